"""Format A: ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` (Hermes, Qwen; the default)."""

from __future__ import annotations

import json

from .. import _jsonblock
from .._reader import BodyReader, CallSink
from ._base import TextFormat, compact_object


class ToolCallFormat(TextFormat):
    """``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` (Hermes, Qwen; the default)."""

    name = "tool_call"
    openers = ("<tool_call>",)
    closer = "</tool_call>"

    def render_call(self, name: str, arguments: str) -> str:
        return f'<tool_call>{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {compact_object(arguments)}}}</tool_call>'

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return _jsonblock.JsonCallsBody(sink, self.closer)

    def refutes(self, opener: str, buf: str, pos: int) -> bool | None:
        """No call object, array or ``<function=`` block starts the body: the reader's ``not_a_call``."""
        return _jsonblock.refutes_start(buf, pos)
