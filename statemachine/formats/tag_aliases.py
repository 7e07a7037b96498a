"""Tag aliases around a format-A call object (llama.cpp's Hermes 2 Pro handling; parsing.md 2.2).

``<function_call>{"name": …, "arguments": {…}}</function_call>``, and the same
object in ``<tool>``, ``<tools>``, ``<json>``, ``<JSON>``, ``<response>``,
``<xml>``, ``<function>`` (a Hermes habit) or ``<tool_calls>`` (Jamba, Apriel:
usually an array of call objects). These tags are common in prose and HTML, so the block is a call only
under the bare-JSON rule: its body starts with a call object (or an array of
them) whose top-level name is an offered tool, with an arguments-like key;
anything else is released as the text it was.
"""

from __future__ import annotations

import json

from .. import _jsonblock
from .._reader import BodyReader, CallSink
from .._scanning import skip_ws
from ._base import TextFormat, compact_object

TAGS = ("function_call", "tool", "tools", "json", "JSON", "response", "xml", "function", "tool_calls")


class TagAliasFormat(TextFormat):
    """Format-A call objects inside any of :data:`TAGS`, each block closed by its own tag."""

    name = "tag_aliases"
    openers = tuple(f"<{tag}>" for tag in TAGS)
    closer = "</function_call>"

    def render_call(self, name: str, arguments: str) -> str:
        return (f'<function_call>{{"name": {json.dumps(name, ensure_ascii=False)}, '
                f'"arguments": {compact_object(arguments)}}}</function_call>')

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return _jsonblock.JsonCallsBody(sink, "</" + opener[1:], bare=True)

    def refutes(self, opener: str, buf: str, pos: int) -> bool | None:
        """The body's first character but whitespace is no ``{`` or ``[``: the bare-JSON rule's text."""
        start = skip_ws(buf, pos)
        return None if start == len(buf) else buf[start] not in "{["
