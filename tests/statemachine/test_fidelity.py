"""Fixes found by replaying the peers' own tool-parser test suites (vLLM, SGLang, llama.cpp, Ollama)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness import CFG, Call, Reasoning, tr
from statemachine import ParserConfig, ToolCallEnded, ToolSpec

SF = {"city": "SF"}
WEATHER_SF = '{"name": "get_weather", "arguments": {"city": "SF"}}'


def test_a_stray_bracket_after_a_bare_array_is_dropped():
    tr(CFG, f"[{WEATHER_SF}]]", [Call("get_weather", SF)], finish="tool_calls", notes=["repaired"])
    tr(CFG, f"[{WEATHER_SF}]\n] Done.", [Call("get_weather", SF), "Done."], finish="tool_calls", notes=["repaired"])


def test_only_one_stray_bracket_is_dropped():
    tr(CFG, f"[{WEATHER_SF}]]]", [Call("get_weather", SF), "]"], finish="tool_calls", notes=["repaired"])


def test_a_block_that_is_no_call_stays_reasoning_in_unclosed_reasoning():
    text = "<think>maybe <tool_call>not json</tool_call> then more"
    tr(CFG, text, [Reasoning("maybe <tool_call>not json</tool_call> then more")], notes=[])


def test_a_real_call_in_unclosed_reasoning_goes_out_and_the_rest_stays_reasoning():
    text = f"<think>so <tool_call>{WEATHER_SF}</tool_call> after"
    tr(CFG, text, [Reasoning("so "), Call("get_weather", SF), Reasoning(" after")], finish="tool_calls")


def test_an_unknown_tool_in_unclosed_reasoning_stays_reasoning():
    text = '<think>so <tool_call>{"name": "nope", "arguments": {}}</tool_call>'
    tr(CFG, text, [Reasoning(text[len("<think>"):])], notes=["unknown_tool"])


# format C values holding tag-like text: one key once, the value whole ------------------------------------

WRITE_FILE = ToolSpec("write_file", parameters={
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}})
FCFG = ParserConfig.for_tools([WRITE_FILE])


def write_call(content: str) -> str:
    return ("<tool_call>\n<function=write_file>\n<parameter=path>\nfixture.py\n</parameter>\n"
            f"<parameter=content>\n{content}\n</parameter>\n</function>\n</tool_call>")


@pytest.mark.parametrize("content", [
    "line1\n<parameter=path>\nliteral/value\n</parameter>\nline2",  # a parameter tag without a closer before
    "x = 1\n</parameter>\n<parameter=path>\nliteral\n",  # a closer, then a key already sent
    "<parameter=path>\na\n</parameter>\n<parameter=content>\nb\n</parameter>",  # a whole example body
    "a\n<tool_call>\n<function=write_file>\n<parameter=path>\nnested\n</parameter>\n</function>\n</tool_call>\nb",
    'see <function name="write_file">\n<parameter=content>\nc\n</parameter>\n</function> here',
])
def test_tag_like_text_in_a_value_stays_in_the_value(content):
    events = tr(FCFG, write_call(content), [Call("write_file", {"path": "fixture.py", "content": content})],
                finish="tool_calls", notes=[], two_split_limit=0)
    [ended] = [e for e in events if isinstance(e, ToolCallEnded)]
    assert ended.arguments.count('"path"') == 1


@pytest.mark.parametrize("content", [
    "def close():\n    return '\\n</function>\\n'",
    'END = """\n</function>\n"""\nassert parse(text).endswith(END)',
    "a\n</tool_call>\nb",
    'x = "</function>"',
])
@pytest.mark.parametrize("wrapped", [True, False])
def test_closing_tags_in_an_open_value_stay_in_the_value(content, wrapped):
    """Issue 31 (vLLM's Qwen3-Coder suite): a ``</function>`` or ``</tool_call>`` inside a value that is still
    open is value text; a value ends at its own ``</parameter>``, and only then can the function close (a
    ``</function>`` right before the block's closer or the end still ends an unclosed value)."""
    text = write_call(content) if wrapped else write_call(content)[len("<tool_call>\n"):-len("\n</tool_call>")]
    tr(FCFG, text, [Call("write_file", {"path": "fixture.py", "content": content})], finish="tool_calls",
       notes=[], two_split_limit=0)


def test_an_unclosed_value_still_ends_at_a_new_schema_parameter():
    text = "<function=write_file><parameter=path>a.py<parameter=content>hi</parameter></function>"
    tr(FCFG, text, [Call("write_file", {"path": "a.py", "content": "hi"})], finish="tool_calls")


def test_an_unclosed_value_keeps_a_tag_for_a_parameter_the_schema_lacks():
    text = "<function=write_file><parameter=content>x<parameter=mode>y</parameter></function>"
    tr(FCFG, text, [Call("write_file", {"content": "x<parameter=mode>y"})], finish="tool_calls")


# <function name="NAME"> ------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    '<function name="get_weather">{"city": "SF"}</function>',
    "<function name='get_weather'><parameter=city>SF</parameter></function>",
    '<tool_call>\n<function name="get_weather">\n<parameter=city>\nSF\n</parameter>\n</function>\n</tool_call>',
])
def test_function_name_attribute_is_format_c(text):
    tr(CFG, text, [Call("get_weather", SF)], finish="tool_calls", notes=[])


def test_marked_function_name_attribute():
    config = replace(CFG, marker="k3J9")
    text = '<function marker="k3J9" name="get_weather">{"city": "SF"}</function>'
    tr(config, text, [Call("get_weather", SF)], finish="tool_calls")
    plain = '<function name="get_weather">{"city": "SF"}</function>'
    tr(config, plain, [plain], leak_ok=True)


# tag aliases around a format-A object (parsing.md 2.2) -------------------------------------------------

@pytest.mark.parametrize("tag", ["function_call", "tool", "tools", "json", "JSON", "response", "xml"])
def test_a_call_object_in_an_alias_tag_is_a_call(tag):
    text = f"Let me check. <{tag}>\n{WEATHER_SF}\n</{tag}> Back soon."
    tr(CFG, text, ["Let me check. ", Call("get_weather", SF), " Back soon."], finish="tool_calls", notes=[])


@pytest.mark.parametrize("text,notes", [
    ('I use <json>{"a": 1}</json> a lot', []),
    ("Wrap it in <response>your answer</response>.", []),
    ('<tool>{"name": "nope", "arguments": {}}</tool>', ["unknown_tool"]),
    ('<xml>{"name": "get_weather"}</xml>', []),  # no arguments-like key: not a call
])
def test_anything_else_in_an_alias_tag_is_text(text, notes):
    tr(CFG, text, [text], notes=notes)


def test_aliases_are_off_when_not_listed():
    text = f"<function_call>{WEATHER_SF}</function_call>"
    tr(replace(CFG, formats=("tool_call",)), text, [text])


# parameter coercion by schema (format C parameters, use_tool children) -----------------------------------

@pytest.mark.parametrize("schema,text,expected", [
    ({"type": ["string", "integer"]}, "3", 3),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "3", 3),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "three", "three"),
    ({"type": ["number", "string"]}, "3", 3),
    ({"type": ["integer", "null"]}, "null", None),
    ({"anyOf": [{"type": "object"}, {"type": "null"}]}, "None", None),
    ({"type": ["string", "null"]}, "null", "null"),  # a string-or-null value streams: it is the string
    ({"type": "object"}, '"{\\"a\\": 1}"', {"a": 1}),  # double-encoded
    ({"type": "array"}, '"[1, 2]"', [1, 2]),
    ({"type": "string"}, '"{\\"a\\": 1}"', '"{\\"a\\": 1}"'),
    ({"type": "integer"}, "3.0", 3),
])
def test_coercion(schema, text, expected):
    tool = ToolSpec("set", parameters={"type": "object", "properties": {"v": schema}})
    call = f"<function=set><parameter=v>{text}</parameter></function>"
    tr(ParserConfig.for_tools([tool]), call, [Call("set", {"v": expected})], finish="tool_calls",
       two_split_limit=0)
