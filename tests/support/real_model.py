"""The real-model tests' prompt set and requests, shared by the e2e tests, their replays and ``make bench-model``."""

from __future__ import annotations

from typing import Any

from .endpoints import CHAT, Endpoint

MAX_TOKENS = 48
WEATHER = {"name": "get_weather", "description": "Current weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
TIME = {"name": "get_time", "description": "Current time in a time zone.",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}
TOOLS = [WEATHER, TIME]
NAMES = {tool["name"] for tool in TOOLS}
# An earlier call and its result in the transcript: the small models imitate a call they see (real-model.md).
EXAMPLE_CALL = {"id": "call_rome", "type": "function", "function": {"name": "get_weather",
                                                                    "arguments": '{"city": "Rome"}'}}
HISTORY = [{"role": "user", "content": "What's the weather in Rome?"},
           {"role": "assistant", "content": None, "tool_calls": [EXAMPLE_CALL]},
           {"role": "tool", "tool_call_id": "call_rome", "content": '{"temperature_c": 18, "sky": "clear"}'},
           {"role": "assistant", "content": "It is 18 °C and clear in Rome."}]
# The same exchange as a model_map example_exchange: toolwire writes it before the conversation.
EXAMPLE_EXCHANGE = {"user": HISTORY[0]["content"], "tool": "get_weather", "arguments": {"city": "Rome"},
                    "result": HISTORY[2]["content"], "answer": HISTORY[3]["content"]}
# The route per client model name: llama-cpp-python serves its one model under any name.
MODELS = {"smollm2": {"model": "smollm2", "tool_format": "tool_call"},
          "gemma3": {"model": "gemma3", "tool_format": "gemma"},
          "smollm2-native": {"model": "smollm2", "tool_mode": "native"},
          "smollm2-taught": {"model": "smollm2", "tool_format": "tool_call", "tool_manifest": "compact",
                             "example_exchange": EXAMPLE_EXCHANGE}}
PROMPTS = {"followup_next_call": "And what's the weather in Paris?", "no_tool": "Write one short line about the sea."}


def request(endpoint: Endpoint, model: str, prompt: str, *, stream: bool, **extra: Any) -> dict[str, Any]:
    """The prompt after the example exchange, in ``endpoint``'s shape."""
    if endpoint is CHAT:
        return {"model": model, "messages": [*HISTORY, {"role": "user", "content": prompt}],
                "tools": [{"type": "function", "function": tool} for tool in TOOLS], "stream": stream,
                "temperature": 0, "max_tokens": MAX_TOKENS, **extra}
    items = [HISTORY[0], {"type": "function_call", "call_id": "call_rome", "name": "get_weather",
                          "arguments": '{"city": "Rome"}'},
             {"type": "function_call_output", "call_id": "call_rome", "output": HISTORY[2]["content"]},
             HISTORY[3], {"role": "user", "content": prompt}]
    return {"model": model, "input": items, "tools": [{"type": "function", **tool} for tool in TOOLS],
            "stream": stream, "temperature": 0, "max_output_tokens": MAX_TOKENS, **extra}
