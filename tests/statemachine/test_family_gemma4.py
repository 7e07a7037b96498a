"""Gemma 4 ``<|tool_call>call:NAME{…}<tool_call|>`` calls through the core, under every chunking: the peers'
cases (``gemma4_cases``) and ours."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gemma4_cases import B, CASES, E, NAMES, Q, call, q
from harness import Call, tr
from statemachine import ParserConfig, ToolSpec, get_format

G4 = replace(ParserConfig.for_tools([ToolSpec(n, "", {"type": "object"}) for n in NAMES]), formats=("gemma4", "tool_call"))


@pytest.mark.parametrize(("source", "label", "text", "expected", "options"), CASES,
                         ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_peer_case(source, label, text, expected, options):
    options = dict(options)
    options.pop("differs", None)
    tr(G4, text, expected, **options)


# ours -------------------------------------------------------------------------

def test_rendered_call_round_trips():
    fmt = get_format("gemma4")
    rendered = fmt.render_call("process", '{"name": "a \\"b\\"", "n": 2, "tags": ["x"], "o": {"k": null}}')
    assert rendered == '<|tool_call>call:process{name:<|"|>a "b"<|"|>,n:2,tags:[<|"|>x<|"|>],o:{k:null}}<tool_call|>'
    tr(G4, rendered, [Call("process", {"name": 'a "b"', "n": 2, "tags": ["x"], "o": {"k": None}})],
       finish="tool_calls", notes=[])
    assert "<|tool_call>call:NAME{…}<tool_call|>" in fmt.instructions("process", '{"n": 2}')


def test_tool_result_in_the_template_form():
    assert get_format("gemma4").render_result("get_weather", "sunny") == (
        '<|tool_response>response:get_weather{value:<|"|>sunny<|"|>}<tool_response|>')


def test_end_of_turn_is_dropped():
    tr(G4, "Hello.<turn|>", ["Hello."])


def test_a_top_level_string_is_typed_by_the_schema():
    typed = replace(G4, tools={"set_temp": ToolSpec("set_temp", "", {"type": "object", "properties": {
        "value": {"type": "integer"}}})})
    tr(typed, call("set_temp", "value:" + q("42")), [Call("set_temp", {"value": 42})], finish="tool_calls")


def test_a_json_quoted_value_is_one_string():
    """A double-quoted value is one JSON string: its commas and colons are text and its escapes are read."""
    tr(G4, call("foo", 'q:"a,b:c"'), [Call("foo", {"q": "a,b:c"})], finish="tool_calls", notes=[])
    tr(G4, call("foo", 'q: "say \\"hi\\", b:1",n:2,l:["x,y",{k:"}"}]'),
       [Call("foo", {"q": 'say "hi", b:1', "n": 2, "l": ["x,y", {"k": "}"}]})], finish="tool_calls", notes=[])
    # a quote inside a bare word is the word's text, not a string's start
    tr(G4, call("foo", 'q:ab"c,n:1'), [Call("foo", {"q": 'ab"c', "n": 1})], finish="tool_calls", notes=[])


def test_a_json_quoted_value_with_a_bad_escape_is_invalid():
    tr(G4, call("foo", 'q:"C:\\users"'), [Call("foo", "{", valid=False)], notes=["invalid_json"])


def test_a_quoted_key_loses_its_quotes():
    tr(G4, call("foo", "o:{" + q("3") + ":" + q("new text") + ',"a:b":1}'),
       [Call("foo", {"o": {"3": "new text", "a:b": 1}})], finish="tool_calls", notes=[])
    tr(G4, call("foo", q("k,1") + ":2," + '"x y":3'), [Call("foo", {"k,1": 2, "x y": 3})], finish="tool_calls",
       notes=[])


def test_a_string_left_open_before_the_closer_is_closed_there():
    """The closer is a special token, never string text: a top-level string still open there ends before it
    (a ``}`` right before the closer is the object's), with a ``repaired`` note."""
    tr(G4, f"{B}call:bash{{command:{Q}ls}}{E}Done.", [Call("bash", {"command": "ls"}), "Done."],
       finish="tool_calls", notes=["repaired"])
    tr(G4, f"{B}call:bash{{path:{q('/tmp')},command:{Q}ls -a {E}", [Call("bash", {"path": "/tmp", "command": "ls -a "})],
       finish="tool_calls", notes=["repaired"])
    tr(G4, f'{B}call:bash{{command:"ls}}{E}', [Call("bash", {"command": "ls"})], finish="tool_calls", notes=["repaired"])


def test_a_nested_string_left_open_before_the_closer_is_invalid():
    tr(G4, f"{B}call:bash{{o:{{k:{Q}ls}}}}{E}Done.", [Call("bash", "{", valid=False), "Done."],
       notes=["invalid_json"])


def test_a_malformed_call_is_dropped_up_to_its_closer():
    tr(G4, call("foo", "a:1,<b>:2") + "after", [Call("foo", '{"a": 1', valid=False), "after"], notes=["invalid_json"])
    tr(G4, call("foo", 'q:"x"y,n:1') + "after", [Call("foo", '{"q": "x"', valid=False), "after"],
       notes=["invalid_json"])
