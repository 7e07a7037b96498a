"""Llama 3.x ``<|python_tag|>`` JSON calls (and bare ones at a message's start) through the core, under every chunking.

Cases mined from vLLM ``tests/tool_parsers/test_llama3_json_tool_parser.py``
(commit e761a18556be6e7e80a81c8bc4b443ac52b2ba69): texts theirs, structure ours.
"""

from __future__ import annotations

from dataclasses import replace

from harness import Call, tr
from statemachine import ParserConfig, ToolSpec, get_format

OBJ = {"type": "object"}
NAMES = ("getOpenIncidentsTool", "searchTool", "complexTool", "simpleTool", "parserTool")
L3 = replace(ParserConfig.for_tools([ToolSpec(n, "", OBJ) for n in NAMES]), formats=("llama3", "tool_call"))
TAG = "<|python_tag|>"
THREE = ('{"name": "searchTool", "parameters": {"query": "test1"}}; '
         '{"name": "getOpenIncidentsTool", "parameters": {}}; '
         '{"name": "searchTool", "parameters": {"query": "test2"}}')
THREE_CALLS = [Call("searchTool", {"query": "test1"}), Call("getOpenIncidentsTool", {}),
               Call("searchTool", {"query": "test2"})]


def test_with_arguments():
    text = '{"name": "searchTool", "parameters": {"query": "test query", "limit": 10}}'
    tr(L3, text, [Call("searchTool", '{"query": "test query", "limit": 10}')], finish="tool_calls")
    tr(L3, TAG + text, [Call("searchTool", '{"query": "test query", "limit": 10}')], finish="tool_calls")


def test_no_json():
    text = "This is just some text without any tool calls"
    tr(L3, text, [text], notes=[])


def test_arguments_key():
    tr(L3, TAG + '{"name": "searchTool", "arguments": {"query": "test"}}', [Call("searchTool", {"query": "test"})],
       finish="tool_calls")


def test_multiple_separated_by_semicolons():
    tr(L3, TAG + THREE, THREE_CALLS, finish="tool_calls")
    tr(L3, THREE, THREE_CALLS, finish="tool_calls")


def test_multiple_with_whitespace_around_semicolons():
    tr(L3, TAG + THREE.replace("; ", " ; "), THREE_CALLS, finish="tool_calls")


def test_surrounding_text_after_the_tag():
    text = "Here are the results: " + TAG + THREE + " Would you like to know more?"
    tr(L3, text, ["Here are the results: ", *THREE_CALLS, "Would you like to know more?"], finish="tool_calls")


def test_deeply_nested_parameters():
    args = '{"level1": {"level2": {"level3": {"level4": {"value": "deep"}}}}}'
    tr(L3, TAG + '{"name": "complexTool", "parameters": ' + args + "}", [Call("complexTool", args)],
       finish="tool_calls")


def test_quotes_and_brackets_in_strings():
    args = '{"query": "test {value} [complex]","nested": {"inner": "more {brackets}"}}'
    tr(L3, TAG + '{"name": "searchTool", "parameters": ' + args + "}", [Call("searchTool", args)],
       finish="tool_calls")


def test_escaped_quotes():
    args = r'{"text": "He said \"Hello {world}\""}'
    tr(L3, TAG + '{"name": "parserTool", "parameters": ' + args + "}", [Call("parserTool", args)],
       finish="tool_calls")


def test_missing_name_is_text():
    tr(L3, '{"parameters": {}}', ['{"parameters": {}}'])


def test_end_of_message_token_is_dropped():
    text = TAG + '{"name": "simpleTool", "parameters": {"value": "test"}}<|eom_id|>'
    tr(L3, text, [Call("simpleTool", {"value": "test"})], finish="tool_calls")


def test_rendered_call_round_trips():
    tr(L3, get_format("llama3").render_call("simpleTool", '{"value": 1}'), [Call("simpleTool", '{"value": 1}')],
       finish="tool_calls")


def test_bare_json_after_prose_stays_text():
    # vLLM: a call; here bare JSON is a call only at a message's start (docs/model-families.md)
    text = 'Here is the result: {"name": "getOpenIncidentsTool", "parameters": {}} Would you like to know more?'
    tr(L3, text, [text])
