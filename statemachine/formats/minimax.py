"""MiniMax M1/M2: ``<minimax:tool_call>`` holding ``<invoke name=…>`` calls with ``<parameter name=…>`` values.

::

    <minimax:tool_call>
    <invoke name="get_weather">
    <parameter name="city">Paris</parameter>
    </invoke>
    </minimax:tool_call>

Several ``<invoke>`` share one block. Values are raw text typed by the
tool's schema, as GLM's are (:class:`~statemachine.formats.glm.GlmBody`).
"""

from __future__ import annotations

import re

from .._reader import BodyReader, CallSink
from ._base import TextFormat, call_instructions
from .glm import GlmBody, render_pairs

OPENER = "<minimax:tool_call>"
CLOSER = "</minimax:tool_call>"


class MiniMaxBody(GlmBody):
    """GLM's key/value reader with MiniMax's tags: calls start at ``<invoke name="`` and end at ``</invoke>``."""

    KEY, KEY_END, VALUE, VALUE_END, CALL_END = '<parameter name="', '">', "", "</parameter>", "</invoke>"
    NAME_START = '<invoke name="'
    NAME_END = re.compile(r'"\s*>')
    SECTION_END = CLOSER


class MiniMaxFormat(TextFormat):
    """MiniMax tool calls (see the module docstring)."""

    name = "minimax"
    model_names = ("minimax",)
    openers = (OPENER,)
    closer = CLOSER

    def render_call(self, name: str, arguments: str) -> str:
        body = render_pairs(arguments, '<parameter name="', '">', "</parameter>")
        return f'{OPENER}\n<invoke name="{name}">\n{body}</invoke>\n{CLOSER}'

    def instructions(self, example_name: str, example_arguments: str) -> str:
        return call_instructions(self.render_call(example_name, example_arguments), (
            f'Put each call in <invoke name="NAME"> … </invoke> (the tool\'s exact name); several calls share one '
            f"{OPENER} … {CLOSER} block.",
            'Write one <parameter name="KEY">VALUE</parameter> per argument with the tool\'s exact parameter names; '
            "strings as they are (no quotes), other values as JSON."))

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return MiniMaxBody(sink)
