"""Gemma 4: FunctionGemma's ``call:NAME{…}`` syntax in ``<|tool_call>`` … ``<tool_call|>``, strings between ``<|"|>``.

::

    <|tool_call>call:get_weather{location:<|"|>Paris<|"|>,days:3}<tool_call|>

The arguments are read by FunctionGemma's reader
(:class:`~statemachine.formats.gemma.GemmaCallBody`): bare keys, strings
verbatim between two ``<|"|>`` tokens, other values JSON-like; each pair goes
out when its value is complete. A tool result is written back as the template
writes it, ``<|tool_response>response:NAME{value:<|"|>…<|"|>}<tool_response|>``.
The thought channel, ``<|channel>thought\n…<channel|>``, is reasoning; the
end of a turn (``<turn|>``) and the ``<|tool_response>`` a model writes after
its calls are dropped where they arrive as text.
"""

from __future__ import annotations

from .gemma import FunctionGemmaFormat

DELIM = '<|"|>'


class Gemma4Format(FunctionGemmaFormat):
    """Gemma 4 tool calls (see the module docstring)."""

    name = "gemma4"
    model_names = ("gemma-4",)
    openers = ("<|tool_call>",)
    closer = "<tool_call|>"
    delim = DELIM
    reasoning_delimiters = ("<|channel>", "<channel|>")
    end_tokens = ("<turn|>", "<|tool_response>")

    def render_result(self, name: str | None, result: str) -> str | None:
        return f"<|tool_response>response:{name or 'unknown'}{{value:{DELIM}{result}{DELIM}}}<tool_response|>"
