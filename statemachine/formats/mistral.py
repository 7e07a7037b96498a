"""Mistral: ``[TOOL_CALLS]`` then a JSON array of call objects (v0.3, Nemo) or ``NAME[ARGS]{…}`` (v11+).

::

    [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "SF"}}]
    [TOOL_CALLS]get_weather[ARGS]{"city": "SF"}
    [TOOL_CALLS]get_weather{"city": "SF"}

Several v11 calls repeat ``[TOOL_CALLS]``; a ``[CALL_ID]id`` between the name
and ``[ARGS]`` (Magistral) is skipped. The blocks end by syntax alone.
Magistral's ``[THINK]`` … ``[/THINK]`` is reasoning; a block that is no call
goes back to text without its special tokens.
"""

from __future__ import annotations

import re

from .._jsonblock import JsonCallsBody
from .._scanning import WS, skip_ws
from .._reader import BodyReader, CallSink, MORE, Outcome
from ._base import compact_object
from ._tokens import HEADER_LIMIT, TokenCallsBody, TokenFormat, Tokens

OPENER = "[TOOL_CALLS]"
_HEADER = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*(?:\[CALL_ID\][^\[\]{}]*)?(?:\[ARGS\])?\s*")


def header_name(header: str) -> str | None:
    """The name in ``NAME[ARGS]``, ``NAME[CALL_ID]id[ARGS]`` or ``NAME``."""
    m = _HEADER.fullmatch(header)
    return m.group(1) if m else None


TOKENS = Tokens(call_begin="", header=header_name)


def refutes_body(buf: str, pos: int) -> bool | None:
    """What :class:`MistralBody` decides from the body's start: ``True`` when no JSON starts it and no
    ``NAME[ARGS]`` header comes before a ``{`` within the header's limit (``not_a_call``)."""
    start = skip_ws(buf, pos)
    if start == len(buf):
        return None
    if buf[start] in "[{":
        return False
    brace = buf.find("{", start, start + HEADER_LIMIT + 1)
    if brace == -1:
        return True if len(buf) - start > HEADER_LIMIT else None
    return header_name(buf[start:brace]) is None


class MistralBody:
    """Picks the reader once the first significant character shows the form: ``[``/``{`` JSON, else a name."""

    def __init__(self, sink: CallSink):
        self.sink = sink
        self.inner: BodyReader | None = None

    def feed(self, buf: str, pos: int) -> tuple[Outcome, int]:
        if self.inner is None:
            while pos < len(buf) and buf[pos] in WS:
                pos += 1
            if pos == len(buf):
                return MORE, pos
            if buf[pos] in "[{":
                self.inner = JsonCallsBody(self.sink, None)
            else:
                self.inner = TokenCallsBody(self.sink, TOKENS, in_call=True)
        return self.inner.feed(buf, pos)

    def at_eof(self) -> None:
        if self.inner is None:
            self.sink.call_abort("not_a_call", "the block ended before a call started")
        else:
            self.inner.at_eof()


class MistralFormat(TokenFormat):
    """Mistral's ``[TOOL_CALLS]`` calls (see the module docstring); renders the v11 ``NAME[ARGS]{…}`` form."""

    name = "mistral"
    model_names = ("mistral", "magistral", "devstral", "ministral")
    openers = (OPENER,)
    closer = ""
    reasoning_delimiters = ("[THINK]", "[/THINK]")
    call_tokens = (OPENER, "[ARGS]", "[CALL_ID]")
    tokens = TOKENS
    rules = (f"Start every call with {OPENER}, then the tool's exact name, then [ARGS], then the arguments.",)

    def render_call(self, name: str, arguments: str) -> str:
        return f"{OPENER}{name}[ARGS]{compact_object(arguments)}"

    def refutes(self, opener: str, buf: str, pos: int) -> bool | None:
        """No JSON and no ``NAME[ARGS]`` header before the arguments: the reader's ``not_a_call``."""
        return refutes_body(buf, pos)

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return MistralBody(sink)


