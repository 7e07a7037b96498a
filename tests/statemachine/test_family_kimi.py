"""Kimi K2 tool-call tokens through the core, under every chunking.

Cases mined from vLLM ``tests/tool_parsers/test_kimi_k2_tool_parser.py``
(commit 42fa4c096d406754b7e5c6d93835fe390487c8af): texts theirs, structure
ours. Mistral's cases are in ``test_family_mistral.py``.
"""

from __future__ import annotations

import json
from dataclasses import replace

from harness import Call, tr
from statemachine import ParserConfig, ToolSpec, get_format

OBJ = {"type": "object"}
NAMES = ("get_weather", "get_news", "send_email", "test", "test2", "process_html", "process_data", "add")
TOOLS = ParserConfig.for_tools([ToolSpec(n, "", OBJ) for n in NAMES])
KIMI = replace(TOOLS, formats=("kimi_k2", "tool_call"))
SB, SE, CB, CE, AB = ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                      "<|tool_call_end|>", "<|tool_call_argument_begin|>")


# Kimi K2 (vLLM) ---------------------------------------------------------------

def test_kimi_no_tools():
    tr(KIMI, "This is a test", ["This is a test"], notes=[])


def test_kimi_call_with_content_before_and_spaces():
    text = (f"I'll help you check the weather. {SB} {CB}\nfunctions.get_weather:0 {AB} "
            f'{{"city": "Beijing"}} {CE} {SE}')
    tr(KIMI, text, ["I'll help you check the weather. ", Call("get_weather", {"city": "Beijing"})],
       finish="tool_calls", notes=[])


def test_kimi_two_calls():
    text = (f"I'll help you check the weather. {SB} {CB}\nfunctions.get_weather:0 {AB} {{\"city\": \"Beijing\"}} "
            f"{CE} {CB}\nfunctions.get_weather:1 {AB} {{\"city\": \"Shanghai\"}} {CE} {SE}")
    tr(KIMI, text, ["I'll help you check the weather. ", Call("get_weather", {"city": "Beijing"}),
                    Call("get_weather", {"city": "Shanghai"})], finish="tool_calls")


def test_kimi_three_concatenated_calls():
    text = (f"I'll help you with multiple tasks. {SB}{CB}functions.get_weather:0{AB}{{\"city\": \"New York\"}}{CE}"
            f"{CB}functions.get_news:1{AB}{{\"topic\": \"technology\"}}{CE}"
            f"{CB}functions.send_email:2{AB}{{\"to\": \"user@example.com\", \"subject\": \"Daily Update\"}}{CE}{SE}")
    tr(KIMI, text, ["I'll help you with multiple tasks. ", Call("get_weather", '{"city": "New York"}'),
                    Call("get_news", '{"topic": "technology"}'),
                    Call("send_email", '{"to": "user@example.com", "subject": "Daily Update"}')], finish="tool_calls")


def test_kimi_mixed_spacing_empty_arguments():
    text = (f"Mixed spacing test. {SB} {CB} functions.test:0 {AB} {{}} {CE}{CB}functions.test2:1{AB}{{}}{CE} {SE}")
    tr(KIMI, text, ["Mixed spacing test. ", Call("test", {}), Call("test2", {})], finish="tool_calls")


def test_kimi_angle_brackets_in_json():
    args = '{"html": "<div>content</div>", "text": "normal text"}'
    text = f"I need to process HTML content. {SB}{CB}functions.process_html:0{AB}{args}{CE}{SE}"
    tr(KIMI, text, ["I need to process HTML content. ", Call("process_html", args)], finish="tool_calls")


def test_kimi_newlines_in_json():
    args = json.dumps({"name": "test", "value": 123, "nested": {"key": "value"}}, indent=2)
    text = f"I need to process formatted JSON. {SB}{CB}functions.process_data:0{AB}{args}{CE}{SE}"
    tr(KIMI, text, ["I need to process formatted JSON. ", Call("process_data", args)], finish="tool_calls")


def test_kimi_rendered_call_round_trips():
    tr(KIMI, get_format("kimi_k2").render_call("add", '{"a": 1}'), [Call("add", '{"a": 1}')], finish="tool_calls")
