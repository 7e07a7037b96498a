"""The client APIs a toolwire mount serves unless told otherwise (``Toolwire(surfaces=...)``)."""

from __future__ import annotations

from .chat.surface import CHAT
from .messages.surface import MESSAGES
from .ollama.surface import OLLAMA
from .responses.surface import RESPONSES
from .surface import Surface

#: OpenAI's Chat Completions and Responses, Anthropic's Messages under the mount's prefix; Ollama's API at the root.
DEFAULT_SURFACES: tuple[Surface, ...] = (CHAT, RESPONSES, MESSAGES, OLLAMA)
