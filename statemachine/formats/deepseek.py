"""DeepSeek V3, V3.1 and R1: calls in fullwidth special tokens (``<｜…｜>``, with ``▁`` for spaces).

V3.1 (the rendered form)::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜><｜tool▁calls▁end｜>

V3 and R1 put a type before the separator and the arguments in a code fence::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
    ```json
    {…}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

Both are read by one reader; a section holds one or more calls. A call
begun without the section token (``<｜tool▁call▁begin｜>`` alone) is read too.
The end-of-sentence token is dropped where it arrives as text, and a block
that is no call goes back to text without its special tokens.
"""

from __future__ import annotations

import re

from ._base import compact_object
from ._tokens import TokenFormat, Tokens

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
_NAME = re.compile(r"[^\s<>{}\[\]｜]+")
_FENCE = re.compile(r"```[a-z]*")


def header_name(header: str) -> str | None:
    """The name in ``NAME<｜tool▁sep｜>`` (V3.1) or ``function<｜tool▁sep｜>NAME```json`` (V3, R1)."""
    before, sep, after = header.partition(SEP)
    if not sep:
        return None
    after = _FENCE.sub("", after, count=1).strip()
    name = after if after else before.strip()
    if after and before.strip() not in ("", "function"):
        return None
    return name if _NAME.fullmatch(name) else None


TOKENS = Tokens(call_begin=CALL_BEGIN, header=header_name, skip=("```",), call_end=CALL_END, section_end=CALLS_END)


class DeepSeekFormat(TokenFormat):
    """DeepSeek V3 / V3.1 / R1 tool calls (see the module docstring); renders the V3.1 form."""

    name = "deepseek"
    model_names = ("deepseek",)
    openers = (CALLS_BEGIN, CALL_BEGIN)
    closer = CALLS_END
    end_tokens = ("<｜end▁of▁sentence｜>",)
    call_tokens = (CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP)
    tokens = TOKENS
    rules = (f"Write the tool's exact name, then {SEP}, then the arguments.",
             f"Several calls share one section: repeat {CALL_BEGIN}…{CALL_END} before {CALLS_END}.")

    def render_call(self, name: str, arguments: str) -> str:
        return f"{CALLS_BEGIN}{CALL_BEGIN}{name}{SEP}{compact_object(arguments)}{CALL_END}{CALLS_END}"




