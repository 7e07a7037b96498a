"""Lenient (relaxed) JSON, transcoded to canonical JSON (parsing.md 4.14, case 25).

Models sometimes write arguments as a Python or JavaScript literal: single-quoted
strings, unquoted keys, trailing commas, ``True``/``False``/``None``, ``//`` and
``/* */`` comments. :class:`RelaxedValue` reads such text incrementally, token
by token (never a global ``'`` → ``"`` swap, so an apostrophe inside a
double-quoted string stays as it is), finds where the value ends, and builds its
canonical JSON text. It can start in the middle of a value, where the strict
lexer met its first grammar violation: it is handed that lexer's container stack
and expectation, and produces only the continuation of what was already sent.

Canonical style: no whitespace but ``json.dumps``'s default separators
(``", "`` between items, ``": "`` after keys); strings escaped as JSON with
non-ASCII kept literal; numbers as written when they are JSON numbers.
"""

from __future__ import annotations

import enum
import json
import math
import re
from typing import Any, Callable

from ._reader import COMPLETE, Step
from ._scanning import NON_WS, Stop, opener_at


class Expected(str, enum.Enum):
    """What may come next outside strings (shared with the strict lexer)."""

    #: A key, or the object's closer.
    KEY = "key"
    COLON = "colon"
    #: A value (in an array, after ``[`` or ``,``, also the closer).
    VALUE = "value"
    #: ``,`` or the container's closer.
    AFTER = "after"


KEY, COLON, VALUE, AFTER = Expected

WS = " \t\r\n"
VALID_ESCAPES = frozenset('"\\/bfnrtu')
CONTROL = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}
JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WORD = re.compile(r"[\w$.+-]*")
_WORD_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$0123456789+-.")
_KEY_WORD = re.compile(r"[\w$]+")
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_HEX = re.compile(r"[+-]?0[xX][0-9a-fA-F]+")
_KEYWORDS = {"true": "true", "True": "true", "false": "false", "False": "false", "null": "null", "None": "null"}
_IN_DOUBLE = re.compile(r'["\\\x00-\x1f]')
_IN_SINGLE = re.compile(r'[\'"\\\x00-\x1f]')
_OPENING = {"}": "{", "]": "["}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def control_escape(ch: str) -> str:
    """A raw control character as a JSON escape."""
    return CONTROL.get(ch) or "\\u%04x" % ord(ch)


def escape_text(ch: str) -> str:
    """JSON text for a backslash followed by ``ch`` in a string: a valid escape stays, ``\\'`` is an
    apostrophe, anything else (``\\d``, ``\\_`` …) is a literal backslash and ``ch``."""
    if ch in VALID_ESCAPES:
        return "\\" + ch
    if ch == "'":
        return "'"
    return "\\\\" + (control_escape(ch) if ch < " " else ch)


def unicode_escape_step(hexits: str, ch: str) -> tuple[str, str | None, bool]:
    """One character after ``\\u`` and ``hexits``: ``(hexits, text, consumed)``.

    A ``\\u`` escape stands only with four hex digits; otherwise its backslash is
    literal (``\\\\u`` and the digits read so far) and ``ch``, not consumed, is read
    again as string text. ``text`` is ``None`` while undecided.
    """
    if ch in _HEX_DIGITS:
        hexits += ch
        return hexits, ("\\u" + hexits if len(hexits) == 4 else None), True
    return hexits, "\\\\u" + hexits, False


class RelaxedState(str, enum.Enum):
    """Where a :class:`RelaxedValue` is in its value (a ``str`` enum: table lookups hash it in C)."""

    #: Outside strings and comments: the next token (once the value failed, only strings and brackets).
    TOKENS = "tokens"
    #: Inside a string quoted with :attr:`RelaxedValue.quote`.
    STRING = "string"
    #: After a backslash in a string.
    ESCAPE = "escape"
    #: The hex digits of a ``\\u`` escape.
    UNICODE = "unicode"
    #: An unquoted word: a key, a keyword or a number.
    WORD = "word"
    #: After a ``/``: the next character says whether a comment starts.
    SLASH = "slash"
    #: A ``//`` comment, to the end of its line.
    LINE_COMMENT = "line_comment"
    #: A ``/* */`` comment.
    BLOCK_COMMENT = "block_comment"


TOKENS, STRING, ESCAPE, UNICODE, WORD, SLASH, LINE_COMMENT, BLOCK_COMMENT = RelaxedState


class RelaxedValue:
    """Reads (the rest of) one relaxed JSON object/array and transcodes it to canonical JSON.

    Args:
        stack: the open containers (``"{"`` / ``"["``), outermost first; empty to
            start at the value's opening bracket.
        expect: what comes next outside strings (:class:`Expected`).
        comma: a ``,`` was read but not written (written before the next item,
            dropped before a closer).
        opening: the innermost container's opening bracket was not written yet.
        stops: call openers; one outside strings interrupts the value, as in
            :class:`~statemachine._jsonlex.ValueLexer` (``stopped``).
        halt: stop reading at the first character that is not relaxed JSON
            either (``feed`` then returns its position, with ``failed`` set).

    ``feed(buf, pos)`` returns the position after the value's closing bracket,
    or ``None`` while it is open. :meth:`text` is then the canonical text (the
    continuation), or ``None`` when the value is not even relaxed JSON
    (``failed``; without ``halt``, reading then only follows brackets, strings
    and comments to find the end).
    """

    __slots__ = ("stack", "expect", "comma", "out", "failed", "stops", "halt", "stopped", "state", "quote", "hexits",
                 "key", "word", "star")

    def __init__(self, stack: list[str] | None = None, expect: Expected = VALUE, *, comma: bool = False,
                 opening: bool = False, stops: tuple[str, ...] = (), halt: bool = False):
        self.stack = list(stack or ())
        self.expect = expect
        self.comma = comma
        self.out: list[str] = [self.stack[-1]] if opening and self.stack else []
        self.failed = False
        self.stops = stops
        self.halt = halt
        self.stopped: Stop | None = None
        self.state = TOKENS
        self.quote = ""  # the open string's quote character
        self.hexits = ""  # the hex digits read so far after a '\\u'
        self.key = False  # the string or word being read is a key
        self.word: list[str] = []  # the unquoted word being read
        self.star = False  # the last chunk ended with a block comment's '*'

    def text(self) -> str | None:
        """The canonical text read so far; ``None`` once the value turned out not to be JSON."""
        return None if self.failed else "".join(self.out)

    def feed(self, buf: str, pos: int) -> int | None:
        """Read ``buf`` from ``pos``: the position after the value's closing bracket, or where it stopped (an
        opener: ``stopped``; with ``halt``, the first character that is no relaxed JSON), else ``None``."""
        n = len(buf)
        self.stopped = None
        while pos < n:
            if self.failed and self.halt:
                return pos
            outcome, pos = _READERS[self.state](self, buf, pos)
            if outcome is COMPLETE:
                return pos
        return pos if self.failed and self.halt else None

    # one method per state: each returns COMPLETE and where the value ended or stopped, or ``None`` and where to
    # read on

    def _read_tokens(self, buf: str, pos: int) -> Step:
        """Outside strings and comments: whitespace, then one token."""
        m = NON_WS.search(buf, pos)
        if m is None:
            return None, len(buf)
        pos = m.start()
        ch = buf[pos]
        if ch == "<" and self.stops:
            self.stopped = opener_at(buf, pos, self.stops)
            if self.stopped is not None:
                return COMPLETE, pos
        if ch == "/":
            self.state = SLASH
        elif self.failed:
            return self._skim(ch, pos)
        elif self._token(ch):
            return (None if self.stack else COMPLETE), pos + 1
        elif self.failed:
            return None, pos  # read it again as a failed value's character
        return None, pos + 1

    def _skim(self, ch: str, pos: int) -> Step:
        """A failed value is only followed to its end: strings and brackets."""
        if ch in "\"'":
            self.quote = ch
            self.state = STRING
        elif ch in "{[":
            self.stack.append(ch)
        elif ch in "}]" and self.stack:
            self.stack.pop()
            if not self.stack:
                return COMPLETE, pos + 1
        return None, pos + 1

    def _read_string(self, buf: str, pos: int) -> Step:
        """Inside a string: its plain characters, up to its quote, a backslash or a control character."""
        out = None if self.failed else self.out
        m = (_IN_SINGLE if self.quote == "'" else _IN_DOUBLE).search(buf, pos)
        if m is None:
            if out is not None:
                out.append(buf[pos:])
            return None, len(buf)
        i = m.start()
        ch = buf[i]
        if out is not None and i > pos:
            out.append(buf[pos:i])
        if ch == self.quote:
            self.state = TOKENS
            self.expect = COLON if self.key else AFTER
            if out is not None:
                out.append('"')
        elif ch == "\\":
            self.state = ESCAPE
        elif out is not None:
            out.append('\\"' if ch == '"' else control_escape(ch))  # '"' only inside a '…' string
        return None, i + 1

    def _read_escape(self, buf: str, pos: int) -> Step:
        """The character after a backslash."""
        ch = buf[pos]
        if ch == "u":
            self.hexits = ""
            self.state = UNICODE
        else:
            self.state = STRING
            if not self.failed:
                self.out.append(escape_text(ch))
        return None, pos + 1

    def _read_unicode(self, buf: str, pos: int) -> Step:
        """A ``\\u`` escape's hex digits."""
        self.hexits, text, consumed = unicode_escape_step(self.hexits, buf[pos])
        if text is None:
            return None, pos + 1
        if not self.failed:
            self.out.append(text)
        self.state = STRING
        return None, pos + 1 if consumed else pos  # a character that is no hex digit is read again as string text

    def _read_word(self, buf: str, pos: int) -> Step:
        """An unquoted word, up to the first character that cannot be part of it."""
        m = _WORD.match(buf, pos)
        assert m is not None  # the pattern matches the empty string
        self.word.append(m.group())
        if m.end() < len(buf):
            self._word_done()
        return None, m.end()

    def _read_slash(self, buf: str, pos: int) -> Step:
        """After a ``/``: a ``//`` or ``/*`` comment, else not JSON."""
        ch = buf[pos]
        if ch == "/":
            self.state = LINE_COMMENT
        elif ch == "*":
            self.state = BLOCK_COMMENT
        else:
            self.state = TOKENS
            self.failed = True
            return None, pos  # read again as a failed value's character
        return None, pos + 1

    def _read_line_comment(self, buf: str, pos: int) -> Step:
        i = buf.find("\n", pos)
        if i == -1:
            return None, len(buf)
        self.state = TOKENS
        return None, i + 1

    def _read_block_comment(self, buf: str, pos: int) -> Step:
        if self.star and buf[pos] == "/":
            end = pos + 1
        else:
            i = buf.find("*/", pos)
            if i == -1:
                self.star = buf.endswith("*")
                return None, len(buf)
            end = i + 2
        self.state = TOKENS
        self.star = False
        return None, end

    # tokens ------------------------------------------------------------------------------------------

    def _token(self, ch: str) -> bool:
        """A character that starts a token outside strings; ``True`` when it closed a container."""
        expect = self.expect
        if ch in "}]":
            return self._close(ch)
        if expect is COLON and ch == ":":
            self.out.append(": ")
            self.expect = VALUE
        elif expect is AFTER and ch == ",":
            self.comma = True
            self.expect = KEY if self.stack[-1] == "{" else VALUE
        elif expect is VALUE and ch in "{[":
            self._item()
            self.stack.append(ch)
            self.out.append(ch)
            self.expect = KEY if ch == "{" else VALUE
        elif (expect is KEY or expect is VALUE) and self.stack and (ch in "\"'" or ch in _WORD_START):
            self._item()
            self.key = expect is KEY
            if ch in "\"'":
                self.quote = ch
                self.state = STRING
                self.out.append('"')
            else:
                self.word = [ch]
                self.state = WORD
        else:
            self.failed = True
        return False

    def _close(self, ch: str) -> bool:
        """A closing bracket: it closes the innermost container if that is open and may end here."""
        stack = self.stack
        if stack and stack[-1] == _OPENING[ch] and self.expect in (AFTER, KEY if ch == "}" else VALUE):
            stack.pop()
            self.comma = False
            self.out.append(ch)
            self.expect = AFTER
            return True
        self.failed = True
        return False

    def _item(self) -> None:
        """A key or value begins: write the comma read before it."""
        if self.comma:
            self.comma = False
            self.out.append(", ")

    def _word_done(self) -> None:
        word = "".join(self.word)
        self.state = TOKENS
        if self.key:
            if _KEY_WORD.fullmatch(word):
                self.out.append(json.dumps(word, ensure_ascii=False))
                self.expect = COLON
                return
        else:
            canonical = _KEYWORDS.get(word) or _number(word)
            if canonical is not None:
                self.out.append(canonical)
                self.expect = AFTER
                return
        self.failed = True


#: The reader of each state.
_READERS: dict[RelaxedState, Callable[[RelaxedValue, str, int], Step]] = {
    TOKENS: RelaxedValue._read_tokens,
    STRING: RelaxedValue._read_string,
    ESCAPE: RelaxedValue._read_escape,
    UNICODE: RelaxedValue._read_unicode,
    WORD: RelaxedValue._read_word,
    SLASH: RelaxedValue._read_slash,
    LINE_COMMENT: RelaxedValue._read_line_comment,
    BLOCK_COMMENT: RelaxedValue._read_block_comment,
}


def _number(word: str) -> str | None:
    """A numeric word as a JSON number (``+1`` → ``1``, ``.5`` → ``0.5``, ``0x1f`` → ``31``), else ``None``."""
    if JSON_NUMBER.fullmatch(word):
        return word
    try:
        if _HEX.fullmatch(word):
            return str(int(word, 16))
        if _INT.fullmatch(word):
            return str(int(word))
        if _FLOAT.fullmatch(word):
            value = float(word)
            return repr(value) if math.isfinite(value) else None
    except ValueError:  # an integer too long to convert
        return None
    return None


def relaxed_loads(text: str) -> Any:
    """``text`` (a whole relaxed JSON object or array) as a Python value, or ``None`` if it is not one."""
    text = text.strip(WS)
    reader = RelaxedValue()
    canonical = reader.text() if reader.feed(text, 0) == len(text) else None
    if canonical is None:
        return None
    try:
        return json.loads(canonical)
    except ValueError:
        return None
