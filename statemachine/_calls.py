"""The call book: what body readers report to (the :class:`~statemachine.formats.CallSink`).

A reader describes what it finds; the book keeps the call being read, decides
whether it is accepted, buffers what comes before its name, and records how it
ended (a :class:`~statemachine._table.Verdict`). The machine fires the edge the
verdict names when the call's block ends, and the edges' callbacks
(:meth:`CallBook.commit`, :meth:`CallBook.close`, :meth:`CallBook.settle`) emit
the call's events: every header, end and rejection goes out inside the table.

The book knows the machine only by its port, :class:`CallMachine`: the two edges a
reader's report makes due at once (a call begins; its name is accepted). How a call
ended waits in :attr:`CallBook.due` for the machine to act on.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Protocol

from ._config import ParserConfig
from ._errors import ModelOutputError
from ._events import CUSTOM, FUNCTION, Event, ToolCallArgumentsDelta, ToolCallEnded, ToolCallInputDelta, ToolCallNote, \
    ToolCallStarted
from ._regex import RegexError, regex_matches
from ._schema import schema_errors
from ._table import Verdict

ACCEPT, REJECT, SUPPRESS = "accept", "reject", "suppress"


class CallMachine(Protocol):
    """The call book's port: the machine's edges that a reader's report makes due at once, in the middle of
    its block (:class:`~statemachine.ChoiceStream` is one)."""

    def begin_call(self, native: bool) -> None:
        """A call begins (a block's first, or its next): leave the call before it by its verdict's edge, then take
        ``tool_open_seen``."""

    def complete_name(self) -> None:
        """The call's accepted name is complete and its header due: take ``name_completed``."""


class Call:
    """Book-keeping for one call being read."""

    __slots__ = ("name", "kind", "decision", "index", "call_id", "pre_args", "pre_len", "args", "invalid", "native",
                 "bare", "valved", "verdict", "repaired", "reason", "then_reasoning")

    def __init__(self, native: bool = False, bare: bool = False):
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
        self.bare = bare  # bare JSON at the message's start: a block that is no call is text, without a note
        self.valved = False
        self.verdict: Verdict | None = None  # how it ended: the edge the machine leaves the call states by
        self.repaired = False
        self.reason: tuple[str | None, str] = (None, "")  # a disproved call's note kind and message
        self.then_reasoning = False  # a dropped block (a message header) is followed by reasoning

    @property
    def header_sent(self) -> bool:
        return self.index >= 0


class CallBook:
    """The choice's calls: the :class:`~statemachine.formats.CallSink` every body reader of the choice gets.

    Args:
        machine: the machine's port (the stream owns the book, so the book holds its machine weakly).
        config: the request's tools, ``tool_choice`` and policy.
        openers: every call opener of the request's formats.
        new_id: makes call ids.
    """

    __slots__ = ("config", "openers", "call", "due", "bare", "cut", "truncated", "incomplete", "valid_calls",
                 "next_index", "out", "_machine", "_all_strict", "_new_id")

    def __init__(self, machine: CallMachine, config: ParserConfig, openers: tuple[str, ...],
                 new_id: Callable[[], str]):
        self._machine = machine
        self.config = config
        self.openers = openers  # bodies stop at these outside JSON strings (case 14)
        self._new_id = new_id
        # With only strict tools, an unknown name breaks the strict contract (strict_mismatch policy).
        self._all_strict = bool(config.tools) and all(t.strict for t in config.tools.values())
        self.call: Call | None = None  # the call being read
        self.due: Call | None = None  # the ended call whose edge out of the call states is still to fire
        self.bare = False  # the open block is bare JSON
        self.cut = False  # policy stopped reading (stop after the first call, max calls)
        self.truncated = False  # the upstream cut the output short (length, content filter)
        self.incomplete = False  # a call was left incomplete
        self.valid_calls = 0
        self.next_index = 0
        self.out: list[Event] = []  # the machine's events of the current input

    @property
    def holding_args(self) -> bool:
        """Whether the call being read is accepted and its arguments have begun, held until they end."""
        call = self.call
        return call is not None and call.decision == ACCEPT and bool(call.pre_args)

    # the sink (what readers report) -------------------------------------------

    def call_begin(self, *, native: bool = False) -> None:
        """A call block (or the next call inside one) begins."""
        self._machine.begin_call(native)

    def call_name(self, name: str, *, kind: str = FUNCTION) -> None:
        """The call's complete name and kind (``function`` or ``custom``); decide whether it is accepted.

        A custom call's header goes out at once (its input may be empty); a
        function call's waits for its arguments to begin.
        """
        call = self.call
        if call is None or call.name is not None:
            return
        call.name = _strip_decorations(name)
        call.kind = kind
        if call.valved:
            return
        call.decision = self._decide(call.name, kind, bare=call.bare)
        if call.decision == ACCEPT and (call.pre_args or kind == CUSTOM) and not self.config.policy.hold_calls:
            self._machine.complete_name()

    def call_args(self, text: str) -> None:
        """A fragment of the call's arguments text."""
        call = self.call
        if call is None or not text:
            return
        if call.index >= 0:  # the header went out; the arguments' path per chunk: _args_out, inlined
            call.args.append(text)
            self.out.append((ToolCallInputDelta if call.kind == CUSTOM else ToolCallArgumentsDelta)(call.index, text))
        elif call.decision == ACCEPT and not self.config.policy.hold_calls:
            self._machine.complete_name()  # the header waits until the arguments begin
            self._args_out(call, text)
        elif call.decision in (None, ACCEPT) and not call.valved:
            call.pre_args.append(text)
            call.pre_len += len(text)
            if call.pre_len > self.config.policy.hold_limit and not self.config.policy.hold_calls:
                call.valved = True  # the size valve: this block will go back to text
                call.pre_args = []

    def call_end(self, *, repaired: bool = False, invalid: bool = False) -> bool:
        """The call's arguments are complete: it is closed when its block ends (a rejected one disproved); whether
        it was a call. A held call (``Policy.hold_calls``) goes out now, whole, if it is acceptable."""
        call = self.call
        if call is None:
            return False
        problem = None
        if call.decision == ACCEPT and not call.header_sent and self.config.policy.hold_calls:
            call.invalid |= invalid
            problem = self._held_problem(call)
            if problem is None:
                self._machine.complete_name()
        self.call = None
        if call.decision != ACCEPT:  # never accepted (a valved call never gets a decision)
            self._ended(call, Verdict.DISPROVED, "invalid_json" if call.name is None else None)
        elif not call.header_sent:  # accepted, but its arguments never became an acceptable object
            self._ended(call, Verdict.DISPROVED, *(problem or ("invalid_json", "the arguments are not a JSON object")))
        else:
            call.repaired = repaired
            call.invalid |= invalid
            self._ended(call, Verdict.CLOSED)
        return call.verdict is Verdict.CLOSED

    def call_unclosed(self, *, repaired: bool = False, invalid: bool = False, tail: str = "") -> None:
        """The stream ended after a complete call whose block never closed (4.11).

        Accepted after a normal stop (``tail``, the arguments' closing text, is
        sent first); when the upstream cut the output short the block may have
        been cut too, so the call is incomplete instead.
        """
        if self.truncated:
            self.call_incomplete()
            return
        self.note("recovered_unclosed", "the call block had no closer; its body was complete")
        self.call_args(tail)
        self.call_end(repaired=repaired, invalid=invalid)

    def call_invalid(self) -> None:
        """The body turned out malformed; a committed call ends as invalid now."""
        call = self.call
        if call is None:
            return
        call.invalid = True
        if call.header_sent:
            self.call_end(invalid=True)

    def call_abort(self, kind: str, message: str) -> None:
        """The block is not a call: release it as text (if nothing of it was sent)."""
        call = self.call
        if call is None:
            return
        if call.header_sent:
            self.call_end(invalid=True)
            return
        self.call = None
        self._ended(call, Verdict.DISPROVED, kind, message)

    def drop_block(self, *, reasoning: bool = False) -> None:
        """The block is structure, not a call (a Harmony message header): its text is dropped, and what
        follows is reasoning or visible text; visible text after visible text starts on a new line."""
        call = self.call
        if call is None or call.header_sent:
            return
        self.call = None
        call.then_reasoning = reasoning
        self._ended(call, Verdict.DISPROVED, "dropped")

    def call_incomplete(self) -> None:
        """The stream ended inside the call's body."""
        call = self.call
        if call is None:
            return
        if call.header_sent:
            self.call = None
            self.incomplete = True
            self.note("incomplete", "the stream ended inside a call", index=call.index, name=call.name)
        else:
            self.call_abort("incomplete", "the stream ended inside a call block")

    def note(self, kind: str, message: str, *, index: int | None = None, name: str | None = None) -> None:
        """Report a recoverable mistake or repair as a ``ToolCallNote``."""
        call = self.call
        if index is None and call is not None and call.header_sent:
            index, name = call.index, call.name
        self.out.append(ToolCallNote(kind, message, index, name))

    def schema_for(self, name: str | None) -> Mapping[str, Any] | None:
        """The JSON Schema of an offered tool's parameters."""
        spec = self.config.tools.get(name or "")
        return spec.parameters if spec else None

    def current_name(self) -> str | None:
        """The name of the call being parsed, if known."""
        return self.call.name if self.call else None

    # the machine's side -------------------------------------------------------

    def hold(self, native: bool) -> None:
        """Entering ``in_tool_call``: a new call is held (:meth:`call_args` buffers arguments before its name)."""
        self.call = Call(native, self.bare and not native)

    def commit(self) -> None:
        """``name_completed``: the call is committed: index and id, ``ToolCallStarted``, the held arguments."""
        call = self.call
        assert call is not None and call.name is not None  # the edge is due only for an accepted name
        call.index = self.next_index
        self.next_index += 1
        call.call_id = self._new_id()
        self.out.append(ToolCallStarted(call.index, call.call_id, call.name, call.kind))
        if call.pre_args:
            self._args_out(call, "".join(call.pre_args))
            call.pre_args = []

    def close(self, call: Call) -> None:
        """``tool_close_seen``: the call's ``ToolCallEnded``, valid or not; a valid one is counted, and may
        reach the policy's limit (the cut: nothing more is read)."""
        assert call.name is not None
        arguments = "".join(call.args)
        if call.kind == CUSTOM:
            problem = self._grammar_problem(call, arguments)
        else:
            value = None if call.invalid else _json_object(arguments)
            problem = "invalid_json" if value is None else self._schema_problem(call, value)
        valid = problem is None
        self.out.append(ToolCallEnded(call.index, call.call_id, call.name, arguments, valid, call.kind))
        if problem is not None:
            self.incomplete = True
            self.note(problem, f"the arguments of {call.name!r} are not acceptable ({problem})",
                      index=call.index, name=call.name)
            return
        self.valid_calls += 1
        if call.repaired:
            self.note("repaired", "the call's JSON was repaired", index=call.index, name=call.name)
        policy = self.config.policy
        if policy.stop_after_first_call or (policy.max_tool_calls and self.valid_calls >= policy.max_tool_calls):
            self.cut = True

    def settle(self, call: Call) -> str:
        """``tool_open_disproved``: the note a rejected call earns (or the ``fail`` policy's error); returns
        how its block's text goes: ``suppressed`` and ``dropped`` blocks never go out."""
        kind, message = call.reason
        if kind == "dropped":  # structure (a message header): no note, and its text never goes out
            return kind
        if call.valved:
            kind, message = "invalid_json", "the arguments grew past the hold limit before the name"
        elif call.decision == SUPPRESS:
            kind, message = "suppressed", "a further call is not allowed here; it was dropped"
        elif call.decision == REJECT:
            kind, message = "unknown_tool", f"{call.name!r} is not an offered tool"
        elif kind is None:
            kind, message = "invalid_json", "the block has no function name"
        if kind == "invalid_json" and not call.bare and self.config.policy.invalid_json == "fail":
            raise ModelOutputError(message or "the model wrote an invalid call", code="invalid_json")
        # a bare block is a call only once it names an offered tool: before that, its failure is plain text
        if kind != "not_a_call" and (not call.bare or kind == "unknown_tool" or call.decision == ACCEPT):
            self.note(kind, message or kind, name=call.name)
        return kind

    def end_native(self) -> None:
        """The native call being read is complete (its next fragment is another call's, text, or the finish);
        its edge is due (:attr:`due`)."""
        call = self.call
        if call is not None and call.native:
            if call.name is None:
                self.call_abort("invalid_json", "a native call never got a name")
            else:
                self.call_end()

    # helpers ------------------------------------------------------------------

    def _ended(self, call: Call, verdict: Verdict, kind: str | None = None, message: str = "") -> None:
        """The call ended with ``verdict``: the machine takes its edge once the block ends (a native call's when
        the report that ended it returns)."""
        call.verdict = verdict
        call.reason = (kind, message)
        self.due = call

    def _decide(self, name: str, kind: str, *, bare: bool) -> str:
        config = self.config
        if config.tool_choice.mode == "none":  # a native call (the back end ignored "none") or a Harmony one
            return SUPPRESS
        if self.valid_calls and (not config.parallel_tool_calls or config.legacy_functions):
            return SUPPRESS
        allowed = config.tool_choice.allowed
        spec = config.tools.get(name)
        if spec is not None and spec.kind == kind and (allowed is None or name in allowed):
            return ACCEPT
        if bare:
            return REJECT
        policy = config.policy.strict_mismatch if self._all_strict else config.policy.unknown_tool
        if policy == "fail":
            raise ModelOutputError(f"the model called an unknown tool {name!r}", code="unknown_tool")
        return ACCEPT if policy == "emit" else REJECT

    def _args_out(self, call: Call, text: str) -> None:
        call.args.append(text)
        delta = ToolCallInputDelta if call.kind == CUSTOM else ToolCallArgumentsDelta
        self.out.append(delta(call.index, text))

    def _held_problem(self, call: Call) -> tuple[str, str] | None:
        """Why a held call (``Policy.hold_calls``) is not sent, as a note's ``(kind, message)``: arguments that are
        not a JSON object, or miss its schema under a ``text`` policy (a ``fail`` policy's error comes when it
        closes); ``None`` if it goes out."""
        if call.kind == CUSTOM:
            return None
        value = None if call.invalid else _json_object("".join(call.pre_args))
        if value is None:
            return "invalid_json", f"the arguments of {call.name!r} are not a JSON object"
        spec = self.config.tools.get(call.name or "")
        shown = self.config.example_arguments.get(call.name or "", ())
        if spec is not None and any(_copies(value, example, spec.parameters) for example in shown):
            return "example_copy", f"the arguments of {call.name!r} are the example's placeholders, not values " \
                                   "from the request"
        policy = self.config.policy
        if spec is None or not spec.parameters or (policy.strict_mismatch if spec.strict else
                                                   policy.schema_mismatch) != "text":
            return None
        errors = schema_errors(spec.parameters, value)
        return ("schema_mismatch", f"the arguments of {call.name!r} do not match its schema: {errors[0]}") if errors \
            else None

    def _schema_problem(self, call: Call, value: dict[str, Any]) -> str | None:
        spec = self.config.tools.get(call.name or "")
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
            raise ModelOutputError(f"arguments for {call.name!r} do not match its schema: {errors[0]}",
                                   code="tool_arguments_invalid")
        if mode == "emit":
            self.note("schema_mismatch", errors[0], index=call.index, name=call.name)
            return None
        return "schema_mismatch"

    def _grammar_problem(self, call: Call, text: str) -> str | None:
        """A custom tool with a ``regex`` grammar: the whole input must match it (schema policies apply)."""
        spec = self.config.tools.get(call.name or "")
        grammar = (spec.input_format if spec else None) or {}
        if spec is None or grammar.get("type") != "grammar" or grammar.get("syntax") != "regex":
            return None
        try:
            matched = regex_matches(grammar.get("definition", ""), text, whole=True)
        except (RegexError, TypeError):  # refused when the request came in; here only from an embedding host
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


def _copies(value: dict[str, Any], shown: Mapping[str, Any], parameters: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` holds the worked example's ``shown`` arguments, and any others only at their schema
    default or at the example's hint for them (``"<key>"``). An example without arguments is any call of its tool,
    so it is never a copy."""
    if not shown or any(key not in value or value[key] != example for key, example in shown.items()):
        return False
    properties = (parameters or {}).get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    for key, given in value.items():
        schema = properties.get(key)
        if key not in shown and given not in (f"<{key}>", f"<another {key}>") and \
                not (isinstance(schema, Mapping) and "default" in schema and schema["default"] == given):
            return False
    return True


def _strip_decorations(name: str) -> str:
    """``functions.get_weather:0`` → ``get_weather``."""
    name = name.strip()
    if name.startswith("functions."):
        name = name[len("functions."):]
    head, sep, tail = name.rpartition(":")
    if sep and tail.isdigit():
        name = head
    return name


def _json_object(arguments: str) -> dict[str, Any] | None:
    """The arguments parsed (once per call), or ``None`` unless they are a JSON object."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
