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

import json
import re

from ._scanning import Stop, opener_at
from ._relaxed import (AFTER, COLON, CONTROL, JSON_NUMBER, KEY, VALID_ESCAPES, VALUE, RelaxedValue, control_escape,
                       escape_text, unicode_escape_step)

# Inside a string only quotes, backslashes and raw control characters matter.
_IN_STRING = re.compile(r'["\\\x00-\x1f]')
_SIGNIFICANT = re.compile(r"[^ \t\r\n]")
_LITERAL = re.compile(r"[\w.+-]*")
_LITERAL_START = frozenset("-0123456789tfn")
_KEYWORDS = frozenset(("true", "false", "null"))
_OPENING = {"}": "{", "]": "["}


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

    __slots__ = ("stack", "expect", "in_string", "escape", "hexits", "held", "opening", "literal", "emit", "repaired",
                 "failed", "stops", "stopped", "relaxed")

    def __init__(self, *, emit: bool = True, stops: tuple[str, ...] = ()):
        self.stack: list[str] = []
        self.expect = VALUE
        self.in_string = False
        self.escape = False
        self.hexits: str | None = None  # the hex digits of a ``\\u`` escape being read
        self.held = ""  # emit mode: the opening bracket or a comma, and the whitespace after it
        self.opening = False  # ``held`` is the value's opening bracket
        self.literal: list[str] | None = None  # a keyword or number being read
        self.emit = emit
        self.repaired = False
        self.failed = False
        self.stops = stops
        self.stopped: Stop | None = None
        self.relaxed: RelaxedValue | None = None

    def feed(self, buf: str, pos: int) -> tuple[str, int | None]:
        self.stopped = None
        out: list[str] = []
        if self.relaxed is not None:
            return self._relaxed(buf, pos, out)
        emit = self.emit
        n = len(buf)
        while pos < n:
            if self.hexits is not None:
                self.hexits, text, consumed = unicode_escape_step(self.hexits, buf[pos])
                if text is None:
                    pos += 1
                    continue
                if emit:
                    out.append(text)
                    self.repaired = self.repaired or not consumed
                self.hexits = None
                pos += consumed  # a character that is no hex digit is read again as string text
                continue
            if self.escape:
                self.escape = False
                ch = buf[pos]
                if ch == "u":
                    self.hexits = ""
                elif emit:
                    out.append(escape_text(ch))
                    if ch not in VALID_ESCAPES:
                        self.repaired = True
                pos += 1
                continue
            if self.in_string:
                m = _IN_STRING.search(buf, pos)
                if m is None:
                    if emit:
                        out.append(buf[pos:])
                    return "".join(out), None
                i = m.start()
                ch = buf[i]
                if emit and i > pos:
                    out.append(buf[pos:i])
                if ch == '"':
                    self.in_string = False
                    self.expect = COLON if self.expect == KEY else AFTER
                    if emit:
                        out.append('"')
                elif ch == "\\":
                    self.escape = True  # decided when the next character arrives
                else:
                    if emit:
                        out.append(control_escape(ch))
                    self.repaired = True
                pos = i + 1
                continue
            if self.literal is not None:
                m = _LITERAL.match(buf, pos)
                assert m is not None  # the pattern matches the empty string
                self.literal.append(m.group())
                pos = m.end()
                if pos == n:
                    break
                literal = "".join(self.literal)
                if literal not in _KEYWORDS and not JSON_NUMBER.fullmatch(literal):
                    return self._relax(buf, pos, out)
                self.literal = None
                self.expect = AFTER
                if emit:
                    self._release(out)
                    out.append(literal)
                continue
            m = _SIGNIFICANT.search(buf, pos)
            i = n if m is None else m.start()
            if emit and i > pos:
                if self.held:
                    self.held += buf[pos:i]
                else:
                    out.append(buf[pos:i])
            if i == n:
                break
            ch = buf[i]
            if ch == "<" and self.stops:
                self.stopped = opener_at(buf, i, self.stops)
                if self.stopped is not None:
                    return "".join(out), i
            status = self._token(ch, out)
            if status < 0:
                return self._relax(buf, i, out)
            pos = i + 1
            if status:
                return "".join(out), pos
        return "".join(out), None

    def _token(self, ch: str, out: list[str]) -> int:
        """A significant character outside strings: 1 if it closed the value, -1 if it breaks strict JSON."""
        expect, stack, emit = self.expect, self.stack, self.emit
        if ch == '"':
            if expect in (KEY, VALUE) and stack:
                self.in_string = True  # the expectation moves on when the string closes
                if emit:
                    self._release(out)
                    out.append('"')
                return 0
        elif ch in "}]":
            if stack and stack[-1] == _OPENING[ch] and expect in (AFTER, KEY if ch == "}" else VALUE):
                if self.held and not self.opening:
                    self.held = ""
                    self.repaired = True  # trailing comma dropped
                stack.pop()
                self.expect = AFTER
                if emit:
                    self._release(out)
                    out.append(ch)
                return 0 if stack else 1
        elif ch == ":":
            if expect == COLON:
                self.expect = VALUE
                if emit:
                    out.append(":")
                return 0
        elif ch == ",":
            if expect == AFTER:
                self.expect = KEY if stack[-1] == "{" else VALUE
                if emit:
                    self.held = ","
                return 0
        elif ch in "{[":
            if expect == VALUE:
                stack.append(ch)
                self.expect = KEY if ch == "{" else VALUE
                if emit:
                    self._release(out)
                    if len(stack) == 1:  # held: a relaxed body sends nothing before its end
                        self.held = ch
                        self.opening = True
                    else:
                        out.append(ch)
                return 0
        elif ch in _LITERAL_START and expect == VALUE and stack:
            self.literal = [ch]  # held until it ends
            return 0
        return -1

    def _release(self, out: list[str]) -> None:
        """The next significant character is strict JSON: send the held bracket or comma."""
        if self.held:
            out.append(self.held)
            self.held = ""
            self.opening = False

    def _relax(self, buf: str, pos: int, out: list[str]) -> tuple[str, int | None]:
        """Strict JSON broke at ``pos``: read the rest as relaxed JSON, continuing the sent text."""
        comma = bool(self.held) and not self.opening
        self.relaxed = RelaxedValue(self.stack, self.expect, comma=comma, opening=self.opening, stops=self.stops)
        self.held = ""
        if self.literal is not None:
            self.relaxed.feed("".join(self.literal), 0)
            self.literal = None
        return self._relaxed(buf, pos, out)

    def _relaxed(self, buf: str, pos: int, out: list[str]) -> tuple[str, int | None]:
        relaxed = self.relaxed
        assert relaxed is not None
        end = relaxed.feed(buf, pos)
        if relaxed.stopped:
            self.stopped = relaxed.stopped
        elif end is not None:
            text = relaxed.text()
            if text is None:
                self.failed = True
            else:
                self.repaired = True
                if self.emit:
                    out.append(text)
        return "".join(out), end


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
        for ch, esc in CONTROL.items():
            raw = raw.replace(ch, esc)
        try:
            return str(json.loads('"' + raw + '"'))
        except ValueError:
            return None


_STRING_STOP = re.compile(r'["\\]')
