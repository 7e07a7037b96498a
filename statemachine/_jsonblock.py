"""The JSON call block reader: one or more call objects, an array of them, or a ``<function=…>`` block.

:class:`JsonCallsBody` is public as ``statemachine.formats.JsonCallsReader``: a
registered format whose block holds JSON call objects reuses it.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Callable, ClassVar

from ._jsoncall import JsonCallParser
from ._reader import COMPLETE, MORE, Outcome, Step, TableReader
from ._scanning import FUNCTION_OPENERS, NON_WS, Stop, skip_to
from ._shown import BEFORE, shown_after

if TYPE_CHECKING:
    from ._reader import BodyReader, CallSink


class JsonBlockState(str, enum.Enum):
    """Where a :class:`JsonCallsBody` is in its block (a ``str`` enum: table lookups hash it in C)."""

    #: Before the first call.
    START = "start"
    #: In a call object (a :class:`~statemachine._jsoncall.JsonCallParser` reads it).
    OBJECT = "object"
    #: In a ``<function=…>`` block (format C's reader reads it).
    FUNCTION = "function"
    #: After a call, or between an array's elements.
    BETWEEN = "between"
    #: A malformed call, skipped to the closer.
    SKIP = "skip"
    #: Bare arguments alone that fit the one tool: its call if nothing but whitespace follows to the end.
    DEFER = "defer"


START, OBJECT, FUNCTION, BETWEEN, SKIP, DEFER = JsonBlockState



def _skip_ws(buf: str, pos: int) -> int:
    m = NON_WS.search(buf, pos)
    return len(buf) if m is None else m.start()


def function_opener_at(buf: str, pos: int) -> str | None:
    """The ``<function=…>`` opener at ``buf[pos]``; ``""`` while ``buf[pos:]`` may still become one; else ``None``."""
    opener = next((op for op in FUNCTION_OPENERS if buf.startswith(op, pos)), None)
    if opener is None and any(op.startswith(buf[pos:]) for op in FUNCTION_OPENERS):
        return ""
    return opener


def refutes_start(buf: str, pos: int) -> bool | None:
    """What a (non-bare) block's start ``buf[pos:]`` shows, as ``TextFormat.refutes`` answers: ``True`` when
    :meth:`JsonCallsBody._read_start` would release it as no call (no object, array or ``<function=``)."""
    pos = _skip_ws(buf, pos)
    if pos == len(buf):
        return None
    ch = buf[pos]
    if ch in "{[":
        return False
    if ch == "<":
        opener = function_opener_at(buf, pos)
        if opener is not None:
            return None if opener == "" else False
    return True


class JsonCallsBody(TableReader):
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

    #: Reads a ``<function=…>`` block in the block (``(sink, closer)``): format C's reader, which
    #: :mod:`.formats.function` lends it (the formats import this module, never the other way round).
    function_body: ClassVar[Callable[[CallSink, str | None], BodyReader]]

    def __init__(self, ctx: CallSink, closer: str | None, *, bare: bool = False, by_fit: bool = False):
        self.ctx = ctx
        self.closer = closer
        self.bare = bare
        self.by_fit = by_fit  # a name-less object is the call of the one tool it fits (a held block found it is)
        self.state = START
        self.parser: JsonCallParser | None = None
        self.inner: BodyReader | None = None
        self.in_array = False
        self.calls = 0
        self.stray_dropped = False
        self.ending: tuple[bool, bool] | None = None  # (repaired, invalid) of a closed, not yet ended call
        self.deferred: tuple[str, str] | None = None  # (name, arguments) of bare arguments alone (DEFER)
        self.after = ""  # the line after them, so far

    # one method per state: each returns the block's outcome, or ``None`` and where to read on

    def _read_start(self, buf: str, pos: int) -> Step:
        """Before the first call: an object, an array of them, or a ``<function=…>`` block (Qwen3-Coder)."""
        pos = _skip_ws(buf, pos)
        if pos == len(buf):
            return MORE, pos
        ch = buf[pos]
        if ch == "{":
            return self._object_starts(pos)
        if ch == "[":
            self.in_array = True
            self.state = BETWEEN
            return None, pos + 1
        if ch == "<" and not self.bare:
            opener = function_opener_at(buf, pos)
            if opener:
                self.inner = JsonCallsBody.function_body(self.ctx, self.closer)
                self.state = FUNCTION
                return None, pos + len(opener)
            if opener is not None:
                return MORE, pos
        self.ctx.call_abort("not_a_call", "the block does not start a call")
        return COMPLETE, pos

    def feed(self, buf: str, pos: int) -> tuple[Outcome, int]:
        """Read ``buf[pos:]``; a call object's parser is called from here, never from the table: the arguments'
        path per chunk, and two frames less under all it reports (a stream's deepest stack is resident in every
        open stream: docs/upstream-client.md)."""
        while True:
            if self.state is OBJECT:
                parser = self.parser
                assert parser is not None
                status, pos = parser.feed(buf, pos)
                if status is MORE or status is Stop.PARTIAL:
                    return MORE, pos
                outcome, pos = self._object_read(parser, status, pos)
                if outcome is not None:
                    return outcome, pos
            outcome, pos = TableReader.feed(self, buf, pos)
            if self.state is not OBJECT:  # else an object began: its parser reads on, above
                return outcome, pos

    def argument_lane(self) -> Callable[[str], str | None] | None:
        """In a call object: its parser's (see ``BodyReader.argument_lane``)."""
        return self.parser.argument_lane() if self.state is OBJECT and self.parser is not None else None

    def _object_read(self, parser: JsonCallParser, status: Outcome | Stop | None, pos: int) -> Step:
        """The call object ended (``status``) at ``pos``: the block goes on after it, or ends if it broke."""
        self.parser = None
        self.calls += 1
        self.state = BETWEEN
        if status is Stop.OPENER:
            self.ctx.call_abort("invalid_json", "a new call began before this one was complete")
            return COMPLETE, pos
        if status is Stop.INVALID:
            return self._invalid_call(pos)
        complete = parser.complete()
        if parser.fitting is not None:
            self.deferred, self.state = parser.fitting, DEFER
            return None, pos
        if complete:
            self.ending = (parser.repaired, parser.invalid)
        if self.bare and not (complete and self._end_call()):
            return COMPLETE, pos  # bare JSON that is no call: the block, text, ends with it (what follows is prose)
        return None, pos

    def _read_function(self, buf: str, pos: int) -> Step:
        """In a ``<function=…>`` block: format C's reader reads it."""
        inner = self.inner
        assert inner is not None
        outcome, pos = inner.feed(buf, pos)
        if outcome is MORE:
            return MORE, pos
        self.inner = None
        self.calls += 1
        self.state = BETWEEN
        return None, pos

    def _read_between(self, buf: str, pos: int) -> Step:
        """After a call, or between an array's elements: the next call, a separator, the closer or the end."""
        n = len(buf)
        pos = _skip_ws(buf, pos)
        if pos == n:
            return MORE, pos
        ch = buf[pos]
        if ch == "{":
            return self._object_starts(pos)
        # one stray '}', ']' (or, in a tag, '>') after the calls is dropped: a model's miscounted brackets
        if ch in ("}]" if self.bare else "}]>") and not self.stray_dropped and not (ch == "]" and self.in_array):
            self.stray_dropped = True
            self.ctx.note("repaired", f"stray {ch!r} after the call dropped")
            return None, pos + 1
        tag_end = buf.find(">", pos) if ch == "<" and self.closer else -1
        if ch == "<" and self.closer and tag_end == -1 and n - pos <= 32:
            return MORE, pos  # a tag still arriving: the closer, or what comes next
        self._end_call()  # anything else shows the call object was the whole call
        if ch in ",;" or (ch == "]" and self.in_array):
            self.in_array = self.in_array and ch != "]"
            return None, pos + 1
        if tag_end != -1 and buf.startswith("</", pos):
            return self._closed(buf[pos:tag_end + 1], tag_end + 1)
        return self._ended(pos)  # a new opener, any other tag or prose: the block ended without its closer

    def _read_defer(self, buf: str, pos: int) -> Step:
        """After bare arguments alone: under ``auto`` any text after them shows they were shown, not called; under a
        forced choice the line after them must not say so (``_shown``). The end names them."""
        start, n = _skip_ws(buf, pos), len(buf)
        if start == n:
            return MORE, pos
        if self.ctx.config.tool_choice.mode == "required":
            line_end = buf.find("\n", start)
            if line_end == -1 and n - start <= BEFORE:
                self.after = buf[start:]
                return MORE, pos  # the line after them is still arriving
            self.after = buf[start:n if line_end == -1 else line_end]
            if not shown_after(self.after):
                self._name_deferred()
                return COMPLETE, start
        self.deferred = None
        self.ctx.call_abort("not_a_call", "arguments alone, with text after them")
        return COMPLETE, start

    def _name_deferred(self) -> None:
        """Bare arguments alone are the call of the one tool they fit (a repair)."""
        assert self.deferred is not None
        name, arguments = self.deferred
        self.deferred = None
        self.ctx.call_name(name)
        self.ctx.call_args(arguments)
        self.ctx.call_end(repaired=True)

    def _read_skip(self, buf: str, pos: int) -> Step:
        """A malformed call: skipped to the block's closer (or a new call's opener), then it is no call."""
        assert self.closer is not None
        hit, end = skip_to(buf, pos, self.closer, self.ctx.openers)
        if hit is None:
            return MORE, end
        self.ctx.call_abort("invalid_json", "the call body is not valid JSON")
        return COMPLETE, end

    # transitions between the states

    def _object_starts(self, pos: int) -> Step:
        if self.calls:  # the opener began the first call; later ones begin here
            self._end_call()
            self.ctx.call_begin()
        self.parser = JsonCallParser(self.ctx, bare=self.bare, by_fit=self.by_fit)
        self.state = OBJECT
        return MORE, pos  # feed reads the object on

    def _invalid_call(self, pos: int) -> Step:
        """The call object broke its grammar: the block ends, or a lone call in tags is skipped to the closer."""
        if self.bare or self.calls > 1 or not self.closer:
            self.ctx.call_abort("invalid_json", "the call body is not valid JSON")
            return COMPLETE, pos
        self.state = SKIP
        self.ctx.call_invalid()
        return None, pos

    def _closed(self, tag: str, end: int) -> Step:
        """A closing tag after the calls ends the block (a mismatched one is accepted, and noted)."""
        if not self.calls:  # ``[`` or ``[]``, then a closer: the block held no call
            return self._ended(end)
        if tag != self.closer:
            self.ctx.note("repaired", f"mismatched closer {tag!r} accepted")
        return COMPLETE, end

    def _end_call(self) -> bool:
        """End the call whose object closed, now that the block is known to go on or end; whether it was a call."""
        if self.ending is None:
            return False
        repaired, invalid = self.ending
        self.ending = None
        return self.ctx.call_end(repaired=repaired, invalid=invalid)

    def _ended(self, pos: int) -> tuple[Outcome, int]:
        """The block ends at ``pos``; if no call was parsed in it (``[`` then prose), it was text."""
        if not self.calls:
            self.ctx.call_abort("not_a_call", "the block holds no call")
        return COMPLETE, pos

    def at_eof(self) -> None:
        if self.deferred is not None:  # the answer ends with them (and, forced, a line that says nothing against)
            if shown_after(self.after):
                self.ctx.call_abort("not_a_call", "arguments alone, with text after them")
            else:
                self._name_deferred()
        elif self.parser is not None:
            self.ctx.call_incomplete()
        elif self.inner is not None:
            self.inner.at_eof()
        elif self.state is SKIP:
            self.ctx.call_abort("invalid_json", "the call body is not valid JSON")
        elif self.state is START or not self.calls:
            self.ctx.call_abort("invalid_json", "the block ended before a call started")
        elif self.ending is not None:
            repaired, invalid = self.ending
            self.ending = None
            self.ctx.call_unclosed(repaired=repaired, invalid=invalid)
        elif self.closer:
            self.ctx.note("recovered_unclosed", "the call had no closer; its JSON was complete")


#: Each state's reader.
_READERS: dict[JsonBlockState, Callable[[JsonCallsBody, str, int], Step]] = {
    START: JsonCallsBody._read_start,
    FUNCTION: JsonCallsBody._read_function,
    BETWEEN: JsonCallsBody._read_between,
    SKIP: JsonCallsBody._read_skip,
    DEFER: JsonCallsBody._read_defer,
}
JsonCallsBody.READERS = _READERS
