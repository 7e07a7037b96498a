"""Fixes found by replaying the peers' own tool-parser test suites (vLLM, SGLang, llama.cpp, Ollama)."""

from __future__ import annotations

from harness import CFG, Call, Reasoning, tr

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
