"""NativeCalls: every back-end tool-call dialect comes out as OpenAI's events, under the same policies.

The streams come from ``support.native_upstream`` (the e2e tests' scripted back end plays the same
ones); each quirk set runs at several chunkings and with one, two and repeated-name calls.
Not promised (no set has it): arguments before the name *and* no usable index, with several calls;
such a call's first arguments cannot be told from the previous call's tail.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from statemachine import (
    ChoiceFinished,
    ChoiceStream,
    ModelOutputError,
    NativeCalls,
    ParserConfig,
    Policy,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnded,
    ToolCallNote,
    ToolCallStarted,
    ToolChoice,
    ToolSpec,
)
from support.native_upstream import QUIRK_SETS, native_frames, quirk_name

WEATHER = ToolSpec(name="get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}},
                                                   "required": ["city"]})
TIME = ToolSpec(name="get_time", parameters={"type": "object", "properties": {"tz": {"type": "string"}}})
CONFIG = ParserConfig.for_tools([WEATHER, TIME])
CALL_SETS = {
    "one": [("get_weather", {"city": "Paris"})],
    "two": [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "Europe/Paris, \"CET\""})],
    "same-name": [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})],
}
CHUNKINGS = (None, 1, 4)


def run(frames: list[list[dict[str, Any]]], config: ParserConfig = CONFIG, *, text_before: str = "",
        finish: str = "stop") -> list[Any]:
    choice = ChoiceStream(config)
    natives = NativeCalls(choice)
    events: list[Any] = list(choice.feed(text_before)) if text_before else []
    for fragments in frames:
        events += natives.feed(fragments)
    events += natives.close()
    events += choice.finish(finish)
    return events


def calls_of(events: list[Any]) -> list[tuple[str, Any]]:
    """The complete valid calls, after checking OpenAI's per-call order and the fragments' sum."""
    started: dict[int, ToolCallStarted] = {}
    fragments: dict[int, str] = {}
    calls = []
    for event in events:
        if isinstance(event, ToolCallStarted):
            assert event.index == len(started), "indexes run 0, 1, 2… in order"
            assert event.call_id.startswith("call_") and "upstream" not in event.call_id
            started[event.index] = event
            fragments[event.index] = ""
        elif isinstance(event, ToolCallArgumentsDelta):
            assert event.index in started and event.fragment
            fragments[event.index] += event.fragment
        elif isinstance(event, ToolCallEnded):
            assert started[event.index].call_id == event.call_id and started[event.index].name == event.name
            assert fragments[event.index] == event.arguments, "fragments concatenate to the arguments"
            if event.valid:
                calls.append((event.name, json.loads(event.arguments)))
    assert isinstance(events[-1], ChoiceFinished)
    return calls


@pytest.mark.parametrize("chunk", CHUNKINGS, ids=lambda c: f"chunk{c}")
@pytest.mark.parametrize("calls", CALL_SETS.values(), ids=CALL_SETS.keys())
@pytest.mark.parametrize("quirks", QUIRK_SETS, ids=quirk_name)
def test_every_dialect_yields_the_calls(quirks: frozenset[str], calls: list, chunk: int | None) -> None:
    events = run(native_frames(calls, quirks=quirks, chunk=chunk))
    assert calls_of(events) == calls
    assert events[-1] == ChoiceFinished("tool_calls"), "a back end's 'stop' after calls is 'tool_calls'"
    assert not [e for e in events if isinstance(e, (ToolCallNote, TextDelta))]


@pytest.mark.parametrize("quirks", QUIRK_SETS, ids=quirk_name)
def test_the_name_is_never_partial_and_ids_are_ours(quirks: frozenset[str]) -> None:
    calls = [("get_weather", {"city": "Paris"})]
    events = run(native_frames(calls, quirks=quirks | {"split_name"}, chunk=2))
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [e.name for e in started] == ["get_weather"]
    first = next(i for i, e in enumerate(events) if isinstance(e, ToolCallStarted))
    assert not any(isinstance(e, ToolCallArgumentsDelta) for e in events[:first]), "header before arguments"


def test_text_before_the_calls_and_call_blocks_in_text_still_parse() -> None:
    events = run(native_frames([("get_time", {"tz": "UTC"})]),
                 text_before='Checking. <tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>')
    assert calls_of(events) == [("get_weather", {"city": "Rome"}), ("get_time", {"tz": "UTC"})]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).strip() == "Checking."


def test_a_cumulative_repeat_that_does_not_extend_is_a_protocol_error_not_a_merge() -> None:
    frames = [[{"index": 0, "id": "a", "function": {"name": "get_weather", "arguments": '{"city":'}}],
              [{"index": 0, "function": {"arguments": '{"town": "Paris"'}}],  # not an extension
              [{"index": 0, "function": {"arguments": '{"city": "Paris"}'}}]]
    frames.insert(1, [{"index": 0, "function": {"arguments": '{"city":'}}])  # a cumulative repeat first
    events = run(frames)
    ended = [e for e in events if isinstance(e, ToolCallEnded)]
    assert [(e.name, e.valid) for e in ended] == [("get_weather", False)]
    assert [e.kind for e in events if isinstance(e, ToolCallNote)] == ["invalid_json"]
    assert events[-1] == ChoiceFinished("stop")
    strict = ParserConfig.for_tools([WEATHER], policy=Policy(invalid_json="fail"))
    with pytest.raises(ModelOutputError):
        run(frames, strict)


def test_a_fragment_for_an_ended_call_is_dropped_with_a_note() -> None:
    frames = [[{"index": 0, "function": {"name": "get_weather", "arguments": '{"city": "A"}'}}],
              [{"index": 1, "function": {"name": "get_time", "arguments": '{"tz": "UTC"}'}}],
              [{"index": 0, "function": {"arguments": "junk"}}]]
    events = run(frames)
    assert calls_of(events) == [("get_weather", {"city": "A"}), ("get_time", {"tz": "UTC"})]
    assert [e.kind for e in events if isinstance(e, ToolCallNote)] == ["invalid_json"]


def test_a_call_without_arguments_gets_an_empty_object() -> None:
    events = run([[{"index": 0, "id": "x", "type": "function", "function": {"name": "get_time"}}]])
    assert calls_of(events) == [("get_time", {})]


def test_a_legacy_function_call_delta_is_one_call() -> None:
    legacy = ParserConfig.for_tools([WEATHER], legacy_functions=True, parallel_tool_calls=False)
    events = run([[{"function": {"name": "get_weather", "arguments": ""}}],
                  [{"function": {"arguments": '{"city": '}}], [{"function": {"arguments": '"Oslo"}'}}]], legacy)
    assert calls_of(events) == [("get_weather", {"city": "Oslo"})]
    assert events[-1] == ChoiceFinished("function_call")


@pytest.mark.parametrize("config, expected, notes", [
    pytest.param(ParserConfig.for_tools([WEATHER, TIME], tool_choice=ToolChoice("none")), [], ["suppressed"] * 2,
                 id="tool_choice-none"),
    pytest.param(ParserConfig.for_tools([WEATHER, TIME], parallel_tool_calls=False),
                 [("get_weather", {"city": "Paris"})], ["suppressed"], id="parallel-false"),
    pytest.param(ParserConfig.for_tools([WEATHER, TIME], tool_choice=ToolChoice("required", frozenset({"get_time"}))),
                 [("get_time", {"tz": "Europe/Paris, \"CET\""})], ["unknown_tool"], id="forced-function"),
    pytest.param(ParserConfig.for_tools([WEATHER], policy=Policy(max_tool_calls=1)),
                 [("get_weather", {"city": "Paris"})], [], id="max-tool-calls"),
])
def test_policies_apply_to_native_calls_as_to_parsed_ones(config: ParserConfig, expected: list, notes: list) -> None:
    events = run(native_frames(CALL_SETS["two"], chunk=3), config)
    assert calls_of(events) == expected
    assert [e.kind for e in events if isinstance(e, ToolCallNote)] == notes


def test_strict_schema_failure_on_a_native_call_follows_strict_mismatch() -> None:
    strict = ToolSpec(name="get_weather", parameters=WEATHER.parameters, strict=True)
    with pytest.raises(ModelOutputError):
        run(native_frames([("get_weather", {"town": "Paris"})]), ParserConfig.for_tools([strict]))


def test_a_call_held_behind_an_unfinished_one_goes_out_after_it() -> None:
    frames = [[{"index": 0, "id": "a", "type": "function", "function": {"name": "get_weather", "arguments": ""}}],
              [{"index": 1, "id": "b", "type": "function", "function": {"name": "get_time", "arguments": ""}}],
              [{"index": 1, "function": {"arguments": '{"tz": "UTC"}'}}],
              [{"index": 0, "function": {"arguments": '{"city": "Rome"}'}}]]
    events = run(frames)
    assert calls_of(events) == [("get_weather", {"city": "Rome"}), ("get_time", {"tz": "UTC"})]
    assert not [e for e in events if isinstance(e, ToolCallNote)]


def test_llama_cpp_python_repeated_headers_make_one_call() -> None:
    """Issue 31, fault 3: llama-cpp-python 0.3.36 (a named tool_choice, grammar-forced) repeats index, id,
    type and name in every fragment and ends with ``"arguments": ""``: one call, no phantom ``get_time({})``."""
    def fragment(arguments: str) -> list[dict[str, Any]]:
        return [{"index": 0, "id": "call__0_get_time_cmpl-5c1f", "type": "function",
                 "function": {"name": "get_time", "arguments": arguments}}]
    pieces = ['{', ' "', 'tz', '":', ' "', 'UTC', '"', ' }', ' ', '']
    assert calls_of(run([fragment(p) for p in pieces])) == [("get_time", {"tz": "UTC"})]
