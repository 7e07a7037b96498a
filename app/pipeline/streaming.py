"""From encoded frames to a live SSE body, under gevent.

:func:`sse_body` is the pump pattern: a greenlet pulls frames (and so the
upstream) into a bounded batch; the WSGI iterator relays each batch as one
write, sending a ``: keep-alive`` comment whenever the upstream is silent for
the heartbeat interval; closing the iterator (the client left) kills the pump,
which closes the upstream. The body reports to the request's
:class:`~app.observability.record.RequestRecord`: stream opened, first frame sent, client left.

Two limits end a stream that would otherwise never end: a total time (checked by the relay once per
batch and at its wake-ups, never per frame: past it the pump is killed, which closes the upstream, and
the stream ends with the endpoint's error frame), and a write timeout on the client socket (a client
that stopped reading makes gunicorn's write fail after it, which closes the body and so the upstream
and the stream slot).
"""

from __future__ import annotations

import socket
import time
from typing import Any, Callable, Iterable, Iterator

import gevent
import orjson
from gevent.event import Event

from ..observability import record as observe
from ..upstreams.base import UpstreamError


#: Yield to the gevent hub after this many events, so one busy stream cannot starve the others.
COOPERATE_EVERY = 64
#: Frames the pump may hold before it waits for the relay (the backpressure bound).
BATCH_FRAMES = 64
KEEPALIVE = b": keep-alive\n\n"
DONE = b"data: [DONE]\n\n"


def data_frame(obj: Any) -> bytes:
    """One ``data:`` SSE event holding ``obj`` as compact JSON."""
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def cooperative(items: Iterable[Any], every: int = COOPERATE_EVERY) -> Iterator[Any]:
    """Pass ``items`` through, calling ``gevent.sleep(0)`` every ``every`` items."""
    for count, item in enumerate(items, 1):
        yield item
        if count % every == 0:
            gevent.sleep(0)


class _Failure:
    __slots__ = ("exc",)

    def __init__(self, exc: Exception):
        self.exc = exc


_END = object()


class SSEBody:
    """The WSGI iterable of one SSE response (see :func:`sse_body`).

    The pump appends frames to a list and the relay takes the whole list at
    once: frames that are ready together go out in one socket write, which
    costs a fraction of a write (and a queue hand-off) per frame.
    """

    __slots__ = ("_frames", "_heartbeat", "_on_error", "_on_abandon", "_batch", "_end", "_ready", "_drained",
                 "_pump_ran", "_pump", "_ended", "_record", "_max_seconds", "_deadline", "_client",
                 "_client_timeout")

    def __init__(self, frames: Iterator[bytes], *, heartbeat_seconds: float | None,
                 on_error: Callable[[Exception], bytes], on_abandon: Callable[[], None],
                 max_seconds: float | None = None, client: socket.socket | None = None,
                 write_timeout: float | None = None):
        self._frames = frames
        self._heartbeat = heartbeat_seconds or None
        self._max_seconds = max_seconds or None
        self._deadline = time.monotonic() + max_seconds if max_seconds else None
        self._client = client if write_timeout else None
        self._client_timeout: float | None = None
        if self._client is not None:
            # gevent's sendall fails once one whole write took longer: no timer per write.
            self._client_timeout = self._client.gettimeout()
            self._client.settimeout(write_timeout)
        self._on_error = on_error
        self._on_abandon = on_abandon
        self._batch: list[bytes] = []
        self._end: _Failure | object | None = None  # _END or a _Failure once the pump is through
        self._ready = Event()  # the batch has frames, or the pump is through
        self._drained = Event()  # the relay took the batch
        self._pump_ran = False
        self._ended = False  # the relay reached the end of the body
        self._record = observe.current()
        if self._record is not None:
            self._record.stream_opened()
        self._pump = gevent.spawn(self._run_pump)

    def __iter__(self) -> Iterator[bytes]:
        return self._relay()

    def close(self) -> None:
        """Stop the pump without blocking; it closes the upstream on its way out."""
        if self._client is not None:
            try:  # the connection may serve the next request: its idle wait is gunicorn's keepalive again
                self._client.settimeout(self._client_timeout)
            except OSError:
                pass
            self._client = None
        self._pump.kill(block=False)
        if not self._pump_ran:
            self._on_abandon()
        if not self._ended and self._record is not None:
            self._record.client_left()

    def _run_pump(self) -> None:
        self._pump_ran = True
        observe.bind(self._record)  # log lines from the pump carry the request id
        frames = self._frames
        try:
            try:
                for count, frame in enumerate(frames, 1):
                    # No local for the batch: the relay takes it while this waits for the upstream.
                    self._batch.append(frame)
                    pending = len(self._batch)
                    if pending == 1:
                        self._ready.set()
                        if count == 1:
                            gevent.sleep(0)  # the first frame (and the headers) go out before more work
                    if pending >= BATCH_FRAMES:
                        self._drained.clear()
                        self._drained.wait()
                    elif count % COOPERATE_EVERY == 0:
                        gevent.sleep(0)
            finally:
                close = getattr(frames, "close", None)
                if close is not None:
                    close()
        except Exception as exc:  # handed to the relay, which answers with an error frame
            self._end = _Failure(exc)
        else:
            self._end = _END
        self._ready.set()

    def _relay(self) -> Iterator[bytes]:
        record = self._record
        deadline = self._deadline
        try:
            while True:
                wait = self._heartbeat
                if deadline is not None and self._end is None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self._expire()
                    elif wait is None or left < wait:
                        wait = left
                if not self._batch and self._end is None:
                    self._ready.clear()
                    if not self._ready.wait(wait):
                        if wait == self._heartbeat:
                            yield KEEPALIVE
                        continue
                if record is not None:
                    record.first_frame_sent()
                    record = None  # only the first one
                if self._batch:
                    yield self._take()
                elif isinstance(self._end, _Failure):
                    self._ended = True
                    yield self._on_error(self._end.exc)
                    return
                else:
                    self._ended = True
                    return
        finally:
            self.close()

    def _expire(self) -> None:
        """The stream went past its total time: stop the pump (closing the upstream) and end with an error."""
        self._pump.kill()
        self._end = _Failure(UpstreamError("timeout", f"The stream went past its {self._max_seconds:g}-second "
                                                      "limit.", status=504, code="stream_time_limit"))

    def _take(self) -> bytes:
        """The batch as one write (not kept here while the relay waits); the pump may go on."""
        batch, self._batch = self._batch, []
        self._drained.set()
        return b"".join(batch)


def sse_body(frames: Iterator[bytes], *, heartbeat_seconds: float | None,
             on_error: Callable[[Exception], bytes], on_abandon: Callable[[], None],
             max_seconds: float | None = None, client: socket.socket | None = None,
             write_timeout: float | None = None) -> SSEBody:
    """Start pumping ``frames`` and return the WSGI iterable that relays them.

    Args:
        frames: encoded SSE events; pulling them pulls the upstream.
        heartbeat_seconds: keep-alive interval while nothing arrives; ``None``/0 = none.
        on_error: turns an exception from ``frames`` into the final bytes to send.
        on_abandon: closes the upstream if the body is closed before the pump ever ran.
        max_seconds: the stream's total time; past it, ``on_error`` gets a ``timeout`` :class:`UpstreamError`.
        client: the client's socket (gunicorn's), to bound each write by ``write_timeout`` seconds.
    """
    return SSEBody(frames, heartbeat_seconds=heartbeat_seconds, on_error=on_error, on_abandon=on_abandon,
                   max_seconds=max_seconds, client=client, write_timeout=write_timeout)
