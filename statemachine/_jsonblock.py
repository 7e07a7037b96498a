"""The JSON call block reader: one or more call objects, an array of them, or a ``<function=…>`` block.

:class:`JsonCallsBody` is public as ``statemachine.formats.JsonCallsReader``: a
registered format whose block holds JSON call objects reuses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._jsoncall import JsonCallParser
from ._reader import DONE, MORE, Outcome
from ._scanning import WS as _WS, Stop, skip_to

if TYPE_CHECKING:
    from ._reader import CallSink
    from .formats.function import FunctionBody


class JsonCallsBody:
    """Body of ``<tool_call>`` (and of a bare JSON call at message start).

    Accepts one object, several objects (``{…}{…}``, ``{…}; {…}``), an array of
    call objects, or a ``<function=…>`` block (Qwen3-Coder). After the calls, the
    closer (or a mismatched ``</…>`` closer) ends the block; a stray ``}``,
    ``]`` or ``>`` is dropped; a new opener or prose ends it implicitly. A new
    opener inside an unfinished object interrupts it (case 14).

    A call object that closed is ended only once what follows shows the block
    went on (the closer, a separator, the next call, prose): at the end of the
    stream it is an unclosed block, which an upstream ``length`` makes
    unusable (4.11). Bare JSON has no closer, so its calls end at once.

    ``closer`` ``None`` reads a block that ends by syntax alone (a registered
    format such as Mistral's ``[TOOL_CALLS][…]``): it ends at the first text
    that is no call, separator or array end.
    """

    def __init__(self, ctx: CallSink, closer: str | None, *, bare: bool = False):
        self.ctx = ctx
        self.closer = closer
        self.bare = bare
        self.state = "start"
        self.parser: JsonCallParser | None = None
        self.inner: FunctionBody | None = None
        self.in_array = False
        self.calls = 0
        self.stray_dropped = False
        self.ending: tuple[bool, bool] | None = None  # (repaired, invalid) of a closed, not yet ended call

    def feed(self, buf: str, pos: int) -> tuple[Outcome, int]:
        n = len(buf)
        while pos < n:
            if self.parser is not None:
                result = self.parser.feed(buf, pos)
                if result is None:
                    return MORE, n
                status, pos = result
                if status is Stop.PARTIAL:
                    return MORE, pos
                parser, self.parser = self.parser, None
                self.calls += 1
                if status is Stop.OPENER:
                    self.ctx.call_abort("invalid_json", "a new call began before this one was complete")
                    return DONE, pos
                if status is Stop.INVALID:
                    if self.bare or self.calls > 1 or not self.closer:
                        self.ctx.call_abort("invalid_json", "the call body is not valid JSON")
                        return DONE, pos
                    self.state = "skip_to_closer"
                    self.ctx.call_invalid()
                    continue
                self.state = "after"
                if parser.complete():
                    self.ending = (parser.repaired, parser.invalid)
                    if self.bare:
                        self._end_call()
                continue
            if self.inner is not None:
                status, pos = self.inner.feed(buf, pos)
                if status == MORE:
                    return MORE, pos
                self.inner = None
                self.calls += 1
                self.state = "after"
                continue
            state = self.state
            if state == "skip_to_closer":
                hit, end = skip_to(buf, pos, self.closer, self.ctx.openers)
                if hit is None:
                    return MORE, end
                self.ctx.call_abort("invalid_json", "the call body is not valid JSON")
                return DONE, end
            ch = buf[pos]
            if ch in _WS:
                pos += 1
                continue
            if ch == "{":
                if self.calls:  # the opener began the first call; later ones begin here
                    self._end_call()
                    self.ctx.call_begin()
                self.parser = JsonCallParser(self.ctx, bare=self.bare)
                continue
            if state == "start":
                if ch == "[":
                    self.in_array = True
                    self.state = "array"
                    pos += 1
                    continue
                if ch == "<" and not self.bare:  # a format C block inside the tags (Qwen3-Coder)
                    from .formats.function import OPENERS, FunctionBody  # the formats package imports this module

                    opener = next((op for op in OPENERS if buf.startswith(op, pos)), None)
                    if opener is not None:
                        self.inner = FunctionBody(self.ctx, self.closer)
                        pos += len(opener)
                        continue
                    if any(op.startswith(buf[pos:]) for op in OPENERS):
                        return MORE, pos
                self.ctx.call_abort("not_a_call", "the block does not start a call")
                return DONE, pos
            # after a call, or between array elements
            # one stray '}', ']' (or, in a tag, '>') after the calls is dropped: a model's miscounted brackets
            if ch in ("}]" if self.bare else "}]>") and not self.stray_dropped and not (ch == "]" and self.in_array):
                self.stray_dropped = True
                self.ctx.note("repaired", f"stray {ch!r} after the call dropped")
                pos += 1
                continue
            if ch == "<" and self.closer:
                end = buf.find(">", pos)
                if end == -1 and n - pos <= 32:
                    return MORE, pos  # a tag still arriving: the closer, or what comes next
            self._end_call()  # anything else shows the call object was the whole call
            if ch in ",;":
                pos += 1
                continue
            if ch == "]" and self.in_array:
                self.in_array = False
                pos += 1
                continue
            if ch == "<" and self.closer and end != -1:
                tag = buf[pos:end + 1]
                if tag.startswith("</"):
                    if not self.calls:  # ``[`` or ``[]``, then a closer: the block held no call
                        return self._ended(end + 1)
                    if tag != self.closer:
                        self.ctx.note("repaired", f"mismatched closer {tag!r} accepted")
                    return DONE, end + 1
            return self._ended(pos)  # a new opener, any other tag or prose: the block ended without its closer
        return MORE, n

    def _end_call(self) -> None:
        """End the call whose object closed, now that the block is known to go on or end."""
        if self.ending is not None:
            repaired, invalid = self.ending
            self.ending = None
            self.ctx.call_end(repaired=repaired, invalid=invalid)

    def _ended(self, pos: int) -> tuple[Outcome, int]:
        """The block ends at ``pos``; if no call was parsed in it (``[`` then prose), it was text."""
        if not self.calls:
            self.ctx.call_abort("not_a_call", "the block holds no call")
        return DONE, pos

    def at_eof(self) -> None:
        if self.parser is not None:
            self.ctx.call_incomplete()
        elif self.inner is not None:
            self.inner.at_eof()
        elif self.state == "skip_to_closer":
            self.ctx.call_abort("invalid_json", "the call body is not valid JSON")
        elif self.state == "start" or not self.calls:
            self.ctx.call_abort("invalid_json", "the block ended before a call started")
        elif self.ending is not None:
            repaired, invalid = self.ending
            self.ending = None
            self.ctx.call_unclosed(repaired=repaired, invalid=invalid)
        elif self.closer:
            self.ctx.note("recovered_unclosed", "the call had no closer; its JSON was complete")
