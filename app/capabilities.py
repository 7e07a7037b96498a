"""What a listed model serves through toolwire (``GET /models``' ``capabilities``): only what is known to work.

Every model a back end generates with gets chat with tools (toolwire's job). The endpoints passed through
(completions, embeddings, rerank, audio) are listed only where known: the model's ``model_map`` object says
(``capabilities``), or the back end's own model list does (LM Studio's ``type``; a list of ``capabilities`` in
Ollama's words, as llama.cpp's and Ollama's entries give it). A back end whose kind has no HTTP endpoints beside
chat (the demo, Codex) serves chat alone, whatever its list says; an embedding model serves embeddings alone.
"""

from __future__ import annotations

from typing import Any, Mapping

from .profile import model_profile
from .settings import Settings

#: What any model a back end generates with serves here.
CHAT = ["chat", "tools"]
#: Ollama's and llama.cpp's capability words, as toolwire's.
_OLLAMA_WORDS = {"completion": ("chat", "tools", "completions"), "tools": ("tools",), "embedding": ("embeddings",)}
#: The model types that only embed (LM Studio's ``type``, others' ``task``).
_EMBEDDING_TYPES = frozenset({"embedding", "embeddings", "embed"})


def capabilities(settings: Settings, model: str, entry: Mapping[str, Any], *, relays: bool) -> list[str]:
    """What the client's ``model`` serves through toolwire.

    Args:
        settings: the settings its back end sees (its ``model_map`` object's ``capabilities`` win, but for what a
            back end that relays nothing cannot serve).
        model: the client's name for it.
        entry: its entry in the back end's model list (``{}`` for a name only the settings give).
        relays: its back end's kind passes requests other than chat through (an HTTP back end).
    """
    declared = model_profile(settings, model).capabilities
    if not relays:
        return [name for name in declared if name in CHAT] if declared is not None else list(CHAT)
    if declared is not None:
        return list(declared)
    kind = entry.get("type", entry.get("task"))
    if isinstance(kind, str) and kind.lower() in _EMBEDDING_TYPES:
        return ["embeddings"]
    words = entry.get("capabilities")
    if not isinstance(words, list) or not words:
        return list(CHAT)
    named = {name for word in words if isinstance(word, str) for name in _OLLAMA_WORDS.get(word.lower(), ())}
    if named == {"embeddings"}:
        return ["embeddings"]
    return [name for name in ("chat", "tools", "completions", "embeddings") if name in named or name in CHAT]
