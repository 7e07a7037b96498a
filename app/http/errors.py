"""Error responses before the first byte, in the envelope of the client API the request is for.

A surface's routes answer in its envelope (:attr:`~app.surface.Surface.error_envelope`: its child Blueprint's
handler); every other route in OpenAI's, ``{"error": {"message", "type", "param", "code"}}`` with all four keys
present (:class:`~app.errors.ApiError`). A method a route does not take (405, raised by routing before any
Blueprint is known) is answered by the handler of the route's Blueprint, and an answer made before the app runs
(gunicorn's refusal of a request it cannot read) in the envelope :func:`envelope_for` its path. Clients never
see a stack trace:
unexpected exceptions are logged and answered with a generic 500 (:func:`~app.pipeline.failures.as_api_error`).
"""

from __future__ import annotations

from typing import Any, Callable

from flask import Blueprint, Flask, Response, current_app, has_request_context, jsonify, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from ..errors import ApiError, body_too_large
from ..observability import record as observe
from ..pipeline.failures import as_api_error
from ..surface import openai_envelope

# ApiError is re-exported: code that raised it from here before it moved to app.errors keeps working.
__all__ = ["ApiError", "as_api_error", "envelope_for", "error_response", "register_error_handlers"]

#: An error as the JSON body a client API's clients read.
Envelope = Callable[[ApiError], dict[str, Any]]


def error_response(exc: BaseException, envelope: Envelope = openai_envelope) -> Response:
    """A JSON error response for ``exc`` (before any streaming), its body in ``envelope``."""
    err = from_http_exception(exc) if isinstance(exc, HTTPException) else as_api_error(exc)
    observe.note_failure(err.code or err.type, err.message)
    response = jsonify(envelope(err))
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


def register_error_handlers(target: Flask | Blueprint, envelope: Envelope = openai_envelope) -> None:
    """Answer every error raised under ``target`` in ``envelope``.

    On a Blueprint this covers errors raised by its views and hooks (and its child Blueprints' without a
    handler of their own); on the app it also covers routing errors (404, 405) for every URL.
    """
    if isinstance(target, Flask):
        target.register_error_handler(Exception, _app_error_response)
    else:
        target.register_error_handler(Exception, _EnvelopeHandler(envelope))


class _EnvelopeHandler:
    """A Blueprint's error handler: :func:`error_response` in its ``envelope``, kept for :func:`envelope_for`."""

    __slots__ = ("envelope",)

    def __init__(self, envelope: Envelope):
        self.envelope = envelope

    def __call__(self, exc: BaseException) -> Response:
        return error_response(exc, self.envelope)


def envelope_for(app: Flask, path: str) -> Envelope:
    """The envelope of the route that takes ``path`` (with any method; a path a surface claims included), else
    OpenAI's: for an answer made before the app runs, which knows the path alone."""
    adapter = app.url_map.bind("localhost")
    try:
        endpoint, _ = adapter.match(path, method="POST")
    except MethodNotAllowed as exc:
        try:
            endpoint, _ = adapter.match(path, method=next(iter(exc.valid_methods or ("GET",))))
        except HTTPException:
            return openai_envelope
    except HTTPException:
        return openai_envelope
    handler = _scope_handler(app, endpoint)
    return handler.envelope if isinstance(handler, _EnvelopeHandler) else openai_envelope


def _app_error_response(exc: BaseException) -> Response:
    """An error no Blueprint handled: a 405 as the handler of the route that takes the path answers it, any
    other in OpenAI's envelope."""
    handler = _route_handler(exc) if isinstance(exc, MethodNotAllowed) else None
    return error_response(exc) if handler is None else handler(exc)


def _route_handler(exc: MethodNotAllowed) -> Callable[[BaseException], Response] | None:
    """The error handler of the Blueprint (or its nearest parent with one) whose route takes the request's path
    with another method, if any."""
    adapter = current_app.create_url_adapter(request)
    method = next(iter(exc.valid_methods or ()), None)
    if request.url_rule is not None or adapter is None or method is None:
        return None
    try:
        rule, _ = adapter.match(method=method, return_rule=True)
    except HTTPException:
        return None
    return _scope_handler(current_app, rule.endpoint)


def _scope_handler(app: Flask, endpoint: str) -> Callable[[BaseException], Response] | None:
    """The error handler of ``endpoint``'s Blueprint, or of its nearest parent with one."""
    scope = endpoint.rpartition(".")[0]
    while scope:
        handler = app.error_handler_spec.get(scope, {}).get(None, {}).get(Exception)
        if handler is not None:
            return handler  # type: ignore[return-value]
        scope = scope.rpartition(".")[0]
    return None
