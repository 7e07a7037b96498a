"""Format A: ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` (Hermes, Qwen; the default)."""

from __future__ import annotations

import json
from typing import Sequence

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

    def bare_instructions(self, calls: Sequence[tuple[str, str]]) -> str | None:
        """One JSON list of the calls, shown with two or three calls of the request's own tools.

        Measured on ``make bench-bfcl`` (Qwen2.5-Coder-0.5B, issue 38): such a model never writes the
        ``<tool_call>`` wrapper (a special token of its family it does not emit when only told about it); it writes
        a bare JSON call or list, which the core reads at the message's start. Taught one call per block, or a list
        shown with one call, it wrote one call where several were asked; a worked example with a made-up tool was
        copied (its calls, and ``get_``-names for the offered tools); BFCL's abstract two-call shape
        (``tool_name1``) got 3 of 24 parallel cases right, two calls of the offered tools 8, and the same list
        written one call a line 12: a call's line ending in a comma, the model writes the next one.
        """
        listed = ",\n".join(f'{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {compact_object(arguments)}}}'
                             for name, arguments in calls)
        return (
            f"To call tools, reply with only a JSON list of the calls, for example:\n[\n{listed}\n]\n"
            "- Write one call for each thing the request asks for: two cities, two values or two tasks are two "
            "calls, even of the same tool.\n"
            "- Each call's arguments are its tool's parameters with the values from the request.\n"
            "- Nothing else: no code fence, no comment, no text around the list.\n"
            "- If no tool fits the request, answer in plain text without any call."
        )

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return _jsonblock.JsonCallsBody(sink, self.closer)

    def refutes(self, opener: str, buf: str, pos: int) -> bool | None:
        """No call object, array or ``<function=`` block starts the body: the reader's ``not_a_call``."""
        return _jsonblock.refutes_start(buf, pos)
