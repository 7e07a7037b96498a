"""The client APIs a toolwire mount serves unless told otherwise (``Toolwire(surfaces=...)``)."""

from __future__ import annotations

from .chat.surface import CHAT
from .gemini.surface import GEMINI, GEMINI_V1
from .messages.surface import MESSAGES
from .ollama.surface import OLLAMA
from .passthrough.surface import PASSTHROUGH, TOKENIZER
from .responses.surface import RESPONSES
from .surface import Surface

#: OpenAI's Chat Completions and Responses, Anthropic's Messages under the mount's prefix; Ollama's API at the root;
#: Google's Gemini API at ``/v1beta`` (and its model routes at ``/v1``); the endpoints passed through to the back
#: end (embeddings, completions, rerank, audio under the prefix; its tokenizer at the root).
DEFAULT_SURFACES: tuple[Surface, ...] = (CHAT, RESPONSES, MESSAGES, OLLAMA, GEMINI, GEMINI_V1, PASSTHROUGH, TOKENIZER)
