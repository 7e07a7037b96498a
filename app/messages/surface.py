"""Anthropic's Messages API as a surface: ``POST /messages`` and ``POST /messages/count_tokens`` (any other
``/messages/…`` path a 404, as every surface's), in Anthropic's error envelope; the client key as ``x-api-key`` (Claude Code's) or
a Bearer token; ``GET /models`` with Anthropic's fields for a client sending ``anthropic-version``."""

from __future__ import annotations

from ..surface import BEARER, Compute, Generate, Surface, header_key
from .errors import error_body
from .models import model_list_for_anthropic_clients
from .views import count_message_tokens, plan_message

MESSAGES = Surface(
    "messages",
    routes=(Generate("/messages", "create_message", plan_message),
            Compute("/messages/count_tokens", "count_message_tokens", count_message_tokens)),
    error_envelope=error_body,
    keys=(BEARER, header_key("x-api-key")),
    model_list=model_list_for_anthropic_clients)
