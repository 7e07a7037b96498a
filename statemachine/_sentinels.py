"""Where in a piece of text a sentinel (an opener, a closer, ``<think>``) may start: the scanner's fast path.

Most start characters begin no sentinel: prose has ``<b>``, ``[links](x)`` and
``a < b``. :class:`SentinelFinder` skips every position where none can start
in C, however many formats are registered and whatever characters their
sentinels start with. Per start character (``<``; ``[`` of ``[TOOL_CALLS]``)
it keeps one regular expression of the sentinels' first few characters (one
literal first character, which the search jumps between) and the proper
prefixes of those, for a sentinel's start cut by the text's end
(``endswith``). Text without any start character costs one ``in`` per
character.
"""

from __future__ import annotations

import os.path
import re
from typing import Any, Callable

#: How many leading characters of a sentinel the search matches (fewer when a sentinel is shorter).
KEY_MAX = 4

#: A start character, its keys' common start, a search for its keys, and the keys' proper prefixes.
_Group = tuple[str, str, Callable[..., Any], tuple[str, ...]]


class SentinelFinder:
    """Finds the positions where one of ``sentinels`` starts, or where the text ends inside one.

    Attributes:
        key: how many leading characters are matched (``KEY_MAX``, or the shortest sentinel's length).
        index: each sentinel by its first ``key`` characters, and by every shorter prefix (a position
            near the text's end), in the order given.
        prefixes: every proper prefix of every sentinel (a text ending in one is held).
        longest: the longest sentinel's length.
        quiet: ``quiet(text)`` is true when no sentinel may start in ``text`` (most text: the caller
            passes it on as it is).
    """

    __slots__ = ("key", "index", "prefixes", "longest", "quiet", "_groups")

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
        # Per start character: a search for its keys, and their proper prefixes (a key cut by the text's
        # end), longest first (the earliest position).
        self._groups: tuple[_Group, ...] = tuple(
            (c, os.path.commonprefix(sorted(keys)), re.compile("|".join(map(re.escape, sorted(keys)))).search,
             tuple(sorted({k[:j] for k in keys for j in range(1, key)}, key=len, reverse=True)))
            for c, keys in keys_by_start.items())
        self.quiet = _quiet(self._groups, key)

    def find(self, buf: str, pos: int) -> int:
        """The first position from ``pos`` where a sentinel, or the start of one cut by ``buf``'s end, may
        stand; -1 if none. Every position skipped is certainly not one."""
        end = n = len(buf)
        for c, _, search, _ in self._groups:
            if c in buf:
                m = search(buf, pos, end + self.key - 1)  # a hit must start before ``end``
                if m is not None:
                    end = m.start()
        if end < n:
            return end  # a whole key starts before any position where one is cut by the end
        tail = buf[1 - self.key:]  # where a key may be cut by the end
        for c, _, _, cut in self._groups:
            if c in tail and buf.endswith(cut, pos):
                end = min(end, n - len(next(t for t in cut if buf.endswith(t, pos))))
        return -1 if end == n else end

    def held(self, buf: str, i: int) -> bool:
        """Whether ``buf[i:]``, the rest of the text, may be the start of a sentinel (to hold it for more)."""
        return len(buf) - i < self.longest and buf[i:] in self.prefixes


def _quiet(groups: tuple[_Group, ...], key: int) -> Callable[[str], bool]:
    """:attr:`SentinelFinder.quiet` for these start characters. A group's keys are searched only when their
    common start stands in the text (``[TOO`` when ``[TOOL_CALLS]`` is the only sentinel starting with
    ``[``: a markdown ``[`` costs one ``in``), and a cut key only when its character stands in the last
    ``key - 1``. Every set of formats so far has one or two start characters (``<``, ``[``): those get a
    closure without loops or calls."""
    last = 1 - key
    if len(groups) == 1:
        ((a, gate_a, search_a, cut_a),) = groups
        return lambda text: (a not in text or (gate_a not in text or search_a(text) is None)
                             and (a not in text[last:] or not text.endswith(cut_a)))
    if len(groups) == 2:
        (a, gate_a, search_a, cut_a), (b, gate_b, search_b, cut_b) = groups
        return lambda text: (
            (a not in text or (gate_a not in text or search_a(text) is None)
             and (a not in text[last:] or not text.endswith(cut_a)))
            and (b not in text or (gate_b not in text or search_b(text) is None)
                 and (b not in text[last:] or not text.endswith(cut_b))))
    return lambda text: not any(
        c in text and (gate in text and search(text) is not None or c in text[last:] and text.endswith(cut))
        for c, gate, search, cut in groups)
