"""ChoiceDriver: an open upstream stream run through one state machine per choice.

Streaming and non-streaming responses both consume it, so they cannot disagree.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

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
