"""A non-streamed answer the back end's ``length`` cut while the model wrote one call again and again: the repeats
are dropped (issue 38).

A small model at temperature 0 can fall into a loop of the same call until the token limit ends it
(Qwen2.5-Coder-0.5B answered one request with ``analyze_structure(building_id="B1004", floors=[2, 3, 4])`` seven
times, and the start of an eighth). A call that repeats the one before it (the same name and arguments) is kept
back until something else comes: another call or text let them all go out (two identical calls can be meant),
an answer that ends normally too; only an answer cut by ``length`` straight after them drops them, with a note.
Only an answer sent whole can wait for its end; a streamed call has gone out before the next one starts.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from statemachine import ChoiceFinished, ToolCallArgumentsDelta, ToolCallEnded, ToolCallInputDelta, ToolCallNote, \
    ToolCallStarted

from .streaming import Events

_CALL_EVENTS = (ToolCallStarted, ToolCallArgumentsDelta, ToolCallInputDelta)


class _Choice:
    """One choice's call being read, the call before it, and the repeats of it kept back."""

    __slots__ = ("reading", "last", "repeats")

    def __init__(self) -> None:
        self.reading: list[Any] = []
        self.last: tuple[str, Any] | None = None
        self.repeats: list[Any] = []


def without_repeats(items: Events) -> Iterator[Any]:
    """``items`` (``(choice index, event)`` pairs, and pauses), the repeated calls before a ``length`` cut
    dropped (a ``repeated_call`` note in their place)."""
    choices: dict[int, _Choice] = {}
    for item in items:
        index, event = item
        if index is None:  # a pause
            yield item
            continue
        choice = choices.setdefault(index, _Choice())
        if isinstance(event, _CALL_EVENTS) or (choice.reading and not isinstance(event, ToolCallEnded)):
            choice.reading.append(item)
            continue
        if isinstance(event, ToolCallNote):  # not the model's text: the repeats stay kept back
            yield item
            continue
        if isinstance(event, ToolCallEnded):
            call, choice.reading = [*choice.reading, item], []
            key = (event.name, _value(event.arguments)) if event.valid else None
            if key is not None and key == choice.last:
                choice.repeats.extend(call)
                continue
            choice.last = key
            yield from _let_go(choice)
            yield from call
            continue
        if isinstance(event, ChoiceFinished) and event.finish_reason == "length" and choice.repeats:
            dropped = sum(isinstance(kept[1], ToolCallEnded) for kept in choice.repeats)
            choice.repeats = []
            yield index, ToolCallNote("repeated_call", f"{dropped} repeats of the call before them, cut by the "
                                                       "token limit, were dropped")
        yield from _let_go(choice)
        yield item


def _let_go(choice: _Choice) -> Iterator[Any]:
    kept, choice.repeats = choice.repeats, []
    yield from kept


def _value(arguments: str) -> Any:
    """The arguments as a value to compare (a parsed object equals another whatever its keys' order)."""
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments
