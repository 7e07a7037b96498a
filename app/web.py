"""Request helpers shared by the endpoints: the body, the request id, the upstream call, the SSE response."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import orjson
from flask import Response, g, request

from . import limits, observe
from .errors import ApiError
from .extension import current_state
from .streaming import sse_body
from .upstream_types import UpstreamStream

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: Deepest nesting a body may have: recursive code downstream (pydantic, the JSON writers, the
#: prompt builder) must never meet anything near Python's recursion limit or orjson's 254 levels.
MAX_JSON_DEPTH = 128


def request_id() -> str:
    """This request's id (echoed from ``X-Request-Id`` or generated)."""
    return g.toolwire_request_id


def json_body() -> dict[str, Any]:
    """The request body as a JSON object.

    Raises:
        ApiError: 400 ``invalid_json`` when it does not parse, is not an
            object or nests deeper than ``MAX_JSON_DEPTH``; 413 over the body-size limit.
    """
    raw = limits.read_body()
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ApiError(400, "We could not parse the JSON body of your request.", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
    # Nesting needs an opening bracket per level, so a body with few brackets (most bodies: counting
    # is C-fast) skips the walk, which costs tens of µs per request before the upstream call.
    if raw.count(b"{") + raw.count(b"[") > MAX_JSON_DEPTH and _nests_deeper(body, MAX_JSON_DEPTH):
        raise ApiError(400, f"The request body nests deeper than {MAX_JSON_DEPTH} levels.", code="invalid_json")
    observe.note_model(body.get("model"))  # here, so every endpoint reading a body labels its metrics
    return body


def _nests_deeper(value: dict[str, Any], limit: int) -> bool:
    """Whether ``value`` has containers nested more than ``limit`` levels (iteratively: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def wants_keepalive() -> bool:
    """``False`` when the client opted out of keep-alive comments (``X-No-Keepalive: 1``)."""
    return request.headers.get("X-No-Keepalive", "").strip().lower() not in ("1", "true", "yes")


def open_upstream(model: str, messages: list[dict[str, Any]], fields: dict[str, Any]) -> UpstreamStream:
    """Open the upstream's answer to ``messages`` for the client's ``model``.

    ``fields`` are the other request parameters the back end gets; it is always
    asked for a stream with usage (a non-streaming answer is accumulated from it).

    Raises:
        UpstreamError: the upstream refused (an ordinary HTTP error: the client got nothing yet).
    """
    state = current_state()
    body = {**fields, "model": state.settings.upstream_model(model), "messages": messages, "stream": True,
            "stream_options": {"include_usage": True}}
    return state.upstream.open(body, request_id=request_id())


def sse_response(frames: Iterator[bytes], *, on_error: Callable[[Exception], bytes],
                 on_abandon: Callable[[], None]) -> Response:
    """The ``text/event-stream`` response pumping ``frames``, with keep-alives unless the client opted out.

    ``on_error`` and ``on_abandon`` are :func:`~app.streaming.sse_body`'s.
    """
    heartbeat = current_state().settings.heartbeat_seconds if wants_keepalive() else None
    body = sse_body(frames, heartbeat_seconds=heartbeat, on_error=on_error, on_abandon=on_abandon)
    return Response(body, mimetype="text/event-stream", headers=SSE_HEADERS)
