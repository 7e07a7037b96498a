"""The ``TEXT`` state's reader: visible text and reasoning, up to the sentinel that opens a block.

:class:`TextReader` is the part of :class:`~statemachine.ChoiceStream` that
reads model text while no block is open. What it looks for depends on its
:class:`TextMode`, one method per mode (:data:`_MODE_READERS`); the modes are
sub-states of ``TEXT``, not of the machine (reasoning never changes what a
call is). The sentinels it looks for come from the request's formats
(:func:`scan_tables`), shared by every choice that has the same formats.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ._events import Event, ReasoningDelta, TextDelta
from ._fences import FenceTracker
from ._jsonblock import JsonCallsBody
from ._reader import BodyReader, Pending
from ._scanning import opener_at
from ._scan_tables import ScanTables, reader_opens_reasoning, scan_tables
from ._lines import FENCED_CALL_END, FORCED_PROSE, HELD, HELD_CALL, LINE_START, MESSAGE_START, NEXT_CALL, PROSE, \
    REASONING, WATCH, LineStarts, TextMode
from ._shown import BEFORE
from .formats import Refutation, TextFormat

if TYPE_CHECKING:
    from ._calls import CallBook
    from ._config import ParserConfig

_WS = " \t\r\n"
#: An opener whose format cannot yet tell whether a call follows is held (not opened) while this much text after
#: it has arrived (formats decide within it); past it or at the finish its block opens and its reader decides.
_UNREFUTED_HOLD = 256


class TextReader(LineStarts):
    """Reads text in the ``TEXT`` state (a base of :class:`~statemachine.ChoiceStream`, sharing its slots).

    It holds back only what may still become a sentinel, and whitespace around
    calls; everything else goes out as it arrives. Reasoning from a call
    opener on is held as a draft: if reasoning never closes, the draft is read
    again as text at the finish (the call in it was real).
    """

    __slots__ = ("_after_call", "_bare_formats", "_clear", "_closers", "_draft_text_is_reasoning", "_end_tokens",
                 "_find", "_held", "_keys", "_lt_only", "_mode", "_opener_index", "_openers", "_out", "_parsing",
                 "_pending", "_refutable", "_resume_mode", "_sentinel_index", "_sentinels",
                 "_stretch_has_text", "_suppress_tail", "_taught", "_think_closes", "_think_fences", "_think_fresh",
                 "_think_held", "_think_held_tail", "_think_opens", "_ws_is_break", "config")

    config: ParserConfig
    _calls: CallBook

    def _init_text(self, config: ParserConfig, formats: tuple[TextFormat, ...]) -> ScanTables:
        """Set up the text reader for ``formats``; returns the scan tables it reads with."""
        scan = scan_tables(formats, config.marker, config.reasoning)
        self._parsing = config.parsing_enabled
        self._suppress_tail = config.policy.text_after_calls == "suppress"
        self._bare_formats = scan.bare_formats  # calls with no opener at the start
        self._taught = formats[0].name if formats else None  # its special tokens only are structure (scan_tables)
        self._openers = scan.openers
        self._refutable = scan.refutable
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
        # nothing visible yet: a fence or bare JSON may start a call (never in marker mode)
        self._mode = MESSAGE_START if config.marker is None and self._parsing else PROSE
        self._resume_mode = self._mode  # the mode reasoning returns to
        self._init_lines(config, self._mode is MESSAGE_START)
        if config.starts_in_reasoning and config.reasoning:
            self._enter_reasoning()
        self._think_fresh = True  # no reasoning text yet: a redundant <think> here is absorbed (case 28)
        self._think_held: list[str] | None = None  # reasoning from a call opener on
        self._think_fences: FenceTracker | None = None  # the fence tracker where the held draft began
        self._draft_text_is_reasoning = False  # at the end, unclosed reasoning's held draft is read again
        self._fence = ""  # a held fence line that may wrap the message's call
        self._fences = FenceTracker()  # sentinels inside a fenced block are text (case 29)
        return scan

    def _open_block(self, body: BodyReader, opener: str, tokens: tuple[str, ...] = ()) -> None:
        raise NotImplementedError  # the machine's (ChoiceStream)

    def _take_direct(self, name: str, **kwargs: Any) -> None:
        raise NotImplementedError  # the machine's (ChoiceStream): a direct edge of the table

    # modes ------------------------------------------------------------------

    def _enter_reasoning(self) -> None:
        if self._mode is not REASONING:
            self._resume_mode, self._mode = self._mode, REASONING
        self._think_fresh = True

    def _leave_reasoning(self) -> None:
        self._mode = self._resume_mode

    def _base_mode(self) -> TextMode:
        """The mode text is read in outside reasoning."""
        return self._resume_mode if self._mode is REASONING else self._mode

    def _set_mode(self, mode: TextMode) -> None:
        """The mode text goes on in (after reasoning, when reasoning is open)."""
        if self._mode is REASONING:
            self._resume_mode = mode
        else:
            self._mode = mode

    def _leave_message_start(self) -> None:
        """Something visible went out, or a call: no call starts bare any more (a forced answer's next line may)."""
        if self._base_mode() in (MESSAGE_START, FORCED_PROSE, LINE_START, NEXT_CALL, HELD_CALL):
            self._set_mode(self._prose_mode())

    def _call_committed(self) -> None:
        """A call's header went out: a new stretch of text begins after it; a fence that wrapped it goes."""
        self._stretch_has_text = False
        self._tail = []
        if self._base_mode() is HELD_CALL and self._late and self._calls.bare:
            self._calls.note("repaired", "a call written as JSON after text was read as the call")
        self._leave_message_start()
        if self._calls.bare:  # the same form may follow: a next bare call, fence or list
            self._set_mode(NEXT_CALL)
        if self._fence:  # the fence only wrapped this call: it goes, and so will its closer
            self._fence = ""
            self._set_mode(FENCED_CALL_END)
            self._fences.reset()

    def _read_text(self, buf: str, pos: int) -> int:
        """``TEXT``'s reader: the current mode's method reads from ``pos``; returns where it stopped."""
        return _MODE_READERS[self._mode](self, buf, pos)

    def _read_message_start(self, buf: str, pos: int) -> int:
        """Nothing visible yet (or a line's start where a call may begin): a bare call, bare JSON or a fence line."""
        n = len(buf)
        if self._stretch_has_text and not self._fence:  # a line's start after text: its whitespace is text
            pos = self._after_line_space(buf, pos)
            if pos < 0:
                return self._read_forced_prose(buf, -pos - 1)
        j = self._skip_ws(buf, pos)
        if j == n:
            return n
        held = self._holds(buf, j)
        if held is None:
            self._pending = buf[pos:]
            return n
        if held:
            return self._hold_block(buf, pos)  # a call or a shown example: what is around it tells
        if self._mode is LINE_START and not (self._forced and not self._calls.next_index):
            if self._fence:  # after text a fence wraps a call only as JSON: this one is text
                self._emit_text(self._take_fence())
        elif (end := self._open_bare(buf, pos, j)) is not None:
            return end
        if buf[j] == "`" and not self._fence and not self._fences.inside:
            return self._fence_line(buf, pos, j)
        return self._read_forced_prose(buf, pos) if self._watching else self._read_prose(buf, pos)

    def _open_bare(self, buf: str, pos: int, j: int) -> int | None:
        """A call written without an opener at ``buf[j]``: a bare-reading format's, or bare JSON; where to read on
        (``len(buf)`` when it may still become one), ``None`` when none starts there."""
        if self._bare_formats and (body := self._bare_start(buf, j)) is not None:
            if body is Pending.PARTIAL:
                self._pending = buf[pos:]
                return len(buf)
            self._ws += buf[pos:j]
            self._fences.feed(buf[pos:j])
            self._open_block(body, "")
            return j
        if (buf[j] in "{[" and self.config.bare_json
                and (self._lt_only or not opener_at(buf, j, self._sentinels))):  # not a registered sentinel
            self._ws += buf[pos:j]
            self._fences.feed(buf[pos:j])
            self._open_block(JsonCallsBody(self._calls, None, bare=True, by_fit=self._mode is HELD_CALL), "")
            return j
        return None

    def _fence_line(self, buf: str, pos: int, j: int) -> int:
        """A fence line at ``buf[j]`` may wrap a call: held (with the whitespace before it) until what it holds shows."""
        n = len(buf)
        line_end = buf.find("\n", j)
        if line_end == -1 and n - j < 16:
            self._pending = buf[pos:]
            return n
        lang = buf[j + 3:line_end].strip() if line_end != -1 else "-"
        if buf.startswith("```", j) and (lang == "" or lang.isalnum()):
            self._fences.feed(buf[pos:line_end + 1])
            self._fence = self._ws + buf[pos:line_end + 1]  # with the blank lines before it, if it is text
            self._ws = ""
            return line_end + 1
        return self._read_forced_prose(buf, pos) if self._watching else self._read_prose(buf, pos)

    def _read_forced_prose(self, buf: str, pos: int) -> int:
        """Prose to the end of its line; the next line, outside a fence, starts in ``LINE_START``: a model that
        writes its call in a fence (or, under a forced ``tool_choice``, as bare JSON) after a sentence may mean it."""
        examined = self._mode is LINE_START  # this line's start was read already
        if examined and self._stretch_has_text:
            self._mode = self._prose_mode()  # the line's start held nothing: the rest of the line is prose
        line_end = self._next_line_start(buf, pos, examined)
        if line_end < 0:
            return self._read_prose(buf, pos)
        end = pos + self._read_prose(buf[pos:line_end], 0)  # the line alone: a long chunk is never copied per line
        if self._pending:  # a sentinel held until what follows decides it: read on from it, with what follows
            start = line_end - len(self._pending)
            self._pending = ""
            return self._read_prose(buf, start)
        if end == line_end and (self._mode is FORCED_PROSE or self._mode is WATCH) and not self._fences.inside:
            self._mode = LINE_START
            if self._forced:  # a forced answer's call line drops the blank lines before it
                self._stretch_has_text = False
        return end

    def _read_fenced_call_end(self, buf: str, pos: int) -> int:
        """After a fenced call: the fence's closing line, if it comes first, is dropped."""
        j = self._skip_ws(buf, pos)
        n = len(buf)
        if j == n:
            return n
        run = j
        while run < n and buf[run] == "`":
            run += 1
        if run == n:  # what follows the backticks tells a closing fence from a next ```tool_code
            self._pending = buf[pos:]
            return n
        if run - j >= 3 and buf[run] in _WS:
            self._set_mode(NEXT_CALL)  # another fenced call may follow
            self._ws = ""
            end = buf.find("\n", j)
            return n if end == -1 else end + 1
        self._set_mode(PROSE)
        return self._read_prose(buf, pos)

    def _skip_ws(self, buf: str, pos: int) -> int:
        """Where the first non-whitespace character from ``pos`` is; whitespace up to the end is held."""
        j, n = pos, len(buf)
        while j < n and buf[j] in _WS:
            j += 1
        if j == n:
            self._ws += buf[pos:]
            self._fences.feed(buf[pos:])
        return j

    def _read_prose(self, buf: str, pos: int) -> int:
        """Visible text up to the next sentinel (read by :meth:`_on_sentinel`) or a sentinel cut by the end."""
        n = len(buf)
        fed = pos  # the fence tracker has read up to here (a refuted opener resets it, as its block would)
        i = self._find(buf, pos)
        while i != -1:
            for s in self._sentinel_index[buf[i:i + self._keys[buf[i]]]]:
                if buf.startswith(s, i):
                    end = i + len(s)
                    if s in self._refutable:
                        refuted = self._openers[s].refutes(s, buf, end)
                        if refuted is None and n - end <= _UNREFUTED_HOLD:
                            self._hold_from(buf, pos, i, fed)  # undecided: held for the next characters
                            return n
                        if refuted:  # what follows shows it opens no call: it is text (no block opened and released)
                            pos, fed = self._refuted(buf, pos, i, fed, refuted, s)
                            break
                    self._fences.feed(buf[fed:end])  # a sentinel ends no line: no fence changes in it
                    if i > pos:
                        self._emit_text(buf[pos:i])
                    self._on_sentinel(s)
                    return end
            else:
                if self._held(buf, i):
                    self._hold_from(buf, pos, i, fed)
                    return n
                end = i + 1  # it began like a sentinel but is none: text
            i = self._find(buf, end)
        self._fences.feed(buf[fed:])
        self._emit_text(buf[pos:])
        return n

    def _refuted(self, buf: str, pos: int, i: int, fed: int, refuted: Refutation, opener: str) -> tuple[int, int]:
        """The opener at ``buf[i]`` opens no call: the fences as its block's release would leave them, and its
        note (``tool_open_refuted``) after the text before it; returns where the text and the fences now are."""
        fences = self._fences
        fences.feed(buf[fed:i])
        # The text before it goes out first, as before a block, where that decides what the opener is: text ends a
        # held message-start fence's wait (the opener is then in that fence's example), and the whitespace left
        # held is what a released block feeds again before its opener (after a line break, ```tool_code is then
        # a fence line).
        fence_like = opener.lstrip(" ").startswith(("`", "~"))
        if i > pos and (self._fence or fence_like or isinstance(refuted, tuple)):
            self._emit_text(buf[pos:i])
            pos = i
        if fences.inside and not self._fence:  # an example in a fenced block: text, as every sentinel there
            return pos, i
        fences.reset()  # an opener ends any fence line
        if fence_like:
            fences.feed(self._ws)
        if isinstance(refuted, tuple):
            self._take_direct("tool_open_refuted", kind=refuted[0], message=refuted[1])
        return pos, i

    def _hold_from(self, buf: str, pos: int, i: int, fed: int) -> None:
        """Text up to ``i`` goes out (the fences have read to ``fed``); ``buf[i:]`` waits for the next chunk."""
        self._fences.feed(buf[fed:i])
        if i > pos:
            self._emit_text(buf[pos:i])
        self._pending = buf[i:]

    def _bare_start(self, buf: str, j: int) -> BodyReader | Pending | None:
        """The first bare-reading format's block at the message's start ``buf[j]`` (see ``TextFormat.bare_start``)."""
        for fmt in self._bare_formats:
            body = fmt.bare_start(buf, j, self._calls)
            if body is not None:
                return body
        return None

    def _on_sentinel(self, s: str) -> None:
        if self._fences.inside and not self._fence:
            self._emit_text(s)  # an example in a fenced block (a held message-start fence may wrap a call)
        elif s in self._think_opens:
            self._enter_reasoning()
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
            self._open_block(fmt.new_body(s, self._calls), s, fmt.call_tokens if fmt.name == self._taught else ())

    def _read_reasoning(self, buf: str, pos: int) -> int:
        """Reasoning up to a reasoning closer; from a call opener on it is held as a draft."""
        n = len(buf)
        fences = self._fences  # fences in reasoning are tracked too: a sentinel inside one is reasoning (4.13)
        fed = pos  # buf[:fed] has been fed to the fence tracker
        i = self._find(buf, pos)
        while i != -1:
            fences.feed(buf[fed:i])
            fed = i
            if not fences.inside:  # a sentinel holds no newline: inside-ness at i is final
                if buf.startswith(self._think_closes, i):  # any family's closer ends reasoning (a template
                    return self._close_reasoning(buf, pos, i)  # may have opened it)
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

    def _close_reasoning(self, buf: str, pos: int, i: int) -> int:
        """The reasoning closer at ``buf[i]`` ends reasoning: a held draft goes out as reasoning."""
        close = next(c for c in self._think_closes if buf.startswith(c, i))
        self._fences.feed(close)
        self._reasoning(buf[pos:i])
        if self._think_held is not None:
            self._out.append(ReasoningDelta("".join(self._think_held)))
            self._think_held = None
            self._think_fences = None
        self._leave_reasoning()
        return i + len(close)

    # output -----------------------------------------------------------------

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
        if self._suppress_tail and self._calls.valid_calls:
            self._ws = ""
            return
        if not self._stretch_has_text:
            text = self._ws + text
            if not text.strip(_WS):
                self._ws = text
                return
            self._ws = ""
            self._stretch_has_text = True
            self._leave_message_start()
            self._after_call = False
            text = self._take_fence() + text
        elif self._ws or self._fence:  # a fence line (and whitespace) held at a line's start after text
            text, self._ws = self._take_fence() + self._ws + text, ""
        if text:
            self._out.append(TextDelta(text))
            if self._watching:
                tail = self._tail
                tail.append(text)
                if len(tail) > 64:  # kept short: only its last BEFORE characters are ever read
                    tail[:] = ["".join(tail)[-BEFORE:]]

    def _take_fence(self) -> str:
        fence, self._fence = self._fence, ""
        return fence

    def _flush_text(self, *, final: bool = False) -> None:
        """Release held text: a partial sentinel, a held fence, and (at the end) whitespace."""
        pending, self._pending = self._pending, ""
        if self._mode is REASONING:
            self._reasoning(pending)
            return
        if pending:
            self._emit_text(pending)
        if not final:
            return
        if self._fence:
            self._out.append(TextDelta(self._take_fence()))
        calls = self._calls
        if self._ws and not calls.valid_calls and calls.next_index == 0 and not self._ws_is_break:
            self._out.append(ReasoningDelta(self._ws) if self._draft_text_is_reasoning else TextDelta(self._ws))
        self._ws = ""

    def _drop_block(self, *, reasoning: bool) -> None:
        """A dropped block (a message header) is followed by reasoning, or by a new message of visible text."""
        if reasoning:
            self._enter_reasoning()
        elif self._stretch_has_text:  # a new message of visible text: held like whitespace until text comes
            self._stretch_has_text = False
            self._ws = "\n"
            self._ws_is_break = True

    def _read_draft_again(self) -> None:
        """At the finish, in unclosed reasoning: the draft held from a call opener on was real; read it again."""
        assert self._think_held is not None
        held, self._think_held = "".join(self._think_held) + self._pending, None
        self._pending = ""
        self._leave_reasoning()  # reasoning never closed: the held call was real
        self._draft_text_is_reasoning = True  # … but what is no call in it stays reasoning
        self._refutable = frozenset()  # at the finish the readers decide (as for a held opener)
        self._fences = self._think_fences or self._fences
        self._think_fences = None
        self._scan(held)

    def _scan(self, buf: str) -> None:
        raise NotImplementedError  # the machine's (ChoiceStream)


#: Each mode's reader.
_MODE_READERS: dict[TextMode, Callable[[TextReader, str, int], int]] = {
    PROSE: TextReader._read_prose,
    MESSAGE_START: TextReader._read_message_start,
    LINE_START: TextReader._read_message_start,
    NEXT_CALL: TextReader._read_message_start,
    HELD: TextReader._read_held,
    HELD_CALL: TextReader._read_message_start,
    FORCED_PROSE: TextReader._read_forced_prose,
    WATCH: TextReader._read_forced_prose,
    FENCED_CALL_END: TextReader._read_fenced_call_end,
    REASONING: TextReader._read_reasoning,
}
