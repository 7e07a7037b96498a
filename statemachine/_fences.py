"""Tracks CommonMark fenced code blocks in a choice's text, across chunks (parsing.md 4.13).

A sentinel inside a fence is content: the model is showing an example. Only
line starts need attention, so plain text costs one ``find("\\n")`` per piece.
"""

from __future__ import annotations

import enum
from typing import Callable


class FencePhase(str, enum.Enum):
    """Where a :class:`FenceTracker` is in the current line (a ``str`` enum: table lookups hash it in C)."""

    #: The rest of a line that cannot be a fence line.
    SKIP = "skip"
    #: At a line start: up to three spaces.
    INDENT = "indent"
    #: A run of backticks or tildes.
    RUN = "run"
    #: After a run long enough for a fence: the rest of the line decides.
    REST = "rest"


SKIP, INDENT, RUN, REST = FencePhase


class FenceTracker:
    """Follows fence openers and closers in text fed in order, split anywhere.

    ``inside`` is true from the end of an opening fence line (three or more
    backticks or tildes after at most three spaces; a backtick fence's info
    string holds no backtick) to the end of its closing line (the same
    character, at least as many, nothing else on the line).
    """

    __slots__ = ("inside", "_char", "_length", "phase", "_indent", "_run_char", "_run", "_rest_ok")

    def __init__(self) -> None:
        self.inside = False
        self._char = ""  # the open fence's character and length
        self._length = 0
        #: What is being read: ``SKIP`` (the rest of a line that is no fence line) changes with a newline only.
        self.phase = INDENT
        self._indent = 0
        self._run_char = ""
        self._run = 0
        self._rest_ok = True

    def copy(self) -> "FenceTracker":
        """An independent tracker in the same state."""
        twin = FenceTracker.__new__(FenceTracker)
        for slot in self.__slots__:
            setattr(twin, slot, getattr(self, slot))
        return twin

    def reset(self) -> None:
        """Forget an open fence (it wrapped a call); the current line is not a fence line."""
        self.inside = False
        self.phase = SKIP

    def feed(self, text: str) -> None:
        """Follow ``text``, the next piece of the choice's text."""
        if self.phase is SKIP and "\n" not in text:
            return  # the common case: more of a line that is no fence line
        pos, n = 0, len(text)
        while pos < n:
            pos = _READERS[self.phase](self, text, pos)

    # one method per phase: each returns where to read on (``len(text)``: the piece is used up)

    def _read_skip(self, text: str, pos: int) -> int:
        """The rest of a line that is no fence line."""
        nl = text.find("\n", pos)
        if nl == -1:
            return len(text)
        self._new_line()
        return nl + 1

    def _read_rest(self, text: str, pos: int) -> int:
        """The rest of a fence line: a closer has nothing after its run, an opener's info string no backtick."""
        nl = text.find("\n", pos)
        rest = text[pos:] if nl == -1 else text[pos:nl]
        if self.inside:
            self._rest_ok = self._rest_ok and not rest.strip()
        elif self._run_char == "`":
            self._rest_ok = self._rest_ok and "`" not in rest
        if nl == -1:
            return len(text)
        if self._rest_ok:
            self._toggle()
        self._new_line()
        return nl + 1

    def _read_indent(self, text: str, pos: int) -> int:
        """A line start: up to three spaces, then a fence character, or the line is no fence line."""
        ch = text[pos]
        if ch == " " and self._indent < 3:
            self._indent += 1
            return pos + 1
        if ch in "`~":
            self.phase = RUN
            self._run_char = ch
        elif ch == "\n":
            self._new_line()
            return pos + 1
        else:
            self.phase = SKIP
        return pos

    def _read_run(self, text: str, pos: int) -> int:
        """A run of fence characters: three or more (and, to close, as long as the opener's) make a fence."""
        if text[pos] == self._run_char:
            self._run += 1
            return pos + 1
        if self._run >= 3 and (not self.inside or (self._run_char == self._char and self._run >= self._length)):
            self.phase = REST
        else:
            self.phase = SKIP
        return pos

    def _new_line(self) -> None:
        self.phase = INDENT
        self._indent = 0
        self._run = 0
        self._rest_ok = True

    def _toggle(self) -> None:
        if self.inside:
            self.inside = False
        else:
            self.inside = True
            self._char, self._length = self._run_char, self._run


#: The reader of each phase.
_READERS: dict[FencePhase, Callable[[FenceTracker, str, int], int]] = {
    SKIP: FenceTracker._read_skip,
    INDENT: FenceTracker._read_indent,
    RUN: FenceTracker._read_run,
    REST: FenceTracker._read_rest,
}
