"""The OpenAI error envelope, before headers (JSON responses) and after (stream frames).

Every error toolwire answers with has the shape
``{"error": {"message", "type", "param", "code"}}`` with all four keys present.
Clients never see a stack trace: unexpected exceptions are logged here and
answered with a generic 500.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Blueprint, Flask, Response, current_app, has_request_context, request
from werkzeug.exceptions import HTTPException

from statemachine import ModelOutputError

from ..responses.schemas import InputError
from ..responses.store import StoreUnavailable
from ..upstreams.base import UpstreamError

log = logging.getLogger(__name__)


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


def error_body(message: str, type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """``{"error": {...}}`` with all four keys."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def body_too_large(limit: int | None) -> ApiError:
    """413 for a request body over ``limit`` bytes (Content-Length or chunked)."""
    bound = f"the {limit}-byte limit" if limit else "the limit"
    return ApiError(413, f"The request body is larger than {bound}.", code="request_entity_too_large")


def from_upstream(exc: UpstreamError) -> ApiError:
    """The client-facing error for an upstream failure."""
    headers = {"Retry-After": exc.retry_after} if exc.retry_after else None
    if exc.kind == "client_error":
        return ApiError(exc.status, exc.message, param=exc.param, code=exc.code)
    if exc.kind == "rate_limited":
        return ApiError(exc.status, exc.message, type="rate_limit_error", code=exc.code or "rate_limit_exceeded",
                        headers=headers)
    return ApiError(exc.status, exc.message, type="server_error", code=exc.code or f"upstream_{exc.kind}",
                    headers=headers)


def store_unavailable() -> ApiError:
    """503 for a request that needs the response store while it is down, slow or unwritable."""
    return ApiError(503, "The response store is unavailable right now. Try again shortly, or send "
                         "the full conversation (no previous_response_id or item_reference) with store: false.",
                    type="server_error", code="store_unavailable", headers={"Retry-After": "1"})


def from_model_output(exc: ModelOutputError) -> ApiError:
    """The client-facing error for a model output the policy rejects."""
    hint = exc.event_hint
    return ApiError(exc.status_hint, hint["message"], type=hint["type"], param=hint["param"], code=hint["code"])


def as_api_error(exc: BaseException) -> ApiError:
    """Any exception as an :class:`ApiError`; unknown ones are logged and hidden."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, InputError):
        return ApiError(exc.status, exc.message, param=exc.param, code=exc.code)
    if isinstance(exc, UpstreamError):
        return from_upstream(exc)
    if isinstance(exc, StoreUnavailable):
        return store_unavailable()
    if isinstance(exc, ModelOutputError):
        return from_model_output(exc)
    if isinstance(exc, HTTPException):
        code = exc.code or 500
        if code == 413:
            return body_too_large(request.max_content_length if has_request_context() else None)
        type_ = "invalid_request_error" if code < 500 else "server_error"
        return ApiError(code, exc.description or exc.name, type=type_,
                        code=exc.name.lower().replace(" ", "_"))  # "Method Not Allowed" -> method_not_allowed
    log.error("unhandled error", exc_info=exc)
    return ApiError(500, "The server had an error while processing your request.", type="server_error",
                    code="server_error")


def error_response(exc: BaseException) -> Response:
    """A JSON error response for ``exc`` (before any streaming)."""
    err = as_api_error(exc)
    response = current_app.json.response(err.body())
    response.status_code = err.status
    response.headers.update(err.headers)
    if isinstance(exc, HTTPException) and exc.code == 405:
        allowed = exc.get_response().headers.get("Allow")
        if allowed:
            response.headers["Allow"] = allowed
    return response


def register_error_handlers(target: Flask | Blueprint) -> None:
    """Answer every error raised under ``target`` in the envelope.

    On a Blueprint this covers errors raised by its views; on the app it also
    covers routing errors (404, 405) for every URL.
    """
    target.register_error_handler(Exception, error_response)
