"""``stop`` and ``max_tokens`` for a back end that has neither: cut the streamed text in toolwire.

Codex's app-server takes no sampling parameters, so :class:`StopRules` watches the text deltas: the
text up to a stop sequence goes out and the reason is ``stop``; after ``max_tokens`` deltas (a model's
text deltas are about one token each, which is how OpenAI streams them) the reason is ``length``.
Either way the caller interrupts the turn. Text that could be the start of a stop sequence is held
back until the next delta shows it is not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class StopRules:
    """The limits of one request.

    Fields:
        stops: the stop sequences (empty: none).
        max_tokens: text deltas allowed (``None``: no limit).
    """

    stops: tuple[str, ...] = ()
    max_tokens: int | None = None
    _held: str = ""
    _deltas: int = field(default=0)

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
        if self.stops:
            cut = min((i for i in (text.find(s) for s in self.stops) if i >= 0), default=-1)
            if cut >= 0:
                return text[:cut], "stop"
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
        """How many trailing characters of ``text`` begin some stop sequence."""
        longest = 0
        for stop in self.stops:
            for size in range(min(len(stop) - 1, len(text)), longest, -1):
                if stop.startswith(text[-size:]):
                    longest = size
                    break
        return longest
