"""One request's observability record: request id, timings, tool calls, its access line and metrics.

The API Blueprint's hooks (:mod:`app.http.recording`) open a :class:`RequestRecord` per request
(:func:`start`) and register its :meth:`~RequestRecord.finish` to run when
the response body is closed, so a stream is accounted for at its real end. The
record is kept in a context variable, which log lines read the request id from;
the pipeline gets it handed (:class:`~app.pipeline.context.RequestContext`), and
:class:`~app.pipeline.driver.ChoiceDriver` and :class:`~app.pipeline.streaming.SSEBody`
report to it. A stream is relayed by the request's own greenlet, so its log lines carry the
request id too.
"""

from __future__ import annotations

import contextvars
import logging
import re
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Protocol

from statemachine import ChoiceFinished, ChoiceStream, Event, ToolCallEnded, ToolCallNote

from . import logs, metrics
from .current import current_record
from .debug import DebugStore

access_log = logging.getLogger("toolwire.access")

#: An incoming ``X-Request-Id`` is echoed when it matches this, else a fresh one is made.
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")

_current: contextvars.ContextVar[RequestRecord | None] = current_record


@dataclass(slots=True)
class ReasoningSpan:
    """A stretch of one choice's reasoning, for the debug view.

    Fields:
        step: the number of transitions its machine had taken when the span began.
        began: ``time.perf_counter()`` at its first piece.
        pieces: its text.
        open: no text, call or finish has followed it yet.
    """

    step: int
    began: float
    pieces: list[str]
    open: bool = True


class TracedChoices(Protocol):
    """What a record reads of a choice driver (:class:`~app.pipeline.driver.ChoiceDriver`) once its response
    ended: outcome counts, the choices' machines, and what the debug view keeps."""

    outcomes: Counter[str]
    first_output_at: float | None
    texts: dict[int, list[str]] | None
    outcome_events: dict[int, list[Event]] | None
    step_times: dict[int, list[float]] | None
    reasoning: dict[int, list[ReasoningSpan]] | None

    @property
    def choices(self) -> Mapping[int, ChoiceStream]: ...


@dataclass(eq=False, slots=True)
class RequestRecord:
    """What is known about one API request while it runs.

    Fields:
        request_id: the echoed or generated id.
        method, route: the request line (the URL rule, not the raw path: bounded).
        started: ``time.perf_counter()`` at arrival; ``started_at`` the same moment on the wall clock.
        status: the response status, once known.
        model: the client's ``model``; ``model_label`` is it when configured, else ``other``.
        upstream: the name of the back end the request was routed to, once routed.
        stream: the body is an SSE stream.
        stream_requested: the body's ``stream`` value, once read (the access log's ``stream``, so a
            rejected streaming request still shows ``true``).
        tool_mode: how the back end got the tools (``prompt`` or ``native``), once it was called.
        reasked: why the model was asked a second time (``invalid_call``, ``forced_choice_unmet``), if it was.
        first_byte: when the first frame (or the whole JSON body) was handed to the server.
        disconnected: the client left before the stream's end.
        drivers: the choice drivers built for this request.
        debug: where the state-machine paths go when debug is on, else ``None``.
        owner: the client key's owner digest (``None`` on an open API): its debug record is that key's alone.
        outcome: the error code the response ended with (an error response, an error frame or
            ``response.failed``); ``None`` until then (the access line says ``completed`` or ``client_gone``).
        dropped_tools: the types of the request's tools not offered to the model (hosted tools), in order.
        usage: whose token counts the response's usage gave: ``back_end``, ``tokenizer`` (the back end's own,
            counted at the end) or ``estimate`` (:mod:`app.pipeline.usage`); ``None`` when it gave none.
        gateway: the requests made for the tools the gateway runs itself, in order (``mcp.call:ok``…).
    """

    request_id: str
    method: str
    route: str
    started: float = field(default_factory=time.perf_counter)
    started_at: float = field(default_factory=time.time)
    status: int = 0
    model: str | None = None
    model_label: str = "other"
    upstream: str | None = None
    stream: bool = False
    stream_requested: bool | None = None
    tool_mode: str | None = None
    reasked: str | None = None
    first_byte: float | None = None
    disconnected: bool = False
    drivers: list[TracedChoices] = field(default_factory=list)
    debug: DebugStore | None = None
    owner: str | None = None
    outcome: str | None = None
    dropped_tools: tuple[str, ...] = ()
    usage: str | None = None
    gateway: tuple[str, ...] = ()
    finished: bool = False

    @property
    def keeps_text(self) -> bool:
        """Whether drivers should keep the model text (only for the debug view)."""
        return self.debug is not None

    @property
    def ttfb_ms(self) -> float | None:
        """Milliseconds from arrival to the first bytes of the body, once they went out."""
        return _ms(self.first_byte - self.started) if self.first_byte is not None else None

    def stream_opened(self) -> None:
        """An SSE body started for this request."""
        self.stream = True
        metrics.STREAMS_IN_FLIGHT.inc()

    def first_frame_sent(self) -> None:
        """The first bytes of the body are going out."""
        if self.first_byte is None:
            self.first_byte = time.perf_counter()

    def client_left(self) -> None:
        """The body was closed before its end."""
        self.disconnected = True

    def failed(self, code: str, message: str) -> None:
        """The response ended in an error with ``code``; a stream (its status long sent as 200) says so
        in a warning naming the cause."""
        self.outcome = code
        if self.stream:
            access_log.warning("stream failed after its headers: %s", message, extra={
                "request_id": self.request_id, "fields": {"code": code, "route": self.route, "model": self.model}})

    @property
    def ended(self) -> str:
        """How the response ended: ``completed``, ``client_gone``, or the error code."""
        if self.outcome is not None:
            return self.outcome
        if self.disconnected:
            return "client_gone"
        return "completed" if self.status < 400 else f"http_{self.status}"

    def finish(self) -> None:
        """The body is closed: count the request, write its access line (and debug path). Idempotent."""
        if self.finished:
            return
        self.finished = True
        duration = time.perf_counter() - self.started
        if self.stream:
            metrics.STREAMS_IN_FLIGHT.dec()
        if self.disconnected:
            metrics.CLIENT_DISCONNECTS.inc()
        metrics.child(metrics.REQUESTS, self.route, str(self.status)).inc()
        ended = self.ended
        outcome = metrics.outcome_label(ended)
        metrics.child(metrics.REQUEST_OUTCOMES, self.route, outcome).inc()
        metrics.child(metrics.REQUEST_DURATION, self.route).observe(duration)
        if self.upstream is not None:
            metrics.child(metrics.UPSTREAM_REQUESTS, self.upstream, outcome).inc()
        outcomes: dict[str, int] = {}
        moves: dict[tuple[str, str], int] = {}
        first_output = None
        for driver in self.drivers:  # (plain dicts: a Counter's update is Python, once a request)
            for kind, count in driver.outcomes.items():
                outcomes[kind] = outcomes.get(kind, 0) + count
            for choice in driver.choices.values():
                for source, _, dest in choice.path:
                    moves[source, dest] = moves.get((source, dest), 0) + 1
            if driver.first_output_at is not None:
                first_output = min(first_output or driver.first_output_at, driver.first_output_at)
        if first_output is not None:
            metrics.child(metrics.TIME_TO_FIRST_TOKEN, self.model_label).observe(first_output - self.started)
        for kind, count in outcomes.items():
            metrics.child(metrics.TOOL_CALLS, self.model_label, kind).inc(count)
        for (source, dest), count in moves.items():
            metrics.child(metrics.FSM_TRANSITIONS, source, dest).inc(count)
        if access_log.isEnabledFor(logging.INFO):
            # The id is the record's own: a body may be closed outside its request's context (another
            # request's, or none). Straight to the one JSON handler when that is where it goes, else a record
            # made here (Logger.info would also walk the stack to find this line).
            fields = {"method": self.method, "route": self.route, "status": self.status, "model": self.model,
                      "stream": self.stream if self.stream_requested is None else self.stream_requested,
                      "tool_mode": self.tool_mode, "upstream": self.upstream, "tool_calls": outcomes.get("emitted", 0),
                      "reasked": self.reasked, "dropped_tools": list(self.dropped_tools) or None,
                      "usage": self.usage,
                      "gateway": list(self.gateway) or None,
                      "disconnected": self.disconnected, "outcome": ended, "ttfb_ms": self.ttfb_ms,
                      "duration_ms": _ms(duration)}
            if not logs.write_direct(access_log, logging.INFO, f"{self.method} {self.route} {self.status}",
                                     self.request_id, fields):
                access_log.handle(access_log.makeRecord(
                    access_log.name, logging.INFO, __file__, 0, "%s %s %s", (self.method, self.route, self.status),
                    None, "finish", {"request_id": self.request_id, "fields": fields}))
        if self.debug is not None:
            try:
                self.debug.save(self.request_id, self.debug_view(duration, outcomes), owner=self.owner)
            except OSError as exc:  # the debug view must never break a response
                access_log.warning("debug record not saved: %s", exc)
        if _current.get() is self:
            _current.set(None)

    def debug_view(self, duration: float, outcomes: dict[str, int]) -> dict[str, Any]:
        """The request's summary and per-choice state-machine paths, each transition with its text span.

        Args:
            duration: seconds from arrival to the end of the body.
            outcomes: the request's tool calls by outcome (``emitted``, ``repaired``…).
        """
        choices = []
        for driver in self.drivers:
            for index, choice in sorted(driver.choices.items()):
                text = "".join((driver.texts or {}).get(index, ()))
                times = (driver.step_times or {}).get(index, [])
                path = [{"source": s, "trigger": t, "dest": d, "span": [a, b], "text": text[a:b],
                         "at_ms": _ms(times[i] - self.started) if i < len(times) else None}
                        for i, ((s, t, d), (a, b)) in enumerate(zip(choice.path, choice.spans))]
                events = (driver.outcome_events or {}).get(index, ())
                reasoning = [{"step": span.step, "at_ms": _ms(span.began - self.started), "text": "".join(span.pieces)}
                             for span in (driver.reasoning or {}).get(index, ())]
                choices.append({
                    "index": index, "state": choice.state.value, "path": path, "reasoning": reasoning,
                    "calls": [asdict(e) for e in events if isinstance(e, ToolCallEnded)],
                    "notes": [asdict(e) for e in events if isinstance(e, ToolCallNote)],
                    "finish_reason": next((e.finish_reason for e in events if isinstance(e, ChoiceFinished)), None)})
        return {"request_id": self.request_id, "method": self.method, "route": self.route,
                "status": self.status, "model": self.model, "upstream": self.upstream, "stream": self.stream,
                "tool_mode": self.tool_mode, "started_at": self.started_at, "duration_ms": _ms(duration),
                "ttfb_ms": self.ttfb_ms,
                "tool_calls": dict(outcomes), "choices": choices}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def current() -> RequestRecord | None:
    """The record of the request this code runs for, if any."""
    return _current.get()


def start(record: RequestRecord) -> RequestRecord:
    """Make ``record`` the current request's (the HTTP layer opens one per API request)."""
    _current.set(record)
    return record


def note_model(model: Any, configured: frozenset[str]) -> None:
    """The request asked for ``model``; label metrics with it when it is one of the ``configured`` models."""
    record = _current.get()
    if record is None or not isinstance(model, str):
        return
    record.model = model
    record.model_label = model if model in configured else "other"


def note_upstream(name: str) -> None:
    """The request was routed to the back end ``name``."""
    record = _current.get()
    if record is not None:
        record.upstream = name


def note_failure(code: str, message: str) -> None:
    """The current request is answered with an error (see :meth:`RequestRecord.failed`)."""
    record = _current.get()
    if record is not None:
        record.failed(code, message)


def note_dropped_tools(kinds: list[str]) -> None:
    """The request's tools of these types were not offered to the model (hosted: the provider would run them)."""
    record = _current.get()
    if record is not None:
        record.dropped_tools = tuple(kinds)


def note_gateway(kind: str, request: str, outcome: str, seconds: float, record: RequestRecord | None = None
                 ) -> None:
    """The gateway made a ``request`` (``call``, ``list_tools``…) for a tool of ``kind`` it runs (``mcp``…),
    which ended with ``outcome`` (``ok``, ``error``, ``timeout``, ``limit``, ``refused``) after ``seconds``:
    counted, timed, and named on the access line of ``record`` (default: the current request's)."""
    metrics.child(metrics.GATEWAY_REQUESTS, kind, request, outcome).inc()
    metrics.child(metrics.GATEWAY_SECONDS, kind, request).observe(seconds)
    record = record or _current.get()
    if record is not None:
        record.gateway += (f"{kind}.{request}:{outcome}",)


def note_stream(stream: Any) -> None:
    """The request body asked for a stream (``stream: true``) or not."""
    record = _current.get()
    if record is not None:
        record.stream_requested = stream is True
