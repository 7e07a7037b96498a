"""From core events to a live SSE body, under gevent, in the request's own greenlet.

:class:`SSEBody` pulls the driver's events (and so the upstream) itself and has the
endpoint's encoder turn them into frames: no second greenlet per stream, and no
generator between the body and the driver (each one nested is a frame and a slice
of C stack an open stream holds through every wait). The upstream stream says
when it is about to wait (``PAUSE``, see
:meth:`~app.upstreams.base.UpstreamStream.pause_every`): the frames gathered
since go out as one write, so a receive that brought a hundred events costs one
socket write, not a hundred (at most ``COOPERATE_EVERY`` frames a write; the first
event's frames go out at once, so the client's first content waits for no batch); a model's token, its one event
and the pause after it, comes as one item (the driver's ``fold_pauses``). An HTTP upstream then waits for its next bytes in
the body's own frame (``wait``), which the server's write loop iterates directly
(:class:`~app.http.request.StreamResponse`): the greenlet of an open stream is
suspended at its shallowest, and keeps that much less C stack through the wait.
While the upstream is silent it says ``IDLE`` once
a tick: the encoder's keep-alive (an SSE comment; Anthropic's ``ping``) goes out
when nothing was written for the heartbeat interval. Closing the body (the client
left) closes the events, which close the upstream. The body reports to the request's
:class:`~app.observability.record.RequestRecord`: stream opened, first frame sent, client left.

Two limits end a stream that would otherwise never end: a total time (checked at the upstream's
pauses, never per frame: past it the upstream is closed and the stream ends with the endpoint's error
frame; a silent upstream is checked once a tick), and a write timeout on the client socket (a client
that stopped reading makes gunicorn's write fail after it, which closes the body and so the upstream
and the stream slot).

A stopping worker ends its open streams itself (:func:`end_open_streams`, called by gunicorn's settings
shortly before the graceful timeout, after which gunicorn would cut them mid-body): each ends with the
endpoint's error frame and terminator, like any failure after the first byte.
"""

from __future__ import annotations

import inspect
import socket
import time
import weakref
from typing import Any, Callable, Generator, Iterable, Iterator, cast

import gevent
import orjson

from statemachine import Event

from ..observability.record import RequestRecord
from ..upstreams.base import PAUSE, Pause, UpstreamError
from .encoder import Encoder, Usage
from .failures import ServerStopping, as_api_error

#: What a body pulls: a choice's core event by index, or the upstream's pause as ``(None, pause)``; from a source
#: that offers ``fold_pauses`` (:meth:`~app.pipeline.driver.ChoiceDriver.fold_pauses`), also ``(None, event)``:
#: choice 0's event and the upstream's pause after it, one item (a paced stream's chunk costs one pull, not two).
Events = Iterable[tuple[int, Event] | tuple[None, Pause] | tuple[None, Event]]


#: Yield to the gevent hub after this many events, so one busy stream cannot starve the others.
COOPERATE_EVERY = 64
#: The SSE comment frame that keeps an idle stream open.
KEEPALIVE = b": keep-alive\n\n"
#: The ``data: [DONE]`` frame that ends a Chat stream.
DONE_FRAME = b"data: [DONE]\n\n"


def data_frame(obj: Any) -> bytes:
    """One ``data:`` SSE event holding ``obj`` as compact JSON."""
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def cooperative(items: Iterable[Any], every: int = COOPERATE_EVERY) -> Iterator[Any]:
    """Pass ``items`` through, calling ``gevent.sleep(0)`` every ``every`` items."""
    for count, item in enumerate(items, 1):
        yield item
        if count % every == 0:
            gevent.sleep(0)


def tick_seconds(heartbeat_seconds: float | None, max_seconds: float | None) -> float | None:
    """How often a silent upstream should say ``IDLE``: the heartbeat, or the time limit if shorter."""
    ticks = [t for t in (heartbeat_seconds, max_seconds) if t]
    return min(ticks) if ticks else None


#: This worker's streams that started and have not closed (for :func:`end_open_streams`); weak, so a body a
#: server dropped without closing it is not kept alive here.
_open: "weakref.WeakSet[SSEBody]" = weakref.WeakSet()


def end_open_streams() -> int:
    """End every open stream of this worker with the endpoint's error frame (the worker is stopping); how many.

    A stream waiting inside its body (on the upstream, mostly) gets :class:`ServerStopping` thrown into its
    greenlet; one whose frames gunicorn is writing ends when that write returns.
    """
    bodies = list(_open)
    for body in bodies:
        body.stop()
    return len(bodies)


class SSEBody:
    """The WSGI iterable of one SSE response (see :func:`sse_body`)."""

    __slots__ = ("_events", "_encoder", "_usage", "_heartbeat", "_on_abandon", "_started", "_ended", "_record",
                 "_limit_seconds", "_deadline", "_client", "_client_timeout", "_relaying", "_greenlet", "_stopping",
                 "_wait", "__weakref__")

    def __init__(self, events: Events, encoder: Encoder, usage: Callable[[], Usage], *,
                 heartbeat_seconds: float | None, on_abandon: Callable[[], None], max_seconds: float | None = None,
                 limit_seconds: float | None = None, client: socket.socket | None = None,
                 write_timeout: float | None = None, record: RequestRecord | None = None,
                 wait: Callable[[], None] | None = None):
        fold_pauses = getattr(events, "fold_pauses", None)
        if fold_pauses is not None:
            fold_pauses()
        self._events = iter(events)
        self._wait = wait
        self._encoder = encoder
        self._usage = usage
        self._heartbeat = heartbeat_seconds or None
        self._limit_seconds = limit_seconds or max_seconds
        self._deadline = time.monotonic() + max_seconds if max_seconds else None
        self._client = client if write_timeout else None
        self._client_timeout: float | None = None
        if self._client is not None:
            # gevent's sendall fails once one whole write took longer: no timer per write.
            self._client_timeout = self._client.gettimeout()
            self._client.settimeout(write_timeout)
        self._on_abandon = on_abandon
        self._started = False
        self._ended = False  # the body reached its end
        self._relaying: Generator[bytes, None, None] | None = None
        self._greenlet: Any = None  # the request's greenlet, which iterates the body
        self._stopping = False
        self._record = record
        if self._record is not None:
            self._record.stream_opened()

    def __iter__(self) -> Iterator[bytes]:
        self._relaying = self._relay()
        self._greenlet = gevent.getcurrent()
        _open.add(self)
        return self._relaying

    def stop(self) -> None:
        """End the stream with the endpoint's error frame: the worker is stopping."""
        self._stopping = True
        gevent.get_hub().loop.run_callback(self._wake)

    def _wake(self) -> None:
        """Run by the hub, while no stream runs: a body that is inside its loop is waiting there (on the
        upstream, mostly), so ``ServerStopping`` is thrown in; one at a ``yield`` (gunicorn writing its frames)
        or ended is left to its flag (an exception thrown there would land in gunicorn's code)."""
        relaying = self._relaying
        if (relaying is not None and inspect.getgeneratorstate(relaying) == inspect.GEN_RUNNING and not self._ended
                and not self._greenlet.dead):
            self._greenlet.throw(ServerStopping)

    def close(self) -> None:
        """Close the events (and so the upstream); the client's socket gets its own timeout back."""
        _open.discard(self)
        if self._client is not None:
            try:  # the connection may serve the next request: its idle wait is gunicorn's keepalive again
                self._client.settimeout(self._client_timeout)
            except OSError:
                pass
            self._client = None
        if self._started:
            close = getattr(self._events, "close", None)
            if close is not None:
                close()
        else:
            self._started = True
            self._on_abandon()  # the events never ran: nothing of theirs would close the upstream
        if not self._ended and self._record is not None:
            self._record.client_left()
            self._record = None

    def _relay(self) -> Generator[bytes, None, None]:
        self._started = True
        record = self._record
        heartbeat, deadline, encoder, wait = self._heartbeat, self._deadline, self._encoder, self._wait
        one_frame = getattr(encoder, "one_frame", None)  # optional (see Encoder.frames)
        frame: bytes | None
        batch: list[bytes] = []
        written = time.monotonic()
        try:
            try:
                batch += encoder.opening(self._usage())
                # The first event's frames go out at once, with what is left of the opening (the client's
                # first content waits for no batch); after them, ready frames go out COOPERATE_EVERY at a time.
                flush_at = len(batch) + 1
                for index, item in self._events:
                    folded = index is None and item.__class__ is not Pause  # choice 0's event, then a pause
                    if folded:
                        index = 0
                    if index is not None:
                        # Events pairs an index with an event only; mypy cannot tell without a check per event
                        if one_frame is not None and (frame := one_frame(index, item)) is not None:
                            batch.append(frame)
                        else:
                            batch += encoder.frames(index, item)  # type: ignore[arg-type]
                        if folded:
                            index, item = None, PAUSE
                        elif len(batch) < flush_at:
                            continue
                    now = time.monotonic()  # read at the upstream's pauses only, never per frame
                    if batch:
                        if record is not None:
                            record.first_frame_sent()
                            record = None  # only the first one
                        yield b"".join(batch)
                        if flush_at != COOPERATE_EVERY:  # the first content went out (or, at a pause, the opening
                            # alone: content is next)
                            flush_at = COOPERATE_EVERY if len(batch) >= flush_at else 1
                        elif index is not None:  # a long run of ready frames went out: now the other streams run
                            gevent.sleep(0)
                        batch, frame = [], None  # (the last frame is not held through the wait)
                        written = now
                    elif cast(Pause, item).idle and heartbeat is not None and now - written >= heartbeat:
                        yield encoder.keepalive
                        written = now
                    if self._stopping:  # stopped while its frames were being written
                        raise ServerStopping
                    if deadline is not None and now >= deadline:
                        raise UpstreamError("timeout", f"The stream went past its {self._limit_seconds:g}-second "
                                                       "limit.", status=504, code="stream_time_limit")
                    if index is None and wait is not None:
                        wait()  # the upstream's wait for its next bytes, in this shallow frame
                batch += encoder.closing(self._usage())
            except (Exception, ServerStopping) as exc:  # the endpoint's error frame ends the stream, after
                # what was ready
                error = as_api_error(exc)
                batch.append(encoder.error_frames(error, self._usage()))
                if self._record is not None:
                    self._record.failed(error.code or error.type, error.message)
            if record is not None and batch:
                record.first_frame_sent()
            self._ended = True
            if batch:
                yield b"".join(batch)
        finally:
            self.close()


def sse_body(events: Events, encoder: Encoder, usage: Callable[[], Usage], *, heartbeat_seconds: float | None,
             on_abandon: Callable[[], None], max_seconds: float | None = None, limit_seconds: float | None = None,
             client: socket.socket | None = None, write_timeout: float | None = None,
             record: RequestRecord | None = None, wait: Callable[[], None] | None = None) -> SSEBody:
    """The WSGI iterable that streams ``events`` as ``encoder``'s frames.

    Args:
        events: the driver's events and the upstream's pauses; pulling them pulls the upstream.
        encoder: the endpoint's encoder: its opening, the frames of each event, then its closing; if pulling
            fails, its error frames end the stream instead (after the frames that were ready).
        usage: the usage so far, for the closing or error frames.
        heartbeat_seconds: keep-alive interval while nothing arrives; ``None``/0 = none.
        on_abandon: closes the upstream if the body is closed before it was ever iterated.
        max_seconds: the stream's total time; past it, the stream ends with a ``timeout`` error.
        limit_seconds: the limit that error names (the generation's, of which ``max_seconds`` may be what is left
            after the wait for the first output); default ``max_seconds``.
        client: the client's socket (gunicorn's), to bound each write by ``write_timeout`` seconds.
        record: the request's record, told when the stream opens, sends its first frame and is left.
        wait: the upstream's wait for its next bytes, called after each of its pauses (its next pull then goes
            on with what came; see :meth:`~app.upstreams.http.HttpStream.wait`): the stream then waits in the
            body's frame, not below the driver's and the upstream's generators.
    """
    return SSEBody(events, encoder, usage, heartbeat_seconds=heartbeat_seconds, on_abandon=on_abandon,
                   max_seconds=max_seconds, limit_seconds=limit_seconds, client=client, write_timeout=write_timeout,
                   record=record, wait=wait)
