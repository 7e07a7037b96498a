"""Opt-in CORS (``TOOLWIRE_CORS_ORIGINS``): a web page at a listed origin may call the API from a browser.

A preflight (``OPTIONS`` with ``Access-Control-Request-Method``) from a listed origin is answered 204 with the
origin, the methods, the headers it asked for and a max age; every other answer to such an origin, streams and
error bodies included, carries ``Access-Control-Allow-Origin``, ``Vary: Origin`` and exposes ``X-Request-Id``.
An origin not listed gets no CORS headers (its browser then refuses the answer), and nothing changes while the
list is empty.
"""

from __future__ import annotations

from flask import Request, Response

from ..settings import Settings

#: Seconds a browser may keep a preflight's answer.
MAX_AGE = 600
#: The methods a page may use.
METHODS = "GET, POST, DELETE, OPTIONS"
#: Any origin (``TOOLWIRE_CORS_ORIGINS=*``).
ANY = "*"


def allowed_origins(settings: Settings) -> frozenset[str]:
    """The origins ``cors_origins`` lists (made once per settings)."""
    return settings.derived(("cors origins",), lambda: frozenset(
        origin.strip().rstrip("/") for origin in settings.cors_origins.split(",") if origin.strip()))


def allowed_origin(req: Request, settings: Settings) -> str | None:
    """The request's ``Origin`` when CORS is on for it, else ``None``."""
    origin = req.environ.get("HTTP_ORIGIN")
    if not origin:
        return None
    origins = allowed_origins(settings)
    return origin if origin in origins or ANY in origins else None


def preflight(req: Request, settings: Settings) -> Response | None:
    """The 204 answering ``req`` when it is a preflight from an allowed origin, else ``None``."""
    origin = allowed_origin(req, settings)
    if origin is None or "HTTP_ACCESS_CONTROL_REQUEST_METHOD" not in req.environ:
        return None
    response = Response(status=204)
    response.headers["Access-Control-Allow-Methods"] = METHODS
    asked = req.environ.get("HTTP_ACCESS_CONTROL_REQUEST_HEADERS")
    if asked:
        response.headers["Access-Control-Allow-Headers"] = asked
    response.headers["Access-Control-Max-Age"] = str(MAX_AGE)
    return with_cors(response, origin)


def with_cors(response: Response, origin: str | None) -> Response:
    """``response`` with the headers that let a page at the allowed ``origin`` read it (unchanged for ``None``)."""
    if origin is not None:
        headers = response.headers
        headers["Access-Control-Allow-Origin"] = origin
        headers["Access-Control-Expose-Headers"] = "X-Request-Id"
        response.vary.add("Origin")
    return response
