"""Calls a model wrote again (``repeated_calls``, issue 38): a call with the same name and arguments as an
earlier one of the same answer.

A small model repeats calls it was never asked to: at temperature 0 Qwen2.5-Coder-0.5B answered four of
BFCL's sixty requests with one call written two, three or seven times (a loop the token limit cut). Run as
sent, each repeat does the same thing again (a second identical payment, message or write), so under ``drop``
(the default) a call equal to an earlier one is dropped and noted; the calls after it are numbered on without a
gap. Calls meant twice with the same arguments exist (two draws of a random number: one of BFCL's 530 parallel
answers), so ``keep`` sends them all, except a loop cut by ``length`` straight after it, whose repeats go.

A call is known whole only once it ends: a non-streamed answer, or a streamed one whose calls are held
(``reask_calls: on``, gateway tools offered), is filtered; an unheld streamed call has gone out before its
repeat could be told.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Iterator

from statemachine import ChoiceFinished, ToolCallArgumentsDelta, ToolCallEnded, ToolCallInputDelta, ToolCallNote, \
    ToolCallStarted

from .streaming import Events

_CALL_EVENTS = (ToolCallStarted, ToolCallArgumentsDelta, ToolCallInputDelta)


class _Choice:
    """One choice's call being read, the calls sent, the repeats kept back, and how many calls were dropped."""

    __slots__ = ("reading", "sent", "repeats", "dropped")

    def __init__(self) -> None:
        self.reading: list[Any] = []
        self.sent: list[tuple[str, Any]] = []
        self.repeats: list[Any] = []
        self.dropped = 0


def without_repeats(items: Events, mode: str) -> Iterator[Any]:
    """``items`` (``(choice index, event)`` pairs, and pauses) without the repeated calls: under ``mode`` ``drop``
    every call equal to an earlier one of its choice, under ``keep`` only the repeats of the last call before a
    ``length`` cut; each drop noted ``repeated_call``."""
    drop = mode == "drop"
    choices: dict[int, _Choice] = {}
    for item in items:
        index, event = item
        if index is None:  # a pause
            yield item
            continue
        choice = choices.setdefault(index, _Choice())
        if isinstance(event, _CALL_EVENTS) or (choice.reading and not isinstance(event, ToolCallEnded)):
            choice.reading.append(item)
        elif isinstance(event, ToolCallEnded):
            yield from _ended(choice, index, event, drop)
        elif isinstance(event, ToolCallNote):  # not the model's text: the repeats stay kept back
            yield from _numbered([item], choice.dropped)
        else:
            if isinstance(event, ChoiceFinished) and event.finish_reason == "length" and choice.repeats:
                yield from _dropped(choice, index, "cut by the token limit")
            yield from _let_go(choice)
            yield item


def _ended(choice: _Choice, index: int, event: ToolCallEnded, drop: bool) -> Iterator[Any]:
    """A call's end: the call dropped, kept back as a repeat of the one before it, or let go with those before it."""
    call, choice.reading = [*choice.reading, (index, event)], []
    key = (event.name, _value(event.arguments)) if event.valid else None
    if key is not None and drop and key in choice.sent:
        choice.repeats.extend(call)
        yield from _dropped(choice, index, "in the same answer")
        return
    if key is not None and choice.sent and key == choice.sent[-1]:
        choice.repeats.extend(call)
        return
    yield from _let_go(choice)
    if key is not None:
        choice.sent.append(key)
    yield from _numbered(call, choice.dropped)


def _dropped(choice: _Choice, index: int, why: str) -> Iterator[Any]:
    """Drop the calls kept back, with a note."""
    count = sum(isinstance(kept[1], ToolCallEnded) for kept in choice.repeats)
    choice.repeats = []
    choice.dropped += count
    noun = "a repeat" if count == 1 else f"{count} repeats"
    yield index, ToolCallNote("repeated_call", f"{noun} of an earlier call ({why}) dropped")


def _let_go(choice: _Choice) -> Iterator[Any]:
    kept, choice.repeats = choice.repeats, []
    yield from _numbered(kept, choice.dropped)


def _numbered(items: list[Any], shift: int) -> Iterator[Any]:
    """The call's items with the index each call event carries moved down by ``shift`` (calls dropped before)."""
    if not shift:
        yield from items
        return
    for index, event in items:
        moved = event.index - shift if isinstance(getattr(event, "index", None), int) else None
        yield index, (event if moved is None else dataclasses.replace(event, index=moved))


def _value(arguments: str) -> Any:
    """The arguments as a value to compare (a parsed object equals another whatever its keys' order)."""
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments
