"""Incremental, string-aware JSON lexing for call bodies.

:class:`ValueLexer` follows one JSON object or array across chunks and finds
its end without ever re-reading text: the open containers, what may come next,
inside-string and escape state persist between chunks. In ``emit`` mode it also
returns the text to stream, verbatim apart from local repairs decided where
they occur (so the streamed text and the final text are the same bytes): raw
control characters inside strings are escaped, invalid escapes fixed, and a
trailing comma before a closer dropped.

At the first grammar violation (a single quote, an unquoted key, ``True``, a
comment…) the value is relaxed JSON (case 25): the rest is read by
:class:`~statemachine._relaxed.RelaxedValue` and sent once, canonically, at the
value's end, so what went out before stays a prefix of the final text.
"""

from __future__ import annotations

import enum
import json
import re
from typing import Callable

from ._reader import COMPLETE, MORE, Step
from ._relaxed import (AFTER, COLON, CONTROL, JSON_NUMBER, KEY, VALID_ESCAPES, VALUE, RelaxedValue, control_escape,
                       escape_text, unicode_escape_step)
from ._scanning import NON_WS, Stop, opener_at

# A string's run of plain characters and escapes sent as they are: it ends at the closing quote, a raw
# control character, or a backslash that starts a ``\\u`` escape, an invalid one, or the chunk's end.
_STRING_RUN = re.compile(r'(?:[^"\\\x00-\x1f]++|\\["\\/bfnrt])*+')
_SIMPLE_ESCAPES = frozenset('"\\/bfnrt')  # the valid escapes but ``\u``: a backslash and one character
_LITERAL = re.compile(r"[\w.+-]*")
_KEYWORDS = frozenset(("true", "false", "null"))
_OPENING = {"}": "{", "]": "["}


class LexerState(str, enum.Enum):
    """Where a :class:`ValueLexer` is in its value (a ``str`` enum: table lookups hash it in C)."""

    #: Outside strings: whitespace, then a bracket, comma, colon, or the start of a string or literal.
    TOKENS = "tokens"
    #: Inside a string.
    STRING = "string"
    #: After a backslash in a string.
    ESCAPE = "escape"
    #: The hex digits of a ``\\u`` escape.
    UNICODE = "unicode"
    #: A keyword or number, held until it ends.
    LITERAL = "literal"
    #: The rest of the value, read as relaxed JSON (case 25).
    RELAXED = "relaxed"


TOKENS, STRING, ESCAPE, UNICODE, LITERAL, RELAXED = LexerState


class ValueLexer:
    """Follows one JSON object/array value starting at its opening bracket.

    ``feed(buf, pos)`` consumes from ``pos`` and returns ``(text, end)``:
    ``text`` is what may be emitted now (``""`` in skip mode) and ``end`` the
    position after the value's closing bracket, or ``None`` if the value is
    still open. ``repaired`` turns true when a local repair changed the text or
    the value was relaxed JSON; ``failed`` when it was not even that (the text
    sent so far is then all there is, and not JSON).

    The value's opening bracket, a comma and a keyword or number are held
    until the next significant character shows they are strict JSON.

    With ``stops`` (call openers), an opener outside strings interrupts the
    value: ``end`` is then the opener's position and ``stopped`` is
    ``Stop.OPENER``; a possible opener cut by the chunk's end gives
    ``stopped is Stop.PARTIAL`` and must be fed again with the next chunk.
    """

    __slots__ = ("state", "stack", "expect", "hexits", "held", "opening", "literal", "emit", "repaired", "failed",
                 "stops", "stopped", "relaxed")

    def __init__(self, *, emit: bool = True, stops: tuple[str, ...] = ()):
        self.state = TOKENS
        self.stack: list[str] = []
        self.expect = VALUE
        self.hexits = ""  # the hex digits of a ``\\u`` escape being read
        self.held = ""  # emit mode: the opening bracket or a comma, and the whitespace after it
        self.opening = False  # ``held`` is the value's opening bracket
        self.literal: list[str] = []  # the keyword or number being read
        self.emit = emit
        self.repaired = False
        self.failed = False
        self.stops = stops
        self.stopped: Stop | None = None
        self.relaxed: RelaxedValue | None = None

    def feed(self, buf: str, pos: int) -> tuple[str, int | None]:
        """Read ``buf`` from ``pos``: the text to send, and where the value ended (see the class docstring)."""
        self.stopped = None
        if self.state is STRING and _STRING_RUN.match(buf, pos).end() == len(buf):  # type: ignore[union-attr]
            # the hot path: the chunk goes on inside a string (its escapes valid and complete), as _lex_string reads it
            return (buf[pos:] if self.emit else ""), None
        out: list[str] = []
        n = len(buf)
        while pos < n:
            outcome, pos = _LEXERS[self.state](self, buf, pos, out)
            if outcome is not None:
                return "".join(out), pos if outcome is COMPLETE else None
        return "".join(out), None

    def string_chunk(self, text: str) -> str | None:
        """The text ``feed`` would send for a chunk inside the string it is in (emit mode), reading it as
        ``feed`` does: valid escapes, one cut by the chunk's end held and one cut by its start completed;
        ``None`` (and nothing read) for any other chunk. The arguments' path per chunk (``argument_lane``)."""
        start, escaped = 0, ""
        if self.state is ESCAPE:
            if not text or text[0] not in _SIMPLE_ESCAPES:
                return None
            start, escaped = 1, "\\" + text[0]
        elif self.state is not STRING:
            return None
        end = _STRING_RUN.match(text, start).end()  # type: ignore[union-attr]  # it matches the empty string
        if end == len(text):
            self.state = STRING
            return escaped + text[start:] if start else text
        if end == len(text) - 1 and text[end] == "\\":
            self.state = ESCAPE  # decided by the next chunk's first character
            return escaped + text[start:end]
        return None

    # one method per state: each returns COMPLETE and where the value ended or stopped, MORE when the chunk is used
    # up, or ``None`` and where to read on; ``out`` collects the text to send

    def _lex_string(self, buf: str, pos: int, out: list[str]) -> Step:
        """Inside a string: a run of plain characters and valid escapes (one regex match), up to the closing
        quote, a backslash to decide or a raw control character."""
        m = _STRING_RUN.match(buf, pos)
        assert m is not None  # the pattern matches the empty string
        i = m.end()
        if self.emit and i > pos:
            out.append(buf[pos:i])
        if i == len(buf):
            return MORE, i
        ch = buf[i]
        if ch == '"':
            self.state = TOKENS
            self.expect = COLON if self.expect is KEY else AFTER
            if self.emit:
                out.append('"')
        elif ch == "\\":
            self.state = ESCAPE  # decided when the next character arrives
        else:
            if self.emit:
                out.append(control_escape(ch))
            self.repaired = True
        return None, i + 1

    def _lex_escape(self, buf: str, pos: int, out: list[str]) -> Step:
        """The character after a backslash: ``u`` starts a unicode escape, an invalid escape is repaired."""
        ch = buf[pos]
        if ch == "u":
            self.hexits = ""
            self.state = UNICODE
            return None, pos + 1
        self.state = STRING
        if self.emit:
            out.append(escape_text(ch))
            if ch not in VALID_ESCAPES:
                self.repaired = True
        return None, pos + 1

    def _lex_unicode(self, buf: str, pos: int, out: list[str]) -> Step:
        """A ``\\u`` escape's hex digits: four stand, fewer leave a literal backslash."""
        self.hexits, text, consumed = unicode_escape_step(self.hexits, buf[pos])
        if text is None:
            return None, pos + 1
        if self.emit:
            out.append(text)
            self.repaired = self.repaired or not consumed
        self.state = STRING
        return None, pos + 1 if consumed else pos  # a character that is no hex digit is read again as string text

    def _lex_literal(self, buf: str, pos: int, out: list[str]) -> Step:
        """A keyword or number, held until it ends: strict JSON goes out, anything else is relaxed JSON."""
        m = _LITERAL.match(buf, pos)
        assert m is not None  # the pattern matches the empty string
        self.literal.append(m.group())
        pos = m.end()
        if pos == len(buf):
            return MORE, pos
        literal = "".join(self.literal)
        if literal not in _KEYWORDS and not JSON_NUMBER.fullmatch(literal):
            return self._relax(pos)
        self.literal = []
        self.state = TOKENS
        self.expect = AFTER
        if self.emit:
            self._release(out)
            out.append(literal)
        return None, pos

    def _lex_tokens(self, buf: str, pos: int, out: list[str]) -> Step:
        """Outside strings: whitespace (sent, or held after a held bracket or comma), then one token."""
        m = NON_WS.search(buf, pos)
        i = len(buf) if m is None else m.start()
        if self.emit and i > pos:
            if self.held:
                self.held += buf[pos:i]
            else:
                out.append(buf[pos:i])
        if m is None:
            return MORE, i
        ch = buf[i]
        if ch == "<" and self.stops:
            self.stopped = opener_at(buf, i, self.stops)
            if self.stopped is not None:
                return COMPLETE, i
        token = _TOKENS.get(ch)
        if token is None or not token(self, ch, out):
            return self._relax(i)
        return (None if self.stack else COMPLETE), i + 1

    def _lex_relaxed(self, buf: str, pos: int, out: list[str]) -> Step:
        """The rest of a value that broke strict JSON: sent once, canonically, at its end."""
        relaxed = self.relaxed
        assert relaxed is not None
        end = relaxed.feed(buf, pos)
        if end is None:
            return MORE, len(buf)
        self.stopped = relaxed.stopped
        if self.stopped is None:
            text = relaxed.text()
            if text is None:
                self.failed = True
            else:
                self.repaired = True
                if self.emit:
                    out.append(text)
        return COMPLETE, end

    # tokens: each reads its character and returns ``False`` where it breaks strict JSON ----------------------

    def _string_starts(self, ch: str, out: list[str]) -> bool:
        if not (self.stack and self.expect in (KEY, VALUE)):
            return False
        self.state = STRING  # the expectation moves on when the string closes
        if self.emit:
            self._release(out)
            out.append('"')
        return True

    def _closes(self, ch: str, out: list[str]) -> bool:
        stack = self.stack
        if not stack or stack[-1] != _OPENING[ch] or self.expect not in (AFTER, KEY if ch == "}" else VALUE):
            return False
        if self.held and not self.opening:
            self.held = ""
            self.repaired = True  # trailing comma dropped
        stack.pop()
        self.expect = AFTER
        if self.emit:
            self._release(out)
            out.append(ch)
        return True

    def _colon(self, ch: str, out: list[str]) -> bool:
        if self.expect is not COLON:
            return False
        self.expect = VALUE
        if self.emit:
            out.append(":")
        return True

    def _comma(self, ch: str, out: list[str]) -> bool:
        if self.expect is not AFTER:
            return False
        self.expect = KEY if self.stack[-1] == "{" else VALUE
        if self.emit:
            self.held = ","
        return True

    def _opens(self, ch: str, out: list[str]) -> bool:
        if self.expect is not VALUE:
            return False
        self.stack.append(ch)
        self.expect = KEY if ch == "{" else VALUE
        if self.emit:
            self._release(out)
            if len(self.stack) == 1:  # held: a relaxed body sends nothing before its end
                self.held = ch
                self.opening = True
            else:
                out.append(ch)
        return True

    def _literal_starts(self, ch: str, out: list[str]) -> bool:
        if self.expect is not VALUE or not self.stack:
            return False
        self.literal = [ch]  # held until it ends
        self.state = LITERAL
        return True

    def _release(self, out: list[str]) -> None:
        """The next significant character is strict JSON: send the held bracket or comma."""
        if self.held:
            out.append(self.held)
            self.held = ""
            self.opening = False

    def _relax(self, pos: int) -> Step:
        """Strict JSON broke at ``pos``: read the rest as relaxed JSON, continuing the sent text."""
        comma = bool(self.held) and not self.opening
        self.relaxed = RelaxedValue(self.stack, self.expect, comma=comma, opening=self.opening, stops=self.stops)
        self.held = ""
        if self.state is LITERAL:
            self.relaxed.feed("".join(self.literal), 0)
        self.state = RELAXED
        return None, pos


#: The method of each state.
_LEXERS: dict[LexerState, Callable[[ValueLexer, str, int, list[str]], Step]] = {
    TOKENS: ValueLexer._lex_tokens,
    STRING: ValueLexer._lex_string,
    ESCAPE: ValueLexer._lex_escape,
    UNICODE: ValueLexer._lex_unicode,
    LITERAL: ValueLexer._lex_literal,
    RELAXED: ValueLexer._lex_relaxed,
}

#: The token each significant character outside strings starts.
_TOKENS: dict[str, Callable[[ValueLexer, str, list[str]], bool]] = {
    '"': ValueLexer._string_starts, "}": ValueLexer._closes, "]": ValueLexer._closes, ":": ValueLexer._colon,
    ",": ValueLexer._comma, "{": ValueLexer._opens, "[": ValueLexer._opens,
    **dict.fromkeys("-0123456789tfn", ValueLexer._literal_starts),
}


class StringReader:
    """Collects a JSON string's raw body (escapes kept), starting after its opening quote."""

    __slots__ = ("parts", "escape")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.escape = False

    def feed(self, buf: str, pos: int) -> int | None:
        """Read from ``pos``; return the position after the closing quote, or ``None`` if still open."""
        n = len(buf)
        while pos < n:
            if self.escape:
                self.escape = False
                self.parts.append(buf[pos])
                pos += 1
                continue
            m = _STRING_STOP.search(buf, pos)
            if m is None:
                self.parts.append(buf[pos:])
                return None
            i = m.start()
            if buf[i] == '"':
                self.parts.append(buf[pos:i])
                return i + 1
            self.parts.append(buf[pos:i + 1])
            self.escape = True
            pos = i + 1
        return None

    def raw(self) -> str:
        """The raw string body read so far."""
        return "".join(self.parts)

    def decoded(self) -> str | None:
        """The decoded string, or ``None`` when its escapes are invalid."""
        raw = self.raw()
        if "\\" not in raw and raw.isprintable():  # no escapes and no control characters: the text itself
            return raw
        for ch, esc in CONTROL.items():
            raw = raw.replace(ch, esc)
        try:
            return str(json.loads('"' + raw + '"'))
        except ValueError:
            return None


_STRING_STOP = re.compile(r'["\\]')
