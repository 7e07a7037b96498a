"""Gateway tools run inside the response (docs/gateway-tools.md): a call the model makes of a tool toolwire runs
itself (an MCP server's, web search) never goes to the client; it is run, its result is given back to the model
and the next generation opens in the same response, until the model answers or calls one of the client's own
tools, asks for a call the client must approve, or a limit is hit.

Built on the model of :class:`~app.pipeline.reask.Reasking`: the generation's calls are held until they end
(``Policy.hold_calls``), so a gateway call is known whole before anything of it could go out. The surface's
encoder gets the core's events of every generation (text, the client's calls, the last finish) and, in their
place for each gateway call, a :class:`~app.gateway_tools.base.GatewayCallStarted` and a
:class:`~app.gateway_tools.base.GatewayCallFinished` (or a
:class:`~app.gateway_tools.base.GatewayApprovalRequested`). A run waits in its own greenlet, bounded by the
toolset's timeout and the request's time limit; a stream meanwhile gets the pauses its keep-alives and its time
limit are checked at. Usage sums every generation.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any, Callable, Generator, Iterator, NamedTuple

import gevent
import orjson

from statemachine import ChoiceFinished, Event, ParserConfig, TextDelta, ToolCallArgumentsDelta, ToolCallEnded, \
    ToolCallInputDelta, ToolCallStarted, ToolChoice

from ..gateway_tools.base import GatewayApprovalRequested, GatewayCallFinished, GatewayCallStarted, \
    GatewayEvent, GatewayTool, GatewayToolset, ToolRun
from ..observability import record as observe
from ..upstreams.base import IDLE, PAUSE, Pause, UpstreamStream

if TYPE_CHECKING:
    from ..observability.record import RequestRecord
    from .driver import ChoiceDriver
    from .reask import Reasking

#: What the loop yields: the core's events and the gateway's, by choice index, and the pauses.
LoopItem = tuple[int, Event | GatewayEvent] | tuple[None, Pause]


class NextGeneration(NamedTuple):
    """A generation the loop opened after running calls: its stream, its driver and the prompt's characters
    (for a usage estimate)."""

    stream: UpstreamStream
    driver: ChoiceDriver
    prompt_chars: int


class Ended(NamedTuple):
    """How one generation ended: its finish (held back), the text it said, how many of the client's tools it
    called."""

    finished: tuple[int, Event]
    said: str
    client_calls: int


#: Opens the next generation given the turns to add after the client's transcript and whether the gateway tools
#: are still offered.
Again = Callable[[list[dict[str, Any]], bool], NextGeneration]


def offering(config: ParserConfig, toolset: GatewayToolset) -> ParserConfig:
    """``config`` with the gateway tools offered beside the client's.

    Raises:
        ValueError: a gateway tool is named like one of the client's.
    """
    clash = sorted(config.tools.keys() & toolset.tools.keys())
    if clash:
        raise ValueError(f"gateway tools named like the client's: {', '.join(clash)}")
    return dataclasses.replace(config, tools={**config.tools, **{spec.name: spec for spec in toolset.specs()}})


def following(config: ParserConfig, toolset: GatewayToolset, *, gateway: bool) -> ParserConfig:
    """The configuration of a generation after gateway calls ran: its tool choice free (a forced call was met by
    the call that ran), and without the gateway tools once their limit was reached."""
    tools = config.tools if gateway else {name: spec for name, spec in config.tools.items()
                                          if name not in toolset.tools}
    choice = config.tool_choice if config.tool_choice.mode == "none" else ToolChoice("auto")
    return dataclasses.replace(config, tools=tools, tool_choice=choice)


class GatewayLoop:
    """The events of a response whose model may call gateway tools: iterate for ``(index, event)`` as over a
    :class:`~app.pipeline.driver.ChoiceDriver` (one choice); it also stands for the upstream stream in use
    (``pause_every``, ``wait``, ``close``) and reports the usage and output of every generation.

    Args:
        events: the first generation's events (a driver or a :class:`~app.pipeline.reask.Reasking`; its calls
            held until they end).
        source: the first generation's stream (or the ``Reasking`` standing for it).
        toolset: the request's gateway tools and limits.
        again: opens the next generation (:data:`Again`).
        deadline: the request's time limit (a ``time.monotonic()`` time), if it has one.
        record: the request's record (each call is named on its access line).
    """

    __slots__ = ("_events", "_source", "_toolset", "_again", "_deadline", "_tick", "_running", "_calls",
                 "_added", "_usages", "_earlier_chars", "_record", "later_prompt_chars")

    def __init__(self, events: ChoiceDriver | Reasking, source: UpstreamStream | Reasking, toolset: GatewayToolset,
                 again: Again, *, deadline: float | None, record: RequestRecord | None = None):
        self._record = record
        self._events: ChoiceDriver | Reasking = events
        self._source: UpstreamStream | Reasking = source
        self._toolset = toolset
        self._again = again
        self._deadline = deadline
        self._tick: float | None = None
        self._running: gevent.Greenlet | None = None
        self._calls = 0  # gateway calls of this response (run or refused by the limit)
        self._added: list[dict[str, Any]] = []  # the turns added after the client's transcript so far
        self._usages: list[dict[str, Any] | None] = []  # the earlier generations' usage
        self._earlier_chars = 0
        #: The prompt characters of the generations after the first (a usage estimate counts them too).
        self.later_prompt_chars = 0

    @property
    def usage(self) -> dict[str, Any] | None:
        """Every generation's usage summed (``None`` unless each had the back end's)."""
        usages = [*self._usages, self._events.usage]
        if any(usage is None for usage in usages):
            return None
        return _summed([usage for usage in usages if usage is not None])

    @property
    def output_chars(self) -> int:
        """Characters produced by every generation."""
        return self._earlier_chars + self._events.output_chars

    def pause_every(self, tick: float | None) -> None:
        """Pass the pauses' interval to the stream in use (and to the next ones)."""
        self._tick = tick
        self._source.pause_every(tick)

    def wait(self) -> None:
        """The stream in use's wait for its next bytes; nothing while a call runs (the loop waits on it)."""
        wait = getattr(self._source, "wait", None)
        if wait is not None and self._running is None:
            wait()

    def close(self) -> None:
        """Close the stream in use, abandon a run under way and let the tools' connections go."""
        running = self._running
        if running is not None:
            running.kill(block=False)
        self._source.close()
        self._toolset.close()

    def __iter__(self) -> Iterator[LoopItem]:
        try:
            while True:
                held: list[ToolCallEnded] = []
                ended = yield from self._generation(held)
                if ended is None:  # (an events source that ended without a finish)
                    return
                finished, said, client_calls = ended
                if held:
                    turns: list[dict[str, Any]] = []
                    approval = yield from self._run_all(held, said, turns)
                    if not (approval or client_calls):
                        self._next(turns)
                        continue
                yield finished
                return
        finally:
            self._toolset.close()

    def _generation(self, held: list[ToolCallEnded]) -> Generator[LoopItem, None, Ended | None]:
        """Pass one generation's events on, its valid gateway calls put in ``held``; its finish is returned, not
        passed (the response may go on)."""
        gateway_indexes: set[int] = set()
        said: list[str] = []
        client_calls = 0
        finished: tuple[int, Event] | None = None
        for item in self._events:
            index, event = item
            if index is None:
                yield item
                continue
            if isinstance(event, ToolCallStarted) and event.name in self._toolset.tools:
                gateway_indexes.add(event.index)
                continue
            if isinstance(event, (ToolCallArgumentsDelta, ToolCallInputDelta)) and event.index in gateway_indexes:
                continue
            if isinstance(event, ToolCallEnded):
                if event.index in gateway_indexes:
                    if event.valid:
                        held.append(event)
                    continue
                client_calls += 1
            elif isinstance(event, TextDelta):
                said.append(event.text)
            elif isinstance(event, ChoiceFinished):
                finished = (index, event)
                continue
            yield item
        return None if finished is None else Ended(finished, "".join(said), client_calls)

    def _run_all(self, held: list[ToolCallEnded], said: str, turns: list[dict[str, Any]]
                 ) -> Generator[LoopItem, None, bool]:
        """Run the held calls in turn (each told to the encoder before and after), filling ``turns`` with the
        assistant's calls and their results; returns whether a call awaits the client's approval."""
        approval = False
        calls: list[dict[str, Any]] = []
        for call in held:
            tool = self._toolset.tools[call.name]
            if tool.needs_approval:
                approval = True
                yield 0, GatewayApprovalRequested(call.call_id, tool, call.arguments)
                continue
            yield 0, GatewayCallStarted(call.call_id, tool, call.arguments)
            if self._tick is not None:
                yield None, PAUSE  # the call's start goes out before it runs
            began = time.monotonic()
            run, outcome = yield from self._run(tool, call.arguments)
            seconds = time.monotonic() - began
            observe.note_gateway(tool.kind, "call", outcome, seconds, self._record)
            yield 0, GatewayCallFinished(call.call_id, tool, call.arguments, run, seconds)
            calls.append({"id": call.call_id, "type": "function",
                          "function": {"name": call.name, "arguments": call.arguments}})
            turns.append({"role": "tool", "tool_call_id": call.call_id, "content": run.output})
        if calls:
            turns.insert(0, {"role": "assistant", "content": said or None, "tool_calls": calls})
        return approval

    def _run(self, tool: GatewayTool, arguments: str) -> Generator[LoopItem, None, tuple[ToolRun, str]]:
        """One call's run and its outcome (``ok``, ``error``, ``timeout``, ``limit``), in its own greenlet,
        bounded by the toolset's timeout and the request's limit; a stream gets an ``IDLE`` pause each tick
        meanwhile."""
        self._calls += 1
        if self._calls > self._toolset.max_calls:
            return _failed(f"not run: the limit of {self._toolset.max_calls} gateway tool calls per response was "
                           "reached"), "limit"
        try:
            parsed = orjson.loads(arguments or "{}")
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            return _failed("the arguments are not a JSON object"), "error"
        deadline = self._toolset.deadline(self._deadline)
        running = self._running = gevent.spawn(_guarded, tool, parsed, deadline)
        try:
            while not running.ready():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                running.join(min(left, self._tick) if self._tick else left)
                if not running.ready() and self._tick is not None:
                    yield None, IDLE
        finally:
            self._running = None
            if not running.ready():
                running.kill(block=False)
        if not running.ready():
            return _failed(f"the tool did not answer within {self._toolset.timeout_seconds:g} seconds"), "timeout"
        run: ToolRun = running.value
        return self._toolset.clipped(run), "error" if run.error else "ok"

    def _next(self, turns: list[dict[str, Any]]) -> None:
        """Open the next generation with ``turns`` added, in place of the one that ended."""
        self._usages.append(self._events.usage)
        self._earlier_chars += self._events.output_chars
        self._added.extend(turns)
        opened = self._again(list(self._added), self._calls < self._toolset.max_calls)
        self.later_prompt_chars += opened.prompt_chars
        self._events = opened.driver
        self._source = opened.stream
        if self._tick is not None:
            opened.stream.pause_every(self._tick)


def _guarded(tool: GatewayTool, arguments: dict[str, Any], deadline: float) -> ToolRun:
    """``tool.run``, an exception made the model's error."""
    try:
        return tool.run(arguments, deadline)
    except Exception as exc:  # a tool's failure is the model's to hear about, never the response's end
        return _failed(f"the tool failed: {type(exc).__name__}: {exc}")


def _failed(message: str) -> ToolRun:
    """A run that failed with ``message`` (what the model is told)."""
    return ToolRun(f"Error: {message}", error=message)


def _summed(usages: list[dict[str, Any]]) -> dict[str, Any]:
    """Usage objects added up: numbers summed, nested detail objects summed key by key."""
    total: dict[str, Any] = {}
    for usage in usages:
        for key, value in usage.items():
            if isinstance(value, bool) or value is None:
                total.setdefault(key, value)
            elif isinstance(value, (int, float)):
                total[key] = total.get(key, 0) + value
            elif isinstance(value, dict):
                total[key] = _summed([total[key], value]) if isinstance(total.get(key), dict) else dict(value)
            else:
                total.setdefault(key, value)
    return total
