"""OpenAI's Conversations API on the response store, and the ``conversation`` parameter of a Responses request.

A conversation is an object (``id``, ``created_at``, ``metadata``) and its items in order, kept per client key
(:meth:`~app.store.ResponseStore.put_conversation`). A response created with ``conversation`` is generated on
the conversation's items followed by its own input, and its turn (the input items, then the output items) is
appended once it ends ``completed`` or ``incomplete``. Every item is kept with an ``id`` (one is given to an item
sent without) and a message's string ``content`` as one text part, as OpenAI lists them.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from flask import Response, jsonify, request
from pydantic import Field

from ..errors import ApiError, InputError
from ..store import OwnedStore, StoreQuotaExceeded
from ..validation import Metadata, RequestModel, validate
from .encoder import new_item_id
from .listing import kept_item, page, parse_list_query
from .schemas import InputItem, ItemReference, ResponsesRequest

log = logging.getLogger("toolwire.responses.conversations")

#: The most items one request may add to a conversation (OpenAI's limit).
MAX_ADDED_ITEMS = 20


class ConversationCreate(RequestModel):
    """``POST /conversations``: its first items and metadata."""

    items: list[InputItem] = Field(default_factory=list, max_length=MAX_ADDED_ITEMS)
    metadata: Metadata | None = None


class ConversationUpdate(RequestModel):
    """``POST /conversations/{id}``: its new metadata."""

    metadata: Metadata


class ItemsCreate(RequestModel):
    """``POST /conversations/{id}/items``: the items to append."""

    items: list[InputItem] = Field(min_length=1, max_length=MAX_ADDED_ITEMS)


def create_conversation(store: OwnedStore | None, body: dict[str, Any]) -> Response:
    """``POST /conversations``: a new conversation, with its first ``items``."""
    owned = _enabled(store)
    req = validate(ConversationCreate, body)
    items = _new_items(owned, req.items)
    conversation_id = new_item_id("conv")
    conversation = {"id": conversation_id, "object": "conversation", "created_at": int(time.time()),
                    "metadata": req.metadata or {}}
    try:
        owned.put_conversation(conversation)
        if items and not owned.add_conversation_items(conversation_id, items):
            raise _not_found(conversation_id)  # deleted between the two writes
    except StoreQuotaExceeded as exc:
        owned.delete_conversation(conversation_id)
        raise _over_quota(exc, "items") from None
    return jsonify(conversation)


def get_conversation(conversation_id: str, store: OwnedStore | None) -> Response:
    """``GET /conversations/{id}``."""
    return jsonify(_conversation(store, conversation_id))


def update_conversation(conversation_id: str, store: OwnedStore | None, body: dict[str, Any]) -> Response:
    """``POST /conversations/{id}``: replace its ``metadata``."""
    req = validate(ConversationUpdate, body)
    conversation = {**_conversation(store, conversation_id), "metadata": req.metadata}
    try:
        _enabled(store).put_conversation(conversation)
    except StoreQuotaExceeded as exc:
        raise _over_quota(exc, "metadata") from None
    return jsonify(conversation)


def delete_conversation(conversation_id: str, store: OwnedStore | None) -> Response:
    """``DELETE /conversations/{id}``: forget it and its items."""
    if not _enabled(store).delete_conversation(conversation_id):
        raise _not_found(conversation_id)
    return jsonify({"id": conversation_id, "object": "conversation.deleted", "deleted": True})


def list_items(conversation_id: str, store: OwnedStore | None) -> Response:
    """``GET /conversations/{id}/items``: its items, paged as OpenAI pages them (newest first by default)."""
    query = parse_list_query(request.args)
    return jsonify(page(_items(store, conversation_id), query))


def add_items(conversation_id: str, store: OwnedStore | None, body: dict[str, Any]) -> Response:
    """``POST /conversations/{id}/items``: append ``items``; answered with the items as stored."""
    owned = _enabled(store)
    req = validate(ItemsCreate, body)
    items = _new_items(owned, req.items)
    try:
        added = owned.add_conversation_items(conversation_id, items)
    except StoreQuotaExceeded as exc:
        raise _over_quota(exc, "items") from None
    if not added:
        raise _not_found(conversation_id)
    return jsonify({"object": "list", "data": items, "first_id": items[0]["id"], "last_id": items[-1]["id"],
                    "has_more": False})


def get_item(conversation_id: str, item_id: str, store: OwnedStore | None) -> Response:
    """``GET /conversations/{id}/items/{item_id}``."""
    for item in _items(store, conversation_id):
        if item.get("id") == item_id:
            return jsonify(item)
    raise _item_not_found(item_id)


def delete_item(conversation_id: str, item_id: str, store: OwnedStore | None) -> Response:
    """``DELETE /conversations/{id}/items/{item_id}``: answered with the conversation."""
    conversation = _conversation(store, conversation_id)
    if not _enabled(store).delete_conversation_item(conversation_id, item_id):
        raise _item_not_found(item_id)
    return jsonify(conversation)


def conversation_transcript(req: ResponsesRequest, store: OwnedStore | None,
                            max_items: int) -> list[dict[str, Any]] | None:
    """The items of the request's ``conversation`` (``None`` without one).

    Raises:
        InputError: ``previous_response_id`` given too, an unknown conversation (404), or one of more than
            ``max_items`` items (0: no limit).
    """
    conversation = req.conversation_id
    if conversation is None:
        return None
    if req.previous_response_id is not None:
        raise InputError("'previous_response_id' and 'conversation' cannot be used together: a conversation "
                         "holds the history itself.", "conversation", "invalid_value")
    items = _enabled(store).conversation_items(conversation)
    if items is None:
        raise InputError(f"Conversation with id {conversation!r} not found.", "conversation",
                         "conversation_not_found", status=404)
    if max_items and len(items) > max_items:
        raise InputError(f"The conversation holds {len(items)} items, more than a request may ({max_items}): "
                         "start a new conversation, or compact this one.", "conversation", "history_too_long")
    return items


def append_turn(store: OwnedStore, conversation: str, input_items: list[dict[str, Any]],
                response: dict[str, Any]) -> None:
    """Append a response's turn to ``conversation``: its input items (given ids), then its output items.

    Raises:
        StoreError: the store failed.
    """
    items = [*map(kept_item, input_items), *(response.get("output") or [])]
    if items and not store.add_conversation_items(conversation, items):
        log.warning("response %s: its conversation %s is gone; the turn was not added", response["id"], conversation)


def _new_items(store: OwnedStore, items: list[Any]) -> list[dict[str, Any]]:
    """Request items as stored: references resolved, each with an id."""
    added = []
    for i, item in enumerate(items):
        if isinstance(item, ItemReference):
            stored = store.get_item(item.id)
            if stored is None:
                raise InputError(f"Item with id {item.id!r} not found.", f"items[{i}].id", "item_not_found",
                                 status=404)
            added.append(kept_item(stored))
        else:
            added.append(kept_item(item.model_dump(exclude_none=True)))
    return added


def _conversation(store: OwnedStore | None, conversation_id: str) -> dict[str, Any]:
    conversation = _enabled(store).get_conversation(conversation_id)
    if conversation is None:
        raise _not_found(conversation_id)
    return conversation


def _items(store: OwnedStore | None, conversation_id: str) -> list[dict[str, Any]]:
    items = _enabled(store).conversation_items(conversation_id)
    if items is None:
        raise _not_found(conversation_id)
    return items


def _enabled(store: OwnedStore | None) -> OwnedStore:
    if store is None:
        raise ApiError(404, "Conversations are not stored on this server (the response store is disabled).",
                       code="not_found")
    return store


def _not_found(conversation_id: str) -> ApiError:
    return ApiError(404, f"Conversation with id {conversation_id!r} not found.", param="conversation_id",
                    code="not_found")


def _over_quota(exc: StoreQuotaExceeded, param: str) -> InputError:
    """A conversation write the store's byte quotas refused (conversations count in them as responses do)."""
    return InputError(f"The conversation cannot be stored: {exc}. Delete conversations or items to make room.",
                      param, "store_quota_exceeded")


def _item_not_found(item_id: str) -> ApiError:
    return ApiError(404, f"Item with id {item_id!r} not found.", param="item_id", code="not_found")
