"""The pass-through endpoints as surfaces: OpenAI's ``/embeddings``, ``/completions``, ``/audio/…`` and the
``/rerank`` of llama.cpp, vLLM and others under the mount's prefix; the ``/tokenize`` and ``/detokenize`` of
llama.cpp and vLLM at the root, where their clients look. Each is routed by its ``model`` as a generation is and
relayed to the same path of the back end (:class:`~app.surface.Relay`)."""

from __future__ import annotations

from ..surface import BEARER, Relay, Surface, header_key

#: Keys as Chat Completions takes them: a Bearer token or ``x-api-key``.
_KEYS = (BEARER, header_key("x-api-key"))

#: OpenAI's pass-through endpoints, under the mount's prefix (``/v1``).
PASSTHROUGH = Surface("passthrough", keys=_KEYS, routes=(
    Relay("/embeddings", "embeddings", "/embeddings"),
    Relay("/completions", "completions", "/completions"),
    Relay("/rerank", "rerank", "/rerank"),
    Relay("/audio/<any(speech, transcriptions, translations):kind>", "audio", "/audio/{kind}"),
))

#: The back end's tokenizer, at the root.
TOKENIZER = Surface("tokenizer", keys=_KEYS, url_prefix="", routes=(
    Relay("/tokenize", "tokenize", "/tokenize", at_root=True),
    Relay("/detokenize", "detokenize", "/detokenize", at_root=True),
))
