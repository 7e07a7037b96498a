"""Ollama's API as a surface, at the root as Ollama serves it (``OLLAMA_HOST=http://toolwire:PORT`` works):
``POST /api/chat`` and ``/api/generate`` (NDJSON streams unless ``stream: false``), ``POST /api/show``,
``/api/embed`` and ``/api/embeddings``, ``GET /api/tags``, ``/api/ps``, ``/api/version`` and ``/`` (Ollama's
"Ollama is running", which its clients probe); the model-management routes (``/api/pull``, ``push``, ``create``,
``copy``, ``delete``, ``blobs/…``) a 501 saying toolwire manages no models, any other ``/api/…`` path a 404 (as
every surface's); every error as Ollama's ``{"error": "..."}``; the client key as a Bearer token (the
``ollama`` libraries send one from ``OLLAMA_API_KEY`` or their ``headers``). ``ollama_surface(prefix)`` mounts
the same API under a prefix of its own."""

from __future__ import annotations

import re
from typing import Any

from ..errors import ApiError
from ..surface import Compute, Generate, ListModels, Surface, View
from .embed import embed, embed_one
from .encoder import NDJSON
from .views import (manages_no_models, model_named, model_tags, plan_chat, plan_generate, running, running_models,
                    show_model, streams, version)


def error_body(error: ApiError) -> dict[str, Any]:
    """``error`` in Ollama's envelope: ``{"error": message}``."""
    return {"error": error.message}


def ollama_surface(url_prefix: str = "", name: str | None = None) -> Surface:
    """Ollama's API with its routes under ``url_prefix`` (``""``: at the root, where Ollama's clients look), named
    ``name`` (default ``ollama``, and ``ollama_PREFIX`` under a prefix, so that it can be mounted beside the
    root one)."""
    if name is None:
        name = "_".join(["ollama", *re.findall(r"\w+", url_prefix)])
    return Surface(name, routes=(
        Generate("/api/chat", "chat", plan_chat, stream=streams, media_type=NDJSON),
        Generate("/api/generate", "generate", plan_generate, stream=streams, media_type=NDJSON),
        Compute("/api/show", "show", show_model, model=model_named),
        Compute("/api/embed", "embed", embed),
        Compute("/api/embeddings", "embeddings", embed_one),
        ListModels("/api/tags", "tags", model_tags),
        ListModels("/api/ps", "ps", running_models),
        View("/api/version", "version", version),
        View("/", "running", running),
        View("/api/<any(pull, push, create, copy, delete):action>", "manage", manages_no_models, ("POST", "DELETE"),
             refusal=True),
        View("/api/blobs/<digest>", "blobs", manages_no_models, ("HEAD", "POST"), refusal=True),
    ), error_envelope=error_body, url_prefix=url_prefix)


#: Ollama's API at the root.
OLLAMA = ollama_surface()
