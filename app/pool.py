"""A model's pool: several back ends serving it alike, and which of them takes a request.

Each conversation goes to the member most likely to hold its prompt's prefix in its cache: the members are
ranked for the request's affinity key by weighted rendezvous hashing (highest random weight), so every
worker and every toolwire host ranks them alike without sharing any state, and a member leaving moves only
its own conversations, each to its next-ranked member. The load is bounded: a member takes a request only
while its generations in flight (in this worker) stay under ``pool_load_factor`` times its weighted share of
the pool's; past it the request goes to the next member by rank under its own bound (or, with
``pool_tie_breaker = least_busy``, to the least busy member). A member that failed is passed over for its
cooldown, and one whose health endpoint fails (:mod:`app.pool_health`) until it answers again.
"""

from __future__ import annotations

import hashlib
import math
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

#: How many members one request tries: the one chosen, then once the next (before the first byte only).
ATTEMPTS = 2
_SCALE = 2.0 ** 64
_MASK = (1 << 64) - 1
#: The longest cooldown a 429's ``Retry-After`` sets, seconds (a back end's "come back tomorrow" is not kept).
MAX_RETRY_AFTER = 300.0


class MemberSlots(Protocol):
    """A member's generations in flight in this worker (:class:`~app.http.state.StreamSlots`)."""

    @property
    def in_use(self) -> int:
        """How many are in flight."""

    def try_acquire(self) -> Any:
        """A held place, or ``None`` when the member's own limit is reached."""


class MemberBackend(Protocol):
    """What a pool needs of one of its back ends (:class:`~app.http.state.Backend`)."""

    @property
    def name(self) -> str:
        """Its name."""

    @property
    def upstream(self) -> Any:
        """The back end itself."""

    @property
    def settings(self) -> Any:
        """The settings as it sees them."""

    @property
    def slots(self) -> MemberSlots:
        """Its generations in flight in this worker."""


@dataclass(eq=False, slots=True)
class PoolMember:
    """One back end of a pool, as the pool sees it.

    Fields:
        backend: the back end (its name, upstream, settings and slots).
        weight: its share of the conversations against the other members' (its ``weight``).
        seed: what its rank for a key is mixed with (hashed from its name: the same on every host).
        down_until: ``time.monotonic()`` until which it is passed over (a cooldown after a failure).
        healthy: its health endpoint's last answer (``True`` until a check says otherwise).
    """

    backend: MemberBackend
    weight: float = 1.0
    seed: int = field(init=False)
    down_until: float = 0.0
    healthy: bool = True

    def __post_init__(self) -> None:
        self.seed = int.from_bytes(hashlib.blake2b(self.backend.name.encode(), digest_size=8).digest(), "big")

    @property
    def name(self) -> str:
        """The back end's name (``upstream=`` of the access line, a metrics label)."""
        return self.backend.name

    def available(self, now: float) -> bool:
        """Whether it takes requests: healthy and not cooling down."""
        return self.healthy and now >= self.down_until

    def score(self, key_hash: int) -> float:
        """Its weighted rendezvous score for a key's hash (the highest takes the key): ``weight / -ln(u)`` for a
        uniform ``u`` in (0, 1) mixed from the hash and its seed (splitmix64's finalizer)."""
        mixed = key_hash ^ self.seed
        mixed = (mixed ^ (mixed >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
        mixed = (mixed ^ (mixed >> 27)) * 0x94D049BB133111EB & _MASK
        mixed ^= mixed >> 31
        return self.weight / -math.log((mixed + 0.5) / _SCALE)


class Pool:
    """The members serving one model, and the choice among them.

    Args:
        model: the client's model name the pool serves.
        members: its back ends, in their configured order.
        load_factor: ``pool_load_factor``.
        least_busy: where a request goes past a member's bound (``pool_tie_breaker``): the least busy member
            (else the next by rank).
        cooldown_seconds: ``pool_cooldown_seconds``.
        health_checked: the members' health endpoints are checked (``pool_health_seconds``): a member whose
            connection is refused is passed over until its check answers again, not only for its cooldown.
        clock: the monotonic clock (tests set their own).
    """

    def __init__(self, model: str, members: list[PoolMember], *, load_factor: float = 2.0,
                 least_busy: bool = False, cooldown_seconds: float = 5.0, health_checked: bool = False,
                 clock: Callable[[], float] = time.monotonic):
        self.model = model
        self.members = members
        self.load_factor = load_factor
        self.least_busy = least_busy
        self.cooldown_seconds = cooldown_seconds
        self.health_checked = health_checked
        self._clock = clock

    def ranked(self, key: bytes) -> list[PoolMember]:
        """Every member by its rendezvous score for ``key``, highest first (the same on every host: the key's
        CRC-32, which reads a 4 KB prefix key in a microsecond, spread over 64 bits by :meth:`PoolMember.score`)."""
        key_hash = zlib.crc32(key) * 0x9E3779B97F4A7C15 & _MASK
        scored = [(member.score(key_hash), member) for member in self.members]
        scored.sort(key=_first, reverse=True)
        return [member for _, member in scored]

    def choose(self, key: bytes) -> tuple[list[PoolMember], bool]:
        """The members a request with affinity ``key`` tries, in turn (at most :data:`ATTEMPTS`), and whether
        the first is the key's own member (its highest-ranked: available and under its load bound).

        Available members come first, by rank; when none is, every member by rank (one may be back).
        """
        now = self._clock()
        ranked = self.ranked(key)
        usable = [member for member in ranked if member.available(now)] or ranked
        first = self._within_bound(usable)
        order = [first, *(member for member in usable if member is not first)]
        return order[:ATTEMPTS], first is ranked[0]

    def _within_bound(self, usable: list[PoolMember]) -> PoolMember:
        """The first of ``usable`` (ranked) whose generations in flight stay under its bound with this one: the
        key's own member while it does, else the next by rank (or the least busy, with ``least_busy``)."""
        loads = [member.backend.slots.in_use for member in usable]
        share = self.load_factor * (sum(loads) + 1) / sum(member.weight for member in usable)
        if loads[0] < math.ceil(share * usable[0].weight):
            return usable[0]
        under = [load < math.ceil(share * member.weight) for member, load in zip(usable, loads)]
        if not any(under):
            return usable[0]
        if self.least_busy:  # (the fewest in flight for its weight; the rank breaks a tie)
            return min(zip(usable, loads), key=lambda pair: pair[1] / pair[0].weight)[0]
        return usable[under.index(True)]

    def failed(self, member: PoolMember, *, refused: bool = False, retry_after: float | None = None) -> None:
        """``member`` failed before its first byte: passed over for the cooldown (or ``retry_after`` seconds, a
        429's, when longer); one that ``refused`` the connection, until its health check answers (when checked)."""
        member.down_until = self._clock() + max(self.cooldown_seconds, retry_after or 0.0)
        if refused and self.health_checked:
            member.healthy = False

    def status(self) -> dict[str, str]:
        """Each member's state by name: ``ok``, ``cooling`` (after a failure) or ``down`` (failing its health
        check)."""
        now = self._clock()
        return {member.name: "down" if not member.healthy else "cooling" if now < member.down_until else "ok"
                for member in self.members}


@dataclass(frozen=True, slots=True)
class PoolRequest:
    """One request to a pool, as the HTTP layer hands it to the pipeline (which chooses the member when it knows
    the prompt).

    Fields:
        pool: the model's pool.
        session: the client's own session signal (a session header, ``prompt_cache_key``, ``conversation``,
            ``metadata.user_id``), or ``None``: the prompt's stable prefix is the key.
        hold: keeps the chosen member's slot for as long as the response runs.
    """

    pool: Pool
    session: str | None
    hold: Callable[[Any], None]


def _first(pair: tuple[float, PoolMember]) -> float:
    return pair[0]


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header's seconds, at most :data:`MAX_RETRY_AFTER` (``None`` when absent or not a number of
    seconds, a date included: the cooldown applies)."""
    try:
        seconds = float(value) if value else math.nan
    except ValueError:
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER) if math.isfinite(seconds) else None
