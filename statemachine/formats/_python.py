"""Python call syntax for the pythonic formats: where an argument ends, and a literal's JSON value.

:class:`ArgScanner` finds, across chunks, where one argument of a call ends
(a ``,`` or ``)`` outside strings and brackets); :func:`literal` turns that
argument's complete value into a JSON-serialisable value. No ``eval`` and no
``ast``: a single left-to-right pass over the value's text, nesting capped at
:data:`MAX_DEPTH`, so the work is linear in the text and never recursive beyond
the cap.

Accepted values: strings (``'…'``, ``"…"``, triple-quoted, ``r`` prefix, Python
escapes, adjacent strings joined), integers and floats (``_`` separators, hex,
octal, binary; no ``inf``/``nan``), ``True``/``False``/``None`` and their JSON
spellings, lists, tuples (as arrays) and dicts. Anything else (bytes,
f-strings, sets, names, expressions) raises ``ValueError``.
"""

from __future__ import annotations

import math
import re
from typing import Any

MAX_DEPTH = 64
_OUTSIDE = re.compile(r"""['"()\[\]{},<]""")
_OPEN = {"(": ")", "[": "]", "{": "}"}
_WS = re.compile(r"\s*")
_NUMBER = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|"
                     r"(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?)")
_WORD = re.compile(r"[A-Za-z_]\w*")
_WORDS = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}
_PREFIX = re.compile(r"[rRuU]?(?=['\"])")
_SIMPLE_ESCAPES = {"\n": "", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n",
                   "r": "\r", "t": "\t", "v": "\v"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_OCTAL = re.compile(r"[0-7]{1,3}")


class ArgScanner:
    """Finds the end of one call argument, fed in pieces: a ``,`` or ``)`` outside strings and brackets.

    ``feed(buf, pos)`` returns ``(end, keep)``: ``end`` is the position of the
    ``,`` or ``)`` that ends the argument (not consumed), or ``None`` while it
    goes on; ``buf[pos:keep]`` was read into :attr:`parts` (``keep`` may stop
    short of the end when a quote or backslash there needs the next chunk). A
    ``<`` outside strings, or a closing bracket that matches nothing, sets
    :attr:`broken` and ends the argument there: no Python literal holds one.
    """

    __slots__ = ("parts", "stack", "quote", "broken")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.stack: list[str] = []  # closing brackets expected, innermost last
        self.quote = ""  # the open string's quote: ', ", ''' or \"\"\"
        self.broken = False

    def text(self) -> str:
        """The argument's text read so far."""
        return "".join(self.parts)

    def feed(self, buf: str, pos: int) -> tuple[int | None, int]:
        n = len(buf)
        start = pos
        quote = self.quote
        if quote and buf.find(quote[0], pos) == -1 and buf.find("\\", pos) == -1:  # a string's text goes on
            self.parts.append(buf[pos:])
            return None, n
        while pos < n:
            if self.quote:
                pos, cut = self._in_string(buf, pos)
                if cut:  # a backslash or quote cut by the chunk's end
                    self.parts.append(buf[start:pos])
                    return None, pos
                continue
            m = _OUTSIDE.search(buf, pos)
            if m is None:
                break
            i, ch = m.start(), m.group()
            if ch in "'\"":
                if n - i < 3 and buf[i:] == ch * (n - i):  # maybe a triple quote: decided with more text
                    self.parts.append(buf[start:i])
                    return None, i
                self.quote = ch * 3 if buf.startswith(ch * 3, i) else ch
                pos = i + len(self.quote)
            elif ch in _OPEN:
                self.stack.append(_OPEN[ch])
                pos = i + 1
            elif self.stack and ch == self.stack[-1]:
                self.stack.pop()
                pos = i + 1
            elif ch == "," and self.stack:
                pos = i + 1
            else:  # ',' or ')' ending the argument, or a stray bracket or '<'
                self.broken = ch not in ",)"
                self.parts.append(buf[start:i])
                return i, i
        self.parts.append(buf[start:])
        return None, n

    def _in_string(self, buf: str, pos: int) -> tuple[int, bool]:
        """Read string text from ``pos``: ``(position after it, False)``, or ``(where a quote or escape
        cut by the chunk's end starts, True)``."""
        quote = self.quote
        i = pos
        while True:
            q, b = buf.find(quote[0], i), buf.find("\\", i)
            if b != -1 and (q == -1 or b < q):
                if b + 1 >= len(buf):
                    return b, True
                i = b + 2
                continue
            if q == -1:
                return len(buf), False
            if len(quote) == 3 and not buf.startswith(quote, q):
                if len(buf) - q < 3 and quote.startswith(buf[q:]):
                    return q, True
                i = q + 1
                continue
            self.quote = ""
            return q + len(quote), False


def literal(text: str) -> Any:
    """The JSON value of one complete Python literal (see the module docstring).

    Raises:
        ValueError: the text is not one accepted literal.
    """
    value, pos = _Reader(text).value(_skip(text, 0), 0)
    if _skip(text, pos) != len(text):
        raise ValueError("text after the value")
    return value


def _skip(text: str, pos: int) -> int:
    m = _WS.match(text, pos)
    return pos if m is None else m.end()


class _Reader:
    """One pass over a literal's text."""

    def __init__(self, text: str):
        self.text = text

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        text = self.text
        if depth > MAX_DEPTH:
            raise ValueError("nested too deeply")
        if pos >= len(text):
            raise ValueError("a value is missing")
        ch = text[pos]
        if ch in _OPEN:
            return self._container(pos, depth)
        m = _PREFIX.match(text, pos)
        if m is not None:
            return self._strings(pos)
        m = _NUMBER.match(text, pos)
        if m is not None and m.end() > pos:
            return _number(m.group()), m.end()
        m = _WORD.match(text, pos)
        if m is not None and m.group() in _WORDS:
            return _WORDS[m.group()], m.end()
        raise ValueError(f"not a literal at {pos}")

    def _container(self, pos: int, depth: int) -> tuple[Any, int]:
        text = self.text
        opening = text[pos]
        closing = _OPEN[opening]
        items: list[Any] = []
        pairs: dict[Any, Any] = {}
        commas = 0
        pos = _skip(text, pos + 1)
        while pos < len(text) and text[pos] != closing:
            value, pos = self.value(pos, depth + 1)
            pos = _skip(text, pos)
            if opening == "{":
                if pos >= len(text) or text[pos] != ":":
                    raise ValueError("a set, or a dict item without ':'")
                if not isinstance(value, (str, int, float, bool)) and value is not None:
                    raise ValueError("a dict key must be a string, number, boolean or None")
                pairs[value], pos = self.value(_skip(text, pos + 1), depth + 1)
                pos = _skip(text, pos)
            else:
                items.append(value)
            if pos < len(text) and text[pos] == ",":
                commas += 1
                pos = _skip(text, pos + 1)
            elif pos < len(text) and text[pos] != closing:
                raise ValueError(f"expected ',' or {closing!r} at {pos}")
        if pos >= len(text):
            raise ValueError(f"{opening!r} is not closed")
        if opening == "{":
            return pairs, pos + 1
        if opening == "(" and len(items) == 1 and not commas:  # parentheses around one value
            return items[0], pos + 1
        return items, pos + 1

    def _strings(self, pos: int) -> tuple[str, int]:
        """One string literal, or several adjacent ones joined."""
        text = self.text
        parts = []
        while True:
            part, pos = self._string(pos)
            parts.append(part)
            nxt = _skip(text, pos)
            if _PREFIX.match(text, nxt) is None:
                return "".join(parts), pos
            pos = nxt

    def _string(self, pos: int) -> tuple[str, int]:
        text = self.text
        raw = text[pos] in "rR"
        pos += text[pos] in "rRuU"
        quote = text[pos] * 3 if text.startswith(text[pos] * 3, pos) else text[pos]
        pos += len(quote)
        out: list[str] = []
        while True:
            q, b = text.find(quote, pos), text.find("\\", pos)
            if q == -1:
                raise ValueError("a string is not closed")
            if b == -1 or q < b:
                out.append(text[pos:q])
                if len(quote) == 1 and "\n" in text[pos:q]:
                    raise ValueError("a line break in a one-line string")
                return "".join(out), q + len(quote)
            out.append(text[pos:b])
            if raw:
                out.append(text[b:b + 2])
                pos = b + 2
            else:
                escaped, pos = _escape(text, b + 1)
                out.append(escaped)


def _escape(text: str, pos: int) -> tuple[str, int]:
    """The text of the escape whose backslash stands just before ``pos``, and the position after it."""
    ch = text[pos:pos + 1]
    if ch in _SIMPLE_ESCAPES and ch:
        return _SIMPLE_ESCAPES[ch], pos + 1
    if ch in _HEX_ESCAPES:
        digits = text[pos + 1:pos + 1 + _HEX_ESCAPES[ch]]
        if len(digits) != _HEX_ESCAPES[ch] or not all(c in "0123456789abcdefABCDEF" for c in digits):
            raise ValueError("a truncated \\x, \\u or \\U escape")
        code = int(digits, 16)
        if code > 0x10FFFF:
            raise ValueError("an escape beyond Unicode")
        return chr(code), pos + 1 + len(digits)
    m = _OCTAL.match(text, pos)
    if m is not None:
        return chr(int(m.group(), 8)), m.end()
    return "\\", pos  # an unknown escape keeps its backslash, as in Python


def _number(word: str) -> int | float:
    clean = word.replace("_", "")
    body = clean.lstrip("+-")
    if body[:2].lower() in ("0x", "0o", "0b"):
        value: int | float = int(clean, 0)
    elif any(c in body for c in ".eE"):
        value = float(clean)
        if not math.isfinite(value):
            raise ValueError("a number beyond a float's range")
    else:
        value = int(clean)
    return value
