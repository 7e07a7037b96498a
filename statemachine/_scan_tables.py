"""The sentinel tables of a set of formats: what the ``TEXT`` reader looks for, built once per set.

:func:`scan_tables` is shared by every choice that has the same formats, marker and reasoning setting
(building them per choice cost more than the rest of a short response's parsing).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from ._sentinels import SentinelFinder
from .formats import TextFormat

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


class ScanTables(NamedTuple):
    """What the scanner looks for, for one set of formats, marker and reasoning: shared by every choice that
    has them (building them per choice cost more than the rest of a short response's parsing)."""

    openers: dict[str, TextFormat]  # opener → its format (read only)
    refutable: frozenset[str]  # the openers whose format may tell from the next characters that no call opens
    closers: frozenset[str]
    sentinels: tuple[str, ...]
    lt_only: bool
    finder: SentinelFinder  # where any sentinel may start
    think: SentinelFinder  # the sentinels that matter in reasoning (what of it is held at a chunk's end)
    opener_index: dict[str, tuple[str, ...]]
    think_opens: tuple[str, ...]  # what opens reasoning in text: ``<think>`` and the formats' own openers
    think_closes: tuple[str, ...]  # what ends it: ``</think>`` and the formats' own closers
    end_tokens: frozenset[str]  # the formats' tokens that end a message or turn: dropped in visible text
    opener_names: tuple[str, ...]  # the openers, in ``openers``' order
    bare_formats: tuple[TextFormat, ...]  # the formats that read calls with no opener at a message's start


@functools.lru_cache(maxsize=256)
def scan_tables(formats: tuple[TextFormat, ...], marker: str | None, reasoning: bool) -> ScanTables:
    """The sentinels of ``formats`` (with ``marker``, and ``<think>`` when ``reasoning``), indexed for the scanner."""
    marked = [fmt.with_marker(marker) for fmt in formats]
    # an opener two formats share (``<tool_call>``: format A, GLM) is read by the one whose reader reads the
    # other's bodies too, else by the first format listed
    openers: dict[str, TextFormat] = {}
    for fmt in marked:
        for op in fmt.openers:
            if op not in openers or openers[op].name in fmt.reads_also:
                openers[op] = fmt
    closers = frozenset(fmt.closer for fmt in marked if fmt.closer)
    # ``<think>`` is the config's; a format's own delimiters (``[THINK]``, ``<seed:think>``) and end tokens belong
    # to its syntax, read for the taught format (listed first) only: another family's, merely accepted for its
    # calls, would hide or cut the prose of a model that quotes them. An empty opener is its reader's
    # (``drop_block``, Harmony's analysis header): only the closer is looked for, whichever format it is.
    taught = formats[:1]
    pairs = ([(THINK_OPEN, THINK_CLOSE)] if reasoning else []) + [
        fmt.reasoning_delimiters for fmt in formats
        if fmt.reasoning_delimiters and (fmt in taught or reader_opens_reasoning(fmt))]
    think_opens = tuple(dict.fromkeys(opener for opener, _ in pairs if opener))
    think_closes = tuple(dict.fromkeys(closer for _, closer in pairs))
    end_tokens = tuple(dict.fromkeys(t for fmt in taught for t in fmt.end_tokens if t not in think_closes))
    sentinels = list(openers) + sorted(closers) + [*think_opens, *think_closes, *end_tokens]
    # When every sentinel starts with '<' (the default formats), text without one is plain at once (feed).
    return ScanTables(
        openers=openers, refutable=_refutable(openers, taught[0] if taught else None),
        closers=closers, sentinels=tuple(sentinels), lt_only={s[0] for s in sentinels} <= {"<"},
        finder=SentinelFinder(tuple(sentinels)), think=SentinelFinder((*think_closes, *think_opens, *openers)),
        opener_index=_index(tuple(openers)), think_opens=think_opens, think_closes=think_closes,
        end_tokens=frozenset(end_tokens), opener_names=tuple(openers),
        bare_formats=tuple(fmt for fmt in formats if fmt.reads_bare))


def _refutable(openers: dict[str, TextFormat], taught: TextFormat | None) -> frozenset[str]:
    """The openers whose format may refute them (``TextFormat.refutes``); none of a taught format with call
    tokens, whose released block goes without them while a refuted opener stays whole."""
    return frozenset(op for op, fmt in openers.items() if type(fmt).refutes is not TextFormat.refutes
                     and not (taught is not None and fmt.name == taught.name and fmt.call_tokens))


def reader_opens_reasoning(fmt: TextFormat) -> bool:
    """Whether the format's reader opens reasoning: its delimiters have no opener (Harmony's analysis header)."""
    return fmt.reasoning_delimiters is not None and not fmt.reasoning_delimiters[0]


def _index(sentinels: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """``sentinels`` by their first two characters and by their first one, in their order."""
    index: dict[str, tuple[str, ...]] = {}
    for s in sentinels:
        for key in (s[:2], s[:1]):
            index[key] = index.get(key, ()) + (s,)
    return index
