"""The request body every endpoint reads: JSON, an object, within the size and nesting limits."""

from __future__ import annotations

from typing import Any

import orjson

from ..errors import ApiError
from ..observability import record as observe
from . import limits


def json_body() -> dict[str, Any]:
    """The request body as a JSON object.

    Raises:
        ApiError: 400 ``invalid_json`` when it holds too many values to parse
            (``limits.check_breadth``), does not parse, is not an object or nests
            too deep (``limits.check_nesting``); 413 over the body-size limit.
    """
    raw = limits.read_body()
    limits.check_breadth(raw)
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ApiError(400, "We could not parse the JSON body of your request.", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
    limits.check_nesting(raw)
    observe.note_model(body.get("model"))  # here, so every endpoint reading a body labels its metrics
    observe.note_stream(body.get("stream"))  # and logs the stream it asked for, even if refused below
    return body
