"""Anthropic's error envelope: ``{"type": "error", "error": {"type", "message"}}``, typed by HTTP status.

Every error under ``/v1/messages`` (refused bodies, auth, limits, back-end failures, the stream's
``event: error``) is answered in this shape, with Anthropic's status codes; the offending parameter
is also given as ``error.param`` (an extra key Anthropic's clients ignore).
"""

from __future__ import annotations

from typing import Any

from ..errors import ApiError

#: Anthropic's error type for each status it documents; other statuses go by their class.
_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
          529: "overloaded_error"}


def error_type(status: int) -> str:
    """The Anthropic error type of an HTTP status."""
    return _TYPES.get(status) or ("invalid_request_error" if status < 500 else "api_error")


def error_body(error: ApiError) -> dict[str, Any]:
    """``error`` in Anthropic's envelope."""
    inner: dict[str, Any] = {"type": error_type(error.status), "message": error.message}
    if error.param is not None:
        inner["param"] = error.param
    return {"type": "error", "error": inner}
