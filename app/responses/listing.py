"""Lists of items as OpenAI pages them (a response's input items, a conversation's items): ``after``, ``limit``,
``order`` and ``include`` from the query string; ``data``, ``first_id``, ``last_id`` and ``has_more``.

Items are shown as OpenAI lists them: each with an ``id`` (an item stored without one gets an id derived from
where it is, the same on every page, so ``after`` can name it) and a message's ``content`` as parts.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal, Mapping

from pydantic import Field

from ..errors import InputError
from ..validation import RequestModel, validate
from .encoder import new_item_id

__all__ = ["ListQuery", "item_id_prefix", "kept_item", "listed_item", "page", "parse_list_query"]

#: Item id prefixes by item type, for the ids given to items stored without one.
_ID_PREFIXES = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "custom_tool_call": "ctc",
                "custom_tool_call_output": "ctco", "reasoning": "rs", "compaction": "cmp"}


class ListQuery(RequestModel):
    """A list's query: the page after the item ``after``, ``limit`` items (1-100), oldest or newest first."""

    after: str | None = None
    limit: int = Field(default=20, ge=1, le=100)
    order: Literal["asc", "desc"] = "desc"
    include: list[str] = Field(default_factory=list)


def parse_list_query(args: Mapping[str, Any], *, order: Literal["asc", "desc"] = "desc") -> ListQuery:
    """The query string's list parameters (``include`` may repeat, as ``include`` or ``include[]``).

    Raises:
        InputError: a value out of range (``limit``, ``order``), naming it.
    """
    getlist = getattr(args, "getlist", None)
    include = [*getlist("include"), *getlist("include[]")] if getlist is not None else []
    values = {key: args[key] for key in ("after", "limit", "order") if args.get(key) not in (None, "")}
    return validate(ListQuery, {"order": order, **values, "include": include})


def page(items: list[dict[str, Any]], query: ListQuery) -> dict[str, Any]:
    """The list object of one page of ``items`` (oldest first, each with an ``id``).

    Raises:
        InputError: ``after`` names no item of the list.
    """
    ordered = items if query.order == "asc" else items[::-1]
    start = 0
    if query.after is not None:
        ids = [item.get("id") for item in ordered]
        if query.after not in ids:
            raise InputError(f"No item with id {query.after!r} in this list.", "after", "invalid_value")
        start = ids.index(query.after) + 1
    data = ordered[start:start + query.limit]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": start + query.limit < len(ordered)}


def listed_item(item: dict[str, Any], seed: str) -> dict[str, Any]:
    """``item`` as a list shows it: with an id (derived from ``seed``, its place, when it has none) and a
    message's string ``content`` as one text part."""
    shown = dict(item)
    if not shown.get("id"):
        digest = hashlib.sha256(seed.encode()).hexdigest()[:32]
        shown["id"] = f"{item_id_prefix(item)}_{digest}"
    if shown.get("type", "message") == "message":
        shown["type"] = "message"
        if isinstance(shown.get("content"), str):
            kind = "output_text" if shown.get("role") == "assistant" else "input_text"
            shown["content"] = [{"type": kind, "text": shown["content"]}]
        shown.setdefault("status", "completed")
    return shown


def item_id_prefix(item: Mapping[str, Any]) -> str:
    """The id prefix of an item of ``item``'s type (``msg``, ``fc``…; ``item`` for others)."""
    return _ID_PREFIXES.get(str(item.get("type", "message")), "item")


def kept_item(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` as a list keeps it: as :func:`listed_item` shows it, with a new random id when it has none."""
    return listed_item(item if item.get("id") else {**item, "id": new_item_id(item_id_prefix(item))}, "")
