"""OpenAI's Responses API as a surface: ``POST /responses`` (background ones too), ``GET`` and ``DELETE
/responses/{id}``, its input items and cancel, ``POST /responses/input_tokens`` and ``/responses/compact``, and
the Conversations API (``/conversations`` and its items); a 404 ``not_supported`` for any other path under
them. Its routes get the response store as the client's key sees it."""

from __future__ import annotations

from ..surface import BEARER, Compute, Generate, Surface, View, fixed, header_key
from . import conversations as conv
from .compact import plan_compaction
from .views import (
    cancel_response,
    count_input_tokens,
    delete_response,
    get_response,
    list_input_items,
    plan_response,
    unsupported_subpath,
)

_ANY = ("GET", "POST", "PUT", "PATCH", "DELETE")

RESPONSES = Surface("responses", routes=(
    Generate("/responses", "create_response", plan_response, store=True),
    Compute("/responses/input_tokens", "count_input_tokens", count_input_tokens, store=True),
    Generate("/responses/compact", "compact_response", plan_compaction, stream=fixed(False), store=True),
    View("/responses/<response_id>", "get_response", get_response, ("GET",), store=True),
    View("/responses/<response_id>", "delete_response", delete_response, ("DELETE",), store=True),
    View("/responses/<response_id>/input_items", "list_input_items", list_input_items, ("GET",), store=True),
    View("/responses/<response_id>/cancel", "cancel_response", cancel_response, ("POST",), store=True),
    View("/responses/<path:subpath>", "unsupported_subpath", unsupported_subpath, _ANY, refusal=True),
    View("/conversations", "create_conversation", conv.create_conversation, ("POST",), store=True, body=True),
    View("/conversations/<conversation_id>", "get_conversation", conv.get_conversation, ("GET",), store=True),
    View("/conversations/<conversation_id>", "update_conversation", conv.update_conversation, ("POST",),
         store=True, body=True),
    View("/conversations/<conversation_id>", "delete_conversation", conv.delete_conversation, ("DELETE",),
         store=True),
    View("/conversations/<conversation_id>/items", "list_conversation_items", conv.list_items, ("GET",),
         store=True),
    View("/conversations/<conversation_id>/items", "add_conversation_items", conv.add_items, ("POST",),
         store=True, body=True),
    View("/conversations/<conversation_id>/items/<item_id>", "get_conversation_item", conv.get_item, ("GET",),
         store=True),
    View("/conversations/<conversation_id>/items/<item_id>", "delete_conversation_item", conv.delete_item,
         ("DELETE",), store=True),
), keys=(BEARER, header_key("x-api-key")))  # both, as Chat's
