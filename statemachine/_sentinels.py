"""Where in a piece of text a sentinel (an opener, a closer, ``<think>``) may start: the scanner's fast path.

Most start characters begin no sentinel: prose has ``<b>``, ``[links](x)``,
``a < b``, code fences and quotes ending in ``>``. :class:`SentinelFinder`
skips every position where none can start in C, however many formats are
registered and whatever characters their sentinels start with: one regular
expression matches the sentinels' first few characters (their keys), or a
key's start cut by the text's end (a chunk's end), written as a trie, so a
start character that begins no key fails at once however many keys there are.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

#: How many leading characters of a sentinel the search matches (fewer for a start character one of whose
#: sentinels is shorter: ``>>>``).
KEY_MAX = 4


class SentinelFinder:
    """Finds the positions where one of ``sentinels`` starts, or where the text ends inside one.

    Attributes:
        keys: per start character, how many leading characters are matched (``KEY_MAX``, or the length
            of its shortest sentinel: Functionary's ``>>>`` leaves Gemma's ```` ```tool_code ```` keyed
            ```` ```t ````, which a markdown fence is not).
        index: each sentinel by its first ``keys[its first character]`` characters, and by every shorter
            prefix (a position near the text's end), in the order given.
        prefixes: every proper prefix of every sentinel (a text ending in one is held).
        longest: the longest sentinel's length.
        clear: ``clear(text)`` is how much of ``text``, from its start, no sentinel starts in: ``len(text)``
            for most text, where a sentinel's start cut by the text's end begins (the rest is to be held),
            or -1 when a sentinel may start inside it.
        find: ``find(buf, pos)`` is the first position from ``pos`` where a sentinel, or the start of one cut
            by ``buf``'s end, may stand; -1 if none. Every position skipped is certainly not one.
        held: ``held(buf, i)`` says whether ``buf[i:]``, the rest of the text, may be the start of a sentinel
            (to hold it for more).
    """

    __slots__ = ("keys", "index", "prefixes", "longest", "clear", "find", "held")

    def __init__(self, sentinels: tuple[str, ...]):
        keys: dict[str, int] = {}
        for s in sentinels:
            keys[s[0]] = min(keys.get(s[0], KEY_MAX), len(s))
        self.keys = keys
        index: dict[str, tuple[str, ...]] = {}
        for s in sentinels:
            for k in range(1, keys[s[0]] + 1):
                index[s[:k]] = index.get(s[:k], ()) + (s,)
        self.index = index
        self.prefixes = frozenset(s[:k] for s in sentinels for k in range(1, len(s)))
        self.longest = max(map(len, sentinels), default=0)
        whole = {s[:keys[s[0]]] for s in sentinels}  # one length per start character: none starts another
        cut = frozenset(index) - whole
        # the first match is a whole key, or else the longest cut one (only the text's end cuts)
        search = re.compile(_trie(whole) or "(?!)").search
        prefixes, longest = self.prefixes, self.longest
        # Functions made once per finder (shared by every stream), not methods: each stream's parser keeps
        # them in its slots, and a bound method there would be one more object per open stream.

        def clear(text: str) -> int:
            m = search(text)
            if m is None:
                return len(text)
            return m.start() if m.group() in cut else -1

        def find(buf: str, pos: int) -> int:
            m = search(buf, pos)
            return -1 if m is None else m.start()

        def held(buf: str, i: int) -> bool:
            return len(buf) - i < longest and buf[i:] in prefixes

        self.clear: Callable[[str], int] = clear
        self.find: Callable[[str, int], int] = find
        self.held: Callable[[str, int], bool] = held


def _trie(words: Iterable[str]) -> str:
    """A regular expression matching any of ``words`` (distinct, none the start of another) or a start of
    one at the text's end (``\\Z``), written as a trie: after each character only the branches that can
    still match are tried."""
    by_first: dict[str, list[str]] = {}
    for w in words:
        by_first.setdefault(w[0], []).append(w[1:])
    return "|".join(re.escape(c) + (f"(?:\\Z|{_trie(rests)})" if rests != [""] else "")
                    for c, rests in sorted(by_first.items()))
