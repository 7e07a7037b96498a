"""A least-recently-used map bounded in entries and in total size: the per-process caches of tool sets
and rendered tool blocks, which agents resend unchanged every turn."""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedLRU(Generic[K, V]):
    """At most ``max_entries`` entries whose ``size_of(key, value)`` sum to at most ``max_size``.

    A ``put`` evicts the least recently used entries past either bound; an entry larger than
    ``max_size`` on its own is not kept.
    """

    def __init__(self, max_entries: int, max_size: int, size_of: Callable[[K, V], int]):
        self.max_entries = max_entries
        self.max_size = max_size
        self._size_of = size_of
        self.entries: OrderedDict[K, V] = OrderedDict()
        self.size = 0

    def get(self, key: K) -> V | None:
        """The value kept for ``key`` (now the most recently used), or ``None``."""
        value = self.entries.get(key)
        if value is not None:
            self.entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` for ``key`` (a new key), within the bounds."""
        size = self._size_of(key, value)
        if size > self.max_size:
            return
        self.entries[key] = value
        self.size += size
        while len(self.entries) > self.max_entries or self.size > self.max_size:
            old_key, old_value = self.entries.popitem(last=False)
            self.size -= self._size_of(old_key, old_value)

    def clear(self) -> None:
        """Forget every entry."""
        self.entries.clear()
        self.size = 0
