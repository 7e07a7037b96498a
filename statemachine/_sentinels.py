"""Where in a piece of text a sentinel (an opener, a closer, ``<think>``) may start: the scanner's fast path.

Every start character is not a sentinel: prose has ``<b>``, ``[links](x)`` and
``a < b``. :class:`SentinelFinder` skips, without leaving C string searches
for long, every position where no sentinel can start, however many formats are
registered and whatever characters their sentinels start with:

* a start character shared by many sentinels (``<``) is searched alone, and a
  hit is kept only if the few characters from it begin some sentinel (one set
  lookup);
* a rarer start character (``[`` of ``[TOOL_CALLS]``) is searched by the
  sentinels' first characters together (``[TOO``), so a markdown ``[`` costs
  nothing; the same characters cut by the text's end are checked apart.
"""

from __future__ import annotations

from typing import Callable

#: How many leading characters of a sentinel the index keys on (fewer when a sentinel is shorter).
KEY_MAX = 4
#: A start character with more keys than this is searched alone, its hits filtered by the index.
MANY_KEYS = 2


class SentinelFinder:
    """Finds the positions where one of ``sentinels`` starts, or where the text ends inside one.

    Attributes:
        key: how many leading characters the index keys on (``KEY_MAX``, or the shortest sentinel's length).
        index: each sentinel by its first ``key`` characters, and by every shorter prefix (a position
            near the text's end), in the order given.
        prefixes: every proper prefix of every sentinel (a text ending in one is held).
        longest: the longest sentinel's length.
        quiet: ``quiet(text)`` is true when no sentinel may start in ``text`` (most text: the caller passes
            it on as it is).
    """

    __slots__ = ("key", "index", "prefixes", "longest", "quiet", "_alone", "_rare")

    def __init__(self, sentinels: tuple[str, ...]):
        key = self.key = min(KEY_MAX, *map(len, sentinels)) if sentinels else KEY_MAX
        index: dict[str, tuple[str, ...]] = {}
        keys_by_start: dict[str, set[str]] = {}
        for s in sentinels:
            for k in range(1, key + 1):
                index[s[:k]] = index.get(s[:k], ()) + (s,)
            keys_by_start.setdefault(s[0], set()).add(s[:key])
        self.index = index
        self.prefixes = frozenset(s[:k] for s in sentinels for k in range(1, len(s)))
        self.longest = max(map(len, sentinels), default=0)
        self._alone = tuple(c for c, keys in keys_by_start.items() if len(keys) > MANY_KEYS or key == 1)
        # A rare start character: its keys, and their proper prefixes (a key cut by the text's end), longest
        # first (the earliest position).
        self._rare = tuple(
            (c, tuple(sorted(keys)), tuple(sorted({k[:j] for k in keys for j in range(1, key)}, key=len,
                                                  reverse=True)))
            for c, keys in keys_by_start.items() if c not in self._alone)
        self.quiet = _quiet(self._alone, self._rare, self.find)

    def find(self, buf: str, pos: int) -> int:
        """The first position from ``pos`` where a sentinel, or the start of one cut by ``buf``'s end, may
        stand; -1 if none. Every position skipped is certainly not one."""
        end = n = len(buf)
        for c in self._alone:
            i = buf.find(c, pos, end)
            if i != -1:
                index, key = self.index, self.key
                while i != -1 and buf[i:i + key] not in index:
                    i = buf.find(c, i + 1, end)
                if i != -1:
                    end = i
        for c, keys, cut in self._rare:
            if c not in buf:
                continue
            for k in keys:
                i = buf.find(k, pos, end + len(k) - 1)  # a hit must start before ``end``
                if i != -1:
                    end = i
            if buf.endswith(cut, pos):
                tail = next(t for t in cut if buf.endswith(t, pos))
                end = min(end, n - len(tail))
        return -1 if end == n else end

    def held(self, buf: str, i: int) -> bool:
        """Whether ``buf[i:]``, the rest of the text, may be the start of a sentinel (to hold it for more)."""
        return len(buf) - i < self.longest and buf[i:] in self.prefixes


def _quiet(alone: tuple[str, ...], rare: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...],
           find: Callable[[str, int], int]) -> Callable[[str], bool]:
    """:attr:`SentinelFinder.quiet`. Every set of formats so far has one character searched alone (``<``)
    and at most one rare one with one key (``[`` of ``[TOOL_CALLS]``): those get a closure where ``in`` and
    ``endswith`` tell at C speed for most text. Any other set: text without a start character is quiet,
    other text is searched."""
    if len(alone) == 1 and not rare:
        (a,) = alone
        return lambda text: a not in text or find(text, 0) == -1
    if len(alone) == 1 and len(rare) == 1 and len(rare[0][1]) == 1:
        (a,), ((r, (k,), cut),) = alone, rare
        return lambda text: (find(text, 0) == -1 if a in text
                             else r not in text or k not in text and not text.endswith(cut))
    starts = alone + tuple(c for c, _, _ in rare)
    return lambda text: not any(c in text for c in starts) or find(text, 0) == -1
