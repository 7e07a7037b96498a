"""``POST /api/embed`` (and the older ``/api/embeddings``): the text's vectors from the model's back end, asked as
OpenAI's ``POST /embeddings``.

A back end that has no embeddings (the demo and Codex back ends, or an OpenAI-compatible server answering 404
or 501 there) is a 501 naming the model, in Ollama's envelope; its other refusals pass through as errors do.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import ApiError
from ..pipeline.context import RequestContext
from ..profile import model_profile
from ..upstreams.base import UpstreamError
from .schemas import EmbedRequest, parse_embed_request

#: The back end's answers that mean it has no embeddings endpoint.
_NO_ENDPOINT = (404, 405, 501)


def embed(body: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    """``POST /api/embed``: ``{"model", "embeddings": [[...], ...], "prompt_eval_count", durations}``."""
    req = parse_embed_request(body)
    texts = req.input if isinstance(req.input, list) else [req.input if req.input is not None else req.prompt or ""]
    started = time.monotonic_ns()
    answer = _embeddings(req, texts, context)
    vectors = [item.get("embedding") for item in sorted(answer.get("data") or [], key=lambda d: d.get("index", 0))
               if isinstance(item, dict)]
    if len(vectors) != len(texts) or not all(isinstance(v, list) for v in vectors):
        raise ApiError(502, "The back end sent a malformed embeddings answer.", type="server_error",
                       code="upstream_protocol")
    usage = answer.get("usage") or {}
    return {"model": req.model, "embeddings": vectors, "total_duration": time.monotonic_ns() - started,
            "load_duration": 0, "prompt_eval_count": int(usage.get("prompt_tokens") or 0)}


def embed_one(body: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    """``POST /api/embeddings`` (superseded by ``/api/embed``): one ``prompt``'s ``embedding``."""
    return {"embedding": embed({**body, "input": body.get("prompt") or ""}, context)["embeddings"][0]}


def _embeddings(req: EmbedRequest, texts: list[str], context: RequestContext) -> dict[str, Any]:
    ask = getattr(context.upstream, "embeddings", None)
    if ask is None:
        raise _no_embeddings(req.model, f"its back end ({context.upstream_name}) has none")
    body: dict[str, Any] = {"model": model_profile(context.settings, req.model).upstream_model, "input": texts}
    if req.dimensions:
        body["dimensions"] = req.dimensions
    try:
        answer: dict[str, Any] = ask(body)
    except UpstreamError as exc:
        answered = exc.upstream_status or exc.status  # (a 501 is the client's 502, the back end's 501)
        if answered in _NO_ENDPOINT:
            raise _no_embeddings(req.model, f"its back end answered {answered} at /embeddings") from None
        raise
    return answer


def _no_embeddings(model: str, why: str) -> ApiError:
    return ApiError(501, f"model '{model}' does not support embeddings: {why}.", type="server_error",
                    code="embeddings_unsupported")
