"""The pool members' health, checked in the background: one greenlet per worker asks each member's own health
endpoint (``pool_health_path``, under its server's root) every ``pool_health_seconds``, jittered by a fifth so
that workers and hosts do not ask together, each check bounded in time. A member failing it is passed over
(:meth:`~app.pool.PoolMember.available`) until it answers 200 again, and then taken back at once (its
cooldown cleared). A greenlet left waiting never keeps a gevent worker from exiting.
"""

from __future__ import annotations

import logging
import random
from typing import Iterable

import gevent

from .pool import Pool, PoolMember

log = logging.getLogger("toolwire.pool")

#: The longest one check waits for its member, seconds (less when the interval is shorter).
CHECK_TIMEOUT = 2.0
#: The jitter of the interval: each wait is the interval times a factor within ±this.
JITTER = 0.2


class PoolHealth:
    """The background checks of the members of ``pools`` (a back end in two pools is checked once).

    Args:
        pools: the mount's pools.
        interval: ``pool_health_seconds`` (0: no checks).
        path: ``pool_health_path``.
    """

    def __init__(self, pools: Iterable[Pool], interval: float, path: str):
        self.members = list({member.name: member for pool in pools for member in pool.members}.values())
        self.interval = interval
        self.path = path
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        """Start the checks in this process (once; the worker's first pooled request calls it: after the fork)."""
        if self._greenlet is None and self.interval and self.members:
            self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        """Stop the checks."""
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _run(self) -> None:
        while True:
            gevent.sleep(self.interval * random.uniform(1 - JITTER, 1 + JITTER))
            self.check_all()

    def check_all(self) -> None:
        """Check every member at once, each within its bound, and take each out or back by its answer."""
        timeout = min(CHECK_TIMEOUT, self.interval or CHECK_TIMEOUT)
        checks = [gevent.spawn(self._answers, member, timeout) for member in self.members]
        gevent.joinall(checks)
        for member, check in zip(self.members, checks):
            self.mark(member, bool(check.value))

    def _answers(self, member: PoolMember, timeout: float) -> bool:
        upstream = member.backend.upstream
        probe = getattr(upstream, "healthy", None)
        try:
            with gevent.Timeout(timeout):
                return bool(probe(self.path) if probe is not None else upstream.ready())
        except (gevent.Timeout, Exception):  # a check that fails in any way says the member is not healthy
            return False

    @staticmethod
    def mark(member: PoolMember, healthy: bool) -> None:
        """Record ``member``'s check: out while failing, back (its cooldown cleared) once it answers again."""
        if healthy != member.healthy:
            log.warning("pool member %s is %s", member.name, "back" if healthy else "failing its health check",
                        extra={"fields": {"upstream": member.name}})
        if healthy and not member.healthy:
            member.down_until = 0.0
        member.healthy = healthy
