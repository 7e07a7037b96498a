"""The client APIs a toolwire mount serves unless told otherwise (``Toolwire(surfaces=...)``)."""

from __future__ import annotations

from .chat.surface import CHAT
from .gemini.surface import GEMINI, GEMINI_V1
from .messages.surface import MESSAGES
from .responses.surface import RESPONSES
from .surface import Surface

#: OpenAI's Chat Completions and Responses, Anthropic's Messages, Google's Gemini API (at ``/v1beta``, and its model routes at ``/v1``).
DEFAULT_SURFACES: tuple[Surface, ...] = (CHAT, RESPONSES, MESSAGES, GEMINI, GEMINI_V1)
