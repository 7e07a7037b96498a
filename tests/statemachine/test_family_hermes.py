"""Hermes 2 Pro / Hermes 3 / Qwen 2.5 call spellings through the core's default formats, under every chunking.

llama.cpp's Hermes 2 Pro parser accepts format A's object in many wrappers
(``<tool>``, ``<tools>``, ``<response>``, ``<json>``, ``<JSON>``, ``<xml>``,
``<function_call>``, code fences) and format C's JSON body. Cases mined from
llama.cpp (repository, file, commit): texts theirs, structure ours.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from harness import Call, Reasoning, tr
from statemachine import ParserConfig, ToolSpec

LLAMA_CPP = "ggml-org/llama.cpp tests/test-chat.cpp @ e7e21164bdf5434e3453777fd27e68cdc0ebfe94"
VLLM_JAMBA = "vllm-project/vllm tests/tool_parsers/test_jamba_tool_parser.py @ 045d7575500e01e0f4a7ff84e039a9f7f7dc3bd0"
OBJ = {"type": "object"}
DEFAULT = ParserConfig.for_tools([ToolSpec("special_function", "", OBJ), ToolSpec("python", "", OBJ),
                                  ToolSpec("get_current_weather", "", OBJ)])
BODY = '{"name": "special_function", "arguments": {"arg1": 1}}'
CALL = Call("special_function", '{"arg1": 1}')
PYTHON = Call("python", '{"code":"print(\'hello\')"}')
DALLAS = '{"name": "get_current_weather", "arguments": {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}}'
DALLAS_CALL = Call("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"})


class Case(NamedTuple):
    source: str
    text: str
    expected: list
    finish: str = "tool_calls"


CASES = [
    Case(LLAMA_CPP, f"<tool_call>\n{BODY}\n</tool_call>", [CALL]),
    Case(LLAMA_CPP, f"Hello, world!\nWhat's up?<tool_call>\n{BODY}\n</tool_call>", ["Hello, world!\nWhat's up?", CALL]),
    Case(LLAMA_CPP, '<function=special_function>{"arg1": 1}</function>', [CALL]),
    Case(LLAMA_CPP, '<function name="special_function">\n{"arg1": 1}\n</function>', [CALL]),
    Case(LLAMA_CPP, f"<tool>\n  {BODY}\n</tool>", [CALL]),
    Case(LLAMA_CPP, f"<tools>\n  {BODY}\n</tools>", [CALL]),
    Case(LLAMA_CPP, f"<response>\n  {BODY}\n</response>", [CALL]),
    Case(LLAMA_CPP, f"```xml\n<response>\n    {BODY}\n</response>\n```", [CALL]),
    Case(LLAMA_CPP, f"```xml\n  {BODY}\n```", [CALL]),
    Case(LLAMA_CPP, f"```\n  {BODY}\n```", [CALL]),
    Case(LLAMA_CPP, f"```\n{BODY}\n```", [CALL]),
    Case(LLAMA_CPP, f"```json\n  {BODY}\n```", [CALL]),
    Case(LLAMA_CPP, f"```json\n\n                    <function_call> {BODY} \n                    </function_call> \n``` ",
         [CALL]),
    Case(LLAMA_CPP, f"<json>\n  {BODY}\n</json>", [CALL]),
    Case(LLAMA_CPP, '<xml>\n  {\n    "name": "special_function", "arguments": {"arg1": 1}\n  }\n</xml>', [CALL]),
    Case(LLAMA_CPP, f"<JSON>\n  {BODY}\n</JSON>", [CALL]),
    Case(LLAMA_CPP, BODY, [CALL]),
    Case(LLAMA_CPP, '{\n  "name": "special_function", "arguments": {"arg1": 1}}', [CALL]),
    Case(LLAMA_CPP, f'<tool_call>\n{BODY}\n</tool_call>\n<tool_call>\n{{"name": "python", "arguments": '
                    '{"code":"print(\'hello\')"}}\n</tool_call>', [CALL, PYTHON]),
    Case(LLAMA_CPP, '<function=special_function>{"arg1": 1}</function>\n<function=python>{"code":"print(\'hello\')"}'
                    "</function>", [CALL, PYTHON]),
    # llama.cpp: a call after the prose; here bare JSON counts only at a message's start (parsing.md 2.2)
    Case(LLAMA_CPP, f"This is not a tool call:\n{BODY}", [f"This is not a tool call:\n{BODY}"], "stop"),
    Case(LLAMA_CPP, "Hello, world!\nWhat's up?", ["Hello, world!\nWhat's up?"], "stop"),
    Case(LLAMA_CPP, "<think>I'm\nthinking</think>Hello, world!\nWhat's up?",
         [Reasoning("I'm\nthinking"), "Hello, world!\nWhat's up?"], "stop"),
    Case(LLAMA_CPP, "<think><tool_call>nah uhg</tool_call>", [Reasoning("<tool_call>nah uhg</tool_call>")], "stop"),
    Case(LLAMA_CPP, f"<function_call> {BODY}", [CALL]),
    Case(VLLM_JAMBA, "This is a test", ["This is a test"], "stop"),
    Case(VLLM_JAMBA, f" <tool_calls>[\n    {DALLAS}\n]</tool_calls>", [DALLAS_CALL]),
    Case(VLLM_JAMBA, f" Sure! let me call the tool for you.<tool_calls>[\n    {DALLAS}\n]</tool_calls>",
         [" Sure! let me call the tool for you.", DALLAS_CALL]),
    Case(VLLM_JAMBA, f" <tool_calls>[\n    {DALLAS},\n    {DALLAS.replace('Dallas', 'Orlando').replace('TX', 'FL')}"
                     "\n]</tool_calls>",
         [DALLAS_CALL, Call("get_current_weather", {"city": "Orlando", "state": "FL", "unit": "fahrenheit"})]),
    Case(VLLM_JAMBA, '<tool_calls>[{"name": "get_current_weather", "arguments": {"city": "Dallas", "state": "TX"}}]'
                     "</tool_calls>", [Call("get_current_weather", {"city": "Dallas", "state": "TX"})]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.text[:50])
def test_hermes_spellings(case: Case):
    tr(DEFAULT, case.text, case.expected, finish=case.finish, leak_ok=True)


def test_function_tag_and_python_dict_body():  # ours: Hermes 2 Pro's prompt shows {'arguments': …, 'name': …}
    tr(DEFAULT, '<function>{"name": "special_function", "arguments": {"arg1": 1}}</function>', [CALL],
       finish="tool_calls")
    tr(DEFAULT, "<tool_call>\n{'arguments': {'arg1': 1}, 'name': 'special_function'}\n</tool_call>", [CALL],
       finish="tool_calls")


def test_a_tool_response_wrapper_is_no_call():  # the results' wrapper: a model imitating it is not calling
    text = f"<tool_response>{BODY}</tool_response>"
    tr(DEFAULT, text, [text], leak_ok=True)


def test_alias_tags_in_prose_stay_text():
    for text in ("Use <function>s and <tool_calls> in HTML", "<tool_calls>none</tool_calls>"):
        tr(DEFAULT, text, [text], leak_ok=True)
