"""gpt-oss Harmony: messages with a header (role, channel, recipient) between special tokens.

::

    <|channel|>analysis<|message|>…reasoning…<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "SF"}<|call|>
    <|start|>assistant<|channel|>final<|message|>…the answer…<|return|>

A back end that keeps special tokens shows all of this as text. Every
``<|start|>`` or ``<|channel|>`` opens a block whose reader holds the header up
to ``<|message|>`` and then decides what the message is:

* a recipient (``to=functions.NAME``, before or after the channel, on any
  channel) makes it a call to ``NAME``: the body is the arguments, one JSON
  object streamed verbatim, ended by ``<|call|>`` (or ``<|end|>``,
  ``<|return|>``, the next message's header, or the stream's end);
* the ``analysis`` channel is reasoning, up to ``<|end|>``;
* ``final``, and ``commentary`` without a recipient (a preamble), are visible
  text; a message after visible text starts on a new line;
* a message addressed ``to=assistant`` (a tool's reply the model imitates) is
  dropped whole.

Headers never reach the content: the reader drops them (``drop_block``);
``<|end|>`` is the closer of the format's reasoning delimiters, ``<|return|>``
and ``<|call|>`` are its end tokens, and all three are dropped in text. The first
message of a reply may put its recipient in the role header the prompt began,
``␣to=functions.NAME<|channel|>commentary json<|message|>…``: at the reply's
start such a header is read without an opener (``bare_start``).
"""

from __future__ import annotations

import enum
import re
from typing import Callable, Literal

from .._jsonlex import ValueLexer
from .._scanning import Stop, opener_at, partial_at_end, skip_ws
from .._reader import BodyReader, CallSink, COMPLETE, MORE, Outcome, Pending, Step, TableReader
from ._base import TextFormat, _MarkedFormat, call_instructions, compact_object
from ._tokens import ObjectArguments

START, CHANNEL, MESSAGE, CONSTRAIN = "<|start|>", "<|channel|>", "<|message|>", "<|constrain|>"
END, RETURN, CALL = "<|end|>", "<|return|>", "<|call|>"
TO_FUNCTIONS = "to=functions."
HEADER_LIMIT = 256
_TOKEN = re.compile(r"<\|(\w+)\|>")
_HEADER_TOKENS = frozenset(("start", "channel", "constrain"))
_CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)")
_RECIPIENT = re.compile(r"(?:^|\s|\|>)to=([^\s<]+)")
_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
#: What ends a call's arguments; a header after them (``<|start|>``, ``<|channel|>``) ends it too, unconsumed.
_ENDS = (CALL, END, RETURN)
_AFTER = (*_ENDS, START, CHANNEL)


def parse_header(header: str) -> tuple[str | None, str | None] | None:
    """The ``(channel, recipient)`` of a message header (opener included, ``<|message|>`` excluded), or
    ``None`` when it is no header (another special token, or a stray ``<``, stands in it)."""
    if any(m.group(1) not in _HEADER_TOKENS for m in _TOKEN.finditer(header)) or "<" in _TOKEN.sub(" ", header):
        return None
    channel = _CHANNEL.search(header)
    recipient = _RECIPIENT.search(header)
    return (channel.group(1) if channel else None), (recipient.group(1) if recipient else None)


class HarmonyState(str, enum.Enum):
    """Where a :class:`HarmonyBody` is in its message (a ``str`` enum: table lookups hash it in C)."""

    #: The header, up to ``<|message|>``.
    HEADER = "header"
    #: A call's body: its arguments' object, or an end token with none.
    BODY = "body"
    #: The call's JSON object.
    ARGS = "args"
    #: After the object: an end token, a header, or text.
    AFTER = "after"
    #: A message that is not shown (a tool's reply the model imitates), read to its end.
    SKIP = "skip"
    #: Arguments that are no JSON object, read to their end.
    RAW = "raw"


HEADER, BODY, ARGS, AFTER, SKIP, RAW = HarmonyState


class HarmonyBody(ObjectArguments, TableReader):
    """Reads one Harmony message from its opener: the header, then a call's arguments (or nothing)."""

    def __init__(self, sink: CallSink, opener: str, *, calls: bool = True):
        self.sink = sink
        self.calls = calls  # False: an unmarked header in marker mode, which may open no call
        self.header = [opener]
        self.size = 0  # header characters after the opener
        self.state = HEADER
        self.lexer: ValueLexer | None = None
        self.repaired = False
        self.invalid = False

    # one method per state: each returns the block's outcome, or ``None`` and where to read on

    def _read_header(self, buf: str, pos: int) -> Step:
        """The header, held up to ``<|message|>``; then the message is decided (:meth:`_begin`)."""
        end = buf.find(MESSAGE, pos, pos + HEADER_LIMIT - self.size + len(MESSAGE))
        if end == -1:
            keep = partial_at_end(buf, pos, (MESSAGE,))
            self.size += keep - pos
            if self.size > HEADER_LIMIT:
                return self._not_a_call(pos)
            self.header.append(buf[pos:keep])
            return MORE, keep
        self.header.append(buf[pos:end])
        pos = end + len(MESSAGE)
        return (None, pos) if self._begin("".join(self.header)) else (COMPLETE, pos)

    def _read_body(self, buf: str, pos: int) -> Step:
        """A call's body: its arguments' object; an end token right away is a call without arguments."""
        pos = skip_ws(buf, pos)
        if pos == len(buf):
            return MORE, pos
        if buf[pos] == "{":
            self.lexer = ValueLexer(stops=self.sink.openers)
            self.state = ARGS
            return None, pos
        hit = self._token(buf, pos, _AFTER)
        if hit is Stop.PARTIAL:
            return MORE, pos
        if hit is None:  # neither an object nor an end: the arguments are not JSON
            self.state = RAW
            return None, pos
        self.sink.call_args("{}")  # a call without arguments takes none: {} by rule
        self.repaired = True
        return self._call_end(hit[1])

    def _read_args(self, buf: str, pos: int) -> Step:
        """The call's JSON object, streamed."""
        status, end = self.read_object(buf, pos)
        if status is None:
            self.state = AFTER
        return status, end

    def _read_after(self, buf: str, pos: int) -> Step:
        """After the object: an end token ends the call; a header or text ends it too, unconsumed."""
        pos = skip_ws(buf, pos)
        if pos == len(buf):
            return MORE, pos
        hit = self._token(buf, pos, _AFTER)
        if hit is Stop.PARTIAL:
            return MORE, pos
        return self._call_end(pos if hit is None else hit[1])  # text after the call is read as text

    def _read_to_end(self, buf: str, pos: int) -> Step:
        """A message read to its end: not shown (``SKIP``), or arguments that are no JSON (``RAW``)."""
        hit = self._token(buf, pos, _AFTER, anywhere=True)
        if hit is None:
            return MORE, partial_at_end(buf, pos, _AFTER)
        if self.state is SKIP:
            self.sink.drop_block()
        else:
            self.sink.call_abort("invalid_json", "the arguments are not a JSON object")
        assert isinstance(hit, tuple)  # found anywhere: never cut
        return COMPLETE, hit[1]

    def _call_end(self, pos: int) -> Step:
        self.sink.call_end(repaired=self.repaired, invalid=self.invalid)
        return COMPLETE, pos

    def _begin(self, header: str) -> bool:
        """Decide what the message is once its header is complete; ``False`` when the block ends here."""
        parsed = parse_header(header)
        if parsed is None:
            self.sink.call_abort("not_a_call", "the text is no Harmony message header")
            return False
        channel, recipient = parsed
        if recipient == "assistant":
            self.state = SKIP
            return True
        if recipient is None:
            self.sink.drop_block(reasoning=channel == "analysis")
            return False
        name = recipient.removeprefix("functions.")
        if not self.calls or not _NAME.fullmatch(name):
            self.sink.call_abort("not_a_call", "the recipient is no function name")
            return False
        self.sink.call_name(name)
        self.state = BODY
        return True

    @staticmethod
    def _token(buf: str, pos: int, tokens: tuple[str, ...], *,
               anywhere: bool = False) -> tuple[str, int] | Literal[Stop.PARTIAL] | None:
        """The first of ``tokens`` at ``pos`` as ``(token, where the block ends)``: after an end token, at a
        header; ``Stop.PARTIAL`` when the chunk ends inside one at ``pos``; else ``None``. ``anywhere``: the
        first from ``pos`` on (never partial)."""
        if anywhere:
            found = [(i, t) for t in tokens if (i := buf.find(t, pos)) != -1]
            if not found:
                return None
            i, token = min(found)
            return token, i + len(token) if token in _ENDS else i
        for token in tokens:
            if buf.startswith(token, pos):
                return token, pos + len(token) if token in _ENDS else pos
        tail = buf[pos:]
        return Stop.PARTIAL if any(t.startswith(tail) for t in tokens) else None

    def _not_a_call(self, pos: int) -> tuple[Outcome, int]:
        self.sink.call_abort("not_a_call", "no <|message|> ended the Harmony header")
        return COMPLETE, pos

    def at_eof(self) -> None:
        if self.state is HEADER or self.state is SKIP:  # a header showed nothing yet; a skipped message nothing
            self.sink.drop_block()
        elif self.state is RAW:
            self.sink.call_abort("invalid_json", "the arguments are not a JSON object")
        elif self.state is ARGS:
            self.sink.call_incomplete()
        elif self.state is BODY:
            self.sink.call_abort("incomplete", "the stream ended before the call's arguments")
        else:
            self.sink.call_unclosed(repaired=self.repaired, invalid=self.invalid)


class HarmonyFormat(TextFormat):
    """gpt-oss Harmony messages (see the module docstring)."""

    name = "harmony"
    model_names = ("gpt-oss",)
    openers = (START, CHANNEL)
    closer = ""
    reasoning_delimiters = ("", END)  # the analysis header (the reader) opens reasoning
    end_tokens = (RETURN, CALL)
    reads_bare = True

    def render_call(self, name: str, arguments: str) -> str:
        return f"{START}assistant{CHANNEL}commentary to=functions.{name} {CONSTRAIN}json{MESSAGE}" \
               f"{compact_object(arguments)}{CALL}"

    def render_reasoning(self, text: str) -> str:
        return f"{CHANNEL}analysis{MESSAGE}{text}{END}"

    def render_result(self, name: str | None, result: str) -> str | None:
        return f"{START}functions.{name or 'tool'} to=assistant{CHANNEL}commentary{MESSAGE}{result}{END}"

    def instructions(self, example_name: str, example_arguments: str) -> str:
        return call_instructions(self.render_call(example_name, example_arguments), (
            f"A call is its own message on the commentary channel, addressed to=functions. and the tool's exact "
            f"name; the arguments follow {MESSAGE} and {CALL} ends the call.",
            "Arguments are one JSON object with the tool's exact parameter names ({} when it takes none); "
            "no code fence, no comments.",
            f"Think on the analysis channel and answer on the final channel ({START}assistant{CHANNEL}final"
            f"{MESSAGE}…), as usual."))

    def marked_openers(self, marker: str) -> dict[str, str]:
        """Both openers with the marker inside their ``|>``: ``<|start marker="…"|>``."""
        return {f'{op[:-2]} marker="{marker}"{op[-2:]}': op for op in self.openers}

    def with_marker(self, marker: str | None) -> TextFormat:
        """In marker mode only a marked header opens a call; the model's own unmarked headers still split
        reasoning and text (a call in one is text)."""
        if marker is None:
            return self
        marked = super().with_marker(marker)
        assert isinstance(marked, _MarkedFormat)
        return _MarkedHarmony(marked)

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return HarmonyBody(sink, opener)

    def bare_start(self, buf: str, pos: int, sink: CallSink) -> BodyReader | Pending | None:
        """The reply's first message with its recipient in the role header the prompt began
        (``to=functions.NAME<|channel|>…``): the reader takes it as a header."""
        hit = opener_at(buf, pos, (TO_FUNCTIONS,))
        return HarmonyBody(sink, "") if hit is Stop.OPENER else None if hit is None else Pending.PARTIAL


class _MarkedHarmony(_MarkedFormat):
    """Harmony in marker mode: marked and plain openers; only a marked header may open a call."""

    def __init__(self, marked: _MarkedFormat):
        super().__init__(marked.base, marked.marker)
        self.openers = (*self.openers, *marked.base.openers)

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        marked = opener in self._unmarked
        return HarmonyBody(sink, self._unmarked.get(opener, opener), calls=marked)


#: Each state's reader.
_READERS: dict[HarmonyState, Callable[[HarmonyBody, str, int], Step]] = {
    HEADER: HarmonyBody._read_header,
    BODY: HarmonyBody._read_body,
    ARGS: HarmonyBody._read_args,
    AFTER: HarmonyBody._read_after,
    SKIP: HarmonyBody._read_to_end,
    RAW: HarmonyBody._read_to_end,
}
HarmonyBody.READERS = _READERS
