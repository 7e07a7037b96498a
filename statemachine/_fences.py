"""Tracks CommonMark fenced code blocks in a choice's text, across chunks (parsing.md 4.13).

A sentinel inside a fence is content: the model is showing an example. Only
line starts need attention, so plain text costs one ``find("\\n")`` per piece.
"""

from __future__ import annotations

_SKIP = 0  # the rest of a line that cannot be a fence line
_INDENT = 1  # at a line start: up to three spaces
_RUN = 2  # reading a run of backticks or tildes
_REST = 3  # after a run long enough for a fence: the rest of the line decides


class FenceTracker:
    """Follows fence openers and closers in text fed in order, split anywhere.

    ``inside`` is true from the end of an opening fence line (three or more
    backticks or tildes after at most three spaces; a backtick fence's info
    string holds no backtick) to the end of its closing line (the same
    character, at least as many, nothing else on the line).
    """

    __slots__ = ("inside", "_char", "_length", "_phase", "_indent", "_run_char", "_run", "_rest_ok")

    def __init__(self) -> None:
        self.inside = False
        self._char = ""  # the open fence's character and length
        self._length = 0
        self._phase = _INDENT
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
        self._phase = _SKIP

    def feed(self, text: str) -> None:
        """Follow ``text``, the next piece of the choice's text."""
        if self._phase == _SKIP and "\n" not in text:
            return  # the common case: more of a line that is no fence line
        pos, n = 0, len(text)
        while pos < n:
            phase = self._phase
            if phase == _SKIP:
                nl = text.find("\n", pos)
                if nl == -1:
                    return
                pos = nl + 1
                self._new_line()
                continue
            if phase == _REST:
                nl = text.find("\n", pos)
                rest = text[pos:] if nl == -1 else text[pos:nl]
                if self.inside:
                    self._rest_ok = self._rest_ok and not rest.strip()
                elif self._run_char == "`":
                    self._rest_ok = self._rest_ok and "`" not in rest
                if nl == -1:
                    return
                if self._rest_ok:
                    self._toggle()
                pos = nl + 1
                self._new_line()
                continue
            ch = text[pos]
            if phase == _INDENT:
                if ch == " " and self._indent < 3:
                    self._indent += 1
                    pos += 1
                elif ch in "`~":
                    self._phase = _RUN
                    self._run_char = ch
                elif ch == "\n":
                    pos += 1
                    self._new_line()
                else:
                    self._phase = _SKIP
                continue
            if ch == self._run_char:  # _RUN
                self._run += 1
                pos += 1
            elif self._run >= 3 and (not self.inside or (self._run_char == self._char and self._run >= self._length)):
                self._phase = _REST
            else:
                self._phase = _SKIP

    def _new_line(self) -> None:
        self._phase = _INDENT
        self._indent = 0
        self._run = 0
        self._rest_ok = True

    def _toggle(self) -> None:
        if self.inside:
            self.inside = False
        else:
            self.inside = True
            self._char, self._length = self._run_char, self._run
