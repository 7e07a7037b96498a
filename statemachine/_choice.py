"""ChoiceStream: one response choice's state machine, its callbacks and its readers."""

from __future__ import annotations

import functools
import json
import re
import secrets
from typing import Any, Callable, Mapping, NamedTuple

from transitions import Machine

from ._jsoncall import JsonCallsBody
from ._reader import DONE
from ._scanning import opener_at
from ._sentinels import SentinelFinder
from ._config import ParserConfig
from ._errors import ModelOutputError, UsageError
from ._events import (
    CUSTOM,
    FUNCTION,
    ChoiceFinished,
    Event,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnded,
    ToolCallInputDelta,
    ToolCallNote,
    ToolCallStarted,
)
from ._fences import FenceTracker
from ._finish import normalize_finish_reason
from .formats import BodyReader, TextFormat, get_format
from .formats.custom import CustomToolFormat
from ._schema import schema_errors
from ._table import DONE as DONE_STATE, INITIAL, ON_ENTER, READERS, TEXT, TRANSITIONS, ChoiceState

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
_WS = " \t\r\n"


#: The one machine every choice runs on, built once from the table with the callbacks it names.
#: Per-choice machines cost about 70 µs and 10 KiB each; a model-less machine keeps no per-choice
#: state, so each :class:`ChoiceStream` fires the table's events on itself (:meth:`ChoiceStream.trigger`)
#: and ``transitions`` finds the callbacks by name on that stream.
_MACHINE = Machine(
    model=None,
    states=list(ChoiceState),
    transitions=[{"trigger": t.trigger, "source": t.source, "dest": t.dest, "after": t.after or None}
                 for t in TRANSITIONS],
    initial=INITIAL,
    auto_transitions=False,
)
for _state, _callback in ON_ENTER.items():
    _MACHINE.get_state(_state).add_callback("enter", _callback)


def new_call_id() -> str:
    """A fresh OpenAI-style call id: ``call_`` and 24 random URL-safe characters."""
    return "call_" + secrets.token_urlsafe(18)


class _Call:
    """Book-keeping for the call being parsed."""

    __slots__ = ("name", "kind", "decision", "index", "call_id", "pre_args", "pre_len", "args", "invalid", "native",
                 "valved")

    def __init__(self, native: bool = False):
        self.name: str | None = None
        self.kind = FUNCTION
        self.decision: str | None = None  # accept | reject | suppress
        self.index = -1
        self.call_id = ""
        self.pre_args: list[str] = []
        self.pre_len = 0
        self.args: list[str] = []
        self.invalid = False
        self.native = native
        self.valved = False

    @property
    def header_sent(self) -> bool:
        return self.index >= 0


class ChoiceStream:
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
    __slots__ = ("config", "openers", "path", "spans", "state", "_after_call", "_all_strict", "_at_start",
                 "_bare_formats", "_block_tokens", "_body", "_call", "_clear", "_closers", "_cut",
                 "_draft_text_is_reasoning", "_end_tokens", "_fed", "_fence", "_fence_close", "_fences", "_find",
                 "_held", "_in_think", "_incomplete", "_keys", "_leave", "_lt_only", "_native_index", "_new_id",
                 "_next_index", "_opener_index", "_openers", "_out", "_parsing", "_pending", "_raw", "_release",
                 "_sentinel_index", "_sentinels", "_span_start", "_stretch_has_text", "_suppress_tail", "_taught",
                 "_think_closes", "_think_fences", "_think_fresh", "_think_held", "_think_held_tail", "_think_opens",
                 "_truncated", "_valid_calls", "_ws", "_ws_is_break")

    def __init__(self, config: ParserConfig, *, id_factory: Callable[[], str] = new_call_id):
        self.config = config
        self._new_id = id_factory
        self.state = INITIAL
        self._parsing = config.parsing_enabled
        self._suppress_tail = config.policy.text_after_calls == "suppress"
        # With only strict tools, an unknown name breaks the strict contract (strict_mismatch policy).
        self._all_strict = bool(config.tools) and all(t.strict for t in config.tools.values())
        names = list(config.formats)
        if CustomToolFormat.name not in names and any(t.kind == CUSTOM for t in config.tools.values()):
            names.append(CustomToolFormat.name)  # custom tools have no other format
        formats = tuple(get_format(name) for name in names)
        if not self._parsing:  # no calls to read; a format whose reader opens reasoning (Harmony's headers)
            formats = tuple(fmt for fmt in formats if _reader_opens_reasoning(fmt))  # still splits its channels
        self._bare_formats = tuple(fmt for fmt in formats if fmt.reads_bare)  # calls with no opener at the start
        self._taught = formats[0].name if formats else None  # its special tokens only are structure (_scan_tables)
        scan = _scan_tables(formats, config.marker, config.reasoning)
        self._openers = scan.openers
        self.openers = tuple(scan.openers)  # bodies stop at these outside JSON strings (case 14)
        self._closers = scan.closers
        self._sentinels = scan.sentinels
        self._lt_only = scan.lt_only
        self._sentinel_index = scan.finder.index
        self._keys = scan.finder.keys
        self._find = scan.finder.find  # where a sentinel may start
        self._held = scan.finder.held
        self._clear = scan.finder.clear
        self._think_held_tail = scan.think.held
        self._think_opens, self._think_closes, self._end_tokens = scan.think_opens, scan.think_closes, scan.end_tokens
        self._opener_index = scan.opener_index
        self._out: list[Event] = []
        self._pending = ""  # a partial sentinel (or a body's partial tag) held between chunks
        self._ws = ""  # whitespace held while the current stretch of text has nothing else
        self._ws_is_break = False  # ``_ws`` began as the line break between two messages (drop_block)
        self._stretch_has_text = False  # visible text since the start or the last call
        self._after_call = False  # nothing visible since the last call: an orphan closer is dropped
        self._body: BodyReader | None = None  # the open block's reader (the call states read with it)
        # The edge out of the call states that the last call's outcome chose, fired when its block ends.
        self._leave: str | None = None
        self._raw: list[str] | None = None  # the block's text while it could still be released
        self._release: str | None = None  # the kind of a disproved block awaiting release
        self._block_tokens: tuple[str, ...] = ()  # the open block's format's call tokens: never released
        self._in_think = config.starts_in_reasoning and config.reasoning
        self._think_fresh = True  # no reasoning text yet: a redundant <think> here is absorbed (case 28)
        self._think_held: list[str] | None = None  # reasoning from a call opener on
        self._think_fences: FenceTracker | None = None  # the fence tracker where the held draft began
        self._draft_text_is_reasoning = False  # at the end, unclosed reasoning's held draft is read again
        # nothing visible yet: a fence or bare JSON may start a call (never in marker mode)
        self._at_start = config.marker is None
        self._fence = ""  # a held fence line that may wrap the message's call
        self._fence_close = False
        self._fences = FenceTracker()  # sentinels inside a fenced block are text (case 29)
        self._call: _Call | None = None
        self._native_index: int | None = None
        self._next_index = 0
        self._valid_calls = 0
        self._incomplete = False
        self._truncated = False  # the upstream cut the output short (length, content filter)
        self._cut = False
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
        if self.state is DONE_STATE:
            raise UsageError("feed() after finish()", code="usage_error")
        out = self._out = []
        self._span_start = self._fed - len(self._pending)
        self._fed += len(text)
        if text and not self._cut:
            if self._native_index is not None:
                self._end_native()  # text after native fragments: that call is complete
            buf = self._pending + text
            if not self._sentinels:
                out.append(TextDelta(text))
            elif self._plain_text() and (
                    end := len(buf) if self._lt_only and "<" not in buf else self._clear(buf)) != -1:
                # the common case, prose: out up to a sentinel's start cut by the chunk's end, which is held (a
                # held start the text did not continue goes out with it)
                self._pending = buf[end:]
                if end:
                    self._fences.feed(buf[:end])
                    self._emit_text(buf[:end])
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
        if self.state is DONE_STATE:
            raise UsageError("feed_tool_call() after finish()", code="usage_error")
        out = self._out = []
        self._span_start = self._fed
        if self._cut:
            return out
        if self._native_index != index:
            self._flush_text()
            self._end_native()
            if self._cut:  # ending the previous call reached a limit: this one never begins
                return out
            self._native_index = index
            self.call_begin(native=True)
        if name:
            self.call_name(name)
        if arguments:
            self.call_args(arguments)
        if invalid:
            self.call_invalid()
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
        if self.state is DONE_STATE:
            raise UsageError("finish() called twice", code="usage_error")
        out = self._out = []
        self._span_start = self._fed
        upstream = normalize_finish_reason(reason)
        self._truncated = upstream in ("length", "content_filter")
        self._end_native()
        if self._in_think and self._think_held is not None:
            # the draft goes on to the end: a partial sentinel held after it is the draft's last text
            held, self._think_held = "".join(self._think_held) + self._pending, None
            self._in_think = False  # reasoning never closed: the held call was real
            self._draft_text_is_reasoning = True  # … but what is no call in it stays reasoning
            self._fences, self._think_fences = self._think_fences, None
            self._scan(held)
        if self._cut:  # what was held after the cut is never shown
            self._pending = ""
            self._end_block()
        if self._body is not None:
            self._body.at_eof()
            if self._raw is not None:
                self._raw.append(self._pending)
            self._pending = ""
            self._end_block()
        self._flush_text(final=True)
        self._trigger("upstream_finished", upstream=upstream)
        return out

    @property
    def wants_more(self) -> bool:
        """``False`` once policy (stop after the first call, max calls) says to stop reading."""
        return not self._cut and self.state is not DONE_STATE

    # the scanner ----------------------------------------------------------------

    def _plain_text(self) -> bool:
        """Whether the next text is plain visible text unless a sentinel may start in it (what is held in
        this state is the start of a sentinel, and goes with it)."""
        return self.state is TEXT and not (self._in_think or self._at_start or self._fence_close)

    def _scan(self, buf: str) -> None:
        """Read ``buf`` with the reader the current state names (``READERS``), until it is used up."""
        self._pending = ""
        pos, n = 0, len(buf)
        readers = _READERS
        while pos < n:
            if self._cut:  # policy stopped reading: the rest of the output is ignored
                self._end_block()
                return
            pos = readers[self.state](self, buf, pos)

    def _read_block(self, buf: str, pos: int) -> int:
        """The call states' reader: the open block's body reader, until the block ends."""
        status, end = self._body.feed(buf, pos)
        if self._raw is not None:
            self._raw.append(buf[pos:end])
        if status == DONE:
            self._end_block()
            return end
        self._pending = buf[end:]  # a body's partial tag, handed back with the next chunk
        return len(buf)

    def _end_block(self) -> None:
        """The open block is over: the machine leaves the call state the way its last call went."""
        self._body = None
        self._leave_call()

    def _leave_call(self) -> None:
        """Fire the edge out of the call states that the last call's outcome chose, if one is due."""
        if self._leave is not None:
            trigger, self._leave = self._leave, None
            self._trigger(trigger)

    def _call_closed(self) -> None:
        """``tool_close_seen``'s callback: until visible text comes, an orphan closer is dropped."""
        self._after_call = True

    def _release_block(self) -> None:
        """``tool_open_disproved``'s callback: a disproved block's text (opener included) goes out as text."""
        if self._release is None:
            return
        kind = self._release
        self._release = None
        raw = "".join(self._raw or ())
        self._raw = None
        for token in self._block_tokens:
            raw = raw.replace(token, "")
        if kind not in ("suppressed", "dropped") and raw:
            self._fences.feed(raw)  # text after all (the tracker saw its opener, so this adds no fence line)
            self._emit_text(self._take_fence() + raw)

    def _read_text(self, buf: str, pos: int) -> int:
        """TEXT's reader: visible text, or reasoning inside ``<think>`` (a sub-state of this reader)."""
        return self._scan_think(buf, pos) if self._in_think else self._scan_text(buf, pos)

    def _scan_text(self, buf: str, pos: int) -> int:
        n = len(buf)
        if self._fence_close or (self._at_start and self._parsing):
            j = pos
            while j < n and buf[j] in _WS:
                j += 1
            if j == n:
                self._ws += buf[pos:]
                self._fences.feed(buf[pos:])
                return n
            if self._fence_close:  # the fence that wrapped the call closes: drop it
                if n - j < 3 and "```".startswith(buf[j:]):
                    self._pending = buf[pos:]
                    return n
                self._fence_close = False
                if buf.startswith("```", j):
                    self._ws = ""
                    end = buf.find("\n", j)
                    return n if end == -1 else end + 1
            elif self._bare_formats and (body := self._bare_start(buf, j)) is not None:
                if body == "partial":
                    self._pending = buf[pos:]
                    return n
                self._ws += buf[pos:j]
                self._fences.feed(buf[pos:j])
                self._open_block(body, "")
                return j
            elif (buf[j] in "{[" and self.config.bare_json
                  and (self._lt_only or not opener_at(buf, j, self._sentinels))):  # not a registered sentinel
                self._ws += buf[pos:j]
                self._fences.feed(buf[pos:j])
                self._open_block(JsonCallsBody(self, None, bare=True), "")
                return j
            elif buf[j] == "`" and not self._fence:
                line_end = buf.find("\n", j)
                if line_end == -1 and n - j < 16:
                    self._pending = buf[pos:]
                    return n
                lang = buf[j + 3:line_end].strip() if line_end != -1 else "-"
                if buf.startswith("```", j) and (lang == "" or lang.isalnum()):
                    self._fence = buf[pos:line_end + 1]
                    self._fences.feed(self._fence)
                    self._ws = ""
                    return line_end + 1
        i = self._find(buf, pos)
        while i != -1:
            for s in self._sentinel_index[buf[i:i + self._keys[buf[i]]]]:
                if buf.startswith(s, i):
                    self._fences.feed(buf[pos:i + len(s)])  # a sentinel ends no line: no fence changes in it
                    if i > pos:
                        self._emit_text(buf[pos:i])
                    self._on_sentinel(s)
                    return i + len(s)
            if self._held(buf, i):
                self._fences.feed(buf[pos:i])
                if i > pos:
                    self._emit_text(buf[pos:i])
                self._pending = buf[i:]
                return n
            i = self._find(buf, i + 1)  # it began like a sentinel but is none: text
        self._fences.feed(buf[pos:])
        self._emit_text(buf[pos:])
        return n

    def _bare_start(self, buf: str, j: int) -> BodyReader | str | None:
        """The first bare-reading format's block at the message's start ``buf[j]`` (see ``TextFormat.bare_start``)."""
        for fmt in self._bare_formats:
            body = fmt.bare_start(buf, j, self)
            if body is not None:
                return body
        return None

    def _on_sentinel(self, s: str) -> None:
        if self._fences.inside and not self._fence:
            self._emit_text(s)  # an example in a fenced block (a held message-start fence may wrap a call)
        elif s in self._think_opens:
            self._in_think = True
            self._think_fresh = True
        elif s in self._think_closes or s in self._end_tokens:
            pass  # a stray or duplicate reasoning closer, or a token that ends a message or turn, is absorbed
        elif s in self._closers:
            if not self._after_call:
                self._emit_text(s)  # a closer in prose is just text
            # right after a call, an orphan closer (doubled, or the fenced call's) is dropped
        else:
            fmt = self._openers[s]
            self._fences.reset()  # an opener ends any fence line (```tool_code is Gemma's)
            # a block that goes back to text loses its special tokens only in the taught format (a quote stays whole)
            self._open_block(fmt.new_body(s, self), s, fmt.call_tokens if fmt.name == self._taught else ())

    def _open_block(self, body: Any, opener: str, tokens: tuple[str, ...] = ()) -> None:
        self._body = body
        self._block_tokens = tokens
        # Whitespace before the block is dropped if it is a call, kept if it turns out to be text.
        self._raw = [self._ws, opener]
        self._ws = ""
        self.call_begin()

    def _scan_think(self, buf: str, pos: int) -> int:
        n = len(buf)
        fences = self._fences  # fences in reasoning are tracked too: a sentinel inside one is reasoning (4.13)
        fed = pos  # buf[:fed] has been fed to the fence tracker
        i = self._find(buf, pos)
        while i != -1:
            fences.feed(buf[fed:i])
            fed = i
            if not fences.inside:  # a sentinel holds no newline: inside-ness at i is final
                if buf.startswith(self._think_closes, i):  # any family's closer ends reasoning (a template
                    close = next(c for c in self._think_closes if buf.startswith(c, i))  # may have opened it)
                    fences.feed(close)
                    self._reasoning(buf[pos:i])
                    if self._think_held is not None:
                        self._out.append(ReasoningDelta("".join(self._think_held)))
                        self._think_held = None
                        self._think_fences = None
                    self._in_think = False
                    return i + len(close)
                if self._think_fresh and buf.startswith(self._think_opens, i) and (i == pos or buf[pos:i].isspace()):
                    opener = next(o for o in self._think_opens if buf.startswith(o, i))
                    fences.feed(opener)
                    self._reasoning(buf[pos:i])
                    pos = fed = i + len(opener)
                    i = self._find(buf, pos)
                    continue
                if self._think_held_tail(buf, i):
                    self._reasoning(buf[pos:i])
                    self._pending = buf[i:]
                    return n
                if self._think_held is None and any(
                        buf.startswith(s, i) for s in self._opener_index.get(buf[i:i + 2], ())):
                    self._reasoning(buf[pos:i])
                    self._think_held = []
                    self._think_fences = fences.copy()  # a promoted draft is scanned again from here
                    pos = i
            i = self._find(buf, i + 1)
        fences.feed(buf[fed:])
        self._reasoning(buf[pos:])
        return n

    def _reasoning(self, text: str) -> None:
        if not text:
            return
        if self._think_fresh and not text.isspace():
            self._think_fresh = False
        if self._think_held is not None:
            self._think_held.append(text)
        else:
            self._out.append(ReasoningDelta(text))

    def _emit_text(self, text: str) -> None:
        """Visible text. Whitespace-only stretches around calls are dropped, so they are held."""
        if self._draft_text_is_reasoning:
            if text:
                self._out.append(ReasoningDelta(text))
            return
        if self._suppress_tail and self._valid_calls:
            self._ws = ""
            return
        if not self._stretch_has_text:
            text = self._ws + text
            if not text.strip(_WS):
                self._ws = text
                return
            self._ws = ""
            self._stretch_has_text = True
            self._at_start = False
            self._after_call = False
            text = self._take_fence() + text
        if text:
            self._out.append(TextDelta(text))

    def _take_fence(self) -> str:
        fence, self._fence = self._fence, ""
        return fence

    def _flush_text(self, *, final: bool = False) -> None:
        """Release held text: a partial sentinel, a held fence, and (at the end) whitespace."""
        pending, self._pending = self._pending, ""
        if self._in_think:
            self._reasoning(pending)
            return
        if pending:
            self._emit_text(pending)
        if final and self._fence:
            self._out.append(TextDelta(self._take_fence()))
        if final and self._ws and not self._valid_calls and self._next_index == 0 and not self._ws_is_break:
            self._out.append(ReasoningDelta(self._ws) if self._draft_text_is_reasoning else TextDelta(self._ws))
        if final:
            self._ws = ""

    # the call protocol (used by the bodies) ---------------------------------------

    def call_begin(self, *, native: bool = False) -> None:
        """A call block (or the next call inside one) begins."""
        if self._body is not None and self._leave == "tool_open_disproved":
            self._raw = None  # a next call shows the block holds calls: the rejected one is dropped, its note stands
        self._leave_call()  # the block's next call: the machine leaves the one before first
        self._trigger("tool_open_seen", native=native)

    def _hold_call(self, native: bool = False) -> None:
        """Entering ``in_tool_call``: hold the call, buffering any arguments that come before its name."""
        self._call = _Call(native)

    def call_name(self, name: str, *, kind: str = FUNCTION) -> None:
        """The call's complete name and kind (``function`` or ``custom``); decide whether it is accepted.

        A custom call's header goes out at once (its input may be empty); a
        function call's waits for its arguments to begin.
        """
        call = self._call
        if call is None or call.name is not None:
            return
        call.name = _strip_decorations(name)
        call.kind = kind
        if call.valved:
            return
        call.decision = self._decide(call.name, kind, bare=getattr(self._body, "bare", False))
        if call.decision == "accept" and (call.pre_args or kind == CUSTOM):
            self._trigger("name_completed")

    def call_args(self, text: str) -> None:
        """A fragment of the call's arguments text."""
        call = self._call
        if call is None or not text:
            return
        if call.header_sent:
            self._args_out(call, text)
        elif call.decision == "accept":
            self._trigger("name_completed")  # the header waits until the arguments begin
            self._args_out(call, text)
        elif call.decision is None and not call.valved:
            call.pre_args.append(text)
            call.pre_len += len(text)
            if call.pre_len > self.config.policy.hold_limit:
                call.valved = True  # the size valve: this block will go back to text
                call.pre_args = []

    def _send_header(self) -> None:
        """``name_completed``'s callback: the call is committed; its header and buffered arguments go out."""
        call = self._call
        if call is None:  # fired by hand (:meth:`trigger`), with no call being read
            return
        call.index = self._next_index
        self._next_index += 1
        call.call_id = self._new_id()
        self._raw = None  # committed: this block can no longer turn back into text
        self._at_start = False
        self._stretch_has_text = False
        if self._fence:  # the fence only wrapped this call: it goes, and so will its closer
            self._fence = ""
            self._fence_close = True
            self._fences.reset()
        self._out.append(ToolCallStarted(call.index, call.call_id, call.name, call.kind))
        if call.pre_args:
            self._args_out(call, "".join(call.pre_args))
            call.pre_args = []

    def call_end(self, *, repaired: bool = False, invalid: bool = False) -> None:
        """The call's arguments are complete; validate and close it."""
        call = self._call
        if call is None:
            return
        self._call = None
        if call.decision != "accept":  # never accepted (a valved call never gets a decision)
            self._settle_rejected(call, "invalid_json" if call.name is None else None)
            return
        if not call.header_sent:  # accepted, but its arguments never became an object
            self._settle_rejected(call, "invalid_json", "the arguments are not a JSON object")
            return
        arguments = "".join(call.args)
        if call.kind == CUSTOM:
            problem = self._grammar_problem(call, arguments)
        else:
            value = None if invalid or call.invalid else _json_object(arguments)
            problem = "invalid_json" if value is None else self._schema_problem(call, value)
        valid = problem is None
        self._out.append(ToolCallEnded(call.index, call.call_id, call.name, arguments, valid, call.kind))
        self._leave = "tool_close_seen"
        if valid:
            self._valid_calls += 1
            if repaired:
                self.note("repaired", "the call's JSON was repaired", index=call.index, name=call.name)
            policy = self.config.policy
            if policy.stop_after_first_call or (policy.max_tool_calls and self._valid_calls >= policy.max_tool_calls):
                self._cut = True
        else:
            self._incomplete = True
            self.note(problem, f"the arguments of {call.name!r} are not acceptable ({problem})",
                      index=call.index, name=call.name)
        if self._body is None:  # a native call has no block: the machine leaves now
            self._end_block()

    def call_unclosed(self, *, repaired: bool = False, invalid: bool = False, tail: str = "") -> None:
        """The stream ended after a complete call whose block never closed (4.11).

        Accepted after a normal stop (``tail``, the arguments' closing text, is
        sent first); when the upstream cut the output short the block may have
        been cut too, so the call is incomplete instead.
        """
        if self._truncated:
            self.call_incomplete()
            return
        self.note("recovered_unclosed", "the call block had no closer; its body was complete")
        self.call_args(tail)
        self.call_end(repaired=repaired, invalid=invalid)

    def call_invalid(self) -> None:
        """The body turned out malformed; a committed call ends as invalid now."""
        call = self._call
        if call is None:
            return
        call.invalid = True
        if call.header_sent:
            self.call_end(invalid=True)

    def call_abort(self, kind: str, message: str) -> None:
        """The block is not a call: release it as text (if nothing of it was sent)."""
        call = self._call
        if call is None:
            return
        if call.header_sent:
            self.call_end(invalid=True)
            return
        self._call = None
        self._settle_rejected(call, kind, message)

    def drop_block(self, *, reasoning: bool = False) -> None:
        """The block is structure, not a call (a Harmony message header): its text is dropped, and what
        follows is reasoning or visible text; visible text after visible text starts on a new line."""
        call = self._call
        if call is None or call.header_sent:
            return
        self._call = None
        self._release = "dropped"
        self._leave = "tool_open_disproved"
        if reasoning:
            self._in_think = True
            self._think_fresh = True
        elif self._stretch_has_text:  # a new message of visible text: held like whitespace until text comes
            self._stretch_has_text = False
            self._ws = "\n"
            self._ws_is_break = True

    def call_incomplete(self) -> None:
        """The stream ended inside the call's body."""
        call = self._call
        if call is None:
            return
        if call.header_sent:
            self._call = None
            self._incomplete = True
            self.note("incomplete", "the stream ended inside a call", index=call.index, name=call.name)
        else:
            self.call_abort("incomplete", "the stream ended inside a call block")

    def note(self, kind: str, message: str, *, index: int | None = None, name: str | None = None) -> None:
        """Report a recoverable mistake or repair as a ``ToolCallNote``."""
        call = self._call
        if index is None and call is not None and call.header_sent:
            index, name = call.index, call.name
        self._out.append(ToolCallNote(kind, message, index, name))

    def schema_for(self, name: str | None) -> Mapping[str, Any] | None:
        """The JSON Schema of an offered tool's parameters."""
        spec = self.config.tools.get(name or "")
        return spec.parameters if spec else None

    def current_name(self) -> str | None:
        """The name of the call being parsed, if known."""
        return self._call.name if self._call else None

    # helpers ------------------------------------------------------------------

    def _decide(self, name: str, kind: str, *, bare: bool) -> str:
        config = self.config
        if config.tool_choice.mode == "none":  # a native call (the back end ignored "none") or a Harmony one
            return "suppress"
        if self._valid_calls and (not config.parallel_tool_calls or config.legacy_functions):
            return "suppress"
        allowed = config.tool_choice.allowed
        spec = config.tools.get(name)
        if spec is not None and spec.kind == kind and (allowed is None or name in allowed):
            return "accept"
        if bare:
            return "reject"
        policy = config.policy.strict_mismatch if self._all_strict else config.policy.unknown_tool
        if policy == "fail":
            raise ModelOutputError(f"the model called an unknown tool {name!r}", code="unknown_tool")
        return "accept" if policy == "emit" else "reject"

    def _settle_rejected(self, call: _Call, kind: str | None, message: str = "") -> None:
        """A call that was never committed: its block goes back to text, or is dropped."""
        bare = getattr(self._body, "bare", False)
        if call.valved:
            kind, message = "invalid_json", "the arguments grew past the hold limit before the name"
        elif call.decision == "suppress":
            kind, message = "suppressed", "a further call is not allowed here; it was dropped"
        elif call.decision == "reject":
            kind, message = "unknown_tool", f"{call.name!r} is not an offered tool"
        elif kind is None:
            kind, message = "invalid_json", "the block has no function name"
        if kind == "invalid_json" and not bare and self.config.policy.invalid_json == "fail":
            raise ModelOutputError(message or "the model wrote an invalid call", code="invalid_json")
        self._release = kind
        self._leave = "tool_open_disproved"
        if kind != "not_a_call" and not (bare and kind != "unknown_tool"):
            self.note(kind, message or kind, name=call.name)
        if self._body is None:  # a native call has no block: the machine leaves now
            self._end_block()

    def _args_out(self, call: _Call, text: str) -> None:
        call.args.append(text)
        delta = ToolCallInputDelta if call.kind == CUSTOM else ToolCallArgumentsDelta
        self._out.append(delta(call.index, text))

    def _schema_problem(self, call: _Call, value: dict) -> str | None:
        name = call.name
        spec = self.config.tools.get(name)
        if spec is None or not spec.parameters:
            return None
        policy = self.config.policy
        mode = policy.strict_mismatch if spec.strict else policy.schema_mismatch
        if not spec.strict and mode == "emit":
            return None
        errors = schema_errors(spec.parameters, value)
        if not errors:
            return None
        if mode == "fail":
            raise ModelOutputError(f"arguments for {name!r} do not match its schema: {errors[0]}",
                                   code="tool_arguments_invalid")
        if mode == "emit":
            self.note("schema_mismatch", errors[0], index=call.index, name=name)
            return None
        return "schema_mismatch"

    def _grammar_problem(self, call: _Call, text: str) -> str | None:
        """A custom tool with a ``regex`` grammar: the whole input must match it (schema policies apply)."""
        spec = self.config.tools.get(call.name)
        grammar = (spec.input_format if spec else None) or {}
        if grammar.get("type") != "grammar" or grammar.get("syntax") != "regex":
            return None
        try:
            matched = re.fullmatch(grammar.get("definition", ""), text) is not None
        except (re.error, TypeError):  # a pattern Python cannot read (OpenAI's are Rust regexes): not checked
            return None
        policy = self.config.policy
        mode = policy.strict_mismatch if spec.strict else policy.schema_mismatch
        if matched or mode == "emit":
            if not matched:
                self.note("schema_mismatch", "the input does not match the tool's regex", index=call.index,
                          name=call.name)
            return None
        if mode == "fail":
            raise ModelOutputError(f"the input for {call.name!r} does not match its regex",
                                   code="tool_arguments_invalid")
        return "schema_mismatch"

    def _end_native(self) -> None:
        if self._native_index is not None:
            self._native_index = None
            call = self._call
            if call is not None and call.native:
                if call.name is None:
                    self.call_abort("invalid_json", "a native call never got a name")
                else:
                    self.call_end()

    def _select_finish_reason(self, upstream: str = "stop") -> None:
        """Entering ``done``: the one ``ChoiceFinished``, with the finish reason the choice earned."""
        if upstream in ("length", "content_filter"):
            reason = upstream
        elif self._valid_calls and not self._incomplete:
            reason = "function_call" if self.config.legacy_functions else "tool_calls"
        else:
            reason = "stop"
        self._out.append(ChoiceFinished(reason))

    def trigger(self, name: str, **kwargs: Any) -> bool:
        """Fire the table's event ``name`` on this choice, running the callbacks the table names.

        Args:
            name: the trigger.
            kwargs: passed to the callbacks.
        Returns:
            ``True`` (the transition was taken).
        Raises:
            AttributeError: no such trigger.
            transitions.MachineError: the table has no edge for it from the current state.
        """
        event = _MACHINE.events.get(name)
        if event is None:
            raise AttributeError(f"Do not know event named {name!r}.")
        return event.trigger(self, **kwargs)

    def _trigger(self, name: str, **kwargs: Any) -> None:
        source = self.state
        self.trigger(name, **kwargs)
        self.path.append((source.value, name, self.state.value))
        self.spans.append((self._span_start, self._fed))


#: Each state's reader, resolved once from the table's names.
_READERS = {state: getattr(ChoiceStream, name) for state, name in READERS.items()}


class _ScanTables(NamedTuple):
    """What the scanner looks for, for one set of formats, marker and reasoning: shared by every choice that
    has them (building them per choice cost more than the rest of a short response's parsing)."""

    openers: dict[str, TextFormat]  # opener → its format (read only)
    closers: frozenset[str]
    sentinels: tuple[str, ...]
    lt_only: bool
    finder: SentinelFinder  # where any sentinel may start
    think: SentinelFinder  # the sentinels that matter in reasoning (what of it is held at a chunk's end)
    opener_index: dict[str, tuple[str, ...]]
    think_opens: tuple[str, ...]  # what opens reasoning in text: ``<think>`` and the formats' own openers
    think_closes: tuple[str, ...]  # what ends it: ``</think>`` and the formats' own closers
    end_tokens: frozenset[str]  # the formats' tokens that end a message or turn: dropped in visible text


@functools.lru_cache(maxsize=256)
def _scan_tables(formats: tuple[TextFormat, ...], marker: str | None, reasoning: bool) -> _ScanTables:
    marked = [fmt.with_marker(marker) for fmt in formats]
    # an opener two formats share (``<tool_call>``: format A, GLM) is read by the one whose reader reads the
    # other's bodies too, else by the first format listed
    openers: dict[str, TextFormat] = {}
    for fmt in marked:
        for op in fmt.openers:
            if op not in openers or openers[op].name in fmt.reads_also:
                openers[op] = fmt
    closers = frozenset(fmt.closer for fmt in marked if fmt.closer)
    # ``<think>`` is the config's; a format's own delimiters (``[THINK]``, ``<seed:think>``) and end tokens belong
    # to its syntax, read for the taught format (listed first) only: another family's, merely accepted for its
    # calls, would hide or cut the prose of a model that quotes them. An empty opener is its reader's
    # (``drop_block``, Harmony's analysis header): only the closer is looked for, whichever format it is.
    taught = formats[:1]
    pairs = ([(THINK_OPEN, THINK_CLOSE)] if reasoning else []) + [
        fmt.reasoning_delimiters for fmt in formats
        if fmt.reasoning_delimiters and (fmt in taught or _reader_opens_reasoning(fmt))]
    think_opens = tuple(dict.fromkeys(opener for opener, _ in pairs if opener))
    think_closes = tuple(dict.fromkeys(closer for _, closer in pairs))
    end_tokens = tuple(dict.fromkeys(t for fmt in taught for t in fmt.end_tokens if t not in think_closes))
    sentinels = list(openers) + sorted(closers) + [*think_opens, *think_closes, *end_tokens]
    # When every sentinel starts with '<' (the default formats), text without one is plain at once (feed).
    return _ScanTables(
        openers=openers, closers=closers, sentinels=tuple(sentinels), lt_only={s[0] for s in sentinels} <= {"<"},
        finder=SentinelFinder(tuple(sentinels)), think=SentinelFinder((*think_closes, *think_opens, *openers)),
        opener_index=_index(tuple(openers)), think_opens=think_opens, think_closes=think_closes,
        end_tokens=frozenset(end_tokens))


def _reader_opens_reasoning(fmt: TextFormat) -> bool:
    """Whether the format's reader opens reasoning: its delimiters have no opener (Harmony's analysis header)."""
    return fmt.reasoning_delimiters is not None and not fmt.reasoning_delimiters[0]


def _index(sentinels: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """``sentinels`` by their first two characters and by their first one, in their order."""
    index: dict[str, tuple[str, ...]] = {}
    for s in sentinels:
        for key in (s[:2], s[:1]):
            index[key] = index.get(key, ()) + (s,)
    return index


def _strip_decorations(name: str) -> str:
    """``functions.get_weather:0`` → ``get_weather``."""
    name = name.strip()
    if name.startswith("functions."):
        name = name[len("functions."):]
    head, sep, tail = name.rpartition(":")
    if sep and tail.isdigit():
        name = head
    return name


def _json_object(arguments: str) -> dict | None:
    """The arguments parsed (once per call), or ``None`` unless they are a JSON object."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
