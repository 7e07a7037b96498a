"""Any failure of a generation as the :class:`~app.errors.ApiError` the client is told.

Before the first byte it becomes an HTTP error response (``app.http.errors``, which also turns the web
framework's own errors into ``ApiError``); after it, the endpoint's encoder sends it as its mid-stream
error frame. Unknown exceptions are logged here and hidden behind a generic 500.
"""

from __future__ import annotations

import logging

from gevent import GreenletExit

from statemachine import ModelOutputError

from ..errors import ApiError
from ..upstreams.base import UpstreamError

log = logging.getLogger("toolwire.pipeline.failures")


class ServerStopping(GreenletExit):
    """Thrown into a stream's greenlet when the worker stops (:func:`~app.pipeline.streaming.end_open_streams`).

    A ``GreenletExit``: no ``except Exception`` on its way out of the upstream's reads takes it for another
    failure.
    """


def as_api_error(exc: BaseException) -> ApiError:
    """Any exception as an :class:`ApiError`; unknown ones are logged and hidden."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ServerStopping):
        return ApiError(503, "The server is restarting; retry the request.", type="server_error",
                        code="server_shutting_down")
    if isinstance(exc, UpstreamError):
        return from_upstream(exc)
    if isinstance(exc, ModelOutputError):
        return from_model_output(exc)
    log.error("unhandled error", exc_info=exc)
    return ApiError(500, "The server had an error while processing your request.", type="server_error",
                    code="server_error")


def from_upstream(exc: UpstreamError) -> ApiError:
    """The client-facing error for an upstream failure."""
    headers = {"Retry-After": exc.retry_after} if exc.retry_after else None
    if exc.kind == "client_error":
        return ApiError(exc.status, exc.message, type=exc.type or "invalid_request_error", param=exc.param,
                        code=exc.code)
    if exc.kind == "rate_limited":
        return ApiError(exc.status, exc.message, type="rate_limit_error", code=exc.code or "rate_limit_exceeded",
                        headers=headers)
    return ApiError(exc.status, exc.message, type="server_error", code=exc.code or f"upstream_{exc.kind}",
                    headers=headers)


def from_model_output(exc: ModelOutputError) -> ApiError:
    """The client-facing error for a model output the policy rejects."""
    hint = exc.event_hint
    return ApiError(exc.status_hint, hint["message"], type=hint["type"], param=hint["param"], code=hint["code"])
