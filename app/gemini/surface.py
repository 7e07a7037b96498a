"""Google's Gemini API as a surface, at ``/v1beta`` where the Python GenAI SDK and Gemini CLI call it:
``POST models/{model}:generateContent``, ``:streamGenerateContent`` (``?alt=sse``: SSE, else one JSON array),
``:countTokens``, ``GET models`` and ``GET models/{model}``, and a 404 for any other ``/v1beta/…`` path, in
Google's error envelope; the client key as ``x-goog-api-key`` (the SDKs'), ``?key=`` or a Bearer token.

The JS SDK calls ``/v1`` unless told otherwise: :data:`GEMINI_V1` serves the same model routes there, beside
the OpenAI and Anthropic routes (the shared ``GET /v1/models`` in Gemini's shape for a client sending
``x-goog-api-key``)."""

from __future__ import annotations

import functools

from flask import request

from ..surface import BEARER, SSE, Compute, Generate, KeySource, ListModels, Surface, View, fixed, header_key, in_url
from .errors import error_body
from .views import count_tokens, get_model, list_models, plan_generate_content, unsupported_path, wants_sse

#: ``?key=YOUR_KEY``: the key as Google's REST examples send it.
QUERY_KEY = KeySource(lambda: request.args.get("key", "").strip() or None, "'?key=YOUR_KEY'")
#: The media type of ``streamGenerateContent`` without ``?alt=sse``: pieces of one JSON array.
JSON_ARRAY = "application/json"

#: The routes of one model, under ``/v1beta`` and ``/v1`` alike.
_MODEL_ROUTES = (
    Generate("/models/<path:model>:generateContent", "generate_content",
             functools.partial(plan_generate_content, stream=False), model=in_url("model"), stream=fixed(False)),
    Generate("/models/<path:model>:streamGenerateContent", "stream_generate_content",
             functools.partial(plan_generate_content, stream=True), model=in_url("model"), stream=fixed(True),
             media_type=lambda: SSE if wants_sse() else JSON_ARRAY),
    Compute("/models/<path:model>:countTokens", "count_tokens", count_tokens, model=in_url("model")),
    ListModels("/models/<path:model>", "get_model", get_model))

GEMINI = Surface(
    "gemini",
    routes=(*_MODEL_ROUTES, ListModels("/models", "list_models", list_models),
            View("/<path:subpath>", "unsupported_path", unsupported_path, ("GET", "POST", "DELETE"), refusal=True)),
    error_envelope=error_body,
    keys=(header_key("x-goog-api-key"), QUERY_KEY, BEARER),
    url_prefix="/v1beta")

GEMINI_V1 = Surface("gemini_v1", routes=_MODEL_ROUTES, error_envelope=error_body, keys=GEMINI.keys,
                    model_list=lambda entries: list_models(entries) if "x-goog-api-key" in request.headers else None,
                    url_prefix="/v1")
