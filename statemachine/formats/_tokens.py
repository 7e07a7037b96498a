"""The reader shared by the special-token families: a name header, one JSON object, then end tokens.

DeepSeek, Kimi K2 and Mistral v11 write each call as a header that names the
function, the arguments as one JSON object, and (for the sectioned families)
special tokens that end the call and the section::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜><｜tool▁calls▁end｜>

A :class:`Tokens` value names a family's tokens; :class:`TokenCallsBody`
reads one block of them. The header is everything up to the object's ``{``
(at most ``HEADER_LIMIT`` characters), so a header is held only until the
object starts; the family's ``header`` function turns it into the name (or
``None``: the block is not a call and is released as text). The arguments
then stream verbatim through the JSON value lexer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

from .._jsonlex import ValueLexer
from .._scanning import NON_WS, Stop, partial_at_end
from .._reader import BodyReader, CallSink, COMPLETE, MORE, Outcome, Step, TableReader
from ._base import TextFormat, call_instructions, end_calls_at_eof

HEADER_LIMIT = 256


@dataclass(frozen=True)
class Tokens:
    """A family's call tokens.

    Attributes:
        call_begin: starts each call inside a section (``""``: every call has its own opener).
        header: the name in a header (the text between the call's start and its ``{``), or ``None``.
        skip: literals allowed between the object and the call's end (e.g. a closing code fence).
        call_end: ends one call (``""``: the object's ``}`` ends it).
        section_end: ends the block (``""``: the block ends with its call).
    """

    call_begin: str
    header: Callable[[str], str | None]
    skip: tuple[str, ...] = ()
    call_end: str = ""
    section_end: str = ""


class ObjectArguments:
    """A body reader's arguments: one JSON object, streamed verbatim to the sink by :attr:`lexer`."""

    sink: CallSink
    lexer: ValueLexer | None
    repaired: bool
    invalid: bool

    def read_object(self, buf: str, pos: int) -> tuple[Outcome | None, int]:
        """Stream the object from ``buf[pos:]``: ``(MORE, end)`` to go on with the next chunk, ``(COMPLETE,
        end)`` when a call opener cut it (the call is aborted there), or ``(None, end)``: it closed just
        before ``end`` (``repaired`` and ``invalid`` say how it went; the lexer is let go)."""
        lexer = self.lexer
        assert lexer is not None
        text, end = lexer.feed(buf, pos)
        if text:
            self.sink.call_args(text)
        if end is None:
            return MORE, len(buf)
        if lexer.stopped is Stop.PARTIAL:
            return MORE, end
        if lexer.stopped is Stop.OPENER:
            self.sink.call_abort("invalid_json", "a new call began before this one was complete")
            return COMPLETE, end
        self.repaired, self.invalid = lexer.repaired, lexer.failed
        self.lexer = None
        return None, end


class TokenState(str, enum.Enum):
    """Where a :class:`TokenCallsBody` is in its block (a ``str`` enum: table lookups hash it in C)."""

    #: A section's start: a call's begin token follows.
    SECTION = "section"
    #: A call's header, up to its object.
    HEADER = "header"
    #: The call's JSON object.
    ARGS = "args"
    #: After a call: its end token, the next call, or the section's end.
    AFTER = "after"
    #: A malformed call, skipped to its end token.
    SKIP = "skip"


SECTION, HEADER, ARGS, AFTER, SKIP = TokenState


class TokenCallsBody(ObjectArguments, TableReader):
    """Reads one block of a token family from just after its opener.

    ``in_call`` says the opener began a call (its header follows) rather than
    a section (a ``call_begin`` token follows). A missing call-end token is
    forgiven when the next call or the section's end follows; anything else
    after a complete call ends the block there, and the text after it is
    text again. In a family whose calls end with a token, a call with a
    malformed header is skipped to its end (an ``invalid_json`` note) and the
    section goes on, so the calls after it still go out.
    """

    def __init__(self, sink: CallSink, tokens: Tokens, *, in_call: bool):
        self.sink = sink
        self.tokens = tokens
        self.state = HEADER if in_call else SECTION
        self.lexer: ValueLexer | None = None
        self.calls = 0  # calls whose header went out
        self.used = False  # the call the opener began has been named or dropped: the next needs call_begin
        self.pending = False  # a call whose object closed, not yet ended
        self.repaired = False
        self.invalid = False
        self.after = tuple(t for t in (*tokens.skip, tokens.call_end, tokens.call_begin, tokens.section_end) if t)

    @property
    def in_arguments(self) -> bool:
        """The reader is inside a call's arguments."""
        return self.state is ARGS

    # one method per state: each returns the block's outcome, or ``None`` and where to read on

    def _read_args(self, buf: str, pos: int) -> Step:
        """The call's JSON object, streamed."""
        status, end = self.read_object(buf, pos)
        if status is not None:
            return status, end
        self.pending = True
        if not self.after:  # the object was the call and the block
            self._end()
            return COMPLETE, end
        self.state = AFTER
        return None, end

    def _read_header(self, buf: str, pos: int) -> Step:
        """A call's header, up to its object's ``{``: the name, or a malformed call skipped to its end."""
        brace = buf.find("{", pos, pos + HEADER_LIMIT + 1)
        if brace == -1 and len(buf) - pos <= HEADER_LIMIT:
            return MORE, pos
        name = self.tokens.header(buf[pos:brace]) if brace != -1 else None
        if not name:
            if not self.tokens.call_end:
                return self._not_a_call(pos)
            self._begin()
            self.sink.call_abort("invalid_json", "a call's header is malformed; the call is dropped")
            self.state = SKIP
            return None, pos
        self._begin()
        self.calls += 1
        self.sink.call_name(name)
        self.lexer = ValueLexer(stops=self.sink.openers)
        self.state = ARGS
        return None, brace

    def _read_skip(self, buf: str, pos: int) -> Step:
        pos, skipped = self._skip(buf, pos)
        return skipped, pos

    def _read_tokens(self, buf: str, pos: int) -> Step:
        """In a section, or after a call: the next call, the section's end, or anything else ends the block."""
        m = NON_WS.search(buf, pos)
        if m is None:
            return MORE, len(buf)
        pos = m.start()
        token, cut = self._token_at(buf, pos)
        if cut is Stop.PARTIAL:
            return MORE, pos
        if token is None:
            if self.state is SECTION:  # a call without its begin token: its header is read as one
                self.state = HEADER
                return None, pos
            self._end()
            return COMPLETE, pos  # prose after the calls: the block ended without its end token
        pos += len(token)
        if token == self.tokens.call_begin:
            self._end()
            self.state = HEADER
        elif token == self.tokens.section_end:
            if not self.calls:
                return self._not_a_call(pos)
            self._end()
            return COMPLETE, pos
        return None, pos

    def _token_at(self, buf: str, pos: int) -> tuple[str | None, Stop | None]:
        tokens = self.after if self.state is AFTER else (self.tokens.call_begin, self.tokens.section_end)
        tail = buf[pos:pos + max(map(len, tokens))]
        for token in tokens:
            if token and tail.startswith(token):
                return token, None
        if any(token.startswith(tail) for token in tokens if token) and pos + len(tail) == len(buf):
            return None, Stop.PARTIAL
        return None, None

    def _skip(self, buf: str, pos: int) -> tuple[int, Outcome | None]:
        """Skip a dropped call's text up to its end token (or the next call's, or the section's end)."""
        tokens = self.tokens
        found = [(i, t) for t in (tokens.call_end, tokens.call_begin, tokens.section_end)
                 if t and (i := buf.find(t, pos)) != -1]
        if not found:
            return partial_at_end(buf, pos, self.after), MORE
        i, token = min(found)
        self.state = HEADER if token == tokens.call_begin else AFTER
        if token == tokens.section_end:  # the token is read again in AFTER: it ends the block
            return i, None
        return i + len(token), None

    def _begin(self) -> None:
        """Tell the sink a call begins, unless it is the one the opener began."""
        if self.used:
            self.sink.call_begin()
        self.used = True

    def _end(self) -> None:
        if self.pending:
            self.pending = False
            self.sink.call_end(repaired=self.repaired, invalid=self.invalid)

    def _not_a_call(self, pos: int) -> tuple[Outcome, int]:
        if self.calls:  # a later call's header is malformed: the calls before it stand
            self._end()
            return COMPLETE, pos
        self.sink.call_abort("not_a_call", "the block does not start a call")
        return COMPLETE, pos

    def at_eof(self) -> None:
        end_calls_at_eof(self, repaired=self.repaired, invalid=self.invalid)


class TokenFormat(TextFormat):
    """A family whose calls are written in special tokens: read by :class:`TokenCallsBody`.

    Subclasses set :attr:`tokens` and :attr:`rules`; ``openers[0]`` begins a
    section, any other opener begins a call.
    """

    #: The family's tokens.
    tokens: Tokens
    #: The family's own prompt rules, one line each.
    rules: tuple[str, ...] = ()

    def instructions(self, example_name: str, example_arguments: str) -> str:
        return call_instructions(self.render_call(example_name, example_arguments), (
            *self.rules, "Arguments are one JSON object with the tool's exact parameter names ({} when it takes "
                         "none); no code fence, no comments, nothing else inside the call."))

    def marked_openers(self, marker: str) -> dict[str, str]:
        """The first opener with the marker inside its closing bracket (``<|…|>`` tokens keep their ``|>``)."""
        first = self.openers[0]
        cut = 2 if first.endswith(("|>", "｜>")) else 1
        return {f'{first[:-cut]} marker="{marker}"{first[-cut:]}': first}

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return TokenCallsBody(sink, self.tokens, in_call=opener != self.openers[0] or not self.tokens.call_begin)


#: Each state's reader.
_READERS: dict[TokenState, Callable[[TokenCallsBody, str, int], Step]] = {
    SECTION: TokenCallsBody._read_tokens,
    HEADER: TokenCallsBody._read_header,
    ARGS: TokenCallsBody._read_args,
    AFTER: TokenCallsBody._read_tokens,
    SKIP: TokenCallsBody._read_skip,
}
TokenCallsBody.READERS = _READERS
