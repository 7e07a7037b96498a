"""Small text helpers the readers share: partial tags at a chunk's end, openers, closers.

Every reader keeps the chunk's unconsumed tail (``buf[pos:]``, a tag cut by the
chunk's end) and gets it back in front of the next chunk; these helpers find
where that tail starts without re-reading earlier text.
"""

from __future__ import annotations

import enum
import re


#: Format C's openers, both spellings: ``<function=NAME>`` and ``<function name="NAME">`` (llama.cpp accepts both);
#: a ``<tool_call>`` block may hold one too (Qwen3-Coder).
FUNCTION_OPENERS = ("<function=", "<function name=")


class Stop(enum.Enum):
    """Why a reader stopped before its value or block ended."""

    #: A call opener starts here: a new call interrupts this one (case 14).
    OPENER = "opener"
    #: The chunk ends inside what may be an opener or a closer: read it again with the next chunk.
    PARTIAL = "partial"
    #: The block's closer.
    CLOSER = "closer"
    #: A grammar violation.
    INVALID = "invalid"

WS = " \t\r\n"
#: The first character that is not whitespace (``WS``).
NON_WS = re.compile(r"[^ \t\r\n]")


def skip_ws(buf: str, pos: int) -> int:
    """The first position from ``pos`` that holds no whitespace (``len(buf)`` if none)."""
    n = len(buf)
    while pos < n and buf[pos] in WS:
        pos += 1
    return pos


def partial_at_end(buf: str, pos: int, needles: tuple[str, ...]) -> int:
    """Where a proper prefix of one of ``needles`` starts at the end of ``buf`` (or ``len(buf)``)."""
    n = len(buf)
    start = max(pos, n - max(map(len, needles)) + 1)
    found = n
    for first in {x[0] for x in needles}:  # only where a needle's first character stands (per chunk: O(1) finds)
        i = buf.find(first, start)
        while i != -1 and i < found:
            tail = buf[i:]
            if any(x.startswith(tail) for x in needles):
                found = i
                break
            i = buf.find(first, i + 1)
    return found

def opener_at(buf: str, i: int, openers: tuple[str, ...]) -> Stop | None:
    """``Stop.OPENER`` if one of ``openers`` starts at ``buf[i]``, ``Stop.PARTIAL`` if ``buf[i:]``
    is a proper prefix of one (the chunk ended inside it), else ``None``."""
    for opener in openers:
        if buf.startswith(opener, i):
            return Stop.OPENER
    if len(buf) - i < max(map(len, openers), default=0):
        tail = buf[i:]
        if any(opener.startswith(tail) for opener in openers):
            return Stop.PARTIAL
    return None


def skip_to(buf: str, pos: int, closer: str, openers: tuple[str, ...]) -> tuple[Stop | None, int]:
    """Where a malformed block being skipped ends: ``(Stop.CLOSER, after it)``, ``(Stop.OPENER, at it)``
    when a new call begins first (case 14), or ``(None, keep)``: not yet, ``buf[keep:]`` may be a
    tag cut by the chunk's end."""
    i = buf.find("<", pos)
    while i != -1:
        if buf.startswith(closer, i):
            return Stop.CLOSER, i + len(closer)
        hit = opener_at(buf, i, openers)
        if hit is Stop.OPENER:
            return Stop.OPENER, i
        if hit is Stop.PARTIAL or (len(buf) - i < len(closer) and closer.startswith(buf[i:])):
            return None, i
        i = buf.find("<", i + 1)
    return None, len(buf)


class TextUntil:
    """Collects text up to a literal closer, across chunks.

    With ``tagless`` the text holds no ``<`` but the closer's: at any other
    ``<`` ``feed`` stops there and sets ``stray``; the caller decides.
    """

    def __init__(self, closer: str, *, tagless: bool = False):
        self.closer = closer
        self.tagless = tagless
        self.stray = False
        self.parts: list[str] = []

    def feed(self, buf: str, pos: int) -> tuple[str | None, int]:
        if self.tagless:
            i = buf.find("<", pos)
            if i != -1 and not buf.startswith(self.closer, i) and not self.closer.startswith(buf[i:]):
                self.parts.append(buf[pos:i])
                self.stray = True
                return None, i
        i = buf.find(self.closer, pos)
        if i == -1:
            keep = partial_at_end(buf, pos, (self.closer,))
            self.parts.append(buf[pos:keep])
            return None, keep
        self.parts.append(buf[pos:i])
        return "".join(self.parts), i + len(self.closer)



class NewlineTrim:
    """A streamed value's first leading and last trailing newline dropped (format C values, custom input).

    The trailing newline can't be known to be the last until more text comes,
    so one is held back; whatever is held at the value's end was the last.
    """

    __slots__ = ("started", "held_newline")

    def __init__(self) -> None:
        self.started = False
        self.held_newline = False

    def leading(self, text: str) -> str:
        """``text`` without the value's first newline (only the first non-empty piece has one)."""
        if not self.started and text:
            self.started = True
            if text[0] == "\n":
                return text[1:]
        return text

    def stream(self, text: str) -> str:
        """What of ``text`` may go out now: a held newline first, a trailing one held back."""
        if self.held_newline:
            text = "\n" + text
        self.held_newline = text.endswith("\n")
        return text[:-1] if self.held_newline else text
