"""The OpenAI error envelope as an exception: :class:`ApiError`, and :class:`InputError` for a refused request.

A leaf: every layer may raise these. Turning other failures (upstream, model
output) into an :class:`ApiError` is :func:`app.pipeline.failures.as_api_error`'s job; Werkzeug's,
:func:`app.http.errors.from_http_exception`'s.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error answered to the client in the OpenAI envelope.

    Args:
        status: the HTTP status.
        message: a human-readable message (no internals).
        type: the OpenAI error type (``invalid_request_error``, ``server_error``…).
        param: the offending request parameter, e.g. ``messages[0].role``.
        code: a stable machine-readable code, or ``None``.
        headers: extra response headers (e.g. ``Retry-After``).
    """

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """The error envelope."""
        return error_body(self.message, self.type, self.param, self.code)


class InputError(ApiError):
    """A request refused with an ``invalid_request_error`` (both endpoints' validation raises it).

    Args:
        message: the human-readable reason.
        param: the offending parameter path (``input[1].call_id``), or ``None``.
        code: a machine-readable code, or ``None``.
        status: 400, or 404 for a stored response or item the request names that is not there.
    """

    def __init__(self, message: str, param: str | None = None, code: str | None = None, status: int = 400):
        super().__init__(status, message, param=param, code=code)


def error_body(message: str, type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """``{"error": {...}}`` with all four keys."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def body_too_large(limit: int | None) -> ApiError:
    """413 for a request body over ``limit`` bytes (Content-Length or chunked)."""
    bound = f"the {limit}-byte limit" if limit else "the limit"
    return ApiError(413, f"The request body is larger than {bound}.", code="request_entity_too_large")
