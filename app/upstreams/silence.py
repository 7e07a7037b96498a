"""A receive's timeout without a timer for each wait: one alarm per response, moved on lazily.

A gevent socket with a timeout starts a new ``Timeout`` (a libev timer, started and stopped, and some nine Python
calls) for every wait; a paced stream waits once a chunk, so that cost ~5 µs a chunk (a gevent socket pair, a wait
a receive, ``docs/benchmarks.md``). Here the socket waits without a timeout, and one timer per response watches
the waits' deadlines: a wait only writes its deadline down; when the timer fires, it finds the deadline moved on
and sets itself again for the rest, or throws :class:`Silence` into the greenlet waiting. It throws only while
:attr:`SilenceAlarm.waiting` names that greenlet, which is set just before the socket's wait and cleared just
after it, with no switch between: the greenlet is then suspended in that wait and nowhere else.
"""

from __future__ import annotations

import math
from typing import Any

from gevent import get_hub, getcurrent


class Silence(Exception):
    """Thrown into a wait that outlived its deadline."""


class SilenceAlarm:
    """One timer for the deadlines of a response's waits (see the module's docstring); :meth:`close` it."""

    __slots__ = ("_loop", "_timer", "_fires_at", "_deadline", "waiting")

    def __init__(self) -> None:
        self._loop = get_hub().loop
        self._timer: Any = None
        self._fires_at = math.inf  # the loop time the timer fires at (inf: not set)
        self._deadline = math.inf  # the current wait's end
        self.waiting: Any = None  # the greenlet in the wait, while it waits

    def expect(self, timeout: float) -> None:
        """The current greenlet waits next, for at most ``timeout`` seconds: :class:`Silence` ends the wait then.
        The caller sets :attr:`waiting` back to ``None`` as soon as the wait is over."""
        loop = self._loop
        loop.update_now()  # (the loop's time is its last turn's: stale after work that did not yield)
        deadline = self._deadline = loop.now() + timeout
        if deadline < self._fires_at:  # (a stream's waits are a tick each: a later deadline every time)
            self._set(timeout)
        self.waiting = getcurrent()

    def close(self) -> None:
        """Stop the timer (the response is done)."""
        if self._timer is not None:
            self._timer.close()
            self._timer = None
        self._fires_at = math.inf
        self.waiting = None

    def _set(self, after: float) -> None:
        if self._timer is not None:
            self._timer.close()
        self._timer = self._loop.timer(after)
        self._timer.start(self._ring)
        self._fires_at = self._loop.now() + after

    def _ring(self) -> None:
        self._fires_at = math.inf
        waiting = self.waiting
        if waiting is None:  # between waits: the next one sets the timer again
            return
        rest = self._deadline - self._loop.now()
        if rest > 0:
            self._set(rest)
        else:
            waiting.throw(Silence)
