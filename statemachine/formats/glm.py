"""GLM 4.5–4.7: ``<tool_call>NAME`` then ``<arg_key>K</arg_key><arg_value>V</arg_value>`` pairs.

::

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Beijing</arg_value>
    </tool_call>

GLM 4.7 writes the same without the newlines. Values are raw text, typed by
the tool's schema (``_coerce``): a string parameter stays the text, any other
is parsed as JSON or a Python literal. The format shares ``<tool_call>`` with
format A, and its reader decides by the body: a name starts GLM's syntax,
anything else (``{…}``, ``[…]``, ``<function=…>``) is read as format A reads
it. So whenever ``glm`` is requested its reader takes ``<tool_call>``, taught
or only accepted, without losing format A. The tokens that end GLM's turn
(``<|observation|>`` after calls, ``<|user|>``, ``<|endoftext|>``) are dropped
where they arrive as text.
"""

from __future__ import annotations

import enum
import json
import re
from typing import Callable, ClassVar

from .._coerce import coerce_value
from .._jsonblock import JsonCallsBody, refutes_start
from .._scanning import partial_at_end, skip_ws
from .._reader import BodyReader, CallSink, COMPLETE, MORE, Outcome, Step, TableReader
from ._base import TextFormat, call_instructions, compact_object

OPENER = "<tool_call>"
CLOSER = "</tool_call>"
KEY, KEY_END, VALUE, VALUE_END = "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"
_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
_NAME_LIMIT = 128
_NAME_END = re.compile(r"[\n<]")


class GlmState(str, enum.Enum):
    """Where a :class:`GlmBody` is in its block (a ``str`` enum: table lookups hash it in C)."""

    #: Before the first call: its name (GLM), or the tag that starts it (MiniMax's ``<invoke name="``).
    START = "start"
    #: A call's name, up to the end of its line (or tag).
    NAME = "name"
    #: Between pairs: the next key's tag, or the call's end.
    PAIRS = "pairs"
    #: A key's text, up to its closing tag.
    KEY_TEXT = "key"
    #: After a key: the value's tag.
    BEFORE_VALUE = "before_value"
    #: A value's text, up to its closing tag.
    VALUE_TEXT = "value"
    #: After a call in a section: the next call, or the section's end.
    BETWEEN = "between"
    #: No name after the opener: a format-A body, read by format A's reader.
    FORMAT_A = "format_a"


START, NAME, PAIRS, KEY_TEXT, BEFORE_VALUE, VALUE_TEXT, BETWEEN, FORMAT_A = GlmState


class GlmBody(TableReader):
    """Reads ``NAME`` and the key/value pairs up to ``</tool_call>``; a JSON body goes to format A's reader.

    The header goes out when the name's line ends (a newline, ``<arg_key>`` or
    the closer); ``{`` with the first key, each ``"K": V`` when its value
    closes (its type may change with the schema), ``}`` at the closer.
    """

    #: the tags around a key and a value, what ends a call, and where a call's name starts and ends
    KEY, KEY_END, VALUE, VALUE_END, CALL_END = KEY, KEY_END, VALUE, VALUE_END, CLOSER
    NAME_START = ""
    NAME_END = _NAME_END
    #: what ends the block after a call when several calls share it (``""``: the call's end ends the block)
    SECTION_END = ""
    #: the tags each tag-reading state may meet (see :meth:`_tag_table`)
    tags: ClassVar[dict[GlmState, tuple[str, ...]]]

    def __init__(self, sink: CallSink):
        self.sink = sink
        self.inner: BodyReader | None = None
        self.json_body: JsonCallsBody | None = None  # ``inner`` when it is format A's reader
        self.state = START
        self.key = ""
        self.text: list[str] = []  # the current key's or value's text so far
        self.pairs = 0  # pairs of the current call
        self.calls = 0  # calls named in this block

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.tags = cls._tag_table()

    @classmethod
    def _tag_table(cls) -> dict[GlmState, tuple[str, ...]]:
        """The tags each tag-reading state may meet (a class's, made once: not per block)."""
        return {START: (cls.NAME_START,), PAIRS: (cls.KEY, cls.CALL_END), BEFORE_VALUE: (cls.VALUE,),
                BETWEEN: (cls.NAME_START, cls.SECTION_END)}

    def feed(self, buf: str, pos: int) -> tuple[Outcome, int]:
        """Read ``buf[pos:]``; a format-A body's reader is called from here, never from the table: the arguments'
        path per chunk, and two frames less under all it reports (a stream's deepest stack is resident in every
        open stream: docs/upstream-client.md)."""
        if self.state is not FORMAT_A:
            outcome, pos = TableReader.feed(self, buf, pos)
            if self.state is not FORMAT_A:
                return outcome, pos
        assert self.inner is not None
        return self.inner.feed(buf, pos)

    def argument_lane(self) -> Callable[[str], str | None] | None:
        """In a format-A body: its reader's (see ``BodyReader.argument_lane``)."""
        return self.json_body.argument_lane() if self.json_body is not None else None

    # one method per state: each returns the block's outcome, or ``None`` and where to read on

    def _read_start(self, buf: str, pos: int) -> Step:
        """Before the first call: GLM's name, or else a format-A body; MiniMax's tag."""
        if self.NAME_START:
            return self._read_tags(buf, pos)
        pos = skip_ws(buf, pos)
        if pos < len(buf):
            ch = buf[pos]
            if ch.isalpha() or ch == "_":
                self.state = NAME
            else:  # no name: a format-A body, which feed reads on with
                self.inner = self.json_body = JsonCallsBody(self.sink, CLOSER)
                self.state = FORMAT_A
                return MORE, pos
        return None, pos

    def _read_name(self, buf: str, pos: int) -> Step:
        """A call's name, up to the end of its line: the call's header goes out."""
        m = self.NAME_END.search(buf, pos, pos + _NAME_LIMIT)
        if m is None:
            return self._not_a_call(pos) if len(buf) - pos >= _NAME_LIMIT else (MORE, pos)
        name = buf[pos:m.start()].strip()
        if not _NAME.fullmatch(name):
            return self._not_a_call(pos)
        if self.calls:
            self.sink.call_begin()
        self.calls += 1
        self.sink.call_name(name)
        self.state = PAIRS
        return None, m.end() if self.NAME_START else m.start()

    def _read_text(self, buf: str, pos: int) -> Step:
        """A key's or a value's text, up to its closing tag."""
        end_tag = self.KEY_END if self.state is KEY_TEXT else self.VALUE_END
        end = buf.find(end_tag, pos)
        if end == -1:
            keep = partial_at_end(buf, pos, (end_tag,))
            self.text.append(buf[pos:keep])
            return MORE, keep
        self.text.append(buf[pos:end])
        text, self.text = "".join(self.text), []
        if self.state is KEY_TEXT:
            self.key = text.strip()
            # without a value tag the value starts at once: its leading whitespace is its own
            self.state = BEFORE_VALUE if self.VALUE else VALUE_TEXT
        else:
            self._pair(text)
            self.state = PAIRS
        return None, end + len(end_tag)

    def _read_tags(self, buf: str, pos: int) -> Step:
        """Between pairs or calls: the next tag (whitespace around tags is skipped)."""
        pos = skip_ws(buf, pos)
        if pos == len(buf):
            return MORE, pos
        tags = self.tags[self.state]
        tag = next((t for t in tags if buf.startswith(t, pos)), None)
        if tag is None:
            if any(t.startswith(buf[pos:]) for t in tags):
                return MORE, pos  # a tag cut by the chunk's end
            self.sink.call_abort("invalid_json", "the tool_call block holds text outside its argument tags")
            return COMPLETE, pos
        return self._tag(tag, pos + len(tag))

    def _tag(self, tag: str, pos: int) -> Step:
        """The tag ``tag`` ended just before ``pos``."""
        if tag == self.CALL_END:
            self.sink.call_args("}" if self.pairs else "{}")
            self.sink.call_end()
            if not self.SECTION_END:
                return COMPLETE, pos
            self.state, self.pairs = BETWEEN, 0
        elif tag == self.SECTION_END:
            return COMPLETE, pos
        elif tag == self.NAME_START:
            self.state = NAME
        else:
            self.state = KEY_TEXT if tag == self.KEY else VALUE_TEXT
        return None, pos

    def _pair(self, raw: str) -> None:
        raw = raw.strip("\n")
        schema = self.sink.schema_for(self.sink.current_name()) or {}
        prop = (schema.get("properties") or {}).get(self.key)
        value = coerce_value(raw, prop)
        self.sink.call_args(("{" if not self.pairs else ", ") + json.dumps(self.key, ensure_ascii=False) + ": "
                            + json.dumps(value, ensure_ascii=False))
        self.pairs += 1

    def _not_a_call(self, pos: int) -> tuple[Outcome, int]:
        if self.calls:  # a later call's header is malformed: the calls before it stand
            return COMPLETE, pos
        self.sink.call_abort("not_a_call", "the tool_call block does not start a call")
        return COMPLETE, pos

    def at_eof(self) -> None:
        if self.inner is not None:
            self.inner.at_eof()
        elif self.state in (START, NAME) and not self.calls:
            self.sink.call_abort("not_a_call", "the block ended before a call started")
        elif self.state is BETWEEN:
            self.sink.note("recovered_unclosed", "the block had no closer; its calls were complete")
        else:
            self.sink.call_incomplete()


GlmBody.tags = GlmBody._tag_table()


def render_pairs(arguments: str, key_open: str, key_close: str, value_close: str) -> str:
    """Each argument as ``key_open K key_close V value_close`` and a newline: strings as they are, others as JSON."""
    pairs = json.loads(compact_object(arguments))
    if not isinstance(pairs, dict):
        return ""
    return "".join(f"{key_open}{k}{key_close}{v if isinstance(v, str) else json.dumps(v)}{value_close}\n"
                   for k, v in pairs.items())


class GlmFormat(TextFormat):
    """GLM 4.5–4.7 key/value tool calls in ``<tool_call>`` (see the module docstring)."""

    name = "glm"
    model_names = ("glm-4",)
    openers = (OPENER,)
    closer = CLOSER
    reads_also = frozenset({"tool_call"})
    end_tokens = ("<|observation|>", "<|user|>", "<|endoftext|>")

    def render_call(self, name: str, arguments: str) -> str:
        body = render_pairs(arguments, KEY, KEY_END + "\n" + VALUE, VALUE_END)
        return f"{OPENER}{name}\n{body}{CLOSER}"

    def instructions(self, example_name: str, example_arguments: str) -> str:
        return call_instructions(self.render_call(example_name, example_arguments), (
            f"Start with {OPENER} and the tool's exact name on the same line.",
            f"Then one {KEY}NAME{KEY_END} and {VALUE}VALUE{VALUE_END} pair per argument, using the tool's exact "
            "parameter names; write strings as they are (no quotes), other values as JSON.",
            f"End the call with {CLOSER}; write each call as its own block."))

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return GlmBody(sink)

    def refutes(self, opener: str, buf: str, pos: int) -> bool | None:
        """No name starts the body and no format-A body either: that reader's ``not_a_call``."""
        start = skip_ws(buf, pos)
        if start < len(buf) and (buf[start].isalpha() or buf[start] == "_"):
            return False  # a name: GLM's own syntax
        return refutes_start(buf, pos)

#: Each state's reader.
_READERS: dict[GlmState, Callable[[GlmBody, str, int], Step]] = {
    START: GlmBody._read_start,
    NAME: GlmBody._read_name,
    PAIRS: GlmBody._read_tags,
    KEY_TEXT: GlmBody._read_text,
    BEFORE_VALUE: GlmBody._read_tags,
    VALUE_TEXT: GlmBody._read_text,
    BETWEEN: GlmBody._read_tags,
}
GlmBody.READERS = _READERS
