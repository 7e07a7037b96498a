"""The body-reader protocol: what a format's reader returns (:class:`Outcome`) and whom it reports to
(:class:`CallSink`); what a bare start returns while undecided (:class:`Pending`). Public through
:mod:`statemachine.formats`."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Protocol

if TYPE_CHECKING:
    from ._config import ParserConfig


class Outcome(enum.Enum):
    """What a body reader's ``feed`` found: the block goes on, or it ended."""

    #: The block goes on; the reader consumed up to the returned position.
    MORE = "more"
    #: The block ended at the returned position; the rest is text again.
    COMPLETE = "complete"


class Pending(enum.Enum):
    """What :meth:`~statemachine.formats.TextFormat.bare_start` returns while the text cannot tell yet."""

    #: The chunk ended before the text showed whether a call starts here: the core holds the text and asks
    #: again with the next chunk behind it.
    PARTIAL = "partial"


#: Shorthands for the readers' hot paths (a module global is one lookup, ``Outcome.MORE`` two).
MORE = Outcome.MORE
COMPLETE = Outcome.COMPLETE

#: One state's step in a reader that reads one method per state: the block's outcome, or ``None`` to read on;
#: and the position.
Step = tuple[Outcome | None, int]


class TableReader:
    """A body reader that reads one method per state (h11's ``READERS`` style): ``READERS[self.state]`` reads
    from a position and returns a :data:`Step`; ``feed`` reads on until a step has an outcome or the chunk ends.
    A subclass sets ``READERS`` (its table, built after the class) and keeps ``state`` in its slots."""

    __slots__ = ()
    READERS: ClassVar[Mapping[Any, Callable[[Any, str, int], Step]]]
    state: Any

    def feed(self, buf: str, pos: int) -> tuple[Outcome, int]:
        """Read ``buf[pos:]``: the block's outcome and the position after what was read."""
        readers = self.READERS
        n = len(buf)
        while pos < n:
            outcome, pos = readers[self.state](self, buf, pos)
            if outcome is not None:
                return outcome, pos
        return MORE, n


class CallSink(Protocol):
    """What a body reader reports to: the choice's call book, which applies policy and fires the machine.

    A reader describes what it finds, in order; it never decides whether a
    call is accepted and never emits events itself.

    Attributes:
        openers: every call opener of the request's formats; a reader that
            meets one where its syntax allows no text (outside JSON strings
            and values) should end its block there (case 14).
        config: the request's :class:`~statemachine.ParserConfig`.
    """

    openers: tuple[str, ...]
    config: ParserConfig

    def call_begin(self) -> None:
        """The next call of a block that holds several begins (the opener began the first)."""

    def call_name(self, name: str, *, kind: str = "function") -> None:
        """The call's complete name, and its kind (``function`` or ``custom``)."""

    def call_args(self, text: str) -> None:
        """The next fragment of the call's arguments (JSON object text) or custom input (raw text)."""

    def call_end(self, *, repaired: bool = False, invalid: bool = False) -> bool:
        """The call is complete and its block showed it is over; whether it was a call (``False``: disproved)."""

    def call_unclosed(self, *, repaired: bool = False, invalid: bool = False, tail: str = "") -> None:
        """The stream ended after a complete call whose block never closed; ``tail`` completes its arguments."""

    def call_invalid(self) -> None:
        """The body is malformed; a call whose header went out ends as invalid."""

    def call_abort(self, kind: str, message: str) -> None:
        """The block is not a call (``kind`` is a note kind, or ``not_a_call`` for no note)."""

    def drop_block(self, *, reasoning: bool = False) -> None:
        """The block is structure, not a call (a message header: Harmony's, Functionary's ``>>>all`` line): its
        text is dropped, and what follows is reasoning (``reasoning``, up to the closer of the format's
        :attr:`~statemachine.formats.TextFormat.reasoning_delimiters`) or visible text; visible text after
        visible text starts on a new line."""

    def call_incomplete(self) -> None:
        """The stream ended inside the call's body."""

    def note(self, kind: str, message: str) -> None:
        """Report a repair or a recoverable mistake (a ``ToolCallNote``)."""

    def schema_for(self, name: str | None) -> Mapping[str, Any] | None:
        """The JSON Schema of an offered tool's parameters."""

    def current_name(self) -> str | None:
        """The name of the call being read, once known."""


class BodyReader(Protocol):
    """Reads one block's body, from just after its opener, across chunks.

    ``feed(buf, pos)`` reads ``buf`` from ``pos`` and returns ``(outcome,
    end)``: :attr:`Outcome.MORE` with the position up to which it consumed
    (the scanner keeps ``buf[end:]``, a tag cut by the chunk's end, and hands
    it back in front of the next chunk), or :attr:`Outcome.COMPLETE` with the
    position where the block ended (the rest is read as text again).
    ``at_eof()`` is called when the stream ends inside the block. Work per
    chunk must stay O(len(chunk)): never re-read consumed text.

    A reader may also have ``argument_lane()`` (optional: the scanner looks it up), asked after a ``feed`` that
    consumed the whole chunk and sent argument text: ``None``, or a function that takes the next chunk and,
    when the chunk stays in the argument text the reader is in, reads it as ``feed`` would (its ``call_args``
    being the only report) and returns the text to send, else returns ``None`` and reads nothing. The scanner
    then sends that text itself, without feeding the reader (the arguments' path per chunk: inside a JSON
    string, a chunk is one regex match and one ``call_args``).
    """

    def feed(self, buf: str, pos: int) -> tuple[Outcome, int]:
        """Read ``buf[pos:]``; see the class docstring."""

    def at_eof(self) -> None:
        """The stream ended inside the block: end, recover or abandon its call."""
