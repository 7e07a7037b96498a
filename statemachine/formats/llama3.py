"""Llama 3.1–3.3: ``<|python_tag|>`` then JSON call objects with ``parameters`` (or ``arguments``).

::

    <|python_tag|>{"name": "get_weather", "parameters": {"city": "SF"}}<|eom_id|>

Several calls are separated by ``;``. The same objects without the tag, at the
start of a message, are read by the bare-JSON rule of every request. The
end-of-message and end-of-turn tokens (``<|eom_id|>`` after calls,
``<|eot_id|>``) are dropped wherever they arrive as text.
"""

from __future__ import annotations

import json

from .._jsonblock import JsonCallsBody
from .._reader import BodyReader, CallSink
from ._base import TextFormat, call_instructions, compact_object

OPENER = "<|python_tag|>"


class Llama3Format(TextFormat):
    """Llama 3.x JSON tool calls after ``<|python_tag|>`` (see the module docstring)."""

    name = "llama3"
    model_names = ("llama-3",)
    openers = (OPENER,)
    end_tokens = ("<|eom_id|>", "<|eot_id|>")

    def render_call(self, name: str, arguments: str) -> str:
        return f'{OPENER}{{"name": {json.dumps(name, ensure_ascii=False)}, "parameters": {compact_object(arguments)}}}'

    def instructions(self, example_name: str, example_arguments: str) -> str:
        return call_instructions(self.render_call(example_name, example_arguments), (
            f'Start with {OPENER}, then one JSON object with "name" (the tool\'s exact name) and "parameters" '
            "(a JSON object with the tool's exact parameter names; {} when it takes none).",
            "Several calls: separate the objects with ; after one tag.",
            "No code fence, no comments, nothing else after the tag."))

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return JsonCallsBody(sink, None)
