"""Case 25 / 4.14: relaxed JSON (single quotes, unquoted keys, trailing commas, ``True``/``None``,
comments). Strict JSON streams verbatim up to the first grammar violation; from there the call is
buffered, read leniently, and its arguments go out once, canonically, at the value's end, continuing
what was already sent. Never non-JSON as arguments: a body that is not even relaxed JSON follows the
failure policy. Every fixture goes through ``harness.tr`` (whole, per character, every two-chunk
split, fixed sizes, seeded random splits).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness import CFG, WEATHER, Call, ToolSpec, run_chunks, tr, tr_raises
from statemachine import ModelOutputError, ParserConfig, Policy, ToolCallArgumentsDelta
from statemachine._jsonlex import ValueLexer
from statemachine._relaxed import relaxed_loads

TM = '{"name": "get_time", "arguments": {}}'
CANON = '{"city": "SF", "days": 3}'


def tc(body: str) -> str:
    return f"<tool_call>{body}</tool_call>"


# --- relaxed bodies in every format become canonical calls -------------------------------------------

@pytest.mark.parametrize("text,arguments", [
    # format A: the whole call object relaxed (nothing sent before its end)
    (tc("{'name': 'get_weather', 'arguments': {'city': 'SF', 'days': 3}}"), CANON),
    (tc("{name: 'get_weather', arguments: {city: 'SF', days: 3,},}"), CANON),
    (tc("{'function': {'name': 'get_weather', 'parameters': {'city': 'SF', 'days': 3}}}"), CANON),
    (tc('{"name": "get_weather", "arguments": None}'), "{}"),
    # format A: strict call object, relaxed arguments; an apostrophe in a double-quoted value stays
    (tc("""{"name": "get_weather", "arguments": {'city': "Joe's Diner", 'days': 3}}"""),
     '{"city": "Joe\'s Diner", "days": 3}'),
    # the violation after a strict prefix went out: the canonical rest continues it
    (tc('{"name": "get_weather", "arguments": {"city": "SF", "days": True}}'), '{"city": "SF", "days": true}'),
    (tc('{"name": "get_weather", "arguments": {"city": "SF", days: 3}}'), CANON),
    (tc('{"name": "get_weather", "arguments": {"city": "SF", // the city\n"days": 3}}'), CANON),
    (tc('{"name": "get_weather", "arguments": {"city": "SF",\n  /* two */ "days": 3,\n}}'), CANON),
    (tc('{"name": "get_weather", "arguments": {"city": None, "days": [1, 2,], "x": {"y": False,},}}'),
     '{"city": null, "days": [1, 2], "x": {"y": false}}'),
    # stringified relaxed arguments are unwrapped canonically
    (tc('{"name": "get_weather", "arguments": "{\'city\': \'SF\', \'days\': 3}"}'), CANON),
    # format C JSON body
    ("<function=get_weather>{'city': \"Joe's\", 'days': 3}</function>", '{"city": "Joe\'s", "days": 3}'),
    ('<function=get_weather>{"city": "SF", "days": 3,}</function>', CANON),
    ('<tool_call><function=get_weather>{city: "SF", days: 3}</function></tool_call>', CANON),
    # format B: <args> and a JSON body
    ("<use_tool><name>get_weather</name><args>{'city': 'SF', // note\n 'days': 3}</args></use_tool>", CANON),
    ("<use_tool>{'name': 'get_weather', 'city': 'SF', 'days': 3}</use_tool>", CANON),
    ('<use_tool name="get_weather"><args>{"city": "SF", "days": 3, /* done */}</args></use_tool>', CANON),
    # escapes inside single-quoted strings: \' is an apostrophe, a double quote gets escaped
    (tc("""{"name": "get_weather", "arguments": {'city': '\\u00e9\\u2603 \\uZZ'}}"""),
     '{"city": "\\u00e9\\u2603 \\\\uZZ"}'),
    (tc("""{"name": "get_weather", "arguments": {'city': 'say \\'hi\\' and "bye"'}}"""),
     '{"city": "say \'hi\' and \\"bye\\""}'),
    # Python/JS literals and numbers
    (tc("{'name': 'get_weather', 'arguments': {'days': +3, 'a': .5, 'b': 0x1f, 'c': 1., 'd': [True, None]}}"),
     '{"days": 3, "a": 0.5, "b": 31, "c": 1.0, "d": [true, null]}'),
])
def test_c25_relaxed_json_becomes_canonical(text, arguments):
    tr(CFG, text, [Call(WEATHER.name, arguments)], finish="tool_calls", notes=["repaired"])


def test_c25_strict_json_is_untouched():
    """Apostrophes in double-quoted values and the model's own spacing are no violation: verbatim."""
    args = '{"city":  "it\'s \\"SF\\"" ,"days":3}'
    tr(CFG, tc(f'{{"name": "get_weather", "arguments": {args}}}'), [Call("get_weather", args)],
       finish="tool_calls", notes=[])


def test_c25_bare_relaxed_json_at_message_start():
    text = "{'name': 'get_weather', 'arguments': {'city': 'SF', 'days': 3}}"
    tr(CFG, text, [Call("get_weather", CANON)], finish="tool_calls", notes=["repaired"])


@pytest.mark.parametrize("text", [
    "{'name': 'nope', 'arguments': {'a': 1}} is a dict",  # not an offered tool
    "{'name': 'get_weather'} has no arguments key",
    "{this is prose} <- braces",
])
def test_c25_bare_relaxed_non_calls_are_text(text):
    tr(CFG, text, [text], finish="stop")


def test_c25_bare_prose_after_a_broken_brace_still_finds_a_call():
    text = "{not json} then " + tc(TM)
    tr(CFG, text, ["{not json} then ", Call("get_time", "{}")], finish="tool_calls")


# --- streaming shape --------------------------------------------------------------------------------

def test_c25_strict_prefix_streams_and_the_rest_comes_once():
    """Strict text goes out as it arrives; after the violation nothing until the value closes."""
    text = tc('{"name": "get_weather", "arguments": {"city": "SF", "days": True, "x": \'y\'}}')
    frags = [e.fragment for e in run_chunks(CFG, list(text)) if isinstance(e, ToolCallArgumentsDelta)]
    prefix = '{"city": "SF", "days": '
    assert "".join(frags) == prefix + 'true, "x": "y"}'
    assert frags[-1] == 'true, "x": "y"}'  # the continuation, in one fragment
    assert "".join(frags[:-1]) == prefix


def test_c25_relaxed_from_the_start_sends_nothing_before_the_end():
    """The value's opening bracket is held until the next character shows strict JSON, so a body
    relaxed from its first key sends no header before it closes: cut short, it is text."""
    text = "<function=get_weather>{'city': 'SF', 'days'"
    tr(CFG, text, [text], finish="length", upstream="length", notes=["incomplete"], leak_ok=True)


# --- failures follow the failure policy -------------------------------------------------------------

@pytest.mark.parametrize("text", [
    tc("{'name': 'get_weather', 'arguments': {'city': 'SF' 'x'}}") + " after",
    "<function=get_weather>{'city': SF}</function>",
    "<function=get_weather>{'city': 'SF', 'days': NaN}</function>",
    "<use_tool><name>get_weather</name><args>{'city': 'SF', /x}</args></use_tool>",
    tc("{'name': 'get_weather', 'arguments': {'city': 'SF', 'days': -Infinity}}"),
    tc('{"name": "get_weather", "arguments": "{\'city\': SF}"}'),
])
def test_c25_unparseable_with_nothing_sent_is_text(text):
    tr(CFG, text, [text], finish="stop", notes=["invalid_json"], leak_ok=True)


@pytest.mark.parametrize("text,sent", [
    ('<function=get_weather>{"city": "SF", "days": 3 4}</function>', '{"city": "SF", "days": 3 '),
    (tc('{"name": "get_weather", "arguments": {"city": "SF", "days": undefined}}'), '{"city": "SF", "days": '),
])
def test_c25_unparseable_after_the_header_is_an_invalid_call(text, sent):
    """What went out stays (prefix-monotonic); nothing that is not JSON follows it."""
    tr(CFG, text, [Call("get_weather", sent, valid=False)], finish="stop", notes=["invalid_json"])


def test_c25_opener_ends_an_unfinished_relaxed_body():
    """Case 14 holds in relaxed mode too: an opener outside strings ends the body."""
    text = "<tool_call>{'name': 'get_weather', 'arguments': {'city': '<tool_call>'" + tc(TM)
    tr(CFG, text, ["<tool_call>{'name': 'get_weather', 'arguments': {'city': '<tool_call>'",
                   Call("get_time", "{}")], finish="tool_calls", notes=["invalid_json"], leak_ok=True)


def test_c25_invalid_json_fail_policy_raises():
    cfg = replace(CFG, policy=Policy(invalid_json="fail"))
    tr_raises(cfg, "<function=get_weather>{'city': SF}</function>", ModelOutputError, code="invalid_json")


def test_c25_strict_tool_relaxed_arguments_are_schema_checked():
    strict = ToolSpec("get_weather", "w", {**WEATHER.parameters, "additionalProperties": False}, strict=True)
    cfg = ParserConfig.for_tools([strict])
    tr(cfg, "<function=get_weather>{city: 'SF', days: 3}</function>", [Call("get_weather", CANON)],
       finish="tool_calls", notes=["repaired"])
    tr_raises(cfg, "<function=get_weather>{city: 'SF', days: 'x'}</function>", ModelOutputError,
              code="tool_arguments_invalid")


def test_c25_relaxed_call_object_is_bounded_by_the_hold_limit():
    """4.1 size valve: a relaxed call object held past ``hold_limit`` is not a call."""
    cfg = replace(CFG, policy=Policy(hold_limit=64))
    text = tc("{'name': 'get_weather', 'arguments': {'city': '" + "x" * 100 + "'}}") + " ok"
    tr(cfg, text, [text], finish="stop", notes=["invalid_json"], leak_ok=True, two_split_limit=0)


# --- the lenient reader itself ---------------------------------------------------------------------

@pytest.mark.parametrize("text,value", [
    ("{'a': 'it\\'s', b: [1, 2,], c: None, /* x */ d: True, // y\n}", {"a": "it's", "b": [1, 2], "c": None,
                                                                          "d": True}),
    ('["a", \'b\', -1.5e3, 007]', ["a", "b", -1.5e3, 7]),
    ('{"tab": "a\tb", \'nl\': \'x\ny\'}', {"tab": "a\tb", "nl": "x\ny"}),
    ("{'k': 'caf\u00e9 \u2603'}", {"k": "caf\u00e9 \u2603"}),
    # a \u escape with its four hex digits stays one; without them its backslash is a literal one
    ("{'k': '\\u00e9 \\uZ1 \\u12'}", {"k": "\u00e9 \\uZ1 \\u12"}),
])
def test_relaxed_loads(text, value):
    assert relaxed_loads(text) == value


@pytest.mark.parametrize("text", ["{'a': 1} tail", "{'a' 1}", "{'a': Infinity}", "{'a': [1,, 2]}", "'str'",
                                  "{'a': 1]", "{'a': 1, 'b': 2", "{'a': 'x' /}"])
def test_relaxed_loads_rejects(text):
    assert relaxed_loads(text) is None


def test_value_lexer_canonical_text_is_json_under_every_split():
    """The lexer's text for a relaxed value is the same JSON however the value is cut."""
    text = "{\"a\": 1, 'b': [True, None,], /* c */ c: {'d': \"it's\"}, // e\n}"
    expected = '{"a": 1, "b": [true, null], "c": {"d": "it\'s"}}'
    for i in range(len(text) + 1):
        lexer = ValueLexer()
        first, end = lexer.feed(text[:i], 0)
        assert end is None or i == len(text)
        rest, end = lexer.feed(text[i:], 0) if end is None else ("", end)
        assert first + rest == expected, i
        assert end == len(text) - i or (i == len(text) and end == len(text))
