"""``Policy.hold_calls``: a call goes out whole when it ends, only if it is acceptable (what a non-streamed answer
and the re-ask need: nothing of a bad call may have gone out)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from harness import CFG, Call, Custom, chunkings, counter_ids, normalize, run_chunks, summarize, tr, tr_raises
from statemachine import ChoiceStream, ModelOutputError, ParserConfig, Policy, ToolCallStarted, ToolSpec

HELD = replace(CFG, policy=Policy(hold_calls=True))
SF = {"city": "SF"}

#: Outputs whose calls are all good: held or not, the answer is the same (under every chunking).
GOOD = [
    '<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call>',
    'Let me check.\n<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call>\nDone.',
    '<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call>'
    '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
    '<use_tool><name>get_weather</name><args>{"city": "SF"}</args></use_tool>',
    '<function=get_weather><parameter=city>SF</parameter></function>',
    '{"name": "get_weather", "arguments": {"city": "SF"}}',
    '```json\n{"name": "get_weather", "arguments": {"city": "SF"}}\n```',
    "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'SF'}}</tool_call>",  # relaxed JSON
    '<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}',  # unclosed after stop: accepted
    'No tool needed: it is sunny.',
]


@pytest.mark.parametrize("text", GOOD)
def test_good_calls_come_out_the_same_held_or_not(text: str) -> None:
    expected, finish = summarize(normalize(run_chunks(CFG, [text]))[0])
    tr(HELD, text, expected, finish=finish)


def test_a_held_call_goes_out_only_when_it_ends() -> None:
    stream = ChoiceStream(HELD, id_factory=counter_ids())
    assert stream.feed('<tool_call>{"name": "get_weather", "arguments": {"city": "S') == []
    events = stream.feed('F"}}</tool_call>')
    assert isinstance(events[0], ToolCallStarted)


def test_arguments_that_never_parse_are_text_not_a_broken_call() -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": SF days}}</tool_call>'
    tr(HELD, text, [text], finish="stop", notes=["invalid_json"], leak_ok=True)


def test_arguments_that_never_parse_fail_under_the_fail_policy() -> None:
    config = replace(CFG, policy=Policy(hold_calls=True, invalid_json="fail"))
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": SF days}}</tool_call>'
    tr_raises(config, text, ModelOutputError, code="invalid_json")


def test_a_schema_mismatch_under_the_text_policy_is_text_with_its_error() -> None:
    config = replace(CFG, policy=Policy(hold_calls=True, schema_mismatch="text"))
    text = '<tool_call>{"name": "get_weather", "arguments": {"days": 3}}</tool_call>'
    stream = ChoiceStream(config, id_factory=counter_ids())
    events = stream.feed(text) + stream.finish("stop")
    notes = [event for event in events if event.__class__.__name__ == "ToolCallNote"]
    assert [note.kind for note in notes] == ["schema_mismatch"] and "city" in notes[0].message
    tr(config, text, [text], finish="stop", notes=["schema_mismatch"], leak_ok=True)


def test_a_call_cut_by_length_is_dropped_and_the_text_before_it_kept() -> None:
    text = 'Adding them.\n<tool_call>{"name": "get_weather", "arguments": {"city'
    tr(HELD, text, ["Adding them.\n"], finish="length", upstream="length")


def test_a_good_call_before_the_cut_one_stays() -> None:
    text = ('<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call>'
            '<tool_call>{"name": "get_weather", "arguments": {"city": "L')
    tr(HELD, text, [Call("get_weather", SF)], finish="length", upstream="length")


def test_a_call_the_stream_stopped_inside_is_text() -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "S'
    tr(HELD, text, [text], finish="stop", leak_ok=True)


def test_a_custom_call_is_held_too() -> None:
    config = ParserConfig.for_tools([ToolSpec("apply_patch", kind="custom")], policy=Policy(hold_calls=True))
    text = '<custom_tool_call name="apply_patch">\n*** Begin Patch\n</custom_tool_call>'
    stream = ChoiceStream(config, id_factory=counter_ids())
    assert stream.feed(text[:60]) == []
    tr(config, text, [Custom("apply_patch", "*** Begin Patch")], finish="tool_calls")


def test_a_native_call_with_broken_arguments_is_never_sent() -> None:
    stream = ChoiceStream(HELD, id_factory=counter_ids())
    events = stream.feed_tool_call(0, name="get_weather", arguments='{"city": ')
    events += stream.finish("tool_calls")
    assert not any(isinstance(event, ToolCallStarted) for event in events)
    assert events[-1].finish_reason == "stop"


def test_a_large_held_call_is_not_cut_by_the_size_valve() -> None:
    big = "x" * 10_000
    text = f'<tool_call>{{"name": "get_weather", "arguments": {{"city": "{big}"}}}}</tool_call>'
    for _, chunks in list(chunkings(text, two_split_limit=0))[:5]:
        items, finish = summarize(normalize(run_chunks(HELD, chunks))[0])
        assert items == [Call("get_weather", f'{{"city": "{big}"}}')] and finish == "tool_calls"


# --- the worked example copied (ParserConfig.example_arguments, issue 38) ---------------------------------------

TIP = ToolSpec("calculate_tip", parameters={
    "type": "object", "required": ["bill_total", "tip_percentage"],
    "properties": {"bill_total": {"type": "number"}, "tip_percentage": {"type": "number"},
                   "split": {"type": "integer", "default": 1}, "note": {"type": "string"}}})
SHOWN = ParserConfig.for_tools([TIP], policy=Policy(hold_calls=True),
                               example_arguments={"calculate_tip": ({"bill_total": 1.5, "tip_percentage": 1.5},
                                                                    {"bill_total": 2.5, "tip_percentage": 2.5})})


def _bare_list(*arguments: str) -> str:
    return "[" + ", ".join(f'{{"name": "calculate_tip", "arguments": {a}}}' for a in arguments) + "]"


@pytest.mark.parametrize("arguments", ['{"bill_total": 1.5, "tip_percentage": 1.5}',
                                       '{"tip_percentage": 1.5, "bill_total": 1.5, "split": 1}',
                                       '{"bill_total": 2.5, "tip_percentage": 2.5}',
                                       '{"bill_total": 1.5, "tip_percentage": 1.5, "note": "<note>"}'])
def test_a_call_with_the_worked_example_s_arguments_is_text(arguments: str) -> None:
    for text in (_bare_list(arguments, arguments), f"<tool_call>{{\"name\": \"calculate_tip\", \"arguments\": "
                                                   f"{arguments}}}</tool_call>"):
        stream = ChoiceStream(SHOWN, id_factory=counter_ids())
        events = stream.feed(text) + stream.finish("stop")
        assert not any(isinstance(event, ToolCallStarted) for event in events)
        assert "example_copy" in [event.kind for event in events if event.__class__.__name__ == "ToolCallNote"]
        assert events[-1].finish_reason == "stop"


@pytest.mark.parametrize("arguments", ['{"bill_total": 42.5, "tip_percentage": 1.5}',
                                       '{"bill_total": 1.5, "tip_percentage": 1.5, "split": 3}',
                                       '{"bill_total": 1.5, "tip_percentage": 1.5, "note": "lunch"}'])
def test_a_call_with_values_of_its_own_goes_out(arguments: str) -> None:
    tr(SHOWN, _bare_list(arguments), [Call("calculate_tip", json.loads(arguments))],
       finish="tool_calls")


def test_an_example_without_arguments_is_never_a_copy_and_unheld_calls_are_not_checked() -> None:
    empty = replace(SHOWN, example_arguments={"calculate_tip": ({},)})
    tr(empty, _bare_list("{}"), [Call("calculate_tip", {})], finish="tool_calls")
    unheld = replace(SHOWN, policy=Policy())
    copied = '{"bill_total": 1.5, "tip_percentage": 1.5}'
    tr(unheld, _bare_list(copied), [Call("calculate_tip", {"bill_total": 1.5, "tip_percentage": 1.5})],
       finish="tool_calls")


def test_a_bare_call_of_an_offered_tool_that_fails_its_check_gets_its_note() -> None:
    """A bare list naming an offered tool is a call: a failed check is noted (and so re-asked), as a wrapped
    call's is; before it names one, a bare block is plain text, noted or not."""
    config = replace(CFG, policy=Policy(hold_calls=True, schema_mismatch="text"))
    text = '[{"name": "get_weather", "arguments": {"days": 3}}]'
    stream = ChoiceStream(config, id_factory=counter_ids())
    events = stream.feed(text) + stream.finish("stop")
    assert [e.kind for e in events if e.__class__.__name__ == "ToolCallNote"] == ["schema_mismatch"]
    stream = ChoiceStream(config, id_factory=counter_ids())
    events = stream.feed('[{"title": "a list", "items": [1, 2]}]') + stream.finish("stop")
    assert not [e for e in events if e.__class__.__name__ == "ToolCallNote"]
