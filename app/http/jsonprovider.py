"""Flask's JSON (``jsonify``, ``request.get_json``, ``app.json.response``) backed by orjson."""

from __future__ import annotations

from typing import Any, cast

import orjson
from flask import Response
from flask.json.provider import JSONProvider


class OrjsonProvider(JSONProvider):
    """Flask's JSON (``jsonify``, ``request.get_json``) backed by orjson."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        return orjson.dumps(obj, default=_fallback, option=orjson.OPT_NON_STR_KEYS).decode()

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return orjson.loads(s)

    def response(self, *args: Any, **kwargs: Any) -> Response:
        obj = self._prepare_response_obj(args, kwargs)
        body = orjson.dumps(obj, default=_fallback, option=orjson.OPT_NON_STR_KEYS)
        response_class = cast("type[Response]", self._app.response_class)  # a Flask app's: flask.Response
        return response_class(body, mimetype="application/json")


def _fallback(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")
