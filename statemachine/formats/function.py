"""Format C: ``<function=NAME>`` with a JSON object or ``<parameter=K>V</parameter>`` children.

Functionary v3.1 / Llama 3.1 write a JSON body; Qwen3-Coder, Qwen3.5 and
Seed-OSS write parameter children, usually inside ``<tool_call>`` (the
``tool_call`` reader then runs :class:`FunctionBody` for that inner block).
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from .._coerce import coerce_value, schema_type
from .._jsonlex import ValueLexer
from .._scanning import DONE, MORE, WS as _WS, NewlineTrim, partial_at_end
from ._base import BodyReader, CallSink, TextFormat, compact_object

_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')
_NON_WS = re.compile(r"[^ \t\r\n]")


class FunctionFormat(TextFormat):
    """``<function=NAME>{…}</function>`` or with ``<parameter=K>V</parameter>`` children."""

    name = "function"
    openers = ("<function=",)
    closer = "</function>"

    def render_call(self, name: str, arguments: str) -> str:
        return f"<function={name}>{compact_object(arguments)}</function>"

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return FunctionBody(sink)


class FunctionBody:
    """Body of ``<function=NAME>``: a JSON object, or ``<parameter=K>V</parameter>`` children.

    Parameters stream as they arrive (parsing.md 2.1 C): ``{`` when the first
    one opens, ``"K": `` when its name's ``>`` arrives, a string-typed value as
    escaped JSON string fragments (one trailing newline held until it is known
    not to be the last), any other value once its parameter closes (schema
    coercion may change its text), ``, `` between, ``}`` at ``</function>``.

    A value may contain ``</parameter>``-like text: ``</parameter>`` closes the
    parameter only when what follows it (after whitespace) is ``<parameter=``,
    ``</function>``, the enclosing block's closer or the end of the stream, so
    it and the whitespace after it are held until that is known.
    """

    CLOSER = "</function>"
    _PARAM_CLOSE = "</parameter>"
    _PARAM_END = (_PARAM_CLOSE, "<parameter=", "</function>")
    _PARAM_END_RE = re.compile("|".join(map(re.escape, _PARAM_END)))  # what ends a parameter value
    _PARAM_OPEN = "<parameter="
    _TAG_LIMIT = 128  # a name with no '>' after this many characters is not a tag
    _CLOSE_HOLD = 1024  # whitespace after a '</parameter>' held at most this long; past it, the value goes on

    def __init__(self, ctx: CallSink, outer_closer: str | None = None):
        self.ctx = ctx
        self.outer_closer = outer_closer  # the enclosing block's closer (``</tool_call>``): implies ``</function>``
        self.tags = (self._PARAM_OPEN, self.CLOSER) + ((outer_closer,) if outer_closer else ())
        self.state = "name"
        self.closing: list[str] | None = None  # a '</parameter>' and the whitespace after it, held
        self.closing_len = 0
        self.partial = False  # the last feed stopped at a tag cut by the chunk's end
        self.lexer: ValueLexer | None = None
        self.repaired = False
        self.streamed_json = False
        self.props: Mapping[str, Any] = {}  # the tool's schema properties
        self.params = 0  # parameters opened so far
        self.schema: Mapping[str, Any] | None = None  # the current parameter's schema
        self.held: list[str] | None = None  # a non-string value's text, held until its parameter closes
        self.trim = NewlineTrim()  # the current value's first and last newline are trimmed

    def feed(self, buf: str, pos: int) -> tuple[str, int]:
        n = len(buf)
        self.partial = False
        while pos < n:
            state = self.state
            if self.lexer is not None:
                text, end = self.lexer.feed(buf, pos)
                if text:
                    self.ctx.call_args(text)
                if end is None:
                    return MORE, n
                if self.lexer.stopped == "partial":
                    return MORE, end
                if self.lexer.stopped:
                    self.ctx.call_abort("invalid_json", "a new call began before this one was complete")
                    return DONE, end
                self.repaired |= self.lexer.repaired
                self.lexer = None
                self.streamed_json = True
                pos = end
                continue
            if state in ("name", "param_name"):
                end = buf.find(">", pos, pos + self._TAG_LIMIT)
                if end == -1:
                    if n - pos >= self._TAG_LIMIT:
                        return self._invalid(pos, "no '>' after the name")
                    return MORE, pos
                name = buf[pos:end].strip().strip("\"'")
                if state == "param_name":
                    self._param_open(name)
                elif not name or any(c in name for c in " \n<"):
                    return self._invalid(pos, "bad function name")
                else:
                    self._named(name)
                pos = end + 1
                continue
            if state == "value":
                m = self._PARAM_END_RE.search(buf, pos)
                if m is None:
                    # every tag starts with '<': without one the whole rest is value text
                    keep = n if buf.find("<", pos) == -1 else partial_at_end(buf, pos, self._PARAM_END)
                    self._value(buf[pos:keep])
                    return MORE, keep
                i, hit = m.start(), m.group()
                self._value(buf[pos:i])
                if hit == self._PARAM_CLOSE:
                    self.closing = [hit]
                    self.closing_len = len(hit)
                    self.state = "closing"
                    pos = i + len(hit)
                else:  # an unclosed parameter ends at the next one or at </function>
                    self._param_close()
                    self.state = "body"
                    pos = i
                continue
            if state == "closing":
                pos = self._closing(buf, pos)
                if self.partial:
                    return MORE, pos
                continue
            ch = buf[pos]
            if ch in _WS:
                pos += 1
                continue
            if ch == "{" and not self.params and not self.streamed_json:
                self.lexer = ValueLexer(emit=True, stops=self.ctx.openers)
                continue
            for tag in self.tags:
                if buf.startswith(tag, pos):
                    break
                if tag.startswith(buf[pos:]):
                    return MORE, pos
            else:
                self.ctx.call_invalid()
                return self._invalid(pos, "unexpected text in the function body")
            if tag == self._PARAM_OPEN:
                if not self.params and not self.streamed_json:
                    self.ctx.call_args("{")
                self.state = "param_name"
                pos += len(tag)
                continue
            if tag == self.outer_closer:  # no </function>: the block's closer ends the function too
                self.repaired = True
                self._finish()
                return DONE, pos
            self._finish()
            return DONE, pos + len(tag)
        return MORE, n

    def _closing(self, buf: str, pos: int) -> int:
        """After a ``</parameter>``: decide from what follows whether it closed the parameter."""
        n = len(buf)
        m = _NON_WS.search(buf, pos)
        j = n if m is None else m.start()
        room = self._CLOSE_HOLD - self.closing_len
        if j - pos > room:  # too much whitespace to hold: the '</parameter>' was value text
            self._not_closed(buf[pos:pos + room])
            return pos + room
        self.closing.append(buf[pos:j])
        self.closing_len += j - pos
        if j == n:
            return n
        if any(buf.startswith(tag, j) for tag in self.tags):
            self.closing = None
            self._param_close()
            self.state = "body"
        elif any(tag.startswith(buf[j:]) for tag in self.tags):
            self.partial = True  # a tag cut by the chunk's end: decided with the next chunk
        else:
            self._not_closed("")
        return j

    def _not_closed(self, more: str) -> None:
        """The held ``</parameter>`` (and whitespace) belongs to the value."""
        text = "".join(self.closing) + more
        self.closing = None
        self.state = "value"
        self._value(text)

    def _invalid(self, pos: int, message: str) -> tuple[str, int]:
        self.ctx.call_abort("invalid_json", message)
        return DONE, pos

    def _named(self, name: str) -> None:
        self.ctx.call_name(name)
        schema = self.ctx.schema_for(self.ctx.current_name())
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        self.props = props if isinstance(props, Mapping) else {}
        self.state = "body"

    def _param_open(self, key: str) -> None:
        self.schema = self.props.get(key)
        string = schema_type(self.schema) in (None, "string")
        self.held = None if string else []
        self.trim = NewlineTrim()
        sep = ", " if self.params else ""
        self.params += 1
        self.ctx.call_args(sep + json.dumps(key, ensure_ascii=False) + (': "' if string else ": "))
        self.state = "value"

    def _value(self, text: str) -> None:
        text = self.trim.leading(text)
        if self.held is not None:
            self.held.append(text)
            return
        text = self.trim.stream(text)
        if text:
            # json.dumps (non-ASCII kept) changes only quotes, backslashes and control characters
            self.ctx.call_args(json.dumps(text, ensure_ascii=False)[1:-1] if _NEEDS_ESCAPE.search(text) else text)

    def _param_close(self) -> None:
        if self.held is None:
            self.ctx.call_args('"')  # a held trailing newline was the value's last: trimmed
            return
        text = "".join(self.held)
        if text.endswith("\n"):
            text = text[:-1]
        self.ctx.call_args(json.dumps(coerce_value(text, self.schema), ensure_ascii=False))

    def _finish(self) -> None:
        if not self.streamed_json:
            self.ctx.call_args("}" if self.params else "{}")
        self.ctx.call_end(repaired=self.repaired)

    def at_eof(self) -> None:
        if self.state == "closing" and not self.partial:  # '</parameter>' then only whitespace: it closed
            self._param_close()
            self.state = "body"
        if self.state == "body" and self.lexer is None and (self.streamed_json or self.params):
            self.ctx.call_unclosed(repaired=self.repaired, tail="" if self.streamed_json else "}")
        else:
            self.ctx.call_incomplete()
