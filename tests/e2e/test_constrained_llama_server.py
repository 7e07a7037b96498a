"""Constrained calls against llama.cpp's own ``llama-server`` (issue 38): toolwire's default ``constrain_calls:
auto`` learns from the server's model list that it is llama.cpp and sends the calls' GBNF grammar; whatever the
0.5B model writes, a call it makes is valid JSON naming an offered tool, and text stays text.

The questions are plain ones at temperature 0 (checked by hand on the server: the same answers every run).
"""

from __future__ import annotations

import json
from typing import Callable, Iterator

import pytest

from support.endpoints import CHAT, RESPONSES, Endpoint, send
from support.server import ToolwireServer

llama_cpp_server = pytest.importorskip("support.llama_cpp_server")  # (until the tests' llama-server helper lands)

pytestmark = pytest.mark.e2e

TEST_TIME_LIMIT = 240.0  # a CPU model: the prompt's processing alone takes seconds on a busy 2-core machine
TOOLS = [
    {"name": "get_weather", "description": "Current weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                    "required": ["city"]}},
    {"name": "add", "description": "Add two numbers",
     "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                    "required": ["a", "b"]}},
]
OFFERED = {tool["name"]: tool for tool in TOOLS}


@pytest.fixture(scope="module")
def llama() -> Iterator[object]:
    with llama_cpp_server.LlamaCppServer("qwen-coder", n_ctx=4096) as server:
        yield server


@pytest.fixture
def toolwire(llama, toolwire_factory: Callable[..., ToolwireServer]) -> ToolwireServer:
    return toolwire_factory(TOOLWIRE_UPSTREAM_URL=llama.v1_url, TOOLWIRE_UPSTREAM_READ_TIMEOUT="200")


def ask(toolwire: ToolwireServer, endpoint: Endpoint, question: str, *, stream: bool, choice: str = "auto"):
    body = endpoint.body(question, TOOLS, stream=stream)
    body.update(model="qwen-coder", tool_choice=choice, temperature=0,
                **({"max_tokens": 120} if endpoint is CHAT else {"max_output_tokens": 120}))
    outcome = send(toolwire.v1_url, endpoint, body, within=220)
    assert outcome.kind == "completed", (outcome.error, outcome.body[-800:])
    return outcome


def assert_valid_calls(calls: list) -> None:
    """Each call names an offered tool and its arguments are a JSON object with the tool's required keys."""
    assert calls
    for name, arguments in calls:
        assert name in OFFERED and isinstance(arguments, dict)
        assert set(OFFERED[name]["parameters"]["required"]) <= set(arguments), (name, arguments)


@pytest.mark.parametrize("endpoint", [CHAT, RESPONSES], ids=["chat", "responses"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_forced_call_is_a_valid_call_of_an_offered_tool(toolwire, endpoint: Endpoint, stream: bool) -> None:
    outcome = ask(toolwire, endpoint, "Add 2 and 40.", stream=stream, choice="required")
    assert_valid_calls(outcome.calls)
    assert [name for name, _ in outcome.calls] == ["add"]


def test_a_call_the_model_chooses_is_valid_and_text_stays_text(toolwire) -> None:
    assert_valid_calls(ask(toolwire, CHAT, "What's the weather in Oslo for 3 days?", stream=False).calls)
    joke = ask(toolwire, CHAT, "Tell me a joke about cats.", stream=True)
    assert not joke.calls and joke.text.strip()
