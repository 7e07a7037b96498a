"""Seed-OSS: format C (``<function=NAME><parameter=K>V</parameter></function>``) inside ``<seed:tool_call>``.

::

    <seed:tool_call>
    <function=get_weather>
    <parameter=location>Barcelona, Spain</parameter>
    </function>
    </seed:tool_call>

The block's body is read as ``<tool_call>``'s is, so a JSON call object in
the tags is read too. ``<seed:think>`` … ``</seed:think>`` is reasoning, and
``<seed:eos>`` arriving as text is dropped.
"""

from __future__ import annotations

from .._jsonblock import JsonCallsBody
from .._reader import BodyReader, CallSink
from ._base import TextFormat, call_instructions
from .function import FunctionFormat

OPENER = "<seed:tool_call>"
CLOSER = "</seed:tool_call>"


class SeedOssFormat(TextFormat):
    """Seed-OSS tool calls (see the module docstring)."""

    name = "seed_oss"
    model_names = ("seed-oss",)
    openers = (OPENER,)
    closer = CLOSER
    end_tokens = ("<seed:eos>",)
    reasoning_delimiters = ("<seed:think>", "</seed:think>")

    def render_call(self, name: str, arguments: str) -> str:
        return f"{OPENER}\n{FunctionFormat().render_call(name, arguments)}\n{CLOSER}"

    def instructions(self, example_name: str, example_arguments: str) -> str:
        return call_instructions(self.render_call(example_name, example_arguments), (
            f"Wrap each call in {OPENER} … {CLOSER}, with <function=NAME> (the tool's exact name) inside.",
            "Inside <function=NAME> write the arguments as one JSON object with the tool's exact parameter names "
            "({} when it takes none), then </function>.",
            "Write each call as its own block; nothing else inside it."))

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return JsonCallsBody(sink, CLOSER)
