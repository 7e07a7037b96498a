"""ChoiceStream: one response choice's state machine, its public API and the callbacks the table names.

What reads text is :class:`~statemachine._text.TextReader` (the ``TEXT``
state) and the open block's body reader (the call states); what readers report
to is the choice's :class:`~statemachine._calls.CallBook`.
"""

from __future__ import annotations

import binascii
import functools
import os
import weakref
from typing import Callable

from ._calls import Call, CallBook, CallMachine
from ._config import ParserConfig
from ._errors import UsageError
from ._events import CUSTOM, ChoiceFinished, Event, TextDelta
from ._fences import SKIP
from ._finish import normalize_finish_reason
from ._machine import build_machine
from ._reader import COMPLETE, BodyReader
from ._table import ARGS_STREAMING, DONE, IN_TOOL_CALL, INITIAL, READERS, TEXT, TRANSITIONS, ChoiceState, Verdict
from ._scan_tables import reader_opens_reasoning
from ._lines import FENCED_CALL_END, FORCED_PROSE, PROSE, REASONING, WATCH
from ._text import TextReader
from .formats import TextFormat, get_format, on_register
from .formats.custom import CustomToolFormat

#: The one machine every choice runs on, built once from the table with the callbacks it names.
#: A machine per choice would cost each choice its own build and about 10 KiB; a model-less machine keeps no
#: per-choice state, so each :class:`ChoiceStream` fires the table's events on itself and ``transitions``
#: finds the callbacks by name on that stream.
_MACHINE = build_machine()


@functools.lru_cache(maxsize=256)
def formats_of(names: tuple[str, ...], custom: bool, parsing: bool) -> tuple[TextFormat, ...]:
    """The registered formats a choice reads: ``names``, with ``custom_tool_call`` when custom tools are offered;
    without ``parsing`` only those whose reader opens reasoning (Harmony's headers still split it). Cleared
    when a format is registered."""
    if custom and CustomToolFormat.name not in names:
        names += (CustomToolFormat.name,)
    formats = tuple(get_format(name) for name in names)
    return formats if parsing else tuple(fmt for fmt in formats if reader_opens_reasoning(fmt))


on_register(formats_of.cache_clear)


def new_call_id() -> str:
    """A fresh OpenAI-style call id: ``call_`` and 24 random URL-safe characters."""
    # secrets.token_urlsafe(18), in C calls only: it is made deep in a stream's stack, whose high-water mark every
    # open stream keeps resident (docs/upstream-client.md)
    return "call_" + binascii.b2a_base64(os.urandom(18), newline=False).translate(_URL_SAFE).decode()


_URL_SAFE = bytes.maketrans(b"+/", b"-_")


class ChoiceStream(TextReader):
    """Turns one choice's model output into :mod:`statemachine` events.

    Feed text with :meth:`feed` (split anywhere), native ``tool_calls``
    fragments with :meth:`feed_tool_call`, and end with :meth:`finish`. Each
    call returns the events that input completed, in order. Non-streaming
    responses go through exactly the same path: feed everything, then finish.

    The machine (one shared ``transitions`` machine built from ``_table.py``)
    changes state only at boundaries: an opener, a name, a block's end, the
    finish; the callbacks the table names do those boundaries' work, and the
    state names the reader for the next input (``READERS``). Everything per
    character happens in the readers, without triggers.

    Args:
        config: the request's tools, tool_choice, formats and policy.
        id_factory: makes call ids (default :func:`new_call_id`).
    """

    # One per choice per request: no instance dict (~1 KiB less per open stream).
    __slots__ = ("path", "spans", "state", "_argument_lane", "_block_tokens", "_body", "_calls", "_fed", "_lane",
                 "_native_index", "_raw", "_span_start", "__weakref__")

    def __init__(self, config: ParserConfig, *, id_factory: Callable[[], str] = new_call_id):
        self.config = config
        self.state = INITIAL
        custom = any(t.kind == CUSTOM for t in config.tools.values())  # custom tools have no other format
        scan = self._init_text(config, formats_of(config.formats, custom, config.parsing_enabled))
        machine: CallMachine = self  # the book's port, held weakly: the stream owns the book (no cycle)
        self._calls = CallBook(weakref.proxy(machine), config, scan.opener_names, id_factory)
        self._body: BodyReader | None = None  # the open block's reader (the call states read with it)
        self._raw: list[str] | None = None  # the block's text while it could still be released
        #: what the open block's reader offered to read the next chunk with, if it stays in the argument text the
        #: reader is in (the arguments' path per chunk, see ``BodyReader.argument_lane``)
        self._lane: Callable[[str], str | None] | None = None
        self._argument_lane: Callable[[], Callable[[str], str | None] | None] | None = None  # the open block's
        self._block_tokens: tuple[str, ...] = ()  # the open block's format's call tokens: never released
        self._native_index: int | None = None
        self.path: list[tuple[str, str, str]] = []  # (source, trigger, dest) as taken
        # Per path entry: the [start, end) offsets, in all text fed so far, of the piece being
        # processed when it fired (a held partial sentinel included); empty for native calls and finish.
        self.spans: list[tuple[int, int]] = []
        self._fed = 0  # characters fed so far
        self._span_start = 0  # where the current piece began; it ends at ``_fed`` (made a span only on a transition)

    # public API -------------------------------------------------------------

    def feed(self, text: str) -> list[Event]:
        """Feed a piece of model text.

        Args:
            text: the next piece of output, split anywhere.
        Returns:
            The events this piece completes (possibly none).
        Raises:
            UsageError: the stream already finished.
            ModelOutputError: a ``fail`` policy rejected the model's output.
        """
        if self.state is DONE:
            raise UsageError("feed() after finish()", code="usage_error")
        calls = self._calls
        out = self._out = calls.out = []
        self._span_start = self._fed - len(self._pending)
        self._fed += len(text)
        if (lane := self._lane) is not None:
            if (arguments := lane(text)) is not None:  # what the block's readers would send for it, without them
                calls.call_args(arguments)
                return out
            self._lane = None
        if text and not calls.cut:
            if self._native_index is not None:
                self._end_native()  # text after native fragments: that call is complete
            buf = self._pending + text
            if not self._sentinels:
                out.append(TextDelta(text))
            elif self.state is TEXT and ((mode := self._mode) is PROSE or mode is WATCH and "`" not in buf
                                         or mode is FORCED_PROSE and "\n" not in buf) and (
                    end := len(buf) if self._lt_only and "<" not in buf else self._clear(buf)) != -1:
                # the common case, prose: out up to a sentinel's start cut by the chunk's end, which is held
                self._pending = buf[end:]
                if end:
                    if "\n" in (prose := buf[:end]) or self._fences.phase is not SKIP:  # (its quick exit, no call)
                        self._fences.feed(prose)
                    self._emit_text(prose)
            else:
                self._scan(buf)
        return out

    def feed_tool_call(self, index: int, *, id: str | None = None, name: str | None = None,
                       arguments: str | None = None, invalid: bool = False) -> list[Event]:
        """Feed one native ``delta.tool_calls[]`` fragment from the upstream.

        Native calls go through the same policy as text calls and share the
        choice's index sequence. The upstream's ``id`` is not reused.

        Args:
            index: the upstream's index of the call.
            id: the upstream's call id (ignored; toolwire makes its own).
            name: the function name, when this fragment carries it.
            arguments: a fragment of the arguments text.
            invalid: the upstream broke this call's fragments (see :class:`~statemachine.NativeCalls`);
                the call ends as invalid, as a malformed text call does.
        Returns:
            The events this fragment completes.
        Raises:
            UsageError: the stream already finished.
            ModelOutputError: a ``fail`` policy rejected the call.
        """
        if self.state is DONE:
            raise UsageError("feed_tool_call() after finish()", code="usage_error")
        calls = self._calls
        out = self._out = calls.out = []
        self._span_start = self._fed
        self._lane = None
        if calls.cut:
            return out
        if self._native_index != index and not self._begin_native(index):
            return out
        if name:
            calls.call_name(name)
        if arguments:
            calls.call_args(arguments)
        if invalid:
            calls.call_invalid()
            self._leave_call()
        return out

    def finish(self, reason: str | None = None) -> list[Event]:
        """The upstream finished; flush everything held and decide the finish reason.

        Args:
            reason: the upstream's finish reason (aliases accepted), or
                ``None`` when the stream simply ended.
        Returns:
            The remaining events, always ending with one ``ChoiceFinished``.
        Raises:
            UsageError: called twice.
            ModelOutputError: a ``fail`` policy rejected the model's output.
        """
        if self.state is DONE:
            raise UsageError("finish() called twice", code="usage_error")
        calls = self._calls
        out = self._out = calls.out = []
        self._span_start = self._fed
        self._lane = None
        upstream = normalize_finish_reason(reason)
        calls.truncated = upstream in ("length", "content_filter")
        self._end_native()
        self._end_held()  # a block held to tell a call from an example: the end decides
        if self._mode is REASONING and self._think_held is not None:
            self._read_draft_again()  # the draft goes on to the end: a partial sentinel held after it is its last text
        if calls.cut:  # what was held after the cut is never shown
            self._pending = ""
            self._end_block()
        self._read_held_opener()
        if self._body is not None:
            self._end_block_at_eof()
        if self._base_mode() is FENCED_CALL_END and self._pending.strip().startswith("```"):
            self._pending = ""  # the wrapping fence's closer ends the output
        self._flush_text(final=True)
        self._trigger("upstream_finished", upstream=upstream)
        return out

    @property
    def inside_call(self) -> bool:
        """Whether a call's arguments are being read: going out (``args_streaming``) or held until they end
        (``Policy.hold_calls``), so a stream ending here was cut off inside a call."""
        return self.state is ARGS_STREAMING or self._calls.holding_args

    @property
    def wants_more(self) -> bool:
        """``False`` once policy (stop after the first call, max calls) says to stop reading."""
        return not self._calls.cut and self.state is not DONE

    # the call book's port (CallMachine) --------------------------------------------

    def begin_call(self, native: bool) -> None:
        """A call begins (a block's first, or its next): the machine leaves the one before first."""
        due = self._calls.due
        if self._body is not None and due is not None and due.verdict is Verdict.DISPROVED:
            self._raw = None  # a next call shows the block holds calls: the rejected one is dropped, its note stands
        self._leave_call()
        if not self._calls.cut:  # the call before reached the policy's limit: no further call begins
            self._trigger("tool_open_seen", native=native)

    def complete_name(self) -> None:
        """The call's accepted name is complete: ``name_completed`` (its header goes out)."""
        _MACHINE.events["name_completed"].trigger(self)  # as _trigger does, without its frame under the readers
        self.path.append(_NAME_COMPLETED)
        self.spans.append((self._span_start, self._fed))

    # the scanner ----------------------------------------------------------------

    def _scan(self, buf: str) -> None:
        """Read ``buf`` with the reader the current state names (``READERS``), until it is used up."""
        self._pending = ""
        pos, n = 0, len(buf)
        readers = _READERS
        calls = self._calls
        while pos < n:
            if calls.cut:  # policy stopped reading: the rest of the output is ignored
                self._end_block()
                return
            pos = readers[self.state](self, buf, pos)

    def _read_held_opener(self) -> None:
        """At the finish, an opener held because what followed it could not yet refute it opens its block after
        all: its reader decides how the stream ended inside it (a call cut by ``length`` drops its opener, 4.11)."""
        held = self._pending
        if held and self._mode is not REASONING and any(map(held.startswith, self._refutable)):
            self._refutable = frozenset()  # nothing is read after this
            self._scan(held)

    def _read_block(self, buf: str, pos: int) -> int:
        """The call states' reader: the open block's body reader, until the block ends."""
        body = self._body
        assert body is not None
        outcome, end = body.feed(buf, pos)
        if self._raw is not None:
            self._raw.append(buf[pos:end])
        if outcome is COMPLETE:
            self._end_block()
            return end
        self._pending = buf[end:]  # a body's partial tag, handed back with the next chunk
        argument_lane = self._argument_lane
        if argument_lane is not None and self._out and end == len(buf):  # it sent what it took: all of the chunk
            self._lane = argument_lane() if self._raw is None and not self._calls.cut else None  # once committed
        return len(buf)

    def _open_block(self, body: BodyReader, opener: str, tokens: tuple[str, ...] = ()) -> None:
        self._body = body
        self._argument_lane = getattr(body, "argument_lane", None)  # optional in the protocol
        self._calls.bare = getattr(body, "bare", False)
        self._block_tokens = tokens
        # Whitespace before the block is dropped if it is a call, kept if it turns out to be text.
        self._raw = [self._ws, opener]
        self._ws = ""
        self.begin_call(False)

    def _end_block_at_eof(self) -> None:
        """The stream ended inside the open block: its reader ends, recovers or abandons its call."""
        assert self._body is not None
        calls = self._calls
        unnamed = calls.call is None or calls.call.name is None
        self._body.at_eof()
        if self._raw is not None:
            self._raw.append(self._pending)
            due = calls.due
            if calls.truncated and (unnamed or self.config.policy.hold_calls) and due is not None \
                    and due.verdict is Verdict.DISPROVED and not calls.bare:
                self._raw = None  # a call cut short (before its name, or held): its opener is no text (4.11)
        self._pending = ""
        self._end_block()

    def _end_block(self) -> None:
        """The open block is over: the machine leaves the call state the way its last call went."""
        self._body = self._argument_lane = None
        self._calls.bare = False
        self._leave_call()

    def _leave_call(self) -> None:
        """Fire the edge out of the call states that the last call's verdict names, if one is due."""
        call = self._calls.due
        if call is not None:
            self._calls.due = None
            assert call.verdict is not None
            self._trigger(call.verdict.value, call=call)

    def _begin_native(self, index: int) -> bool:
        """A fragment of another native call: the text and the call before it end, and it begins; ``False``
        when ending the call before reached the policy's limit (this one never begins)."""
        if self._body is not None:
            self._interrupt_block()
        self._flush_text()
        self._end_native()
        if self._calls.cut:
            return False
        self._native_index = index
        self.begin_call(True)
        return True

    def _interrupt_block(self) -> None:
        """A native call begins inside a text call block: the block's call ends as a malformed one does
        (invalid once its header went out, its text released before that)."""
        if self._raw is not None:
            self._raw.append(self._pending)
        self._pending = ""
        self._calls.call_abort("incomplete", "a native call began inside the call block")
        self._end_block()

    def _end_native(self) -> None:
        if self._native_index is not None:
            self._native_index = None
            self._calls.end_native()
            self._leave_call()

    def _trigger(self, name: str, **kwargs: object) -> None:
        """Fire the table's event ``name`` on this choice (its callbacks run), and record the edge in ``path``."""
        source = self.state
        _MACHINE.events[name].trigger(self, **kwargs)
        self.path.append(_EDGES[source, name])
        self.spans.append((self._span_start, self._fed))

    def _take_direct(self, name: str, **kwargs: str) -> None:
        """Take the direct edge ``name`` (``Transition.direct``): a self-loop whose callback, called here, is
        all the machine would do; recorded in ``path`` as any edge."""
        callback, edge = _DIRECT[name]
        getattr(self, callback)(**kwargs)
        self.path.append(edge)
        self.spans.append((self._span_start, self._fed))

    # the table's callbacks -------------------------------------------------------

    def _hold_call(self, native: bool) -> None:
        """Entering ``in_tool_call``: hold the call, buffering any arguments that come before its name."""
        self._calls.hold(native)

    def _send_header(self) -> None:
        """``name_completed``'s callback: the call is committed; its header and buffered arguments go out."""
        self._calls.commit()
        self._raw = None  # committed: this block can no longer turn back into text
        self._call_committed()

    def _call_closed(self, call: Call) -> None:
        """``tool_close_seen``'s callback: the call's end goes out and is counted (the policy may cut the
        stream here); until visible text comes, an orphan closer is dropped."""
        self._calls.close(call)
        self._after_call = True

    def _release_block(self, call: Call) -> None:
        """``tool_open_disproved``'s callback: the rejection is noted, and the disproved block's text
        (opener included) goes out as text, unless it was suppressed or was structure (dropped: what
        follows it is reasoning, or a new message of text)."""
        kind = self._calls.settle(call)
        if kind == "dropped":
            self._raw = None
            self._drop_block(reasoning=call.then_reasoning)
            return
        raw = "".join(self._raw or ())
        self._raw = None
        for token in self._block_tokens:
            raw = raw.replace(token, "")
        if kind != "suppressed" and raw:
            self._fences.feed(raw)  # text after all (the tracker saw its opener, so this adds no fence line)
            self._emit_text(self._take_fence() + raw)

    def _note_refuted(self, kind: str, message: str) -> None:
        """``tool_open_refuted``'s callback: the note the refuted opener's block would have earned (or the
        ``fail`` policy's error); the opener itself stays in the text."""
        call = Call()
        call.reason = (kind, message)
        self._calls.settle(call)

    def _select_finish_reason(self, upstream: str) -> None:
        """Entering ``done``: the one ``ChoiceFinished``, with the finish reason the choice earned."""
        calls = self._calls
        if upstream in ("length", "content_filter"):
            reason = upstream
        elif calls.valid_calls and not calls.incomplete:
            reason = "function_call" if self.config.legacy_functions else "tool_calls"
        else:
            reason = "stop"
        self._out.append(ChoiceFinished(reason))


#: Each edge's ``path`` entry, by its source and trigger.
_EDGES: dict[tuple[ChoiceState, str], tuple[str, str, str]] = {
    (t.source, t.trigger): (t.source.value, t.trigger, t.dest.value) for t in TRANSITIONS}

#: The edges the scanner takes itself, by trigger: their callback's name and their ``path`` entry.
_DIRECT: dict[str, tuple[str, tuple[str, str, str]]] = {
    t.trigger: (t.after, (t.source.value, t.trigger, t.dest.value)) for t in TRANSITIONS if t.direct}

#: ``name_completed``'s ``path`` entry.
_NAME_COMPLETED = _EDGES[IN_TOOL_CALL, "name_completed"]

#: Each state's reader, resolved once from the table's names.
_READERS: dict[ChoiceState, Callable[[ChoiceStream, str, int], int]] = {
    state: getattr(ChoiceStream, name) for state, name in READERS.items()}
