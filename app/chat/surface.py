"""OpenAI's Chat Completions as a surface: ``POST /chat/completions``."""

from __future__ import annotations

from ..surface import Generate, Surface
from .views import plan_chat_completion

CHAT = Surface("chat", routes=(Generate("/chat/completions", "chat_completions", plan_chat_completion),))
