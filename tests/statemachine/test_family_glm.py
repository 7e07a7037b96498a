"""GLM 4.5–4.7 ``<tool_call>NAME<arg_key>…</arg_key><arg_value>…</arg_value></tool_call>`` through the core.

Cases mined from vLLM ``tests/tool_parsers/test_glm4_moe_tool_parser.py``
(commit 1c1b86e1664b8b04423ffc4102f6dd922a97ecbf): texts theirs, structure ours.
"""

from __future__ import annotations

from dataclasses import replace

from harness import Call, Open, Reasoning, tr
from statemachine import ParserConfig, ToolSpec, get_format

STR = {"type": "string"}
WEATHER = ToolSpec("get_current_weather", "", {"type": "object", "properties": {"city": STR, "state": STR,
                                                                                "unit": STR}})
GET = ToolSpec("get_weather", "", {"type": "object", "properties": {"city": STR, "date": STR}})
TIME = ToolSpec("get_current_time", "", {"type": "object"})
SEND = ToolSpec("send_message", "", {"type": "object", "properties": {"recipient": STR, "message": STR,
                                                                     "priority": STR}})
COUNT = ToolSpec("count", "", {"type": "object", "properties": {"n": {"type": "integer"},
                                                                "tags": {"type": "array"}}})
GLM = replace(ParserConfig.for_tools([WEATHER, GET, TIME, SEND, COUNT]), formats=("glm", "use_tool"))


def weather(city: str, state: str, unit: str, indent: str = "    ") -> str:
    pairs = (("city", city), ("state", state), ("unit", unit))
    body = "".join(f"{indent}<arg_key>{k}</arg_key>\n{indent}<arg_value>{v}</arg_value>\n" for k, v in pairs)
    return f"<tool_call>get_current_weather\n{body}{indent}</tool_call>"


def test_no_tools():
    tr(GLM, "This is a test", ["This is a test"], notes=[])


def test_single_call():
    tr(GLM, weather("Dallas", "TX", "fahrenheit"),
       [Call("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"})], finish="tool_calls")


def test_two_calls():
    text = weather("Dallas", "TX", "fahrenheit") + "\n    " + weather("Orlando", "FL", "fahrenheit")
    tr(GLM, text, [Call("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}),
                   Call("get_current_weather", {"city": "Orlando", "state": "FL", "unit": "fahrenheit"})],
       finish="tool_calls")


def test_content_before():
    text = "I'll help you check the weather. " + weather("Seattle", "WA", "celsius")
    tr(GLM, text, ["I'll help you check the weather. ",
                   Call("get_current_weather", {"city": "Seattle", "state": "WA", "unit": "celsius"})],
       finish="tool_calls")


def test_value_with_a_space():
    tr(GLM, weather("New York", "NY", "celsius"),
       [Call("get_current_weather", {"city": "New York", "state": "NY", "unit": "celsius"})], finish="tool_calls")


GET_BEIJING = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
               "<arg_key>date</arg_key>\n<arg_value>2025-08-01</arg_value>\n</tool_call>")


def test_thinking_then_text_then_call():
    text = "<think>I want to get the weather.</think>\n\nI will help you get the weather.\n" + GET_BEIJING
    tr(GLM, text, [Reasoning("I want to get the weather."), "\n\nI will help you get the weather.\n",
                   Call("get_weather", {"city": "Beijing", "date": "2025-08-01"})], finish="tool_calls")


def test_empty_arguments():
    tr(GLM, "<tool_call>get_current_time\n</tool_call>", [Call("get_current_time", "{}")], finish="tool_calls")


def test_mixed_content_and_two_calls():
    second = GET_BEIJING.replace("Beijing", "Shanghai")
    text = ("I will help you get the weather info.\n\n" + GET_BEIJING
            + "\n\nmeaningwhile, I will also check the weather in Shanghai.\n\n" + second)
    tr(GLM, text, ["I will help you get the weather info.\n\n",
                   Call("get_weather", {"city": "Beijing", "date": "2025-08-01"}),
                   "\n\nmeaningwhile, I will also check the weather in Shanghai.\n\n",
                   Call("get_weather", {"city": "Shanghai", "date": "2025-08-01"})], finish="tool_calls")


def test_special_characters():
    text = ("<tool_call>send_message\n<arg_key>recipient</arg_key>\n<arg_value>Amy</arg_value>\n"
            "<arg_key>message</arg_key>\n<arg_value>It is a nice day</arg_value>\n"
            "<arg_key>priority</arg_key>\n<arg_value>high</arg_value>\n</tool_call>")
    tr(GLM, text, [Call("send_message", {"recipient": "Amy", "message": "It is a nice day", "priority": "high"})],
       finish="tool_calls")


def test_incomplete_call_is_not_a_call():
    text = GET_BEIJING[:-len("\n</tool_call>")]
    tr(GLM, text, [Open("get_weather", '{"city": "Beijing", "date": "2025-08-01"')], notes=["incomplete"])


# ours -------------------------------------------------------------------------

def test_glm47_without_newlines_and_typed_values():
    text = '<tool_call>count<arg_key>n</arg_key><arg_value>3</arg_value><arg_key>tags</arg_key><arg_value>["a"]</arg_value></tool_call>'
    tr(GLM, text, [Call("count", '{"n": 3, "tags": ["a"]}')], finish="tool_calls")


def test_a_json_body_is_still_format_a():
    text = '<tool_call>{"name": "get_current_time", "arguments": {}}</tool_call>'
    tr(GLM, text, [Call("get_current_time", {})], finish="tool_calls")


def test_prose_in_the_tag_is_text():
    text = "<tool_call> is how calls start"
    tr(GLM, text, [text], leak_ok=True)


def test_rendered_call_round_trips():
    rendered = get_format("glm").render_call("count", '{"n": 3, "tags": ["a"]}')
    tr(GLM, rendered, [Call("count", '{"n": 3, "tags": ["a"]}')], finish="tool_calls")
