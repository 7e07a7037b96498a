"""Seed-OSS ``<seed:tool_call>`` blocks (format C inside) through the core, under every chunking.

Cases mined from vLLM ``tests/tool_parsers/test_seed_oss_tool_parser.py``
(commit 0f120751344c09af442c1800020908d2b7ff71f2): texts theirs, structure ours.
"""

from __future__ import annotations

from dataclasses import replace

from harness import Call, tr
from statemachine import ParserConfig, ToolSpec, get_format

STR = {"type": "string"}
WEATHER = ToolSpec("get_weather", "Get current temperature for a given location.", {
    "type": "object", "properties": {"location": STR, "unit": STR}, "required": ["location"]})
SEED = replace(ParserConfig.for_tools([WEATHER]), formats=("seed_oss", "tool_call"))
CALL = ("<seed:tool_call>\n<function=get_weather>\n<parameter=location>Barcelona, Spain</parameter>\n"
        "</function>\n</seed:tool_call>")


def test_no_tools():
    text = "This is a test response without any tool calls"
    tr(SEED, text, [text], notes=[])


def test_one_parameter():
    tr(SEED, CALL, [Call("get_weather", {"location": "Barcelona, Spain"})], finish="tool_calls", notes=[])


def test_two_parameters_after_text():
    text = ("The unit parameter can be omitted.\n<seed:tool_call>\n<function=get_weather>\n<parameter=location>"
            "Barcelona, Spain</parameter>\n<parameter=unit>celsius</parameter>\n</function>\n</seed:tool_call>")
    tr(SEED, text, ["The unit parameter can be omitted.\n",
                    Call("get_weather", {"location": "Barcelona, Spain", "unit": "celsius"})], finish="tool_calls")


def test_rendered_call_round_trips():
    rendered = get_format("seed_oss").render_call("get_weather", '{"location": "Oslo"}')
    tr(SEED, rendered, [Call("get_weather", {"location": "Oslo"})], finish="tool_calls")
