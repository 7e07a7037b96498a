"""Hypothesis property tests: random prose and random argument objects under random chunkings.

Whitespace rule of the implementation (checked here): with parsing enabled, a stretch of text
(from the start, or from a call, to the next call or the end) that is whitespace only is dropped
when a call is around it; any other stretch is kept whole, whitespace included. With no call at
all, prose comes back byte for byte.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness import (
    CFG,
    calls_of,
    check_invariants,
    normalize,
    run_chunks,
    visible,
)
from statemachine import ReasoningDelta, TextDelta

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Fragments that make prose tricky: partial sentinels, '<', braces, quotes, backslashes, unicode.
TRICKY = ["<", ">", "<tool", "<tool_", "<tool_call", "</tool_call", "<use_t", "<use_tool", "<functi", "<function",
          "<thi", "</thi", "{", "}", "[", "]", '"', "'", "\\", "`", "```", "<3", "x<y", "<div>", "</b>", "é", "東京",
          "🌧️", "👩‍👩‍👧", "مرحبا", "\n", " ", "\t", ":", ",", "<tools>", "<tool>", "<functions>", "<use_toolx"]
COMPLETE_SENTINELS = ("<tool_call>", "<use_tool>", "<use_tool ", "<function=", "<think>", "</think>")

prose_piece = st.one_of(st.sampled_from(TRICKY), st.text(min_size=1, max_size=8))
# Message-start prefixes get their own draw: the scanner treats a leading '{', '[' or fence specially.
START = st.sampled_from(["", "", "", "[", "{", " [", "\n{", "```", "```json\n", "<", "["])
prose = st.tuples(START, st.lists(prose_piece, max_size=25).map("".join)).map("".join).filter(
    lambda s: not any(x in s for x in COMPLETE_SENTINELS))


def _chunk(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts}) if text else []
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a] or [text]


cuts_st = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)


@SETTINGS
@example(text="[1, 2, 3] is a list", cuts=[])
@example(text="{curly} first", cuts=[3])
@given(text=prose, cuts=cuts_st)
def test_prose_without_opener_is_content_exactly(text, cuts):
    """No complete opener → the content is the prose byte for byte, under any chunking, finish stop.

    Prose that starts with ``{``/``[`` (after whitespace) is bare-JSON-checked at message start;
    it still has to come back unchanged (case 31), so it is included.
    """
    events = run_chunks(CFG, _chunk(text, cuts))
    check_invariants(events, leak_ok=True)
    assert calls_of(events) == []
    assert not any(isinstance(e, ReasoningDelta) for e in events)
    assert visible(events) == text
    assert events[-1].finish_reason == "stop"


@SETTINGS
@given(text=prose.filter(lambda s: not s.lstrip(" \t\r\n")[:1] in ("{", "[", "`")), cuts=cuts_st)
def test_prose_not_starting_with_json_or_fence_is_content_exactly(text, cuts):
    """Same as above, restricted to prose whose first significant character is not ``{``, ``[`` or a backtick."""
    events = run_chunks(CFG, _chunk(text, cuts))
    assert visible(events) == text
    assert normalize(events) == normalize(run_chunks(CFG, [text]))


json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10**12, max_value=10**12),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=12),
    st.sampled_from(["</tool_call>", "<tool_call>", "}", "{", "]", '"', '\\"', "\\", "</use_tool>",
                     "<function=x>", "東京", "🌧️", "\u2028", "a}b{", "\n", "\t"]),
)
json_values = st.recursive(
    json_scalar,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.text(max_size=6), children, max_size=4)),
    max_leaves=15,
)
arg_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=5)
_SAFE = [t for t in TRICKY if not any(c in t for c in "<{[`")]
safe_prose = st.lists(st.one_of(st.sampled_from(_SAFE),
                                st.text(st.characters(blacklist_characters="<{[`"), min_size=1, max_size=8)),
                      max_size=10).map("".join)


@SETTINGS
@given(args=arg_objects, before=safe_prose, after=safe_prose, ensure_ascii=st.booleans(),
       fmt=st.sampled_from(["tool_call", "tool_call_args_first", "function", "use_tool"]), cuts=cuts_st)
def test_random_arguments_round_trip(args, before, after, ensure_ascii, fmt, cuts):
    """One call with random arguments between random prose → exactly one call whose arguments parse
    to the same object; the prose is preserved (whitespace rule in the module docstring)."""
    body = json.dumps(args, ensure_ascii=ensure_ascii)
    if fmt == "tool_call":
        block = '<tool_call>{"name": "get_time", "arguments": ' + body + "}</tool_call>"
    elif fmt == "tool_call_args_first":
        block = '<tool_call>{"arguments": ' + body + ', "name": "get_time"}</tool_call>'
    elif fmt == "function":
        block = "<function=get_time>" + body + "</function>"
    else:
        block = "<use_tool><name>get_time</name><args>" + body + "</args></use_tool>"
    text = before + block + after
    events = run_chunks(CFG, _chunk(text, cuts))
    check_invariants(events)
    calls = calls_of(events)
    assert len(calls) == 1 and calls[0].name == "get_time" and calls[0].valid
    assert json.loads(calls[0].arguments) == args
    assert calls[0].arguments == body  # verbatim
    pieces = [e.text for e in events if isinstance(e, TextDelta)]
    shown = visible(events)
    # Whitespace-only stretches around a call are dropped; any other stretch is kept whole.
    def kept(stretch):
        return stretch if stretch.strip(" \t\r\n") else ""
    assert shown == kept(before) + kept(after), (pieces, before, after)
    assert events[-1].finish_reason == "tool_calls"
    assert normalize(events) == normalize(run_chunks(CFG, [text]))
