"""Validate, then re-ask once (``reask_calls``): a call whose arguments are not a JSON object or miss its tool's
schema, or a forced ``tool_choice`` the answer did not meet, is asked for again, once, with the error told to the
model, before anything of the call went to the client.

The first answer's calls are held until they end (``Policy.hold_calls``) and checked against their schemas
(``schema_mismatch`` / ``strict_mismatch`` read as ``text`` for it), so a bad one is a rejected block, never a sent
call. On a stream, what the client already got of the first answer (its text before the call) stays and the
rest of it is dropped; an answer sent whole (``hold_first``) keeps nothing of a first answer it asked again
for, since nothing of it went out. The second answer's events follow, under the operator's own policies. The request's time limit
covers both answers.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from statemachine import ChoiceFinished, Event, ModelOutputError, ParserConfig, Policy, TextDelta, ToolCallEnded, \
    ToolCallNote

from ..observability import metrics
from ..upstreams.base import Pause, UpstreamStream

if TYPE_CHECKING:
    from .context import RequestContext
    from .driver import ChoiceDriver

#: The notes of a held call that failed its check, and so earn a second answer.
RETRIED = frozenset({"invalid_json", "schema_mismatch"})
#: The codes of a fail policy's errors that earn a second answer.
FAILED = frozenset({"invalid_json", "tool_arguments_invalid", "unknown_tool"})
#: The reason a forced ``tool_choice`` no call met is counted under.
FORCED_UNMET = "forced_choice_unmet"


def checked(config: ParserConfig, *, validate: bool, examples: Mapping[str, Mapping[str, Any]] | None = None
            ) -> ParserConfig:
    """``config`` holding each call until it ends; with ``validate``, a schema mismatch also rejects it; a call with
    the arguments of its tool's worked example in ``examples`` is not a call (``ParserConfig.example_arguments``)."""
    policy: Policy = dataclasses.replace(config.policy, hold_calls=True)
    if validate and policy.schema_mismatch == "emit":
        policy = dataclasses.replace(policy, schema_mismatch="text")  # (a fail policy's error is re-asked too)
    return dataclasses.replace(config, policy=policy, example_arguments=examples or {})


def feedback(problem: str, config: ParserConfig) -> str:
    """What the model is told before its second answer."""
    if problem == FORCED_UNMET:
        names = sorted(config.tool_choice.allowed or config.tools)
        return (f"You must call {' or '.join(names)} now. Answer with the call only, in the format the "
                "instructions show.")
    return (f"That tool call could not be used: {problem}. Write the call again, with arguments that are one JSON "
            "object matching the tool's parameters.")


class Reasking:
    """The events of a generation that may ask the model a second time: iterate for ``(index, event)`` as over a
    :class:`~app.pipeline.driver.ChoiceDriver`; it also stands for the upstream stream in use (``pause_every``,
    ``wait``, ``close``) and reports the usage and output of both answers (``usage``, ``output_chars``).

    Args:
        driver: the first answer's driver (its calls held and checked: :func:`checked`).
        stream: the first answer's upstream stream.
        config: the first answer's parser configuration.
        again: opens the second answer given the messages to add to the transcript; its stream and driver.
        context: the request's context (its record gets the reason; the metric its model label).
        hold_first: hold the first answer's events until it is known to stand (an answer sent whole), so a
            first answer asked again for leaves nothing in the reply.
    """

    __slots__ = ("_driver", "_stream", "_config", "_again", "_context", "_tick", "_earlier_chars", "_hold_first")

    def __init__(self, driver: ChoiceDriver, stream: UpstreamStream, config: ParserConfig,
                 again: Callable[[list[dict[str, Any]]], tuple[UpstreamStream, ChoiceDriver]],
                 context: RequestContext, *, hold_first: bool = False):
        self._hold_first = hold_first
        self._driver = driver
        self._stream = stream
        self._config = config
        self._again = again
        self._context = context
        self._tick: float | None = None
        self._earlier_chars = 0

    @property
    def usage(self) -> dict[str, Any] | None:
        """The back end's usage of the answer in use."""
        return self._driver.usage

    @property
    def output_chars(self) -> int:
        """Characters produced by both answers."""
        return self._earlier_chars + self._driver.output_chars

    def pause_every(self, tick: float | None) -> None:
        """Pass the pauses' interval to the stream in use (and to the next one)."""
        self._tick = tick
        self._stream.pause_every(tick)

    def wait(self) -> None:
        """The stream in use's wait for its next bytes (an in-process one waits in its own way)."""
        wait = getattr(self._stream, "wait", None)
        if wait is not None:
            wait()

    def close(self) -> None:
        """Close the stream in use."""
        self._stream.close()

    def __iter__(self) -> Iterator[tuple[int, Event] | tuple[None, Pause]]:
        said: list[str] = []
        held: list[tuple[int, Event]] = []
        calls = 0
        events = iter(self._driver)
        problem = None
        try:
            for item in events:
                event = item[1]
                if not isinstance(event, Pause):
                    problem = self._problem(event, calls)
                    if problem is not None:
                        break
                    if isinstance(event, TextDelta):
                        said.append(event.text)
                    elif isinstance(event, ToolCallEnded) and event.valid:
                        calls += 1
                    if self._hold_first:
                        held.append(item)  # type: ignore[arg-type]  # (an event's item, not a pause's)
                        continue
                yield item
        except ModelOutputError as exc:  # a fail policy's error: the call it names never went out
            if exc.code not in FAILED:
                raise
            problem = exc.message
        if problem is None:
            yield from held
            return
        close = getattr(events, "close", None)
        if close is not None:
            close()  # the first answer is over: its upstream is closed (the driver's own finally)
        yield from self._second(problem, "".join(said))

    def _problem(self, event: Event, calls: int) -> str | None:
        """What makes ``event`` end the first answer: a held call's failed check, or a finish without the call a
        forced choice demands; ``None`` if it goes out."""
        if isinstance(event, ToolCallNote) and event.index is None and event.kind in RETRIED:
            return event.message
        if isinstance(event, ChoiceFinished) and not calls and self._config.tool_choice.mode == "required" \
                and event.finish_reason not in ("length", "content_filter"):
            return FORCED_UNMET
        return None

    def _second(self, problem: str, said: str) -> Iterator[tuple[int, Event] | tuple[None, Pause]]:
        reason = FORCED_UNMET if problem == FORCED_UNMET else "invalid_call"
        record = self._context.record
        if record is not None:
            record.reasked = reason
        metrics.child(metrics.REASKS, self._context.model_label, reason).inc()
        added = ([{"role": "assistant", "content": said}] if said.strip() else []) + [
            {"role": "user", "content": feedback(problem, self._config)}]
        self._earlier_chars += self._driver.output_chars
        self._stream, self._driver = self._again(added)
        if self._tick is not None:
            self._stream.pause_every(self._tick)
        yield from self._driver
