"""How long to wait before starting an app-server again after it failed to start."""

from __future__ import annotations


class StartBackoff:
    """Doubling waits after consecutive start failures: 1, 2, 4 … seconds, at most ``ceiling``.

    A binary that dies at start would otherwise be started again by every request (19 starts a second
    under 16 clients, ~140 MB each). Meanwhile requests are answered at once (503, ``Retry-After``).
    Times are the caller's monotonic clock readings.
    """

    __slots__ = ("first", "ceiling", "failures", "_until")

    def __init__(self, first: float = 1.0, ceiling: float = 30.0) -> None:
        self.first = first
        self.ceiling = ceiling
        self.failures = 0
        self._until = 0.0

    def failed(self, now: float) -> float:
        """Note a failed start at ``now``; return the wait before the next one."""
        self.failures += 1
        wait = min(self.ceiling, self.first * 2 ** (self.failures - 1))
        self._until = now + wait
        return wait

    def succeeded(self) -> None:
        """Note a start that worked: the next failure waits ``first`` again."""
        self.failures = 0
        self._until = 0.0

    def left(self, now: float) -> float:
        """Seconds still to wait at ``now`` before a start may be tried (0: now)."""
        return max(0.0, self._until - now)
