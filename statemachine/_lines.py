"""The ``TEXT`` reader's modes, and its line starts: where a call written without an opener may begin after text.

After visible text, a line may begin a call the model wrote without an opener: a fenced JSON call
("Here's how you would call it:" then a ```` ```json ```` fence), or, under a forced ``tool_choice`` before its
call, bare JSON. Such a block may as well be an example the model shows, so it is held with the line after it
until :class:`~statemachine._shown.HeldCall` tells which (issue 38, issue 43 item 5), then read again: as the
message's start if it is a call, as text if not. :class:`LineStarts` is that part of
:class:`~statemachine._text.TextReader`.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from ._fences import FenceTracker
from ._shown import BEFORE, HeldCall, first_line_end

if TYPE_CHECKING:
    from ._calls import CallBook
    from ._config import ParserConfig

_WS = " \t\r\n"


class TextMode(str, enum.Enum):
    """What the ``TEXT`` reader looks for next (a ``str`` enum: looked up by its C-level hash per piece)."""

    #: Visible text: only a sentinel changes anything.
    PROSE = "prose"
    #: Nothing visible yet: bare JSON, a bare-reading format's call or a fence line may open a call.
    MESSAGE_START = "message_start"
    #: Visible text under a forced ``tool_choice`` before its call: each line is read to its end, and the next one
    #: starts in ``LINE_START`` (bare or fenced JSON there may be the call).
    FORCED_PROSE = "forced_prose"
    #: Visible text otherwise (a call may start the message without an opener): a line whose first character is a
    #: backtick starts in ``LINE_START`` (a fenced call may follow); text without a backtick is prose.
    WATCH = "watch"
    #: The start of such a line: a fence line is held; JSON in it (or, forced, bare) is held as a ``HELD`` block.
    LINE_START = "line_start"
    #: A block that may be a call or a shown example, held with the line after it (``_shown.HeldCall``).
    HELD = "held"
    #: A held block that is a call, read again as the message's start.
    HELD_CALL = "held_call"
    #: A fenced call went out: the fence's closing line, if it comes next, is dropped.
    FENCED_CALL_END = "fenced_call_end"
    #: A call written without an opener (bare, fenced, a bare list) went out: what comes next, past whitespace,
    #: is read as the message's start, so the same forms repeated (one per line, several fences) are calls too.
    NEXT_CALL = "next_call"
    #: Inside ``<think>`` (or a format's reasoning channel): text is reasoning.
    REASONING = "reasoning"


PROSE = TextMode.PROSE
MESSAGE_START = TextMode.MESSAGE_START
FORCED_PROSE = TextMode.FORCED_PROSE
WATCH = TextMode.WATCH
LINE_START = TextMode.LINE_START
HELD = TextMode.HELD
HELD_CALL = TextMode.HELD_CALL
FENCED_CALL_END = TextMode.FENCED_CALL_END
NEXT_CALL = TextMode.NEXT_CALL
REASONING = TextMode.REASONING


class LineStarts:
    """The text reader's line starts and held blocks (a base of :class:`~statemachine._text.TextReader`)."""

    __slots__ = ("_fence", "_fences", "_forced", "_held_call", "_late", "_tail", "_watching", "_ws")

    config: ParserConfig
    _calls: CallBook
    _mode: TextMode
    _fence: str  # a held fence line that may wrap a call
    _fences: FenceTracker  # sentinels inside a fenced block are text (case 29)
    _forced: bool
    _watching: bool
    _held_call: HeldCall | None
    _late: bool
    _tail: list[str]
    _ws: str  # whitespace held while the current stretch of text has nothing else
    _stretch_has_text: bool

    def _init_lines(self, config: ParserConfig, open_start: bool) -> None:
        """Set up the line starts; ``open_start``: a call may start the message without an opener."""
        self._forced = open_start and config.tool_choice.mode == "required"  # the answer must be a call
        self._watching = open_start and config.bare_json  # a fenced call may start a line after text (held)
        self._held_call = None  # the block held in ``HELD``
        self._late = False  # the held call came after visible text (a repair)
        self._tail: list[str] = []  # the visible text since the last call, its end: what a held block is judged after

    def _after_line_space(self, buf: str, pos: int) -> int:
        """At a line's start after text: its whitespace goes out as text, and a fence line may follow at the returned
        position; anything else (or nothing yet) is prose from ``pos``, returned as ``-pos - 1``."""
        j, n = pos, len(buf)
        while j < n and buf[j] in _WS:
            j += 1
        if j == n or buf[j] != "`":
            return -pos - 1
        self._fences.feed(buf[pos:j])
        self._emit_text(buf[pos:j])
        return j

    def _text_before(self) -> str:
        """The end of the visible text since the last call (``BEFORE`` characters)."""
        tail = self._tail
        if len(tail) > 1:
            tail[:] = ["".join(tail)[-BEFORE:]]
        return tail[0] if tail else ""

    def _set_mode(self, mode: TextMode) -> None:
        raise NotImplementedError  # the text reader's

    def _emit_text(self, text: str) -> None:
        raise NotImplementedError  # the text reader's

    def _scan(self, buf: str) -> None:
        raise NotImplementedError  # the machine's (ChoiceStream)

    def _holds(self, buf: str, j: int) -> bool | None:
        """Whether the JSON object (or array of objects) at ``buf[j]`` is held as a ``HELD`` block: in a fence, or bare
        at a forced answer's line start before its call; ``None`` while the chunk ends before that shows."""
        if buf[j] not in "{[" or self._mode is HELD_CALL or not self.config.bare_json or not (
                self._fence or (self._mode is LINE_START and self._forced and not self._calls.next_index)):
            return False
        k, n = j + 1, len(buf)
        while buf[j] == "[" and k < n and buf[k] in _WS:
            k += 1
        return True if buf[j] == "{" else None if k == n else buf[k] == "{"

    def _hold_block(self, buf: str, pos: int) -> int:
        """Hold the block from ``buf[pos]`` (and its held fence line) with what follows it (``HELD``)."""
        before = self._text_before()
        self._held_call = HeldCall(self.config, before, nameless=self._forced)
        self._late = bool(before.strip())
        text, self._fence, self._ws = self._fence + self._ws + buf[pos:], "", ""
        self._set_mode(HELD)
        self._read_held(text, 0)
        return len(buf)

    def _read_held(self, buf: str, pos: int) -> int:
        """A held block and what follows it, until :class:`HeldCall` tells a call from a shown example."""
        held = self._held_call
        assert held is not None
        verdict = held.feed(buf[pos:])
        if verdict is not None:
            self._release_held(verdict)
        return len(buf)

    def _end_held(self) -> None:
        """At the finish: a held block is decided with what it has."""
        if self._held_call is not None:
            self._release_held(self._held_call.at_eof())

    def _release_held(self, call: bool) -> None:
        """Read the held text again: as the message's start if it is a call, else as text (whose first line is then
        no line start)."""
        held = self._held_call
        assert held is not None
        self._held_call = None
        self._fences = FenceTracker()  # as before the held fence line (a line's start outside any fence)
        text = held.text()
        head = 0 if call else first_line_end(text)
        if head:  # text: the line it starts on is no line start any more
            self._fences.feed(text[:head])
            self._emit_text(text[:head])
        self._set_mode(HELD_CALL if call else self._prose_mode())
        self._scan(text[head:])

    def _prose_mode(self) -> TextMode:
        """The mode visible text is read in: forced lines before the call, watched lines, or plain prose."""
        return FORCED_PROSE if self._forced and not self._calls.next_index else WATCH if self._watching else PROSE

    def _next_line_start(self, buf: str, pos: int, examined: bool) -> int:
        """Where the next line from ``pos`` that may start a call begins, ``-1`` if none does in ``buf``: under a forced
        choice before its call any line, else one whose first character (past up to three spaces) is a backtick
        (``examined``: not the line ``pos`` is in, whose start was read already)."""
        if self._forced and not self._calls.next_index:
            line_end = buf.find("\n", pos)
            return -1 if line_end == -1 else line_end + 1
        tick = buf.find("`", pos)
        while tick != -1:
            line_start = buf.rfind("\n", pos, tick) + 1
            if line_start:
                return line_start
            if not examined and not self._fences.inside and self._line_goes_on(buf[pos:tick]):
                return pos
            tick = buf.find("`", tick + 1)
        return -1

    def _line_goes_on(self, text: str) -> bool:
        """The visible text so far, then ``text``, leaves a line's start (a newline, then at most three spaces)."""
        tail = self._text_before()
        last = tail.rfind("\n")
        return last != -1 and not (tail[last + 1:] + text).strip(" ") and len(tail) - last + len(text) <= 4
