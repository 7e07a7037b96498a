"""Policies: tool_choice, parallel calls, unknown/invalid/schema policies, finish reasons, native deltas."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from harness import CFG, Call, Reasoning, tr_raises, calls_of, check_invariants, chunkings, counter_ids, normalize, run_chunks, tr, visible
from statemachine import (
    ChoiceFinished,
    ChoiceStream,
    ModelOutputError,
    ParserConfig,
    Policy,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnded,
    ToolCallNote,
    ToolCallStarted,
    ToolChoice,
    ToolSpec,
    UsageError,
    new_call_id,
)
from statemachine._finish import normalize_finish_reason

SF = '{"city": "SF"}'
W = '<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call>'
T = '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
UNKNOWN = '<tool_call>{"name": "nope", "arguments": {"a": 1}}</tool_call>'
STRICT = ToolSpec("strict_fn", parameters={"type": "object", "properties": {"a": {"type": "integer"}},
                                           "required": ["a"], "additionalProperties": False}, strict=True)


def cfg(**kw) -> ParserConfig:
    policy = kw.pop("policy", None)
    c = replace(CFG, **kw)
    return replace(c, policy=policy) if policy else c


# tool_choice -------------------------------------------------------------------------------

def test_tool_choice_none_parses_nothing():
    text = "a " + W + " b <think>x</think>"
    c = cfg(tool_choice=ToolChoice("none"))
    # tool sentinels stay visible verbatim; reasoning is still split off (reasoning=True)
    tr(c, text, ["a " + W + " b ", Reasoning("x")], finish="stop", leak_ok=True)
    tr(c, "<use_tool><name>get_time</name></use_tool>", ["<use_tool><name>get_time</name></use_tool>"],
       finish="stop", leak_ok=True)


def test_no_tools_means_no_parsing():
    tr(ParserConfig(), W, [W], finish="stop", leak_ok=True)


def test_forced_name_other_names_use_unknown_policy():
    c = cfg(tool_choice=ToolChoice("required", frozenset({"get_time"})))
    tr(c, W + T, [W, Call("get_time", "{}")], finish="tool_calls", leak_ok=True, notes=["unknown_tool"])
    tr_fail = cfg(tool_choice=ToolChoice("required", frozenset({"get_time"})), policy=Policy(unknown_tool="fail"))
    with pytest.raises(ModelOutputError) as e:
        run_chunks(tr_fail, [W])
    assert e.value.code == "unknown_tool"


def test_allowed_subset():
    c = cfg(tool_choice=ToolChoice("auto", frozenset({"get_weather", "localSearch"})))
    tr(c, T + W, [T, Call("get_weather", SF)], finish="tool_calls", leak_ok=True)


def test_parallel_false_keeps_only_first_and_drops_later_blocks():
    c = cfg(parallel_tool_calls=False)
    tr(c, W + " mid" + T + " end", [Call("get_weather", SF), " mid end"], finish="tool_calls",
       notes=["suppressed"])
    tr(c, W + T + W, [Call("get_weather", SF)], finish="tool_calls")


# unknown tools, invalid JSON, schema ------------------------------------------------------------

def test_unknown_tool_text():
    tr(CFG, UNKNOWN, [UNKNOWN], finish="stop", leak_ok=True, notes=["unknown_tool"])


def test_unknown_tool_emit():
    tr(cfg(policy=Policy(unknown_tool="emit")), UNKNOWN, [Call("nope", '{"a": 1}')], finish="tool_calls")


def test_unknown_tool_fail():
    tr_raises(cfg(policy=Policy(unknown_tool="fail")), UNKNOWN, ModelOutputError, code="unknown_tool")


def test_unknown_name_with_only_strict_tools_follows_strict_policy():
    """8.3 #8: when every offered tool is strict, an unknown name is a strict failure, not text."""
    only_strict = ParserConfig.for_tools([STRICT])
    unknown = '<tool_call>{"name": "nope", "arguments": {"a": 1}}</tool_call>'
    tr_raises(only_strict, unknown, ModelOutputError, code="unknown_tool")
    as_text = replace(only_strict, policy=Policy(strict_mismatch="text"))
    tr(as_text, unknown, [unknown], finish="stop", leak_ok=True, notes=["unknown_tool"])
    emitted = replace(only_strict, policy=Policy(strict_mismatch="emit"))
    tr(emitted, unknown, [Call("nope", '{"a": 1}')], finish="tool_calls")


def test_unknown_name_with_some_non_strict_tools_follows_unknown_tool_policy():
    mixed = ParserConfig.for_tools([STRICT, *CFG.tools.values()])
    tr(mixed, UNKNOWN, [UNKNOWN], finish="stop", leak_ok=True, notes=["unknown_tool"])


def test_strict_schema_mismatch_fails_by_default():
    c = ParserConfig.for_tools([STRICT])
    tr_raises(c, '<tool_call>{"name": "strict_fn", "arguments": {"a": "x"}}</tool_call>', ModelOutputError)
    tr(c, '<tool_call>{"name": "strict_fn", "arguments": {"a": 1}}</tool_call>', [Call("strict_fn", '{"a": 1}')],
       finish="tool_calls")


def test_strict_schema_mismatch_error_is_502():
    c = ParserConfig.for_tools([STRICT])
    with pytest.raises(ModelOutputError) as e:
        run_chunks(c, ['<tool_call>{"name": "strict_fn", "arguments": {"b": 1}}</tool_call>'])
    assert e.value.status_hint == 502


def test_non_strict_mismatch_emitted():
    tr(CFG, '<tool_call>{"name": "get_weather", "arguments": {"days": "x"}}</tool_call>',
       [Call("get_weather", '{"days": "x"}')], finish="tool_calls")


def test_invalid_json_fail_policy():
    tr_raises(cfg(policy=Policy(invalid_json="fail")), "<tool_call>{oops}</tool_call> after", ModelOutputError,
              code="invalid_json")


# finish reasons ---------------------------------------------------------------------------------

def test_legacy_functions_finish_reason():
    tr(cfg(legacy_functions=True), W + T, [Call("get_weather", SF)], finish="function_call")


@pytest.mark.parametrize("upstream,expected", [("length", "length"), ("content_filter", "content_filter"),
                                               ("max_tokens", "length"), ("safety_block", "content_filter")])
def test_length_and_content_filter_kept_with_calls(upstream, expected):
    tr(CFG, W, [Call("get_weather", SF)], finish=expected, upstream=upstream)


@pytest.mark.parametrize("upstream", ["tool_calls", "tool_use", "function_call", "stop", None])
def test_tool_calls_never_without_a_valid_call(upstream):
    tr(CFG, "just text", ["just text"], finish="stop", upstream=upstream)
    tr(CFG, UNKNOWN, [UNKNOWN], finish="stop", upstream=upstream, leak_ok=True)


@pytest.mark.parametrize("alias,canonical", [
    ("completed", "stop"), ("complete", "stop"), ("finished", "stop"), ("done", "stop"), ("halt", "stop"),
    ("max_tokens", "length"), ("token_limit_reached", "length"), ("truncated", "length"),
    ("max_tokens_reached", "length"), ("tool_call", "tool_calls"), ("tool_completion", "tool_calls"),
    ("tool_execution", "tool_calls"), ("requires_tool", "tool_calls"), ("function_calls", "function_call"),
    ("function_execution", "function_call"), ("filtered", "content_filter"), ("safety", "content_filter"),
    ("safety_violation", "content_filter"), ("moderation", "content_filter"), ("policy_filter", "content_filter"),
    ("whatever", "stop"), (None, "stop"), ("", "stop"), (" LENGTH ", "length"),
])
def test_finish_reason_aliases(alias, canonical):
    assert normalize_finish_reason(alias) == canonical


def test_finish_alias_applied_to_stream():
    assert run_chunks(CFG, ["hi"], "max_tokens")[-1] == ChoiceFinished("length")
    assert run_chunks(CFG, [W], "completed")[-1] == ChoiceFinished("tool_calls")


# stop after first call / max calls / tail suppression -------------------------------------------------

@pytest.mark.parametrize("policy", [Policy(stop_after_first_call=True), Policy(max_tool_calls=1)])
def test_stop_after_first_and_max_calls(policy):
    c = cfg(policy=policy)
    text = W + " tail " + T + " more"
    tr(c, text, [Call("get_weather", SF)], finish="tool_calls")
    s = ChoiceStream(c)
    assert s.wants_more
    s.feed(W)
    assert not s.wants_more
    assert s.feed(" later text " + T) == []
    assert s.finish()[-1].finish_reason == "tool_calls"


@pytest.mark.parametrize("policy", [Policy(stop_after_first_call=True), Policy(max_tool_calls=1)])
def test_the_limit_stops_the_next_call_of_the_same_block(policy):
    # the next call object began in the chunk whose call reached the limit: it never goes out
    block = ('<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}, '
             '{"name": "get_time", "arguments": {}}</tool_call> tail')
    tr(cfg(policy=policy), block, [Call("get_weather", SF)], finish="tool_calls")


def test_max_tool_calls_two():
    c = cfg(policy=Policy(max_tool_calls=2))
    tr(c, W + T + W + " x", [Call("get_weather", SF), Call("get_time", "{}")], finish="tool_calls")


def test_text_after_calls_suppress():
    c = cfg(policy=Policy(text_after_calls="suppress"))
    tr(c, "pre:" + W + " tail " + T + " more", ["pre:", Call("get_weather", SF), Call("get_time", "{}")],
       finish="tool_calls")
    tr(c, 'before <use_tool name="get_time"><args>{}</args></use_tool> after',
       ["before ", Call("get_time", "{}")], finish="tool_calls")


# native structured deltas ----------------------------------------------------------------------------

def test_native_call_basic():
    s = ChoiceStream(CFG, id_factory=counter_ids())
    ev = s.feed_tool_call(0, id="up_1", name="get_weather", arguments='{"ci')
    ev += s.feed_tool_call(0, arguments='ty": "SF"}')
    ev += s.finish("tool_calls")
    check_invariants(ev)
    assert normalize(ev)[0] == [ToolCallStarted(0, "call_0", "get_weather"), ToolCallArgumentsDelta(0, SF),
                                ToolCallEnded(0, "call_0", "get_weather", SF), ChoiceFinished("tool_calls")]


def test_native_arguments_before_name_buffered_and_replayed():
    s = ChoiceStream(CFG, id_factory=counter_ids())
    early = s.feed_tool_call(0, arguments='{"city"')
    assert early == []
    ev = s.feed_tool_call(0, name="get_weather", arguments=': "SF"}')
    assert ev[0] == ToolCallStarted(0, "call_0", "get_weather")
    assert ev[1] == ToolCallArgumentsDelta(0, '{"city"')
    ev += s.finish()
    check_invariants(early + ev)
    assert calls_of(ev)[0].arguments == SF


def test_two_native_calls():
    s = ChoiceStream(CFG, id_factory=counter_ids())
    ev = s.feed_tool_call(0, id="a", name="get_weather", arguments=SF)
    ev += s.feed_tool_call(1, id="b", name="get_time", arguments="{}")
    ev += s.finish()
    check_invariants(ev)
    assert [(c.index, c.name, c.arguments) for c in calls_of(ev)] == [(0, "get_weather", SF), (1, "get_time", "{}")]
    assert ev[-1].finish_reason == "tool_calls"


def test_native_upstream_id_ignored_and_ids_unique():
    s = ChoiceStream(CFG)
    ev = s.feed_tool_call(0, id="upstream_id", name="get_weather", arguments=SF)
    ev += s.feed("x" + W)
    ev += s.feed_tool_call(5, id="upstream_id", name="get_time", arguments="{}")
    ev += s.finish()
    ids = [e.call_id for e in ev if isinstance(e, ToolCallStarted)]
    assert len(ids) == 3 and len(set(ids)) == 3
    assert all(re.fullmatch(r"call_[A-Za-z0-9_-]{8,}", i) for i in ids)
    assert "upstream_id" not in ids


def test_mixed_native_and_text_share_one_index_sequence():
    s = ChoiceStream(CFG, id_factory=counter_ids())
    ev = s.feed("Sure:" + W)
    ev += s.feed_tool_call(0, name="get_time", arguments="{}")
    ev += s.feed(T)
    ev += s.finish()
    check_invariants(ev)
    assert [(c.index, c.name) for c in calls_of(ev)] == [(0, "get_weather"), (1, "get_time"), (2, "get_time")]


def test_a_native_call_inside_an_open_text_call_ends_that_call_as_invalid():
    # The text call's header went out: it ends, invalid (its arguments never closed), and the native call follows.
    s = ChoiceStream(CFG, id_factory=counter_ids())
    ev = s.feed('Sure: <tool_call>{"name": "get_weather", "arguments": {"ci')
    ev += s.feed_tool_call(0, name="get_time", arguments="{}")
    ev += s.finish()
    check_invariants(ev)
    assert [(c.index, c.name, c.valid) for c in calls_of(ev)] == [(0, "get_weather", False), (1, "get_time", True)]
    assert [n.kind for n in ev if isinstance(n, ToolCallNote)] == ["invalid_json"]


def test_a_native_call_inside_a_text_block_before_its_name_releases_the_block_as_text():
    s = ChoiceStream(CFG, id_factory=counter_ids())
    ev = s.feed('Sure: <tool_call>{"na')
    ev += s.feed_tool_call(0, name="get_time", arguments="{}")
    ev += s.finish()
    check_invariants(ev, leak_ok=True)
    assert visible(ev) == 'Sure: <tool_call>{"na'
    assert [(c.index, c.name) for c in calls_of(ev)] == [(0, "get_time")]
    assert ev[-1].finish_reason == "tool_calls"


def test_native_unknown_name_not_emitted():
    s = ChoiceStream(CFG)
    ev = s.feed_tool_call(0, name="nope", arguments="{}") + s.finish()
    assert calls_of(ev) == [] and ev[-1].finish_reason == "stop"


def test_new_call_id_format():
    ids = {new_call_id() for _ in range(200)}
    assert len(ids) == 200 and all(i.startswith("call_") and len(i) > 10 for i in ids)


# usage errors and choice isolation ---------------------------------------------------------------------

def test_usage_error_after_finish():
    s = ChoiceStream(CFG)
    s.finish()
    with pytest.raises(UsageError):
        s.feed("x")
    with pytest.raises(UsageError):
        s.feed_tool_call(0, name="get_time")
    with pytest.raises(UsageError):
        s.finish()


def test_n_choices_isolated():
    texts = ["Hi!" + W + " bye", "no calls here <3 " + "<tool", T + T]
    alone = [normalize(run_chunks(CFG, [t[i:i + 3] for i in range(0, len(t), 3)])) for t in texts]
    streams = [ChoiceStream(CFG, id_factory=counter_ids()) for _ in texts]
    events: list[list] = [[] for _ in texts]
    pos = 0
    while any(pos < len(t) for t in texts):
        for k, t in enumerate(texts):
            if pos < len(t):
                events[k] += streams[k].feed(t[pos:pos + 3])
        pos += 3
    for k in range(len(texts)):
        events[k] += streams[k].finish()
    assert [normalize(e) for e in events] == alone
    assert [e[-1].finish_reason for e in events] == ["tool_calls", "stop", "tool_calls"]


# size valve and unterminated calls -----------------------------------------------------------------------

def test_size_valve_releases_text():
    text = "<tool_call>" + "x" * 5000
    tr(CFG, text, [text], finish="stop", leak_ok=True, two_split_limit=0)


def test_unterminated_complete_json_recovered():
    tr(CFG, "<tool_call>" + W[len("<tool_call>"):-len("</tool_call>")], [Call("get_weather", SF)],
       finish="tool_calls")


def test_unterminated_incomplete_not_tool_calls():
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "S'
    for label, chunks in chunkings(text, random_splits=5, two_split_limit=0):
        ev = run_chunks(CFG, chunks)
        check_invariants(ev, leak_ok=True, label=label)
        assert ev[-1].finish_reason != "tool_calls"
        assert not [c for c in calls_of(ev) if c.valid]
        kinds = [e.kind for e in ev if isinstance(e, ToolCallNote)]
        assert visible(ev) == text or "incomplete" in kinds
