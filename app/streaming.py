"""From an open upstream stream to core events, and from frames to a live SSE body.

* :class:`ChoiceDriver` runs upstream chunks through one
  :class:`~statemachine.ChoiceStream` per choice. Streaming and non-streaming
  responses both consume it, so they cannot disagree.
* :func:`sse_body` is the pump pattern: a greenlet pulls frames (and so the
  upstream) into a bounded queue; the WSGI iterator relays them, sending a
  ``: keep-alive`` comment whenever the upstream is silent for the heartbeat
  interval; closing the iterator (the client left) kills the pump, which
  closes the upstream.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Iterator

import gevent
import orjson
from gevent.queue import Empty, Queue

from statemachine import (
    ChoiceStream,
    Event,
    ParserConfig,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallStarted,
    new_call_id,
)

from .upstream_types import UpstreamStream

log = logging.getLogger(__name__)

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


class ChoiceDriver:
    """Feeds an upstream stream to per-choice state machines; iterate for ``(choice_index, event)``.

    Each upstream choice delta goes to its choice's ``ChoiceStream``: content
    to ``feed``, native tool-call fragments to ``feed_tool_call``, the finish
    reason to ``finish``. A choice whose ``wants_more`` turns ``False`` is
    finished at once; once all ``n`` choices are finished and one of them was
    cut that way, the upstream is closed without reading further. Choices
    still open at the end of the stream get ``finish(None)``.
    The upstream is always closed when iteration ends or is abandoned.

    Attributes:
        usage: the upstream's last usage object, if it sent one.
        output_chars: characters of visible text and call arguments produced.
    """

    def __init__(self, stream: UpstreamStream, config: ParserConfig, *, n: int = 1,
                 id_factory: Callable[[], str] = new_call_id):
        self._stream = stream
        self._config = config
        self._n = n
        self._id_factory = id_factory
        # Every requested choice exists from the start, so each gets its finish even if the upstream
        # sends fewer choices than asked for.
        self._choices = {i: ChoiceStream(config, id_factory=id_factory) for i in range(n)}
        self._finished: set[int] = set()
        self.usage: dict[str, Any] | None = None
        self.output_chars = 0

    def __iter__(self) -> Iterator[tuple[int, Event]]:
        cut = False
        try:
            for chunk in self._stream:
                if chunk.usage:
                    self.usage = chunk.usage
                for delta in chunk.choices:
                    if delta.index in self._finished:
                        continue
                    choice = self._choice(delta.index)
                    events: list[Event] = []
                    if delta.reasoning:
                        events.append(ReasoningDelta(delta.reasoning))
                    if delta.content:
                        events += choice.feed(delta.content)
                    for call in delta.tool_calls or ():
                        fn = call.get("function") or {}
                        events += choice.feed_tool_call(call.get("index", 0), id=call.get("id"),
                                                        name=fn.get("name"), arguments=fn.get("arguments"))
                    if delta.finish_reason:
                        events += self._finish(delta.index, delta.finish_reason)
                    elif not choice.wants_more:
                        events += self._finish(delta.index, None)
                        cut = True
                    yield from self._emit(delta.index, events)
                # After natural finishes only the usage chunk is left; after a cut, stop reading now.
                if cut and len(self._finished) >= self._n:
                    break
            for index in sorted(set(self._choices) - self._finished):
                yield from self._emit(index, self._finish(index, None))
        finally:
            self._stream.close()

    def _choice(self, index: int) -> ChoiceStream:
        choice = self._choices.get(index)
        if choice is None:
            choice = self._choices[index] = ChoiceStream(self._config, id_factory=self._id_factory)
        return choice

    def _finish(self, index: int, reason: str | None) -> list[Event]:
        self._finished.add(index)
        return self._choices[index].finish(reason)

    def _emit(self, index: int, events: list[Event]) -> Iterator[tuple[int, Event]]:
        for event in events:
            if isinstance(event, TextDelta):
                self.output_chars += len(event.text)
            elif isinstance(event, ToolCallArgumentsDelta):
                self.output_chars += len(event.fragment)
            elif isinstance(event, ToolCallStarted):
                self.output_chars += len(event.name)
            yield index, event


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
        self._pump = gevent.spawn(self._run_pump)

    def __iter__(self) -> Iterator[bytes]:
        return self._relay()

    def close(self) -> None:
        """Stop the pump without blocking; it closes the upstream on its way out."""
        self._pump.kill(block=False)
        if not self._pump_ran:
            self._on_abandon()

    def _run_pump(self) -> None:
        self._pump_ran = True
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
        try:
            while True:
                try:
                    item = self._queue.get(timeout=self._heartbeat)
                except Empty:
                    yield KEEPALIVE
                    continue
                if item is _END:
                    return
                if isinstance(item, _Failure):
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
