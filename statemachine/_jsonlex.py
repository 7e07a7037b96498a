"""Incremental, string-aware JSON lexing for call bodies.

:class:`ValueLexer` follows one JSON object or array across chunks and finds
its end without ever re-reading text: depth, inside-string and escape state
persist between chunks. In ``emit`` mode it also returns the text to stream,
verbatim apart from local repairs decided where they occur (so the streamed
text and the final text are the same bytes): raw control characters inside
strings are escaped, invalid escapes fixed, and a trailing comma before a
closer dropped.
"""

from __future__ import annotations

import json
import re

# Inside a string only quotes, backslashes and raw control characters matter.
_IN_STRING = re.compile(r'["\\\x00-\x1f]')
# Outside strings: structure, and commas (a trailing comma is held); '<' when openers stop the value.
_OUTSIDE = re.compile(r'["{}\[\],]')
_OUTSIDE_STOPS = re.compile(r'["{}\[\],<]')
_WS = " \t\r\n"
_VALID_ESCAPES = frozenset('"\\/bfnrtu')
_CONTROL = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


class ValueLexer:
    """Follows one JSON object/array value starting at its opening bracket.

    ``feed(buf, pos)`` consumes from ``pos`` and returns ``(text, end)``:
    ``text`` is what may be emitted now (``""`` in skip mode) and ``end`` the
    position after the value's closing bracket, or ``None`` if the value is
    still open. ``repaired`` turns true when a local repair changed the text.

    With ``stops`` (call openers), an opener outside strings interrupts the
    value: ``end`` is then the opener's position and ``stopped`` is
    ``"opener"``; a possible opener cut by the chunk's end gives
    ``stopped == "partial"`` and must be fed again with the next chunk.
    """

    __slots__ = ("depth", "in_string", "escape", "held", "emit", "repaired", "stops", "stopped", "_outside")

    def __init__(self, *, emit: bool = True, stops: tuple[str, ...] = ()):
        self.depth = 0
        self.in_string = False
        self.escape = False
        self.held = ""  # a comma (plus whitespace) waiting for the next significant char
        self.emit = emit
        self.repaired = False
        self.stops = stops
        self.stopped: str | None = None
        self._outside = _OUTSIDE_STOPS if stops else _OUTSIDE

    def feed(self, buf: str, pos: int) -> tuple[str, int | None]:
        out: list[str] = []
        emit = self.emit
        n = len(buf)
        start = pos  # start of the verbatim run not yet copied to out
        self.stopped = None
        while pos < n:
            if self.escape:
                self.escape = False
                ch = buf[pos]
                if emit:
                    if ch in _VALID_ESCAPES:
                        out.append("\\" + ch)
                    elif ch == "'":
                        out.append("'")
                        self.repaired = True
                    else:  # \d, \_ …: keep the backslash as a literal one
                        out.append("\\\\" + ch)
                        self.repaired = True
                pos += 1
                start = pos
                continue
            if self.in_string:
                m = _IN_STRING.search(buf, pos)
                if m is None:
                    pos = n
                    break
                i = m.start()
                ch = buf[i]
                if emit and i > start:
                    out.append(buf[start:i])
                if ch == '"':
                    self.in_string = False
                    if emit:
                        out.append('"')
                elif ch == "\\":
                    self.escape = True  # decided when the next character arrives
                else:
                    if emit:
                        out.append(_CONTROL.get(ch) or "\\u%04x" % ord(ch))
                    self.repaired = True
                pos = i + 1
                start = pos
                continue
            if self.held:
                # Waiting after a comma: whitespace extends the hold.
                ch = buf[pos]
                if ch in _WS:
                    if emit:
                        self.held += ch
                    pos += 1
                    start = pos
                    continue
                if ch in "}]":
                    self.repaired = True  # trailing comma dropped
                elif emit:
                    out.append(self.held)
                self.held = ""
                start = pos
            m = self._outside.search(buf, pos)
            if m is None:
                pos = n
                break
            i = m.start()
            ch = buf[i]
            if ch == "<":
                self.stopped = opener_at(buf, i, self.stops)
                if self.stopped is not None:
                    if emit and i > start:
                        out.append(buf[start:i])
                    return "".join(out), i
                pos = i + 1  # an ordinary '<' stays in the verbatim run
                continue
            if emit and i > start:
                out.append(buf[start:i])
            pos = i + 1
            start = pos
            if ch == '"':
                self.in_string = True
                if emit:
                    out.append('"')
            elif ch == ",":
                self.held = "," if emit else " "
            elif ch in "{[":
                self.depth += 1
                if emit:
                    out.append(ch)
            else:  # } or ]
                self.depth -= 1
                if emit:
                    out.append(ch)
                if self.depth <= 0:
                    return "".join(out), pos
        if emit and pos > start:
            out.append(buf[start:pos])
        return "".join(out), None


def opener_at(buf: str, i: int, openers: tuple[str, ...]) -> str | None:
    """``"opener"`` if one of ``openers`` starts at ``buf[i]``, ``"partial"`` if ``buf[i:]``
    is a proper prefix of one (the chunk ended inside it), else ``None``."""
    for opener in openers:
        if buf.startswith(opener, i):
            return "opener"
    if len(buf) - i < max(map(len, openers), default=0):
        tail = buf[i:]
        if any(opener.startswith(tail) for opener in openers):
            return "partial"
    return None


class StringReader:
    """Collects a JSON string's raw body (escapes kept), starting after its opening quote."""

    __slots__ = ("parts", "escape")

    def __init__(self):
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
        for ch, esc in _CONTROL.items():
            raw = raw.replace(ch, esc)
        try:
            return json.loads('"' + raw + '"')
        except ValueError:
            return None


_STRING_STOP = re.compile(r'["\\]')
