"""``stop`` and ``max_tokens`` for a back end that has neither: cut the streamed text in toolwire.

Codex's app-server takes no sampling parameters, so :class:`StopRules` watches the text deltas: the
text up to a stop sequence goes out and the reason is ``stop``; after ``max_tokens`` deltas (a model's
text deltas are about one token each, which is how OpenAI streams them) the reason is ``length``.
Either way the caller interrupts the turn. Text that could be the start of a stop sequence is held
back until the next delta shows it is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class StopRules:
    """The limits of one request.

    Fields:
        stops: the stop sequences (empty: none). A whole sequence is found by one compiled search for all of
            them; one begun at the end of the text by a loop over the last ``longest - 1`` characters (linear:
            no pattern nests a group per character, which a long sequence would overflow).
        max_tokens: text deltas allowed (``None``: no limit).
        matched: the stop sequence that ended the answer, once one did.
    """

    stops: tuple[str, ...] = ()
    max_tokens: int | None = None
    matched: str | None = field(default=None, init=False, compare=False)
    _held: str = ""
    _deltas: int = field(default=0)
    _any_stop: re.Pattern[str] | None = field(default=None, init=False, compare=False, repr=False)
    _longest: int = field(default=0, init=False, compare=False, repr=False)
    _firsts: frozenset[str] = field(default=frozenset(), init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.stops:
            self._any_stop = re.compile("|".join(map(re.escape, self.stops)))
            self._longest = max(map(len, self.stops))
            self._firsts = frozenset(stop[0] for stop in self.stops)

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> "StopRules":
        """The rules of a Chat request body (``stop``, ``max_completion_tokens`` or ``max_tokens``)."""
        stop = body.get("stop")
        stops = (stop,) if isinstance(stop, str) else tuple(s for s in stop or () if isinstance(s, str))
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        return cls(tuple(s for s in stops if s), limit if isinstance(limit, int) and limit > 0 else None)

    def feed(self, delta: str) -> tuple[str, str | None]:
        """``(text to send now, finish reason or None)`` after one delta; a reason ends the answer."""
        self._deltas += 1
        text = self._held + delta
        self._held = ""
        if self._any_stop is not None:
            found = self._any_stop.search(text)
            if found:
                self.matched = found.group()
                return text[:found.start()], "stop"
            keep = self._partial_stop(text)
            text, self._held = text[:len(text) - keep], text[len(text) - keep:]
        if self.max_tokens is not None and self._deltas >= self.max_tokens:
            return text + self._held, "length"
        return text, None

    def flush(self) -> str:
        """The text held back, at the natural end of the answer."""
        held, self._held = self._held, ""
        return held

    def _partial_stop(self, text: str) -> int:
        """How many trailing characters of ``text`` begin some stop sequence (the leftmost such start is
        the longest; only the last ``longest - 1`` characters can be one, and only where a sequence's first
        character stands)."""
        for start in range(max(0, len(text) - self._longest + 1), len(text)):
            if text[start] not in self._firsts:
                continue
            tail = text[start:]
            if any(len(stop) > len(tail) and stop.startswith(tail) for stop in self.stops):
                return len(text) - start
        return 0
