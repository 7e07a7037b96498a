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

import json
import math
import re
from typing import Any

from ._scanning import Stop, opener_at

# What comes next outside strings (shared with the strict lexer).
KEY = "key"  # a key, or the object's closer
COLON = "colon"
VALUE = "value"  # a value (in an array, after '[' or ',', also the closer)
AFTER = "after"  # ',' or the container's closer

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


class RelaxedValue:
    """Reads (the rest of) one relaxed JSON object/array and transcodes it to canonical JSON.

    Args:
        stack: the open containers (``"{"`` / ``"["``), outermost first; empty to
            start at the value's opening bracket.
        expect: what comes next (``KEY``, ``COLON``, ``VALUE``, ``AFTER``).
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

    __slots__ = ("stack", "expect", "comma", "out", "failed", "stops", "halt", "stopped", "quote", "escape", "hexits",
                 "key", "word", "comment", "star")

    def __init__(self, stack: list[str] | None = None, expect: str = VALUE, *, comma: bool = False,
                 opening: bool = False, stops: tuple[str, ...] = (), halt: bool = False):
        self.stack = list(stack or ())
        self.expect = expect
        self.comma = comma
        self.out: list[str] = [self.stack[-1]] if opening and self.stack else []
        self.failed = False
        self.stops = stops
        self.halt = halt
        self.stopped: Stop | None = None
        self.quote = ""  # the open string's quote character
        self.escape = False
        self.hexits: str | None = None  # the hex digits read so far after a '\\u'
        self.key = False  # the string or word being read is a key
        self.word: list[str] | None = None  # an unquoted word (key, keyword or number) being read
        self.comment = ""  # "/" (the next character decides), "line" or "block"
        self.star = False  # the last chunk ended with a block comment's '*'

    def text(self) -> str | None:
        """The canonical text read so far; ``None`` once the value turned out not to be JSON."""
        return None if self.failed else "".join(self.out)

    def feed(self, buf: str, pos: int) -> int | None:
        n = len(buf)
        self.stopped = None
        while pos < n:
            if self.failed and self.halt:
                return pos
            if self.quote:
                pos = self._string(buf, pos)
                continue
            if self.comment:
                pos = self._comment(buf, pos)
                continue
            if self.word is not None:
                m = _WORD.match(buf, pos)
                assert m is not None  # the pattern matches the empty string
                self.word.append(m.group())
                pos = m.end()
                if pos < n:
                    self._word_done()
                continue
            ch = buf[pos]
            if ch in WS:
                pos += 1
                continue
            if ch == "<" and self.stops:
                self.stopped = opener_at(buf, pos, self.stops)
                if self.stopped is not None:
                    return pos
            pos += 1
            if ch == "/":
                self.comment = "/"
            elif self.failed:  # only find the end: strings, brackets
                if ch in "\"'":
                    self.quote = ch
                elif ch in "{[":
                    self.stack.append(ch)
                elif ch in "}]" and self.stack:
                    self.stack.pop()
                    if not self.stack:
                        return pos
            elif self._token(ch):
                if not self.stack:
                    return pos
            elif self.failed:
                pos -= 1  # read it again as a failed value's character
        return pos if self.failed and self.halt else None

    def _token(self, ch: str) -> bool:
        """A character that starts a token outside strings; ``True`` when it closed a container."""
        expect, stack = self.expect, self.stack
        if ch in "}]":
            if stack and stack[-1] == _OPENING[ch] and expect in (AFTER, KEY if ch == "}" else VALUE):
                stack.pop()
                self.comma = False
                self.out.append(ch)
                self.expect = AFTER
                return True
        elif expect == COLON:
            if ch == ":":
                self.out.append(": ")
                self.expect = VALUE
                return False
        elif expect == AFTER:
            if ch == ",":
                self.comma = True
                self.expect = KEY if stack[-1] == "{" else VALUE
                return False
        elif ch in "{[":
            if expect == VALUE:
                self._item()
                stack.append(ch)
                self.out.append(ch)
                self.expect = KEY if ch == "{" else VALUE
                return False
        elif stack and (ch in "\"'" or ch in _WORD_START):
            self._item()
            self.key = expect == KEY
            if ch in "\"'":
                self.quote = ch
                self.out.append('"')
            else:
                self.word = [ch]
            return False
        self.failed = True
        return False

    def _item(self) -> None:
        """A key or value begins: write the comma read before it."""
        if self.comma:
            self.comma = False
            self.out.append(", ")

    def _word_done(self) -> None:
        assert self.word is not None
        word = "".join(self.word)
        self.word = None
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

    def _string(self, buf: str, pos: int) -> int:
        out = None if self.failed else self.out
        if self.hexits is not None:
            self.hexits, text, consumed = unicode_escape_step(self.hexits, buf[pos])
            if text is None:
                return pos + 1
            if out is not None:
                out.append(text)
            self.hexits = None
            return pos + 1 if consumed else pos  # a character that is no hex digit is read again as string text
        if self.escape:
            self.escape = False
            ch = buf[pos]
            if ch == "u":
                self.hexits = ""
            elif out is not None:
                out.append(escape_text(ch))
            return pos + 1
        m = (_IN_SINGLE if self.quote == "'" else _IN_DOUBLE).search(buf, pos)
        if m is None:
            if out is not None:
                out.append(buf[pos:])
            return len(buf)
        i = m.start()
        ch = buf[i]
        if out is not None and i > pos:
            out.append(buf[pos:i])
        if ch == self.quote:
            self.quote = ""
            self.expect = COLON if self.key else AFTER
            if out is not None:
                out.append('"')
        elif ch == "\\":
            self.escape = True
        elif out is not None:
            out.append('\\"' if ch == '"' else control_escape(ch))  # '"' only inside a '…' string
        return i + 1

    def _comment(self, buf: str, pos: int) -> int:
        kind = self.comment
        if kind == "/":
            ch = buf[pos]
            if ch == "/":
                self.comment = "line"
            elif ch == "*":
                self.comment = "block"
            else:
                self.comment = ""
                self.failed = True
                return pos  # read again as a failed value's character
            return pos + 1
        if kind == "line":
            i = buf.find("\n", pos)
            if i == -1:
                return len(buf)
            self.comment = ""
            return i + 1
        if self.star and buf[pos] == "/":
            self.comment = ""
            self.star = False
            return pos + 1
        i = buf.find("*/", pos)
        if i == -1:
            self.star = buf.endswith("*")
            return len(buf)
        self.comment = ""
        self.star = False
        return i + 2


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
