"""OpenAI's Chat Completions as a surface: ``POST /chat/completions``."""

from __future__ import annotations

from ..surface import BEARER, Generate, Surface, header_key
from .views import plan_chat_completion

#: Keys as a Bearer token or in ``x-api-key``: OpenAI-compatible clients that share an Anthropic client's settings
#: send the latter, and every ``/v1`` route took both before the APIs were surfaces.
CHAT = Surface("chat", routes=(Generate("/chat/completions", "chat_completions", plan_chat_completion),),
               keys=(BEARER, header_key("x-api-key")))
