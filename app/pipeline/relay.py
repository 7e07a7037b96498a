"""A request passed through to its back end (embeddings, legacy completions, the back end's tokenizer, rerank,
audio): the body sent on as it came, the answer relayed as it arrives, with the request's accounting.

The relayed bytes are never parsed: a stream's pieces go out as each read brings them. A back end that has no
such endpoint (a kind with no HTTP endpoints, or a 404, 405 or 501 from it) is an error naming the endpoint
and the back end; its other refusals pass through as a generation's do.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol

import orjson

from ..errors import ApiError
from ..observability.record import RequestRecord
from ..settings import Settings
from ..upstreams.base import UpstreamError
from .context import RequestContext
from .failures import from_upstream
from .generate import FALLS_BACK, falling_back


class Relayed(Protocol):
    """A back end's answer to a relayed request (:class:`~app.upstreams.http.RelayedAnswer`)."""

    status: int
    content_type: str
    length: int | None

    def read(self) -> bytes: ...

    def pieces(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class RelayReply:
    """What goes back to the client: the back end's status and ``Content-Type``, and its body whole (``bytes``)
    or as it arrives (a :class:`RelayBody`)."""

    status: int
    content_type: str
    body: bytes | RelayBody


def relay(context: RequestContext, endpoint: str, path: str, body_for: Callable[[Settings], bytes],
          content_type: str, *, at_root: bool = False) -> RelayReply:
    """Send the request on to the back end's ``path`` and answer with what it answers; while a back end refuses
    the connection or answers 5xx, the model's ``fallback`` back ends are tried in turn, as a generation's are.

    Args:
        context: the request's context: its routed back end (and its fallbacks), its record.
        endpoint: the client's ``METHOD /path``, for the error that says the back end has none.
        path, at_root: where the back end serves it (see :class:`~app.surface.Relay`).
        body_for: the request's body as a back end seeing these settings is sent it (the model its name there).
        content_type: the request's ``Content-Type``.

    Raises:
        ApiError: 404 or 501 ``unsupported_endpoint`` when the back end has no such endpoint; the back end's
            other refusals and failures as a generation's.
    """
    *earlier, last = (context, *context.fallbacks)
    for attempt in earlier:
        try:
            return _relay_to(attempt, endpoint, path, body_for(attempt.settings), content_type, at_root)
        except UpstreamError as exc:
            if exc.kind not in FALLS_BACK:
                raise
            falling_back(attempt, exc)
    return _relay_to(last, endpoint, path, body_for(last.settings), content_type, at_root)


def _relay_to(context: RequestContext, endpoint: str, path: str, body: bytes, content_type: str,
              at_root: bool) -> RelayReply:
    """:func:`relay` to the back end of ``context`` alone."""
    ask = getattr(context.upstream, "relay", None)
    if ask is None:
        raise unsupported(endpoint, context.upstream_name, 501, "its kind serves chat generations only")
    try:
        answer: Relayed = ask(path, body, content_type=content_type, at_root=at_root, request_id=context.request_id)
    except UpstreamError as exc:
        if exc.kind == "no_endpoint":
            raise unsupported(endpoint, context.upstream_name, 404 if exc.status == 404 else 501,
                              f"it answered HTTP {exc.status}") from None
        raise
    if answer.length is not None:
        try:
            return RelayReply(answer.status, answer.content_type, answer.read())
        finally:
            answer.close()
    return RelayReply(answer.status, answer.content_type, RelayBody(answer, context.record))


def unsupported(endpoint: str, backend: str, status: int, why: str) -> ApiError:
    """The error for a back end that does not serve ``endpoint``."""
    return ApiError(status, f"The back end '{backend}' does not serve {endpoint}: {why}.",
                    type="invalid_request_error" if status == 404 else "server_error", code="unsupported_endpoint")


class RelayBody:
    """A relayed answer's body as the WSGI iterable that sends it: each read's bytes as they come.

    A failure after the first byte ends an event stream with an error event in OpenAI's envelope (when the
    stream stood between two events) and anything else by cutting the connection, so no client takes a cut
    body for a whole one; either way the record says how it ended.
    """

    __slots__ = ("_answer", "_record", "_ended")

    def __init__(self, answer: Relayed, record: RequestRecord | None):
        self._answer = answer
        self._record = record
        self._ended = False
        if record is not None:
            record.stream_opened()

    def __iter__(self) -> Iterator[bytes]:
        record = self._record
        last = b"\n\n"
        try:
            for piece in self._answer.pieces():
                if record is not None and record.first_byte is None:
                    record.first_frame_sent()
                last = piece
                yield piece
            self._ended = True
        except UpstreamError as exc:
            self._ended = True
            error = from_upstream(exc)
            if record is not None:
                record.failed(error.code or error.type, error.message)
            if self._answer.content_type.startswith("text/event-stream") and last.endswith((b"\n\n", b"\r\n\r\n")):
                yield b"data: " + orjson.dumps(error.body()) + b"\n\ndata: [DONE]\n\n"
                return
            # ECONNRESET: gunicorn closes the connection without a traceback (the body stays unfinished)
            raise ConnectionResetError(errno.ECONNRESET, "the back end's answer broke off") from None

    def close(self) -> None:
        """Let the back end's answer go (an unfinished one closes its connection: the back end stops); closed
        before its end, the client left."""
        self._answer.close()
        if not self._ended and self._record is not None:
            self._record.client_left()
