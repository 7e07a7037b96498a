"""A generation's ``usage``: the back end's own when it reports one; else counted once, at the response's end, by
the back end's own tokenizer (the prompt it was sent and the text it made, within :data:`TIMEOUT_SECONDS`); else
the estimate of about four characters a token (:func:`~app.pipeline.encoder.usage_of`).

To count the text it made, the text is kept as it comes (:class:`KeptOutput`), only from a back end that may
tokenize and was not seen to report usage: a back end that reports usage (llama-server, vLLM, Ollama…) costs
nothing per chunk once its first answer said so. Which of the three a response's usage is goes on its access
line (``usage``: ``back_end``, ``tokenizer`` or ``estimate``); the client APIs' usage objects have no place for it.
"""

from __future__ import annotations

import logging
from typing import Any, Iterator, Protocol

from ..observability.record import RequestRecord
from ..upstreams.base import StreamItem, UpstreamChunk, UpstreamStream
from ..upstreams.tokenizer import TokenizerUnavailable, count_usage, may_count
from .encoder import Usage, usage_object, usage_of
from .native import upstream_name

log = logging.getLogger("toolwire.pipeline.usage")

#: The longest the count at a response's end may hold its closing frames, seconds.
TIMEOUT_SECONDS = 1.0
#: Back ends (by name) whose last answer reported its usage (``True``) or none (``False``); not yet known: absent.
_REPORTS_USAGE: dict[str, bool] = {}
#: The finish reasons of a model that ended its turn with its end-of-turn token.
_OWN_ENDS = ("stop", "tool_calls")


class Counted(Protocol):
    """What usage reads of a generation's events (a :class:`~app.pipeline.driver.ChoiceDriver` or a re-ask)."""

    @property
    def usage(self) -> dict[str, Any] | None: ...

    @property
    def output_chars(self) -> int: ...


class KeptOutput:
    """An upstream stream whose text, reasoning and call fragments are kept as they pass, for the tokenizer of its
    back end ``upstream`` to count once the stream has ``ended`` (:meth:`count`), with the prompt of the request
    ``body`` it was sent; everything else is the stream's own."""

    __slots__ = ("_stream", "upstream", "body", "pieces", "stops", "ended")

    def __init__(self, stream: UpstreamStream, upstream: object, body: dict[str, Any]):
        self._stream = stream
        self.upstream = upstream
        self.body = body
        self.pieces: list[str] = []
        self.stops = 0  # choices the model ended itself: its end-of-turn token is generated, never shown
        self.ended = False

    def __iter__(self) -> Iterator[StreamItem]:
        pieces = self.pieces
        try:
            for item in self._stream:
                chunk = item[0] if isinstance(item, tuple) else item  # (a chunk with its pause: passed on as one)
                if isinstance(chunk, str):
                    pieces.append(chunk)
                elif isinstance(chunk, list):
                    pieces += _call_text(chunk)
                elif isinstance(chunk, UpstreamChunk):
                    for delta in chunk.choices:
                        pieces += [delta.reasoning or "", delta.content or "", *_call_text(delta.tool_calls or ())]
                        if delta.finish_reason in _OWN_ENDS and delta.stop_sequence is None:
                            self.stops += 1
                yield item
        except Exception:
            self.ended = True  # a broken stream's usage is counted too (its error frames carry it)
            raise
        self.ended = True

    def follow(self, stream: UpstreamStream, body: dict[str, Any]) -> KeptOutput:
        """Keep ``stream``'s output in place of the one before (the model asked again with ``body``)."""
        self._stream, self.body = stream, body
        self.pieces, self.stops, self.ended = [], 0, False
        return self

    def plain_texts(self, *, join: bool = False) -> None:
        """See :meth:`~app.upstreams.base.UpstreamStream.plain_texts`."""
        self._stream.plain_texts(join=join)

    def pause_every(self, tick: float | None) -> None:
        """See :meth:`~app.upstreams.base.UpstreamStream.pause_every`."""
        self._stream.pause_every(tick)

    def confirm(self) -> None:
        """See :meth:`~app.upstreams.base.UpstreamStream.confirm`."""
        self._stream.confirm()

    def close(self) -> None:
        """See :meth:`~app.upstreams.base.UpstreamStream.close`."""
        self._stream.close()

    def __getattr__(self, name: str) -> Any:  # an HTTP stream's wait
        return getattr(self._stream, name)

    def count(self, reported: bool) -> Usage | None:
        """The usage the tokenizer counts; ``None`` when the back end ``reported`` its own or the count failed
        (remembering whether it reported one)."""
        _REPORTS_USAGE[upstream_name(self.upstream)] = reported
        if reported:
            return None
        try:
            prompt, completion = count_usage(self.upstream, self.body, "".join(self.pieces), TIMEOUT_SECONDS)
        except TokenizerUnavailable as exc:
            log.debug("usage estimated: %s", exc)
            return None
        return usage_object(prompt, completion + self.stops)


def _call_text(fragments: Any) -> list[str]:
    """The name and argument text of native call ``fragments``."""
    out = []
    for fragment in fragments:
        function = fragment.get("function") if isinstance(fragment, dict) else None
        if isinstance(function, dict):
            out += [value for value in (function.get("name"), function.get("arguments")) if isinstance(value, str)]
    return out


def keeps_output(upstream: object) -> bool:
    """Whether a stream from ``upstream`` keeps its output (:class:`KeptOutput`): it may count it and was not seen
    to report usage."""
    return not _REPORTS_USAGE.get(upstream_name(upstream)) and may_count(upstream)


class UsageSoFar:
    """The usage of a generation so far, for its encoder's opening, closing or error frames: the back end's, else
    the tokenizer's count once the ``kept`` stream ended (asked once), else the estimate; the last one given is
    named on ``record``. A slotted callable, where a closure would be several objects an open stream holds."""

    __slots__ = ("_events", "_prompt_chars", "_record", "_kept", "_final")

    def __init__(self, events: Counted, prompt_chars: int, record: RequestRecord | None = None,
                 kept: KeptOutput | None = None):
        self._events = events
        self._prompt_chars = prompt_chars
        self._record = record
        self._kept = kept
        self._final: Usage | None = None

    def __call__(self) -> Usage:
        if self._final is not None:
            return self._final
        events, kept = self._events, self._kept
        later = getattr(events, "later_prompt_chars", 0)  # a gateway loop's generations after its calls
        usage = usage_of(events.usage, self._prompt_chars + later, events.output_chars)
        reported = usage is events.usage  # usage_of gives the back end's own object when it is whole
        source = "back_end" if reported else "estimate"
        if kept is not None and kept.ended:
            counted = kept.count(reported)
            if counted is not None:
                usage, source = counted, "tokenizer"
            self._final = usage
        if self._record is not None:
            self._record.usage = source
        return usage
