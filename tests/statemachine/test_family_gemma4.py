"""Gemma 4 ``<|tool_call>call:NAME{…}<tool_call|>`` calls through the core, under every chunking: the peers'
cases (``gemma4_cases``) and ours."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gemma4_cases import CASES, NAMES, call, q
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
