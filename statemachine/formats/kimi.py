"""Kimi K2: calls in a section of special tokens, each named ``functions.NAME:IDX``.

::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "SF"}<|tool_call_end|><|tool_calls_section_end|>

The ``functions.`` prefix and the ``:IDX`` suffix are dropped from the name;
the plural section tokens (``<|tool_calls_section_begin|>``) some checkpoints
write are read too. The end-of-turn token (``<|im_end|>``) is dropped where
it arrives as text, and a block that is no call goes back to text without
its special tokens.
"""

from __future__ import annotations

import re

from ._base import compact_object
from ._tokens import TokenFormat, Tokens

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
CALL_END = "<|tool_call_end|>"
ARGS_BEGIN = "<|tool_call_argument_begin|>"
_HEADER = re.compile(r"\s*(?:functions\.)?([A-Za-z_][\w.\-]*?)(?::\d+)?\s*<\|tool_call_argument_begin\|>\s*")


def header_name(header: str) -> str | None:
    """The name in ``functions.NAME:IDX<|tool_call_argument_begin|>``."""
    m = _HEADER.fullmatch(header)
    return m.group(1) if m else None


TOKENS = Tokens(call_begin=CALL_BEGIN, header=header_name, call_end=CALL_END, section_end=SECTION_END)


class KimiFormat(TokenFormat):
    """Kimi K2 tool-call tokens (see the module docstring)."""

    name = "kimi_k2"
    model_names = ("kimi",)
    openers = (SECTION_BEGIN, CALL_BEGIN)
    closer = SECTION_END
    end_tokens = ("<|im_end|>",)
    call_tokens = (SECTION_BEGIN, SECTION_END, CALL_BEGIN, CALL_END, ARGS_BEGIN)
    tokens = TOKENS
    rules = (f"Each call is {CALL_BEGIN}functions.NAME:INDEX{ARGS_BEGIN}, the arguments, {CALL_END}; "
             "INDEX counts the calls from 0.",
             f"Put all calls of one turn in one section, between {SECTION_BEGIN} and {SECTION_END}.")

    def render_call(self, name: str, arguments: str) -> str:
        return (f"{SECTION_BEGIN}{CALL_BEGIN}functions.{name}:0{ARGS_BEGIN}{compact_object(arguments)}"
                f"{CALL_END}{SECTION_END}")

