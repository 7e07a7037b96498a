"""Request helpers shared by the endpoints: the body, the request id, streaming preferences."""

from __future__ import annotations

from typing import Any

import orjson
from flask import g, request

from . import limits, observe
from .errors import ApiError

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
