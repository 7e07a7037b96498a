"""ChoiceDriver: an open upstream stream run through one state machine per choice.

Streaming and non-streaming responses both consume it, so they cannot disagree.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterator, assert_never

from statemachine import (
    ChoiceFinished,
    ChoiceStream,
    Event,
    ModelOutputError,
    NativeCalls,
    ParserConfig,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnded,
    ToolCallInputDelta,
    ToolCallNote,
    ToolCallStarted,
    new_call_id,
)

from ..observability.record import ReasoningSpan, RequestRecord
from ..upstreams.base import Pause, StreamItem, UpstreamError, UpstreamStream

log = logging.getLogger("toolwire.pipeline.driver")

_OUTPUT = (TextDelta, ReasoningDelta, ToolCallStarted)
_REPAIRS = frozenset({"repaired", "recovered_unclosed"})
#: Notes of a call whose header went out and whose arguments never became valid JSON.
_BROKEN_CALL = frozenset({"invalid_json", "incomplete"})
_CUT = ("length", "content_filter")
_BROKEN_CODE = "invalid_tool_call"


@dataclass(frozen=True, slots=True)
class FinishedAtStopSequence(ChoiceFinished):
    """A choice the request's stop sequence ended (finish reason ``stop``), as the back end said: the Messages
    API reports it as ``stop_reason: "stop_sequence"``; the other endpoints see a ``ChoiceFinished``.

    Fields:
        stop_sequence: the sequence.
    """

    stop_sequence: str = ""


#: Most characters of reasoning a choice passes on; the rest is dropped. A model that never stopped thinking
#: (50 MB) sent it all, five times over on a streamed Responses answer (its deltas, the part's and the item's
#: done events, the completed response), and into the stored response and the debug record.
MAX_REASONING_CHARS = 1_000_000
_OUTCOMES = (ToolCallEnded, ToolCallNote, ChoiceFinished, FinishedAtStopSequence)  # the debug view's, beside the path
_ENDS_REASONING = (TextDelta, ToolCallStarted, ChoiceFinished)  # what closes an inline reasoning span
#: ``reasoning = "inline"``: a reasoning span goes into the content between these, whatever the family's own
#: delimiters were (several are special tokens no client parses; ``<think>`` is the one they do).
INLINE_OPEN, INLINE_CLOSE = "<think>", "</think>"


class ChoiceDriver:
    """Feeds an upstream stream to per-choice state machines; iterate for ``(choice_index, event)``.

    Each upstream choice delta goes to its choice's ``ChoiceStream``: content
    to ``feed``, native tool-call fragments through the choice's
    :class:`~statemachine.NativeCalls` (which undoes back-end quirks), the finish
    reason to ``finish``. A choice whose ``wants_more`` turns ``False`` is
    finished at once; once all ``n`` choices are finished and one of them was
    cut that way, the upstream is closed without reading further. Choices
    still open at the end of the stream get ``finish(None)``. A stream asked
    for pauses (:meth:`~app.upstreams.base.UpstreamStream.pause_every`) has
    them passed through as ``(None, pause)`` (after a chunk's event, as one item once asked: :meth:`fold_pauses`).
    The upstream is always closed when iteration ends or is abandoned.

    ``reasoning`` says what becomes of the model's reasoning (``ReasoningDelta``): ``show`` passes it on,
    ``hide`` drops it, ``inline`` turns each span into content between :data:`INLINE_OPEN` and
    :data:`INLINE_CLOSE`. The default costs nothing per delta.

    Given the request's :class:`~app.observability.record.RequestRecord` (``record``), it attaches
    itself to it, which reads the counts below (and the choices' paths) once the response has ended.

    Attributes:
        usage: the upstream's last usage object, if it sent one.
        output_chars: characters of text, reasoning and call arguments produced.
        outcomes: tool calls by outcome (``emitted``, ``repaired``, ``rejected``, ``failed``).
        first_output_at: ``time.perf_counter()`` at the first text, reasoning or call header.
        texts: per choice, the model text fed (kept only for the debug view), else ``None``.
        outcome_events: per choice, its ``ToolCallEnded``, ``ToolCallNote`` and ``ChoiceFinished``
            events (kept only for the debug view), else ``None``.
        step_times: per choice, the ``time.perf_counter()`` at which each entry of its machine's
            ``path`` was taken (kept only for the debug view), else ``None``.
        reasoning: per choice, its spans of reasoning (kept only for the debug view), else ``None``.
    """

    # One per open stream: no instance dict.
    __slots__ = ("_stream", "_reasoning", "_inline_open", "_config", "_n", "_id_factory", "_choices", "_natives",
                 "_finished", "_cut", "_broken", "usage", "output_chars", "outcomes", "first_output_at", "texts",
                 "outcome_events", "step_times", "reasoning", "_plain", "_reasoned", "_fold")

    def __init__(self, stream: UpstreamStream, config: ParserConfig, *, n: int = 1,
                 id_factory: Callable[[], str] = new_call_id, reasoning: str = "show",
                 record: RequestRecord | None = None):
        self._stream = stream
        debugging = record is not None and record.keeps_text
        # The common chunks light (see UpstreamStream); texts joined when they came together, unless the debug
        # view shows each.
        stream.plain_texts(join=not debugging)
        self._reasoning = reasoning
        self._inline_open: tuple[int, ...] = ()  # choices inside an inline reasoning span
        self._config = config
        self._n = n
        self._id_factory = id_factory
        # Every requested choice exists from the start, so each gets its finish even if the upstream
        # sends fewer choices than asked for.
        self._choices = {i: ChoiceStream(config, id_factory=id_factory) for i in range(n)}
        self._natives: dict[int, NativeCalls] = {}  # per choice, made at its first native fragment
        self._finished: tuple[int, ...] = ()  # a few indexes at most: a set would cost 216 bytes an open stream
        self._cut = False  # a choice stopped reading (its policy cut the output)
        self._broken: tuple[int, ...] = ()  # choices that sent a call whose arguments never became JSON
        self.usage: dict[str, Any] | None = None
        self.output_chars = 0
        self.outcomes: Counter[str] = Counter()
        self.first_output_at: float | None = None
        self.texts: dict[int, list[str]] | None = {} if debugging else None
        self.outcome_events: dict[int, list[Event]] | None = {} if debugging else None
        self.step_times: dict[int, list[float]] | None = {} if debugging else None
        self.reasoning: dict[int, list[ReasoningSpan]] | None = {} if debugging else None
        # Nothing kept for the debug view and reasoning passed on as it is: an event is only counted.
        self._plain = not debugging and reasoning == "show"
        self._reasoned: dict[int, int] | None = None  # characters of reasoning passed on, per choice (made at the first)
        self._fold = False  # a paused chunk's one event and its pause go out as one item (see fold_pauses)
        if record is not None:
            record.drivers.append(self)

    def fold_pauses(self) -> None:
        """From now on a chunk of choice 0 that makes one text or argument event, and after which the stream pauses,
        comes out as one item, ``(None, event)``: that event, then the pause (:data:`~app.upstreams.base.PAUSE`).
        A paced stream's chunk then costs its consumer one pull of this driver and of the stream, not two. Asked
        by a consumer that reads such items (:class:`~app.pipeline.streaming.SSEBody`); the others get the two."""
        self._fold = True

    @property
    def choices(self) -> dict[int, ChoiceStream]:
        """The state machine of every choice the upstream sent, by index (never more than the ``n`` requested)."""
        return self._choices

    def __iter__(self) -> Iterator[tuple[int, Event] | tuple[None, Pause]]:
        first = self._choices[0]
        event: Event | None
        events: list[Event] | None
        pause: Pause | None
        chunk: StreamItem | None
        steady = False  # choice 0's next text takes the steady path (see _steady)
        fold = self._fold
        try:
            for chunk in self._stream:
                pause = None
                if isinstance(chunk, tuple):  # a chunk and the pause after it (the last chunk before a wait)
                    chunk, pause = chunk
                if isinstance(chunk, str):  # choice 0's text alone: most chunks
                    if steady and chunk:
                        # After the first output, a plain driver's chunk of text is mostly one text or argument
                        # event, yielded as it is: a paced stream's every chunk (_plain_out's list and pairs were
                        # a third of this driver's time a chunk, measured 2026-11). That event alone means nothing
                        # was cut: a policy cuts only as a call ends, and its ToolCallEnded comes in the same events.
                        # (_counted's first two branches, inlined: a helper for them, tried, is one more Python call
                        # a chunk in a live worker, measured 2026-11.)
                        events = first.feed(chunk)
                        if len(events) == 1:
                            event = events[0]
                            if isinstance(event, TextDelta):
                                self.output_chars += len(event.text)
                            elif isinstance(event, ToolCallArgumentsDelta):
                                self.output_chars += len(event.fragment)
                            else:
                                event = None
                            if event is not None:
                                if pause is None:
                                    yield 0, event
                                elif fold:  # the event and the pause as one item (see fold_pauses)
                                    chunk = events = None  # (not held through the wait that follows)
                                    yield None, event  # type: ignore[misc]  # (a consumer that asked for it)
                                else:
                                    yield 0, event
                                    chunk = event = events = None
                                    yield None, pause
                                continue
                        yield from self._plain_out(events)
                    elif 0 not in self._finished:
                        yield from self._delta_events(0, chunk)  # (a list: no generator per delta)
                    steady = self._plain and self._steady()  # (no call a chunk for a driver that is not plain)
                elif isinstance(chunk, Pause):  # the stream's pauses pass through (as ``(None, pause)``)
                    delta = event = events = None  # the last chunk's are not held through the wait that follows
                    yield None, chunk
                    continue
                elif isinstance(chunk, list):  # choice 0's native call fragments alone: most chunks of a native call
                    if 0 not in self._finished:
                        yield from self._native_events(chunk)
                    steady = False  # (native calls: no steady text)
                else:  # an UpstreamChunk: the stream items are four classes, so mypy narrows each branch
                    if chunk.usage:
                        self.usage = chunk.usage
                    for delta in chunk.choices:
                        index = delta.index
                        if index not in self._finished:
                            yield from self._delta_events(index, delta.content, delta.reasoning, delta.tool_calls,
                                                          delta.finish_reason, delta.stop_sequence)
                    steady = self._plain and self._steady()  # (no call a chunk for a driver that is not plain)
                # After natural finishes only the usage chunk is left; after a cut, stop reading now.
                if self._cut and len(self._finished) >= self._n:
                    break
                if pause is not None:  # the pause that came with the chunk
                    chunk = delta = event = events = None
                    yield None, pause
            for index in sorted(self._choices.keys() - self._finished):
                if self._choices[index].inside_call:
                    # Part of a call went out and the back end stopped without saying why: it was cut off,
                    # and no finish reason would be true (parsing.md 4.11), so the answer fails.
                    raise UpstreamError("protocol", "The upstream's stream ended inside a tool call "
                                                    "without a finish reason.")
                yield from self._output(index, self._finish(index, None))
        except ModelOutputError as exc:
            if exc.code != _BROKEN_CODE:  # (a broken call was counted by its note)
                self.outcomes["failed"] += 1  # a fail policy ends the response
            raise
        finally:
            self._stream.close()

    def _steady(self) -> bool:
        """Whether a plain driver's next text of choice 0 can take :meth:`__iter__`'s steady path: after the first
        output, choice 0 open and no native call in it (what else a chunk of text would pass through)."""
        return self.first_output_at is not None and not self._natives and 0 not in self._finished

    def _native_events(self, fragments: list[dict[str, Any]]) -> list[tuple[int, Event]]:
        """The events of choice 0's native call ``fragments`` alone (the common chunk of a native call), paired
        with the index as they go out: :meth:`_delta_events` without the checks that only other chunks need."""
        natives = self._natives.get(0)
        if natives is None or not self._plain or self.first_output_at is None:
            return self._delta_events(0, None, None, fragments)
        return self._plain_out(natives.feed(fragments))

    def _plain_out(self, events: list[Event]) -> list[tuple[int, Event]]:
        """Choice 0's ``events`` of a common chunk as they go out of a plain driver: the choice finished if its
        policy cut the output, then :meth:`_counted`."""
        if not self._choices[0].wants_more:
            events += self._finish(0, None)
            self._cut = True
        return self._counted(0, events)

    def _counted(self, index: int, events: list[Event]) -> list[tuple[int, Event]]:
        """Choice ``index``'s ``events`` as a plain driver sends them, in one pass: each counted as
        :meth:`_account` counts it, reasoning bounded where it is counted (:meth:`_bounded`), paired with the
        index."""
        out: list[tuple[int, Event]] = []
        for event in events:
            if isinstance(event, ToolCallArgumentsDelta):  # the two common kinds here
                self.output_chars += len(event.fragment)
            elif isinstance(event, TextDelta):
                self.output_chars += len(event.text)
            elif isinstance(event, ReasoningDelta):
                kept = self._bounded(index, event)
                if kept is None:
                    continue
                event = kept
                self.output_chars += len(event.text)
            else:
                self._account(index, [event])
            out.append((index, event))
        return out

    def _bounded(self, index: int, event: ReasoningDelta) -> ReasoningDelta | None:
        """``event`` as far as choice ``index``'s reasoning stays within :data:`MAX_REASONING_CHARS` (all of it,
        its head, or ``None``)."""
        if self._reasoned is None:
            self._reasoned = {}
        before = self._reasoned.get(index, 0)
        self._reasoned[index] = before + len(event.text)
        if before + len(event.text) <= MAX_REASONING_CHARS:
            return event
        if before >= MAX_REASONING_CHARS:
            return None
        log.warning("choice %d's reasoning is past %d characters: the rest is dropped", index, MAX_REASONING_CHARS)
        return ReasoningDelta(event.text[:MAX_REASONING_CHARS - before])

    def _delta_events(self, index: int, content: str | None, reasoning: str | None = None,
                      tool_calls: list[dict[str, Any]] | None = None, finish_reason: str | None = None,
                      stop_sequence: str | None = None) -> list[tuple[int, Event]]:
        """The events of choice ``index``'s delta (the fields of a :class:`ChoiceDelta`), as they go out, paired
        with the index."""
        choice = self._choices.get(index) or self._choice(index)
        events: list[Event] = [ReasoningDelta(reasoning)] if reasoning else []
        natives = self._natives.get(index) if self._natives else None
        if content:
            if self.texts is not None:
                self.texts.setdefault(index, []).append(content)
            if natives is not None:
                events += natives.close()
            if events:
                events += choice.feed(content)
            else:  # the common case: the choice's fresh list of events is this delta's
                events = choice.feed(content)
        if tool_calls:
            if natives is None:
                natives = self._natives[index] = NativeCalls(choice)
            if events:
                events += natives.feed(tool_calls)
            else:  # a native call's next fragment: its events are this delta's
                events = natives.feed(tool_calls)
        if finish_reason:
            events += self._finish(index, finish_reason, stop_sequence)
        elif not choice.wants_more:
            events += self._finish(index, None)
            self._cut = True
        return self._output(index, events) if events else []

    def _choice(self, index: int) -> ChoiceStream:
        choice = self._choices.get(index)
        if choice is None:
            if not (isinstance(index, int) and 0 <= index < self._n):
                # Each choice costs a parser: an upstream inventing choices must not multiply them.
                raise UpstreamError("protocol", f"The upstream sent choice index {str(index)[:20]} for a "
                                                f"request of n={self._n}.", code="upstream_invalid_choice")
            choice = self._choices[index] = ChoiceStream(self._config, id_factory=self._id_factory)
        return choice

    def _finish(self, index: int, reason: str | None, stop_sequence: str | None = None) -> list[Event]:
        self._finished += (index,)
        natives = self._natives.get(index)
        held = natives.close() if natives is not None else ()
        events = [*held, *self._choices[index].finish(reason)]
        if stop_sequence and events[-1] == ChoiceFinished("stop"):  # a text answer the sequence ended
            events[-1] = FinishedAtStopSequence("stop", stop_sequence)
        return events

    def _output(self, index: int, events: list[Event]) -> list[tuple[int, Event]]:
        """Choice ``index``'s ``events`` as they go out, paired with the index: reasoning recorded for the debug
        view, then dropped or inlined as asked, then counted; past :data:`MAX_REASONING_CHARS`, reasoning is
        dropped where it is first read (counted, recorded or inlined), so a chunk pays no pass of its own."""
        if self._plain:
            out = self._counted(index, events)
            if self.first_output_at is None and any(isinstance(event, _OUTPUT) for _, event in out):
                self.first_output_at = time.perf_counter()
            return out
        if self.reasoning is not None:  # the debug view (off in production) records reasoning bounded
            events = [kept for event in events
                      if (kept := self._bounded(index, event) if isinstance(event, ReasoningDelta) else event)]
            self._keep_reasoning(self.reasoning.setdefault(index, []), index, events)
        if self._reasoning != "show":
            events = self._restyle(index, events)
        self._account(index, events)
        return [(index, event) for event in events]

    def _keep_reasoning(self, spans: list[ReasoningSpan], index: int, events: list[Event]) -> None:
        """Record choice ``index``'s reasoning: one span per stretch of it, with the step of its machine's path
        it came before and when it began."""
        for event in events:
            if event.__class__ is ReasoningDelta:
                if spans and spans[-1].open:
                    spans[-1].pieces.append(event.text)
                else:
                    spans.append(ReasoningSpan(len(self._choices[index].path), time.perf_counter(), [event.text]))
            elif isinstance(event, _ENDS_REASONING) and spans:
                spans[-1].open = False

    def _restyle(self, index: int, events: list[Event]) -> list[Event]:
        """``events`` of choice ``index`` with its reasoning dropped (``hide``) or made content (``inline``, bounded
        here unless the debug view bounded it)."""
        if self._reasoning == "hide":
            return [event for event in events if event.__class__ is not ReasoningDelta]
        inside = index in self._inline_open
        out: list[Event] = []
        for event in events:
            if isinstance(event, ReasoningDelta):
                kept = self._bounded(index, event) if self.reasoning is None else event  # (the debug view bounded it)
                if kept is None:
                    continue
                if not inside:
                    out.append(TextDelta(INLINE_OPEN))
                    inside = True
                out.append(TextDelta(kept.text))
                continue
            if inside and isinstance(event, _ENDS_REASONING):
                out.append(TextDelta(INLINE_CLOSE))
                inside = False
            out.append(event)
        others = tuple(i for i in self._inline_open if i != index)
        self._inline_open = (*others, index) if inside else others
        return out

    def _account(self, index: int, events: list[Event]) -> None:
        """Count what ``events`` of choice ``index`` carry (output size, outcomes) before they go out."""
        if self.step_times is not None:  # stamp the transitions this input fired
            times = self.step_times.setdefault(index, [])
            times += [time.perf_counter()] * (len(self._choices[index].path) - len(times))
        if self.first_output_at is None and any(isinstance(event, _OUTPUT) for event in events):
            self.first_output_at = time.perf_counter()
        for event in events:  # isinstance: as fast as a class check for these final classes, and typed
            if isinstance(event, (TextDelta, ReasoningDelta)):
                self.output_chars += len(event.text)
            elif isinstance(event, (ToolCallArgumentsDelta, ToolCallInputDelta)):
                self.output_chars += len(event.fragment)
            else:
                if self.outcome_events is not None and event.__class__ in _OUTCOMES:
                    self.outcome_events.setdefault(index, []).append(event)
                if isinstance(event, ToolCallStarted):
                    self.output_chars += len(event.name)
                elif isinstance(event, ToolCallEnded):
                    self.outcomes["emitted" if event.valid else "failed"] += 1
                elif isinstance(event, ToolCallNote):
                    self._note(index, event)
                elif isinstance(event, ChoiceFinished):
                    if index in self._broken and event.finish_reason not in _CUT:
                        # A call went out that can be neither run nor taken back: the answer fails (as when the
                        # stream ends inside a call), never "stop" with unparseable arguments. A cut is the cut's.
                        raise ModelOutputError("the model's tool call has arguments that are not valid JSON",
                                               code=_BROKEN_CODE)
                else:
                    assert_never(event)

    def _note(self, index: int, note: ToolCallNote) -> None:
        """Count a note's outcome and log it (its message may quote arguments: debug level only)."""
        if note.kind in _BROKEN_CALL and note.index is not None and index not in self._broken:
            self._broken += (index,)
        if note.kind in _REPAIRS:
            self.outcomes["repaired"] += 1
        elif note.index is None:  # the block never became a call: it went back to text or was dropped
            self.outcomes["rejected"] += 1
        elif note.kind == "incomplete":  # sent, but the stream ended inside it
            self.outcomes["failed"] += 1
        log.info("tool call %s", note.kind, extra={"fields": {
            "kind": note.kind, "choice": index, "call_index": note.index, "tool": note.name}})
        log.debug("tool call %s: %s", note.kind, note.message)
