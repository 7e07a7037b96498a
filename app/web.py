"""Request helpers shared by the endpoints: the body, the request id, streaming preferences."""

from __future__ import annotations

from typing import Any

import orjson
from flask import g, request

from .errors import ApiError

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def request_id() -> str:
    """This request's id (echoed from ``X-Request-Id`` or generated)."""
    return g.toolwire_request_id


def json_body() -> dict[str, Any]:
    """The request body as a JSON object.

    Raises:
        ApiError: 400 ``invalid_json`` when it does not parse, 400 when it is
            not an object (413 comes from the body-size limit).
    """
    try:
        body = orjson.loads(request.get_data(cache=False))
    except orjson.JSONDecodeError:
        raise ApiError(400, "We could not parse the JSON body of your request.", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
    return body


def wants_keepalive() -> bool:
    """``False`` when the client opted out of keep-alive comments (``X-No-Keepalive: 1``)."""
    return request.headers.get("X-No-Keepalive", "").strip().lower() not in ("1", "true", "yes")
