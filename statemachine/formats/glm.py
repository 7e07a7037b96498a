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

import json
import re

from .._coerce import coerce_value
from .._jsonblock import JsonCallsBody, refutes_start
from .._scanning import WS, partial_at_end, skip_ws
from .._reader import BodyReader, CallSink, DONE, MORE, Outcome
from ._base import TextFormat, call_instructions, compact_object

OPENER = "<tool_call>"
CLOSER = "</tool_call>"
KEY, KEY_END, VALUE, VALUE_END = "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"
_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
_NAME_LIMIT = 128
_NAME_END = re.compile(r"[\n<]")


class GlmBody:
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

    def __init__(self, sink: CallSink):
        self.sink = sink
        self.inner: BodyReader | None = None
        self.state = "start"
        self.key = ""
        self.text: list[str] = []  # the current key's or value's text so far
        self.pairs = 0  # pairs of the current call
        self.calls = 0  # calls named in this block

    def feed(self, buf: str, pos: int) -> tuple[Outcome, int]:
        n = len(buf)
        while pos < n:
            if self.inner is not None:
                return self.inner.feed(buf, pos)
            state = self.state
            if state in ("key", "value"):
                end_tag = self.KEY_END if state == "key" else self.VALUE_END
                end = buf.find(end_tag, pos)
                if end == -1:
                    keep = partial_at_end(buf, pos, (end_tag,))
                    self.text.append(buf[pos:keep])
                    return MORE, keep
                self.text.append(buf[pos:end])
                text, self.text = "".join(self.text), []
                if state == "key":
                    self.key = text.strip()
                    # without a value tag the value starts at once: its leading whitespace is its own
                    self.state = "before_value" if self.VALUE else "value"
                else:
                    self._pair(text)
                    self.state = "pairs"
                pos = end + len(end_tag)
                continue
            if buf[pos] in WS and state != "name":
                pos += 1
                continue
            if state == "start" and not self.NAME_START:
                if not (buf[pos].isalpha() or buf[pos] == "_"):  # no name: a format-A body
                    self.inner = JsonCallsBody(self.sink, CLOSER)
                    continue
                self.state = "name"
                continue
            if state == "name":
                m = self.NAME_END.search(buf, pos, pos + _NAME_LIMIT)
                if m is None:
                    return self._not_a_call(pos) if n - pos >= _NAME_LIMIT else (MORE, pos)
                name = buf[pos:m.start()].strip()
                if not _NAME.fullmatch(name):
                    return self._not_a_call(pos)
                if self.calls:
                    self.sink.call_begin()
                self.calls += 1
                self.sink.call_name(name)
                self.state = "pairs"
                pos = m.end() if self.NAME_START else m.start()
                continue
            tags = {"pairs": (self.KEY, self.CALL_END), "before_value": (self.VALUE,),
                    "start": (self.NAME_START,), "between": (self.NAME_START, self.SECTION_END)}[state]
            tag = next((t for t in tags if buf.startswith(t, pos)), None)
            if tag is None:
                if any(t.startswith(buf[pos:]) for t in tags):
                    return MORE, pos  # a tag cut by the chunk's end
                self.sink.call_abort("invalid_json", "the tool_call block holds text outside its argument tags")
                return DONE, pos
            pos += len(tag)
            if tag == self.CALL_END:
                self.sink.call_args("}" if self.pairs else "{}")
                self.sink.call_end()
                if not self.SECTION_END:
                    return DONE, pos
                self.state, self.pairs = "between", 0
            elif tag == self.SECTION_END:
                return DONE, pos
            elif tag == self.NAME_START:
                self.state = "name"
            else:
                self.state = "key" if tag == self.KEY else "value"
        return MORE, n

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
            return DONE, pos
        self.sink.call_abort("not_a_call", "the tool_call block does not start a call")
        return DONE, pos

    def at_eof(self) -> None:
        if self.inner is not None:
            self.inner.at_eof()
        elif self.state in ("start", "name") and not self.calls:
            self.sink.call_abort("not_a_call", "the block ended before a call started")
        elif self.state == "between":
            self.sink.note("recovered_unclosed", "the block had no closer; its calls were complete")
        else:
            self.sink.call_incomplete()


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
