"""Error responses before the first byte: every error raised under toolwire's routes in the OpenAI envelope.

Every error toolwire answers with has the shape
``{"error": {"message", "type", "param", "code"}}`` with all four keys present
(:class:`~app.errors.ApiError`). Clients never see a stack trace: unexpected
exceptions are logged and answered with a generic 500
(:func:`~app.pipeline.failures.as_api_error`). The Messages endpoints answer in Anthropic's envelope
instead (:mod:`app.messages.errors`), with the same statuses.
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, has_request_context, jsonify, request
from werkzeug.exceptions import HTTPException

from ..errors import ApiError, body_too_large
from ..messages.errors import error_body as messages_error_body
from ..messages.views import is_messages_request
from ..observability import record as observe
from ..pipeline.failures import as_api_error

# ApiError is re-exported: code that raised it from here before it moved to app.errors keeps working.
__all__ = ["ApiError", "as_api_error", "error_response", "register_error_handlers"]


def error_response(exc: BaseException) -> Response:
    """A JSON error response for ``exc`` (before any streaming)."""
    err = from_http_exception(exc) if isinstance(exc, HTTPException) else as_api_error(exc)
    observe.note_failure(err.code or err.type, err.message)
    response = jsonify(messages_error_body(err) if is_messages_request() else err.body())
    response.status_code = err.status
    response.headers.update(err.headers)
    if isinstance(exc, HTTPException) and exc.code == 405:
        allowed = exc.get_response().headers.get("Allow")
        if allowed:
            response.headers["Allow"] = allowed
    return response


def from_http_exception(exc: HTTPException) -> ApiError:
    """A Werkzeug error (routing's 404 and 405, a 413 over ``MAX_CONTENT_LENGTH``…) as an :class:`ApiError`."""
    code = exc.code or 500
    if code == 413:
        return body_too_large(request.max_content_length if has_request_context() else None)
    type_ = "invalid_request_error" if code < 500 else "server_error"
    return ApiError(code, exc.description or exc.name, type=type_,
                    code=exc.name.lower().replace(" ", "_"))  # "Method Not Allowed" -> method_not_allowed


def register_error_handlers(target: Flask | Blueprint) -> None:
    """Answer every error raised under ``target`` in the envelope.

    On a Blueprint this covers errors raised by its views; on the app it also
    covers routing errors (404, 405) for every URL.
    """
    target.register_error_handler(Exception, error_response)
