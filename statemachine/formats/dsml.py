"""DeepSeek V3.2 and V4: DSML calls, ``<｜DSML｜invoke>`` blocks holding ``<｜DSML｜parameter>`` values.

::

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

V4 writes the same section as ``<｜DSML｜tool_calls>`` … ``</｜DSML｜tool_calls>``;
both formats read both sections, and an ``<｜DSML｜invoke`` written without its
section (V4 often does) is a call too. Several invokes share a section.

A parameter's ``string`` attribute types its value: ``"true"`` is the text as
it is (streamed as it arrives unless the tool's schema asks for another type,
which it is then converted to); ``"false"`` is a JSON value (a string schema
keeps the text; any other schema converts it as format C's values are); no
attribute types the text by the schema alone. An invoke may instead hold one
JSON object (``{"city": "Paris"}``), streamed verbatim, or close itself
(``<｜DSML｜invoke name="now"/>``: no arguments). A lone ``arguments`` or
``input`` parameter the tool does not have, holding an object of the tool's
parameters, is unwrapped to that object (noted as a repair). The
end-of-sentence token is dropped where it arrives as text; reasoning is
``<think>`` … ``</think>``, as the config reads it.
"""

from __future__ import annotations

import enum
import json
import re
from typing import Any, Callable, Mapping

from .._coerce import coerce_value, schema_types, streams_as_string
from .._jsonlex import ValueLexer
from .._scanning import partial_at_end, skip_to, skip_ws
from .._reader import BodyReader, CallSink, COMPLETE, MORE, Outcome, Step, TableReader
from ._base import TextFormat, call_instructions, compact_object
from ._tokens import ObjectArguments

DSML = "｜DSML｜"
V32_SECTION = f"<{DSML}function_calls>"
V4_SECTION = f"<{DSML}tool_calls>"
INVOKE = f'<{DSML}invoke name="'
INVOKE_END = f"</{DSML}invoke>"
PARAM = f'<{DSML}parameter name="'
PARAM_END = f"</{DSML}parameter>"
#: each section opener with its closer
SECTIONS = {V32_SECTION: f"</{DSML}function_calls>", V4_SECTION: f"</{DSML}tool_calls>"}
_NAME = re.compile(r"[\w.\-:]+")
_HEADER_END = re.compile(r'"\s*(/?)>')  # after the name: ``">`` opens the invoke, ``"/>`` closes it at once
_ATTRS = re.compile(r'([^"<>]+)"(?:\s+string="(true|false)")?\s*')  # ``K" string="true"`` (before the ``>``)
_LIMIT = 256  # longest name or parameter tag read before the block is judged not a call
_WRAPPERS = ("arguments", "input")


class DsmlState(str, enum.Enum):
    """Where a :class:`DsmlBody` is in its block (a ``str`` enum: table lookups hash it in C)."""

    #: Between invokes: the next invoke, or the section's end.
    SECTION = "section"
    #: An invoke's name, up to its ``">``.
    NAME = "name"
    #: Inside an invoke: a parameter, a JSON object, or the invoke's end.
    BODY = "body"
    #: A parameter's attributes, up to its ``>``.
    PARAM_ATTRS = "param"
    #: A parameter's value, up to its closing tag.
    VALUE = "value"
    #: An invoke's arguments as one JSON object.
    OBJECT = "object"
    #: After that object: the invoke's end.
    AFTER_OBJECT = "after_object"
    #: A malformed invoke, dropped up to the section's end.
    SKIP = "skip"


SECTION, NAME, BODY, PARAM_ATTRS, VALUE, OBJECT, AFTER_OBJECT, SKIP = DsmlState


class DsmlBody(ObjectArguments, TableReader):
    """Reads a DSML section (or one bare invoke) from just after its opener, reporting to the sink.

    Each invoke's header goes out with its first argument: a string value is
    streamed as it arrives, any other value is sent when its closing tag is
    read (its type may depend on all of it), ``}`` at the invoke's end.
    """

    def __init__(self, sink: CallSink, closer: str, *, in_invoke: bool):
        self.sink = sink
        self.closer = closer  # the section's closer ("": a bare invoke, the block ends after its invokes)
        self.state = NAME if in_invoke else SECTION
        self.calls = 0  # invokes named in this block
        self.pairs = 0  # parameters sent for the current invoke
        self.key = ""
        self.string: str | None = None  # the current parameter's ``string`` attribute
        self.streaming = False  # the current value goes out as a JSON string as it arrives
        self.text: list[str] = []  # a buffered value's text so far
        self.held: tuple[str, Any, dict[str, Any]] | None = None  # a wrapper parameter (key, value, the object it wraps)
        self.lexer: ValueLexer | None = None
        self.repaired = self.invalid = False
        #: the tags each tag-reading state may meet
        self.tags: dict[DsmlState, tuple[str, ...]] = {
            state: tuple(tag for tag in tags if tag) for state, tags in (
                (SECTION, (INVOKE, closer)), (BODY, (PARAM, INVOKE_END, INVOKE, closer)),
                (AFTER_OBJECT, (INVOKE_END, INVOKE, closer)))}

    # one method per state: each returns the block's outcome, or ``None`` and where to read on

    def _read_tags(self, buf: str, pos: int) -> Step:
        """Between tags: an invoke, a parameter, a JSON object, an invoke's end or the section's."""
        pos = skip_ws(buf, pos)
        if pos == len(buf):
            return MORE, pos
        if self.state is BODY and buf[pos] == "{" and not self.pairs and self.held is None:
            self.lexer = ValueLexer(stops=self.sink.openers)
            self.state = OBJECT
            return None, pos
        tags = self.tags[self.state]
        tag = next((t for t in tags if buf.startswith(t, pos)), None)
        if tag is None:
            if any(t.startswith(buf[pos:]) for t in tags):
                return MORE, pos  # a tag cut by the chunk's end
            return self._stray(buf, pos)
        return self._tag(tag, buf, pos + len(tag))

    def _tag(self, tag: str, buf: str, pos: int) -> Step:
        """The tag ``tag`` ended just before ``pos``."""
        if tag == PARAM:
            self.state = PARAM_ATTRS
            return None, pos
        if self.state is not SECTION:  # the invoke ends here, with or without its own closing tag
            self._end_invoke()
        if tag == INVOKE:
            self.state = NAME
        elif tag == self.closer:
            return self._section_end(buf, pos)
        else:
            self.state = SECTION
        return None, pos

    def _read_object(self, buf: str, pos: int) -> Step:
        """The invoke's arguments as one JSON object, streamed."""
        status, end = self.read_object(buf, pos)
        if status is None:
            self.state = AFTER_OBJECT
        return status, end

    # the invoke's header ---------------------------------------------------------------------------

    def _read_name(self, buf: str, pos: int) -> Step:
        """``NAME">`` (or ``NAME"/>``): the call begins; ``(None, after it)``, or the block's outcome."""
        quote = buf.find('"', pos, pos + _LIMIT)
        m = _HEADER_END.match(buf, quote) if quote != -1 else None
        if m is None:
            if len(buf) - pos > _LIMIT or (quote != -1 and len(buf) - quote > 8):
                return self._not_a_call(buf, pos)
            return MORE, pos  # the name or its ``">`` is still coming
        name = buf[pos:quote]
        if not _NAME.fullmatch(name):
            return self._not_a_call(buf, pos)
        if self.calls:
            self.sink.call_begin()
        self.calls += 1
        self.sink.call_name(name)
        self.pairs, self.held = 0, None
        if m.group(1):  # self-closing: a call without arguments
            self.sink.call_args("{}")
            self.sink.call_end()
            self.state = SECTION
        else:
            self.state = BODY
        return None, m.end()

    # parameters ------------------------------------------------------------------------------------

    def _read_param(self, buf: str, pos: int) -> Step:
        """``K" string="…">``: a value begins; ``(None, after it)``, or the block's outcome."""
        close = buf.find(">", pos, pos + _LIMIT)
        if close == -1:
            return (self._stray(buf, pos) if len(buf) - pos > _LIMIT else (MORE, pos))
        m = _ATTRS.fullmatch(buf, pos, close)
        if m is None:
            return self._stray(buf, pos)
        self.key, self.string = m.group(1).strip(), m.group(2)
        prop = self._prop()
        self.streaming = self.string == "true" and streams_as_string(prop) and not self._may_wrap()
        if self.streaming:
            self._flush_held()
            self._send(json.dumps(self.key, ensure_ascii=False) + ': "')
        self.text = []
        self.state = VALUE
        return None, close + 1

    def _read_value(self, buf: str, pos: int) -> Step:
        """Read the current value on from ``pos``; at its closing tag the parameter is complete, and at the
        invoke's (the parameter's was left out) the invoke is too."""
        end = buf.find(PARAM_END, pos)
        cut = buf.find(INVOKE_END, pos, None if end == -1 else end)
        if cut != -1:
            self.sink.note("repaired", "a parameter without its closing tag ended at the invoke's end")
            end = cut
        stop = end if end != -1 else partial_at_end(buf, pos, (PARAM_END, INVOKE_END))
        if self.streaming:
            if stop > pos:
                self.sink.call_args(json.dumps(buf[pos:stop], ensure_ascii=False)[1:-1])
        else:
            self.text.append(buf[pos:stop])
        if end == -1:
            return MORE, stop
        if self.streaming:
            self.sink.call_args('"')
        else:
            self._pair("".join(self.text))
        self.state = BODY
        return None, end if cut != -1 else end + len(PARAM_END)

    def _pair(self, raw: str) -> None:
        value = typed_value(raw, self.string, self._prop())
        inner = _object_in(value) if self._may_wrap() else None
        if inner is not None and set(inner) <= set(self._props()):
            self.held = (self.key, value, inner)  # the whole arguments, if no other parameter follows
            return
        self._flush_held()
        self._send(json.dumps(self.key, ensure_ascii=False) + ": " + json.dumps(value, ensure_ascii=False))

    def _send(self, pair_start: str) -> None:
        self.sink.call_args(("{" if not self.pairs else ", ") + pair_start)
        self.pairs += 1

    def _flush_held(self) -> None:
        if self.held is not None:
            key, value, _ = self.held
            self.held = None
            self._send(json.dumps(key, ensure_ascii=False) + ": " + json.dumps(value, ensure_ascii=False))

    def _props(self) -> Mapping[str, Any]:
        schema = self.sink.schema_for(self.sink.current_name()) or {}
        return schema.get("properties") or {}

    def _prop(self) -> Mapping[str, Any] | None:
        return self._props().get(self.key)

    def _may_wrap(self) -> bool:
        """The current parameter is the invoke's first and a wrapper the tool does not have."""
        props = self._props()
        return not self.pairs and self.held is None and self.key in _WRAPPERS and bool(props) and self.key not in props

    # ends ------------------------------------------------------------------------------------------

    def _end_invoke(self) -> None:
        if self.state is AFTER_OBJECT:
            self.sink.call_end(repaired=self.repaired, invalid=self.invalid)
            return
        if self.held is not None and not self.pairs:
            self.sink.note("repaired", f"the {self.held[0]!r} wrapper was unwrapped to the tool's parameters")
            self.sink.call_args(json.dumps(self.held[2], ensure_ascii=False))
            self.held = None
        else:
            self._flush_held()
            self.sink.call_args("}" if self.pairs else "{}")
        self.sink.call_end()

    def _section_end(self, buf: str, pos: int) -> tuple[Outcome, int]:
        if not self.calls:
            return self._not_a_call(buf, pos)
        return COMPLETE, pos

    def _stray(self, buf: str, pos: int) -> tuple[Outcome, int]:
        """Text the syntax has no place for: between invokes the block ends there; inside one it is malformed."""
        if self.state is SECTION:  # prose after complete invokes: the section ended without its closer
            return (COMPLETE, pos) if self.calls else self._not_a_call(buf, pos)
        self.sink.call_abort("invalid_json", "the DSML block holds text outside its tags")
        return COMPLETE, pos

    def _not_a_call(self, buf: str, pos: int) -> tuple[Outcome, int]:
        if self.calls:  # a later invoke's header is malformed: the calls before it stand, the rest is dropped
            self.sink.note("invalid_json", "a malformed DSML invoke was dropped up to the section's end")
            self.state = SKIP
            return self._read_skip(buf, pos)
        self.sink.call_abort("not_a_call", "the DSML block does not start a call")
        return COMPLETE, pos

    def _read_skip(self, buf: str, pos: int) -> tuple[Outcome, int]:
        """Drop text up to the section's end (a bare invoke's: the invoke's), or to the next call's opener."""
        hit, end = skip_to(buf, pos, self.closer or INVOKE_END, self.sink.openers)
        return (MORE, end) if hit is None else (COMPLETE, end)

    def at_eof(self) -> None:
        if self.state is SKIP:
            return
        if self.state is SECTION and self.calls:
            if self.closer:
                self.sink.note("recovered_unclosed", "the DSML section had no closer; its calls were complete")
        elif self.state in (SECTION, NAME) and not self.calls:
            self.sink.call_abort("not_a_call", "the block ended before a call started")
        else:
            self.sink.call_incomplete()


def typed_value(raw: str, string: str | None, prop: Mapping[str, Any] | None) -> Any:
    """A parameter's value by its ``string`` attribute and the parameter's schema (see the module docstring)."""
    if string != "false":
        return raw if string == "true" and streams_as_string(prop) else coerce_value(raw, prop)
    if streams_as_string(prop) and schema_types(prop):  # a string (or string-or-null) parameter
        return None if raw.strip() == "null" and "null" in schema_types(prop) else raw
    if prop is None or not schema_types(prop):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return coerce_value(raw, prop)


def _object_in(value: Any) -> dict[str, Any] | None:
    """A wrapper's value as the object it holds (an object, or a string holding one), else ``None``."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def render_parameters(arguments: str) -> str:
    """Each argument as a ``<｜DSML｜parameter>`` line: strings as they are, other values as JSON."""
    pairs = json.loads(compact_object(arguments))
    if not isinstance(pairs, dict):
        return ""
    return "".join(f'{PARAM}{k}" string="{str(isinstance(v, str)).lower()}">'
                   f"{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}{PARAM_END}\n"
                   for k, v in pairs.items())


class DsmlFormat(TextFormat):
    """DeepSeek V3.2 DSML tool calls (see the module docstring); renders ``<｜DSML｜function_calls>``."""

    name = "deepseek_v32"
    model_names = ("deepseek-v3.2",)
    section = V32_SECTION
    openers: tuple[str, ...] = (V32_SECTION, V4_SECTION, INVOKE)
    end_tokens = ("<｜end▁of▁sentence｜>",)

    def __init__(self) -> None:
        self.openers = (self.section, *(op for op in type(self).openers if op != self.section))
        self.closer = SECTIONS[self.section]

    def render_call(self, name: str, arguments: str) -> str:
        return f'{self.section}\n{INVOKE}{name}">\n{render_parameters(arguments)}{INVOKE_END}\n{self.closer}'

    def instructions(self, example_name: str, example_arguments: str) -> str:
        return call_instructions(self.render_call(example_name, example_arguments), (
            f'Put each call in {INVOKE}NAME"> … {INVOKE_END} with the tool\'s exact name; several calls share one '
            f"{self.section} … {self.closer} block.",
            f'Write one {PARAM}KEY" string="true|false">VALUE{PARAM_END} per argument with the tool\'s exact '
            'parameter names: string="true" and the text as it is for a string, string="false" and JSON for '
            "any other value."))

    def marked_openers(self, marker: str) -> dict[str, str]:
        """The section openers with the marker before their ``>`` (a bare invoke has no marked form)."""
        return {f'{op[:-1]} marker="{marker}">': op for op in SECTIONS}

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return DsmlBody(sink, SECTIONS.get(opener, ""), in_invoke=opener == INVOKE)


class DsmlV4Format(DsmlFormat):
    """DeepSeek V4 DSML tool calls: V3.2's, rendered in ``<｜DSML｜tool_calls>``."""

    name = "deepseek_v4"
    model_names = ("deepseek-v4",)
    section = V4_SECTION


#: Each state's reader.
_READERS: dict[DsmlState, Callable[[DsmlBody, str, int], Step]] = {
    SECTION: DsmlBody._read_tags,
    NAME: DsmlBody._read_name,
    BODY: DsmlBody._read_tags,
    PARAM_ATTRS: DsmlBody._read_param,
    VALUE: DsmlBody._read_value,
    OBJECT: DsmlBody._read_object,
    AFTER_OBJECT: DsmlBody._read_tags,
    SKIP: DsmlBody._read_skip,
}
DsmlBody.READERS = _READERS
