"""From encoded frames to a live SSE body, under gevent.

:func:`sse_body` is the pump pattern: a greenlet pulls frames (and so the
upstream) into a bounded queue; the WSGI iterator relays them, sending a
``: keep-alive`` comment whenever the upstream is silent for the heartbeat
interval; closing the iterator (the client left) kills the pump, which closes
the upstream. The body reports to the request's
:class:`~app.observe.RequestRecord`: stream opened, first frame sent, client left.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import gevent
import orjson
from gevent.queue import Empty, Queue

from . import observe


#: Yield to the gevent hub after this many events, so one busy stream cannot starve the others.
COOPERATE_EVERY = 64
QUEUE_SIZE = 64
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
    """The WSGI iterable of one SSE response (see :func:`sse_body`)."""

    def __init__(self, frames: Iterator[bytes], *, heartbeat_seconds: float | None,
                 on_error: Callable[[Exception], bytes], on_abandon: Callable[[], None]):
        self._frames = frames
        self._heartbeat = heartbeat_seconds or None
        self._on_error = on_error
        self._on_abandon = on_abandon
        self._queue: Queue = Queue(maxsize=QUEUE_SIZE)
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
                for frame in cooperative(frames):
                    self._queue.put(frame)
            finally:
                close = getattr(frames, "close", None)
                if close is not None:
                    close()
        except Exception as exc:  # handed to the relay, which answers with an error frame
            self._queue.put(_Failure(exc))
        else:
            self._queue.put(_END)

    def _relay(self) -> Iterator[bytes]:
        record = self._record
        try:
            while True:
                try:
                    item = self._queue.get(timeout=self._heartbeat)
                except Empty:
                    yield KEEPALIVE
                    continue
                if record is not None:
                    record.first_frame_sent()
                    record = None  # only the first one
                if item is _END:
                    self._ended = True
                    return
                if isinstance(item, _Failure):
                    self._ended = True
                    yield self._on_error(item.exc)
                    return
                yield item
        finally:
            self.close()


def sse_body(frames: Iterator[bytes], *, heartbeat_seconds: float | None,
             on_error: Callable[[Exception], bytes], on_abandon: Callable[[], None]) -> SSEBody:
    """Start pumping ``frames`` and return the WSGI iterable that relays them.

    Args:
        frames: encoded SSE events; pulling them pulls the upstream.
        heartbeat_seconds: keep-alive interval while nothing arrives; ``None``/0 = none.
        on_error: turns an exception from ``frames`` into the final bytes to send.
        on_abandon: closes the upstream if the body is closed before the pump ever ran.
    """
    return SSEBody(frames, heartbeat_seconds=heartbeat_seconds, on_error=on_error, on_abandon=on_abandon)
