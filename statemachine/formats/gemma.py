"""Gemma: Gemma 3's pythonic calls in a ```` ```tool_code ```` fence, and FunctionGemma's ``call:NAME{…}`` blocks.

::

    ```tool_code
    get_weather(city="SF")
    ```

    <start_function_call>call:get_weather{city:<escape>SF<escape>,days:3}<end_function_call>

FunctionGemma's arguments are an object with bare keys; a string value sits
between two ``<escape>`` tokens (its text is verbatim: no JSON escapes), other
values are JSON numbers, ``true``/``false``/``null``, lists ``[…]`` and
objects ``{…}`` of the same syntax. Commas between pairs may be missing. A
value (or key) that starts with ``"`` is one JSON string, escapes and all, so
its commas and colons are text; a key between two ``<escape>`` tokens loses
them. Each pair goes out as ``"key": value`` once its value is complete; a
top-level string is typed by the tool's schema (``<escape>42<escape>`` for an
integer parameter is ``42``).

The closer is a special token, never string text: a top-level string still
open there ends before it (a ``}`` right before it is the object's) and the
call is repaired (a ``repaired`` note); a nested one leaves the call invalid.
A malformed call is dropped up to its closer.
"""

from __future__ import annotations

import enum
import json
import re
from typing import Any, Callable

from .._coerce import coerce_value
from .._scanning import WS, partial_at_end, skip_to, skip_ws
from .._reader import BodyReader, CallSink, COMPLETE, MORE, Outcome, Step, TableReader
from ._base import TextFormat, call_instructions
from .pythonic import PythonicBody, python_call, refutes_start

_HEADER = re.compile(r"\s*(?:call:)?([A-Za-z_][\w.\-]*)\s*")
_HEADER_LIMIT = 256
_KEY_LIMIT = 256
_SCALAR_END = re.compile(r"[,}\]]")
_BARE_KEY = re.compile(r"[^:{}\[\]<>,\"]*")
_JSON_STOP = re.compile(r'["\\]')
_JSON = json.JSONDecoder(strict=False)  # a raw newline in a quoted value is the newline it looks like
_MAX_DEPTH = 64
_PAIR_GAP = WS + ","  # what may stand between pairs


class Gemma3Format(TextFormat):
    """Gemma 3: pythonic calls in a ```` ```tool_code ```` fence (read by :class:`~.pythonic.PythonicBody`)."""

    name = "gemma"
    model_names = ("gemma-3",)
    system_role = False
    openers = ("```tool_code",)
    end_tokens = ("<end_of_turn>",)
    closer = ""  # the fence's closing ``` is read by the body: as a sentinel it would be every fence's

    def render_call(self, name: str, arguments: str) -> str:
        return f"```tool_code\n{python_call(name, arguments)}\n```"

    def instructions(self, example_name: str, example_arguments: str) -> str:
        return call_instructions(self.render_call(example_name, example_arguments), (
            "Write each call as a Python function call, one per line, in a ```tool_code fence.",
            "Arguments are keyword arguments with the tool's exact parameter names; values are Python literals."))

    def marked_openers(self, marker: str) -> dict[str, str]:
        return {f'```tool_code marker="{marker}"': self.openers[0]}

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return PythonicBody(sink, "```")

    def refutes(self, opener: str, buf: str, pos: int) -> bool | None:
        """No call's name (or ``[``) starts the fence's body: the reader's ``not_a_call``."""
        return refutes_start(buf, pos)


class GemmaState(str, enum.Enum):
    """Where a :class:`GemmaCallBody` is in its block (a ``str`` enum: table lookups hash it in C)."""

    #: The call's header, ``call:NAME``, up to its object's ``{``.
    HEADER = "header"
    #: Between pairs: the next key, or the object's ``}``.
    PAIRS = "pairs"
    #: A key, up to its ``:``.
    KEY = "key"
    #: A value, up to the ``,`` or ``}`` after it.
    VALUE = "value"
    #: After the object: the call's closer.
    AFTER = "after"
    #: A malformed call, dropped up to its closer.
    SKIP = "skip"


HEADER, PAIRS, KEY, VALUE, AFTER, SKIP = GemmaState


class GemmaCallBody(TableReader):
    """One ``call:NAME{…}`` block, from just after its opener to its closer; strings between ``delim`` tokens."""

    def __init__(self, sink: CallSink, delim: str, closer: str):
        self.sink = sink
        self.delim = delim
        self.closer = closer
        self.state = HEADER
        self.pairs = 0
        self.key = ""
        self.value: list[str] = []
        self.depth = 0  # brackets open in the current value
        self.quote: str | None = None  # the open string's end quote: ``delim`` or '"'
        self.escaped = False  # the open JSON string's last character was a backslash
        self.at_start = True  # a value may start here (a '"' opens a JSON string)
        self.props: dict[str, Any] = {}
        # where an open string stops: its end quote, a backslash in a JSON string, or the call's closer
        self.stops = {delim: re.compile(f"{re.escape(delim)}|{re.escape(closer)}"),
                      '"': re.compile(f"{_JSON_STOP.pattern}|{re.escape(closer)}")}

    # one method per state: each returns the block's outcome, or ``None`` and where to read on

    def _read_header(self, buf: str, pos: int) -> Step:
        """``call:NAME`` up to the object's ``{``: the call's header goes out."""
        brace = buf.find("{", pos, pos + _HEADER_LIMIT + 1)
        if brace == -1:
            return self._not_a_call(pos) if len(buf) - pos > _HEADER_LIMIT else (MORE, pos)
        m = _HEADER.fullmatch(buf, pos, brace)
        if m is None:
            return self._not_a_call(pos)
        self.sink.call_name(m.group(1))
        schema = self.sink.schema_for(self.sink.current_name()) or {}
        self.props = schema.get("properties") or {}
        self.sink.call_args("{")
        self.state = PAIRS
        return None, brace + 1

    def _read_pairs(self, buf: str, pos: int) -> Step:
        """Between pairs (their commas may be missing): the next key, or the object's ``}``."""
        n = len(buf)
        while pos < n and buf[pos] in _PAIR_GAP:
            pos += 1
        if pos == n:
            return MORE, pos
        if buf[pos] == "}":
            self.sink.call_args("}")
            self.state = AFTER
            return None, pos + 1
        self.state = KEY
        return None, pos

    def _read_key(self, buf: str, pos: int) -> Step:
        """A key, held up to its ``:``."""
        try:
            found = _key(buf, pos, self.delim)
        except ValueError:
            return self._broken(buf, pos)
        if found is None:
            return self._broken(buf, pos) if len(buf) - pos > _KEY_LIMIT else (MORE, pos)
        self.key, pos = found
        self.state = VALUE
        self.value, self.depth, self.at_start = [], 0, True
        return None, pos

    def _read_value(self, buf: str, pos: int) -> Step:
        """A value's text, up to the ``,`` or ``}`` after it: then the pair goes out."""
        pos, done = self._value_text(buf, pos)
        if done is None:
            return MORE, pos
        if not done:
            return self._cut(pos)
        self._pair()
        self.state = PAIRS
        return None, pos

    def _read_after(self, buf: str, pos: int) -> Step:
        """After the object: its closer ends the call; anything else ends the block without it."""
        pos = skip_ws(buf, pos)
        if pos == len(buf):
            return MORE, pos
        if buf.startswith(self.closer, pos):
            self.sink.call_end()
            return COMPLETE, pos + len(self.closer)
        if self.closer.startswith(buf[pos:]):
            return MORE, pos
        self.sink.call_end()
        return COMPLETE, pos

    def _value_text(self, buf: str, pos: int) -> tuple[int, bool | None]:
        """Read the current value's text on from ``pos``: ``(position, True)`` at its end, ``(keep, None)`` if open,
        ``(position, False)`` where the call's closer cuts a string left open."""
        delim, n = self.delim, len(buf)
        while pos < n:
            if self.quote is not None:
                pos, ended = self._string_text(buf, pos)
                if not ended:
                    return pos, ended
                self.at_start = False
                if not self.depth:
                    return pos, True
                continue
            if buf.startswith(delim, pos) or (self.at_start and buf[pos] == '"'):
                self.quote = delim if buf[pos] != '"' else '"'
                self.value.append(self.quote)
                pos += len(self.quote)
                continue
            if delim.startswith(buf[pos:]):
                return pos, None
            ch = buf[pos]
            if ch in "{[":
                self.depth += 1
            elif ch in "}]" or (ch == "," and not self.depth):
                if not self.depth:  # a bare scalar ends here (the ',' or '}' is the object's)
                    return pos, True
                self.depth -= 1
                if not self.depth:
                    self.value.append(ch)
                    return pos + 1, True
            elif ch == "<" and not self.depth:  # the closer with the object's '}' missing
                return pos, True
            if ch not in WS:
                self.at_start = ch in "{[,:"
            self.value.append(ch)
            pos += 1
        return pos, None

    def _string_text(self, buf: str, pos: int) -> tuple[int, bool | None]:
        """Read the open string on from ``pos``: ``(position, True)`` after its end quote, ``(keep, None)`` if it
        is still open, ``(position, False)`` at the call's closer (the string was left open)."""
        n = len(buf)
        quote = self.quote
        assert quote is not None
        while pos < n:
            if self.escaped:
                self.value.append(buf[pos])
                self.escaped = False
                pos += 1
                continue
            m = self.stops[quote].search(buf, pos)
            if m is None:
                keep = partial_at_end(buf, pos, (quote, self.closer))
                self.value.append(buf[pos:keep])
                return keep, None
            if m.group() == self.closer:
                self.value.append(buf[pos:m.start()])
                return m.start(), False
            self.value.append(buf[pos:m.end()])
            pos = m.end()
            if m.group() == "\\":
                self.escaped = True
                continue
            self.quote = None
            return pos, True
        return pos, None

    def _cut(self, pos: int) -> tuple[Outcome, int]:
        """The closer at ``pos`` cut a string left open. The closer is a special token, never string text: a
        top-level string ends before it (a ``}`` there is the object's) and the call is repaired; a nested one
        leaves the call invalid, as where the string ends inside its brackets is not known."""
        if self.depth:
            self.sink.call_invalid()
            return COMPLETE, pos + len(self.closer)
        text = "".join(self.value)
        body = text.rstrip()
        self.value = [body[:-1] if body.endswith("}") else text, self.quote or ""]
        self.sink.note("repaired", "a string left open before the call's closer was closed there")
        self._pair()
        self.sink.call_args("}")
        self.sink.call_end()
        return COMPLETE, pos + len(self.closer)

    def _pair(self) -> None:
        text = "".join(self.value).strip()
        try:
            value, end = _gemma_value(text, 0, self.delim, 0)
            if end != len(text):
                raise ValueError("text after the value")
        except ValueError:
            self.sink.call_invalid()
            value = text
        if isinstance(value, str) and text.startswith(self.delim):  # a top-level string: typed by the schema
            value = coerce_value(value, self.props.get(self.key))
        self.sink.call_args(("" if not self.pairs else ", ") + json.dumps(self.key, ensure_ascii=False) + ": "
                            + json.dumps(value, ensure_ascii=False))
        self.pairs += 1

    def _broken(self, buf: str, pos: int) -> tuple[Outcome, int]:
        """The arguments are malformed: the call is dropped, and so is its text up to the closer."""
        self.sink.call_abort("invalid_json", "the call's arguments are not key:value pairs")
        self.state = SKIP
        return self._read_skip(buf, pos)

    def _read_skip(self, buf: str, pos: int) -> tuple[Outcome, int]:
        """A malformed call's text, dropped up to its closer (or the next call's opener)."""
        hit, end = skip_to(buf, pos, self.closer, self.sink.openers)
        return (MORE, end) if hit is None else (COMPLETE, end)

    def _not_a_call(self, pos: int) -> tuple[Outcome, int]:
        self.sink.call_abort("not_a_call", "the block does not start a call")
        return COMPLETE, pos

    def at_eof(self) -> None:
        if self.state is SKIP:
            return
        if self.state is HEADER:
            self.sink.call_abort("not_a_call", "the block ended before a call started")
        elif self.state is AFTER:
            self.sink.call_unclosed()
        else:
            self.sink.call_incomplete()


def _gemma_value(text: str, pos: int, delim: str, depth: int) -> tuple[Any, int]:
    """One complete value of the Gemma call syntax at ``text[pos]`` and the position after it."""
    if depth > _MAX_DEPTH:
        raise ValueError("nested too deeply")
    pos = skip_ws(text, pos)
    if text.startswith(delim, pos) or text.startswith('"', pos):
        found = _string(text, pos, delim)
        if found is None:
            raise ValueError("a string is not closed")
        return found
    if text.startswith("{", pos) or text.startswith("[", pos):
        return _container(text, pos, delim, depth)
    m = _SCALAR_END.search(text, pos)
    end = len(text) if m is None else m.start()
    word = text[pos:end].strip()
    if not word:
        raise ValueError("a value is missing")
    try:
        return json.loads(word), end
    except ValueError:
        return word, end  # a bare word: the string it spells


def _container(text: str, pos: int, delim: str, depth: int) -> tuple[Any, int]:
    """The object or list at ``text[pos]`` (its ``{`` or ``[``) and the position after it; ``depth`` is its own."""
    closing = "}" if text[pos] == "{" else "]"
    items: list[Any] = []
    pairs: dict[str, Any] = {}
    pos = skip_ws(text, pos + 1)
    while not text.startswith(closing, pos):
        if pos >= len(text):
            raise ValueError("a bracket is not closed")
        if closing == "}":
            found = _key(text, pos, delim)
            if found is None:
                raise ValueError("a key without ':'")
            key, pos = found
            pairs[key], pos = _gemma_value(text, pos, delim, depth + 1)
        else:
            item, pos = _gemma_value(text, pos, delim, depth + 1)
            items.append(item)
        pos = skip_ws(text, pos)
        if text.startswith(",", pos):
            pos = skip_ws(text, pos + 1)
    return (pairs if closing == "}" else items), pos + 1


def _string(text: str, pos: int, delim: str) -> tuple[str, int] | None:
    """The string at ``text[pos]``, verbatim between two ``delim`` tokens or a JSON string, and the position after
    it; ``None`` if ``text`` ends first, ``ValueError`` for a JSON string that is not valid JSON."""
    if text.startswith('"', pos):
        i = pos + 1
        while (m := _JSON_STOP.search(text, i)) is not None:
            if m.group() == '"':
                return _JSON.raw_decode(text, pos)
            i = m.end() + 1  # past the escaped character
        return None
    end = text.find(delim, pos + len(delim))
    return None if end == -1 else (text[pos + len(delim):end], end + len(delim))


def _key(text: str, pos: int, delim: str) -> tuple[str, int] | None:
    """The key at ``text[pos]`` (bare, a JSON string or between ``delim`` tokens) and the position after its
    ``:``; ``None`` if ``text`` ends first, ``ValueError`` if it is no key."""
    pos = skip_ws(text, pos)
    quoted = text.startswith('"', pos) or text.startswith(delim, pos)
    if quoted or delim.startswith(text[pos:pos + len(delim)]):  # a quoted key, or the text ends first
        found = _string(text, pos, delim) if quoted else None
        if found is None:
            return None
        key, pos = found[0], skip_ws(text, found[1])
    else:
        m = _BARE_KEY.match(text, pos)
        assert m is not None  # the pattern matches the empty string
        key, pos = m.group().strip().strip("'"), m.end()
        if not key and pos < len(text):
            raise ValueError("a key is missing")
    if pos >= len(text):
        return None
    if text[pos] != ":":
        raise ValueError("a key without ':'")
    return key, pos + 1


def gemma_object(arguments: str, delim: str) -> str:
    """JSON arguments in the Gemma call syntax: bare keys, strings between ``delim`` tokens."""
    try:
        value = json.loads(arguments)
    except ValueError:
        value = {}

    def write(v: Any) -> str:
        if isinstance(v, str):
            return f"{delim}{v}{delim}"
        if isinstance(v, dict):
            return "{" + ",".join(f"{k}:{write(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ",".join(map(write, v)) + "]"
        return json.dumps(v)

    return write(value if isinstance(value, dict) else {})


class FunctionGemmaFormat(TextFormat):
    """FunctionGemma: ``<start_function_call>call:NAME{key:<escape>value<escape>}<end_function_call>``."""

    name = "functiongemma"
    model_names = ("functiongemma",)
    openers: tuple[str, ...] = ("<start_function_call>",)
    end_tokens: tuple[str, ...] = ("<end_of_turn>",)
    closer = "<end_function_call>"
    delim = "<escape>"

    def render_call(self, name: str, arguments: str) -> str:
        return f"{self.openers[0]}call:{name}{gemma_object(arguments, self.delim)}{self.closer}"

    def instructions(self, example_name: str, example_arguments: str) -> str:
        return call_instructions(self.render_call(example_name, example_arguments), (
            f"Write each call as {self.openers[0]}call:NAME{{…}}{self.closer} with the tool's exact name.",
            f"Inside the braces write key:value pairs separated by commas, with the tool's exact parameter names; "
            f"put every string between two {self.delim} tokens; numbers, true, false, lists and objects as they are."))

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return GemmaCallBody(sink, self.delim, self.closer)

    def refutes(self, opener: str, buf: str, pos: int) -> bool | None:
        """No ``call:NAME`` header before the ``{`` (or no ``{`` within the header's limit): the reader's
        ``not_a_call``, decided on the same characters."""
        brace = buf.find("{", pos, pos + _HEADER_LIMIT + 1)
        if brace == -1:
            return True if len(buf) - pos > _HEADER_LIMIT else None
        return _HEADER.fullmatch(buf, pos, brace) is None

#: Each state's reader.
_READERS: dict[GemmaState, Callable[[GemmaCallBody, str, int], Step]] = {
    HEADER: GemmaCallBody._read_header,
    PAIRS: GemmaCallBody._read_pairs,
    KEY: GemmaCallBody._read_key,
    VALUE: GemmaCallBody._read_value,
    AFTER: GemmaCallBody._read_after,
    SKIP: GemmaCallBody._read_skip,
}
GemmaCallBody.READERS = _READERS
