"""Responses request → chat-format messages, tool specs and tool choice.

The back end only speaks Chat, so ``instructions``, the history of a
``previous_response_id`` chain and the ``input`` items become the message dicts
that ``prompting.build_upstream_messages`` takes. Stored items come from a
:class:`~app.responses.store.ResponseStore`; anything that can't be resolved is an
:class:`InputError` (400; 404 for a stored response or item that is not there, or not the caller's) raised before
the first byte is sent.
"""

from __future__ import annotations

from typing import Any

import orjson

from statemachine import ToolChoice

from ..errors import InputError
from ..pipeline.plan import ChoiceRequest
from ..pipeline.prompt import media_placeholder
from .schemas import (
    AllowedToolsChoice,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionToolChoice,
    ItemReference,
    MessageItem,
    MediaPart,
    RefusalPart,
    ResponsesRequest,
    ToolChoiceParam,
    parse_input_item,
)
from .store import OwnedStore, ResponseStore

#: What stored items are read from: the store as the request's client key sees it (or the whole store).
Lookup = OwnedStore | ResponseStore

__all__ = ["InputError", "choice_request", "resolve_input_items", "to_chat_messages", "to_tool_choice"]

_NO_STORE_HINT = (
    " Responses are only kept when created with store enabled and within the retention period. "
    "Send the full items instead (with the AI SDK: providerOptions.openai.store = false)."
)


def resolve_input_items(request: ResponsesRequest, lookup: Lookup | None) -> list[dict[str, Any]]:
    """The request's own input as item dicts, with every ``item_reference`` replaced by its stored item.

    This is what to store as the response's input items (a string input is one
    user message item).

    Raises:
        InputError: an ``item_reference`` that is not stored (``param`` ``input[i].id``).
    """
    return [
        _stored_item(item, i, lookup) if isinstance(item, ItemReference) else item.model_dump(exclude_none=True)
        for i, item in enumerate(request.input)
    ]


def to_chat_messages(
    request: ResponsesRequest, lookup: Lookup | None, input_items: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Chat-format messages for ``build_upstream_messages``.

    Order: ``instructions`` (a system message; never carried over from an
    earlier response), then the input and output items of every response in the
    ``previous_response_id`` chain, oldest first, then this request's input.
    Consecutive function calls (and a call right after assistant text) share
    one assistant message; the Responses ``call_id`` is the tool-call id.

    ``input_items`` is :func:`resolve_input_items`'s answer when the caller has
    it already (only its referenced items are read: the store is not asked again).

    Raises:
        InputError: unknown ``previous_response_id``, unresolvable
            ``item_reference``, or a ``function_call_output`` whose ``call_id``
            matches no earlier ``function_call``; ``param`` names the offending parameter.
            (A media part becomes a placeholder such as ``[image]``, as on the Chat endpoint.)
    """
    builder = _ChatBuilder()
    if request.instructions:
        builder.messages.append({"role": "system", "content": request.instructions})
    if request.previous_response_id is not None:
        for item in _history(request.previous_response_id, lookup):
            builder.add(parse_input_item(item, "previous_response_id"), "previous_response_id")
    # The request's own items are parsed already; only a referenced (stored) one needs parsing,
    # and every reference is resolved before any item is added, as resolve_input_items does.
    stored = {i: input_items[i] if input_items is not None else _stored_item(item, i, lookup)
              for i, item in enumerate(request.input) if isinstance(item, ItemReference)}
    for i, item in enumerate(request.input):
        param = f"input[{i}]"
        builder.add(parse_input_item(stored[i], param) if i in stored else item, param)
    return builder.messages


def _stored_item(reference: ItemReference, index: int, lookup: Lookup | None) -> dict[str, Any]:
    stored = lookup.get_item(reference.id) if lookup is not None else None
    if stored is None:
        raise InputError(
            f"Item with id {reference.id!r} not found." + _NO_STORE_HINT, f"input[{index}].id", "item_not_found",
            status=404,
        )
    return stored


def to_tool_choice(tool_choice: ToolChoiceParam | None) -> ToolChoice:
    """The request's ``tool_choice`` as a core ``ToolChoice`` (``auto`` when absent)."""
    if tool_choice is None:
        return ToolChoice("auto")
    if isinstance(tool_choice, FunctionToolChoice):
        return ToolChoice("required", frozenset({tool_choice.name}))
    if isinstance(tool_choice, AllowedToolsChoice):
        return ToolChoice(tool_choice.mode, frozenset(t.name for t in tool_choice.tools))
    return ToolChoice(tool_choice)


def choice_request(tool_choice: ToolChoiceParam | None) -> ChoiceRequest:
    """The request's ``tool_choice`` for the plan, with the path of each name it allows."""
    if isinstance(tool_choice, FunctionToolChoice):
        names = {tool_choice.name: "tool_choice.name"}
    elif isinstance(tool_choice, AllowedToolsChoice):
        names = {}
        for i, tool in enumerate(tool_choice.tools):
            names.setdefault(tool.name, f"tool_choice.tools[{i}].name")
    else:
        names = {}
    return ChoiceRequest(to_tool_choice(tool_choice), name_params=names)


def _history(response_id: str, lookup: Lookup | None) -> list[dict[str, Any]]:
    """Input and output items of the chain ending at ``response_id``, oldest response first."""
    chain: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []
    seen: set[str] = set()
    next_id: str | None = response_id
    while next_id is not None and next_id not in seen:
        seen.add(next_id)
        stored = lookup.load(next_id) if lookup is not None else None
        if stored is None:
            raise InputError(
                f"Previous response with id {next_id!r} not found." + _NO_STORE_HINT,
                "previous_response_id",
                "previous_response_not_found",
                status=404,
            )
        chain.append((stored.input_items, stored.response))
        next_id = stored.response.get("previous_response_id")
    items: list[dict[str, Any]] = []
    for input_items, response in reversed(chain):
        items.extend(input_items)
        items.extend(response.get("output") or [])
    return items


class _ChatBuilder:
    """Accumulates chat messages, merging calls into the preceding assistant turn."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._call_ids: set[str] = set()

    def add(self, item: Any, param: str) -> None:
        if isinstance(item, MessageItem):
            self.messages.append({"role": item.role, "content": _content_text(item.content)})
        elif isinstance(item, FunctionCallItem):
            self._add_call(item)
        elif isinstance(item, FunctionCallOutputItem):
            if item.call_id not in self._call_ids:
                raise InputError(
                    f"No tool call found for function call output with call_id {item.call_id!r}.",
                    f"{param}.call_id",
                    "invalid_value",
                )
            self.messages.append({"role": "tool", "tool_call_id": item.call_id, "content": _output_text(item.output)})
        # Reasoning items are not replayed to a text-only model.

    def _add_call(self, item: FunctionCallItem) -> None:
        self._call_ids.add(item.call_id)
        call = {"id": item.call_id, "type": "function", "function": {"name": item.name, "arguments": item.arguments}}
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "assistant":
            last.setdefault("tool_calls", []).append(call)
        else:
            self.messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(_part_text(part) for part in content)


def _part_text(part: Any) -> str:
    if isinstance(part, MediaPart):
        return media_placeholder(part.type)
    return part.refusal if isinstance(part, RefusalPart) else part.text


def _output_text(output: Any) -> str:
    """A tool result as text: a string as is, a list of content parts as their text (media as
    placeholders), anything else as JSON."""
    if isinstance(output, str):
        return output
    if isinstance(output, list) and output and all(_is_output_part(p) for p in output):
        return "\n".join(p["text"] if p["type"] == "input_text" else media_placeholder(p["type"]) for p in output)
    return orjson.dumps(output).decode()


def _is_output_part(part: Any) -> bool:
    if not isinstance(part, dict):
        return False
    if part.get("type") == "input_text":
        return isinstance(part.get("text"), str)
    return part.get("type") in ("input_image", "input_file")
