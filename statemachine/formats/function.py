"""Format C: ``<function=NAME>`` with a JSON object or ``<parameter=K>V</parameter>`` children.

Functionary v3.1 / Llama 3.1 write a JSON body; Qwen3-Coder, Qwen3.5 and
Seed-OSS write parameter children, usually inside ``<tool_call>`` (the
``tool_call`` reader then runs :class:`FunctionBody` for that inner block).
"""

from __future__ import annotations

import enum
import json
import re
from typing import Any, Callable, Mapping

from .._coerce import coerce_value, streams_as_string
from .._jsonlex import ValueLexer
from .._jsonblock import JsonCallsBody
from .._scanning import FUNCTION_OPENERS, NON_WS, NewlineTrim, partial_at_end
from .._reader import BodyReader, CallSink, COMPLETE, MORE, Outcome, Step
from ._base import Refutation, TextFormat, compact_object
from ._tokens import ObjectArguments

_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')

OPENERS = FUNCTION_OPENERS


class FunctionFormat(TextFormat):
    """``<function=NAME>{…}</function>`` or with ``<parameter=K>V</parameter>`` children.

    ``<function name="NAME">`` is the same format.
    """

    name = "function"
    model_names: tuple[str, ...] = ("qwen3-coder",)
    openers: tuple[str, ...] = OPENERS
    closer = "</function>"

    def render_call(self, name: str, arguments: str) -> str:
        return f"<function={name}>{compact_object(arguments)}</function>"

    def marked_openers(self, marker: str) -> dict[str, str]:
        """``<function marker="…"=`` and ``<function marker="…" name=``."""
        return {f'<function marker="{marker}"=': "<function=", f'<function marker="{marker}" name=': "<function name="}

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return FunctionBody(sink)

    def refutes(self, opener: str, buf: str, pos: int) -> Refutation:
        """No name can follow ``<function=`` (a repeated opener, no ``>`` within the limit): its reader's note."""
        if opener not in OPENERS:
            return False  # a subclass's other opener (Functionary's ``<|python_tag|>``)
        found = opener_name(buf, pos)
        return found if found is None else ("invalid_json", found) if isinstance(found, str) else False


class FunctionState(str, enum.Enum):
    """Where a :class:`FunctionBody` is in its block (a ``str`` enum: table lookups hash it in C)."""

    #: The function's name, up to the opener's ``>``.
    NAME = "name"
    #: Between parameters: a parameter, a JSON object, or the end.
    BODY = "body"
    #: A JSON object body, streamed by the value lexer.
    JSON = "json"
    #: A parameter's name, up to its tag's ``>``.
    PARAM_NAME = "param_name"
    #: A parameter's value.
    VALUE = "value"
    #: After a ``</parameter>`` (or a ``</function>`` in an open value): did it close the parameter?
    CLOSING = "closing"
    #: A ``</function>`` in an open value ended the call.
    ENDED = "ended"


NAME, BODY, JSON, PARAM_NAME, VALUE, CLOSING, ENDED = FunctionState



class FunctionBody(ObjectArguments):
    """Body of ``<function=NAME>``: a JSON object, or ``<parameter=K>V</parameter>`` children.

    Parameters stream as they arrive (parsing.md 2.1 C): ``{`` when the first
    one opens, ``"K": `` when its name's ``>`` arrives, a string-typed value as
    escaped JSON string fragments (one trailing newline held until it is known
    not to be the last), any other value once its parameter closes (schema
    coercion may change its text), ``, `` between, ``}`` at ``</function>``.

    A value may contain tag-like text (a file's content, an example call), and a
    key is never sent twice. ``</parameter>`` closes the parameter only when
    what follows it (after whitespace) is a new parameter, ``</function>``, the
    enclosing block's closer or the end of the stream, so it and the whitespace
    after it are held until that is known. ``<parameter=K>`` is a new parameter
    only when ``K`` was not sent yet in this call (and, when it would end a
    value that has no ``</parameter>``, when the schema, if it lists
    properties, names ``K``); otherwise it is value text. A ``<function=`` inside a value
    opens a nested example: its tags up to its own ``</function>`` are value
    text. A value ends at its own ``</parameter>``: a ``</function>`` inside an
    open value ends it (and the call) only when nothing but whitespace and the
    enclosing block's closer, a new call's opener or the end of the stream
    follows, so a file's content that mentions the closing tags stays whole.
    """

    CLOSER = "</function>"
    _PARAM_CLOSE = "</parameter>"
    _PARAM_OPEN = "<parameter="
    _NESTED_OPENERS = OPENERS
    _VALUE_TAGS = (_PARAM_CLOSE, _PARAM_OPEN, CLOSER, *_NESTED_OPENERS)
    _VALUE_TAGS_RE = re.compile("|".join(map(re.escape, _VALUE_TAGS)))  # tags that matter inside a value
    _TAG_LIMIT = 128  # a name with no '>' after this many characters is not a tag
    _CLOSE_HOLD = 1024  # whitespace after a '</parameter>' held at most this long; past it, the value goes on

    def __init__(self, sink: CallSink, outer_closer: str | None = None):
        self.sink = sink
        self.outer_closer = outer_closer  # the enclosing block's closer (``</tool_call>``): implies ``</function>``
        self.tags = (self._PARAM_OPEN, self.CLOSER) + ((outer_closer,) if outer_closer else ())
        self.state = NAME
        self.closing: list[str] | None = None  # a '</parameter>' and the whitespace after it, held
        self.closing_len = 0
        self.partial = False  # the last feed stopped at a tag cut by the chunk's end
        self.lexer: ValueLexer | None = None
        self.repaired = self.invalid = False  # how the JSON body (read_object) or the parameters went
        self.streamed_json = False
        self.props: Mapping[str, Any] = {}  # the tool's schema properties
        self.params = 0  # parameters opened so far
        self.schema: Mapping[str, Any] | None = None  # the current parameter's schema
        self.held: list[str] | None = None  # a non-string value's text, held until its parameter closes
        self.trim = NewlineTrim()  # the current value's first and last newline are trimmed
        self.sent_keys: set[str] = set()  # parameters sent so far: a key is never sent twice
        self.nested = 0  # '<function=' blocks open inside the current value (an example call)

    def feed(self, buf: str, pos: int) -> tuple[Outcome, int]:
        n = len(buf)
        self.partial = False
        while pos < n:
            outcome, pos = _READERS[self.state](self, buf, pos)
            if outcome is not None:
                return outcome, pos
        return MORE, n

    # one method per state: each returns the block's outcome, or ``None`` and where to read on

    def _read_name(self, buf: str, pos: int) -> Step:
        """The function's name, up to the opener's ``>``."""
        found = opener_name(buf, pos)
        if found is None:
            return MORE, pos
        if isinstance(found, str):
            return self._invalid(pos, found)
        name, end = found
        self._named(name)
        return None, end + 1

    def _read_param_name(self, buf: str, pos: int) -> Step:
        """A parameter's name, up to its tag's ``>``: its value begins."""
        end = buf.find(">", pos, pos + self._TAG_LIMIT)
        if end == -1:
            return self._no_tag_end(buf, pos)
        self._param_open(_param_key(buf[pos:end]))
        return None, end + 1

    def _no_tag_end(self, buf: str, pos: int) -> Step:
        """No ``>`` after a name yet: it may come with the next chunk, unless the name is already too long."""
        if len(buf) - pos >= self._TAG_LIMIT:
            return self._invalid(pos, "no '>' after the name")
        return MORE, pos

    def _read_json(self, buf: str, pos: int) -> Step:
        """A JSON object body, streamed verbatim by the value lexer."""
        outcome, end = self.read_object(buf, pos)
        if outcome is None:
            self.streamed_json = True
            self.state = BODY
        return outcome, end

    def _read_value(self, buf: str, pos: int) -> Step:
        """A parameter's value, up to a tag that may end it."""
        m = self._VALUE_TAGS_RE.search(buf, pos)
        if m is None:
            # every tag starts with '<': without one the whole rest is value text
            keep = len(buf) if buf.find("<", pos) == -1 else partial_at_end(buf, pos, self._VALUE_TAGS)
            self._value(buf[pos:keep])
            return MORE, keep
        i, hit = m.start(), m.group()
        self._value(buf[pos:i])
        boundary = self._value_tag(hit, buf, i)
        if boundary is None:  # a parameter's name cut by the chunk's end: decided with the next chunk
            return MORE, i
        if not boundary:
            self._value(hit)
            return None, i + len(hit)
        if hit in (self._PARAM_CLOSE, self.CLOSER):
            self.closing = [hit]
            self.closing_len = len(hit)
            self.state = CLOSING
            return None, i + len(hit)
        self._param_close()  # an unclosed parameter ends at the next one or at </function>
        self.state = BODY
        return None, i

    def _read_closing(self, buf: str, pos: int) -> Step:
        """After a ``</parameter>`` (or a ``</function>`` in an open value): what follows decides whether it
        closed the parameter (or the call)."""
        pos = self._closing(buf, pos)
        if self.partial:
            return MORE, pos
        return (COMPLETE if self.state is ENDED else None), pos

    def _read_ended(self, buf: str, pos: int) -> Step:
        """The call ended inside a value (``_function_closing``): the block ends here."""
        return COMPLETE, pos

    def _read_body(self, buf: str, pos: int) -> Step:
        """Between parameters: a parameter, a JSON object (first), or the end of the function."""
        m = NON_WS.search(buf, pos)
        if m is None:
            return MORE, len(buf)
        pos = m.start()
        if buf[pos] == "{" and not self.params and not self.streamed_json:
            self.lexer = ValueLexer(emit=True, stops=self.sink.openers)
            self.state = JSON
            return None, pos
        tag = next((t for t in self.tags if buf.startswith(t, pos)), None)
        if tag is None:
            if any(t.startswith(buf[pos:]) for t in self.tags):
                return MORE, pos
            self.sink.call_invalid()
            return self._invalid(pos, "unexpected text in the function body")
        if tag == self._PARAM_OPEN:
            if not self.params and not self.streamed_json:
                self.sink.call_args("{")
            self.state = PARAM_NAME
            return None, pos + len(tag)
        if tag == self.outer_closer:  # no </function>: the block's closer ends the function too
            self.repaired = True
            self._finish()
            return COMPLETE, pos
        self._finish()
        return COMPLETE, pos + len(tag)

    def _closing(self, buf: str, pos: int) -> int:
        """After a ``</parameter>``: decide from what follows whether it closed the parameter."""
        n = len(buf)
        m = NON_WS.search(buf, pos)
        j = n if m is None else m.start()
        room = self._CLOSE_HOLD - self.closing_len
        assert self.closing is not None
        if j - pos > room:  # too much whitespace to hold: the '</parameter>' was value text
            self._not_closed(buf[pos:pos + room])
            return pos + room
        self.closing.append(buf[pos:j])
        self.closing_len += j - pos
        if j == n:
            return n
        if self.closing[0] == self.CLOSER:
            return self._function_closing(buf, j)
        if buf.startswith(self._PARAM_OPEN, j):
            closed = self._new_param_at(buf, j, after_closer=True)
        elif any(buf.startswith(tag, j) for tag in self.tags):
            closed = True
        else:
            closed = None if any(tag.startswith(buf[j:]) for tag in self.tags) else False
        if closed:
            self.closing = None
            self._param_close()
            self.state = BODY
        elif closed is None:
            self.partial = True  # a tag cut by the chunk's end: decided with the next chunk
        else:
            self._not_closed("")
        return j

    def _function_closing(self, buf: str, j: int) -> int:
        """After a ``</function>`` in an open value: it ended the call if the enclosing closer or a new call's
        opener follows."""
        ends = ((self.outer_closer,) if self.outer_closer else ()) + tuple(self.sink.openers)
        if any(buf.startswith(tag, j) for tag in ends):
            self.closing = None
            self._param_close()
            self._finish()
            self.state = ENDED
        elif any(tag.startswith(buf[j:]) for tag in ends):
            self.partial = True
        else:
            self._not_closed("")
        return j

    def _value_tag(self, hit: str, buf: str, i: int) -> bool | None:
        """Whether the tag ``hit`` at ``buf[i]``, inside a value, may end the value (``None``: not known yet)."""
        if hit in self._NESTED_OPENERS:
            self.nested += 1
            return False
        if self.nested:  # inside an example call in the value: its tags are text
            self.nested -= hit == self.CLOSER
            return False
        return self._new_param_at(buf, i, after_closer=False) if hit == self._PARAM_OPEN else True

    def _new_param_at(self, buf: str, i: int, *, after_closer: bool) -> bool | None:
        """Whether the ``<parameter=K>`` at ``buf[i]`` opens a new parameter (``None``: its ``>`` is still to come).

        ``K`` must not have been sent yet; without a ``</parameter>`` before it, the schema (if it lists
        properties) must also name it, since nothing else shows the value ended.
        """
        start = i + len(self._PARAM_OPEN)
        end = buf.find(">", start, start + self._TAG_LIMIT)
        if end == -1:
            return None if len(buf) - start < self._TAG_LIMIT else False
        key = _param_key(buf[start:end])
        return key not in self.sent_keys and (after_closer or not self.props or key in self.props)

    def _not_closed(self, more: str) -> None:
        """The held ``</parameter>`` (and whitespace) belongs to the value."""
        text = "".join(self.closing or ()) + more
        self.closing = None
        self.state = VALUE
        self._value(text)

    def _invalid(self, pos: int, message: str) -> tuple[Outcome, int]:
        self.sink.call_abort("invalid_json", message)
        return COMPLETE, pos

    def _named(self, name: str) -> None:
        self.sink.call_name(name)
        schema = self.sink.schema_for(self.sink.current_name())
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        self.props = props if isinstance(props, Mapping) else {}
        self.state = BODY

    def _param_open(self, key: str) -> None:
        self.sent_keys.add(key)
        self.nested = 0
        self.schema = self.props.get(key)
        string = streams_as_string(self.schema)
        self.held = None if string else []
        self.trim = NewlineTrim()
        sep = ", " if self.params else ""
        self.params += 1
        self.sink.call_args(sep + json.dumps(key, ensure_ascii=False) + (': "' if string else ": "))
        self.state = VALUE

    def _value(self, text: str) -> None:
        trim = self.trim
        if not trim.started:
            text = trim.leading(text)
        if self.held is not None:
            self.held.append(text)
            return
        text = trim.stream(text)
        if text:
            # json.dumps (non-ASCII kept) changes only quotes, backslashes and control characters
            self.sink.call_args(json.dumps(text, ensure_ascii=False)[1:-1] if _NEEDS_ESCAPE.search(text) else text)

    def _param_close(self) -> None:
        if self.held is None:
            self.sink.call_args('"')  # a held trailing newline was the value's last: trimmed
            return
        text = "".join(self.held)
        if text.endswith("\n"):
            text = text[:-1]
        self.sink.call_args(json.dumps(coerce_value(text, self.schema), ensure_ascii=False))

    def _finish(self) -> None:
        if not self.streamed_json:
            self.sink.call_args("}" if self.params else "{}")
        self.sink.call_end(repaired=self.repaired)

    def at_eof(self) -> None:
        if self.state is CLOSING and not self.partial:  # '</parameter>' then only whitespace: it closed
            self._param_close()
            self.state = BODY
            if self.closing and self.closing[0] == self.CLOSER:  # '</function>' too
                self._finish()
                return
        if self.state is BODY and (self.streamed_json or self.params):
            self.sink.call_unclosed(repaired=self.repaired, tail="" if self.streamed_json else "}")
        else:
            self.sink.call_incomplete()


def opener_name(buf: str, pos: int) -> tuple[str, int] | str | None:
    """The name after ``<function=`` at ``buf[pos]`` and where its ``>`` stands; the reader's message when
    none can follow; ``None`` while it may still arrive."""
    end = buf.find(">", pos, pos + FunctionBody._TAG_LIMIT)
    if end == -1:
        return "no '>' after the name" if len(buf) - pos >= FunctionBody._TAG_LIMIT else None
    name = _param_key(buf[pos:end])
    if not name or any(c in name for c in " \n<"):
        return "bad function name"
    return name, end


def _param_key(text: str) -> str:
    """A tag's name: ``<parameter=path>`` and ``<function name="get_weather">`` alike."""
    return text.strip().strip("\"'")


#: Each state's reader.
_READERS: dict[FunctionState, Callable[[FunctionBody, str, int], Step]] = {
    NAME: FunctionBody._read_name,
    BODY: FunctionBody._read_body,
    JSON: FunctionBody._read_json,
    PARAM_NAME: FunctionBody._read_param_name,
    VALUE: FunctionBody._read_value,
    CLOSING: FunctionBody._read_closing,
    ENDED: FunctionBody._read_ended,
}

JsonCallsBody.function_body = FunctionBody  # a <tool_call> block may hold a <function=…> block (Qwen3-Coder)
