"""toolwire in front of llama.cpp's own ``llama-server`` (``support.llama_cpp_server``) with Qwen2.5-Coder-0.5B-
Instruct, the model ``make bench-bfcl`` measures: the back end users run, in each of toolwire's tool modes.

- ``prompt`` against ``llama-server --no-jinja``: the model writes its calls as text and toolwire reads them.
- ``auto`` against ``--no-jinja``: the server's real refusal of ``tools`` sends toolwire to prompt mode.
- ``native`` against ``--jinja``: the server renders Qwen's own template and parses its calls.

A 0.5B model does not always choose well; these questions name one city and one tool, and at temperature 0
the model calls it (checked by hand on the server, the same text every run).
"""

from __future__ import annotations

import json
from typing import Callable

import httpx
import pytest

from support.endpoints import CHAT, send
from support.llama_cpp_server import LlamaCppServer
from support.real_model import WEATHER
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

TEST_TIME_LIMIT = 180.0  # a CPU model: the prompt's processing alone takes seconds on a busy 2-core machine
QUESTION = "What's the weather in Paris?"


def ask(factory: Callable[..., ToolwireServer], server: LlamaCppServer, mode: str, *, stream: bool) -> list:
    toolwire = factory(TOOLWIRE_UPSTREAM_URL=server.v1_url, TOOLWIRE_UPSTREAM_READ_TIMEOUT="150",
                       TOOLWIRE_MODEL_MAP=json.dumps({"qwen": {"model": "qwen-coder", "tool_mode": mode}}))
    body = {"model": "qwen", "messages": [{"role": "user", "content": QUESTION}], "stream": stream,
            "tools": [{"type": "function", "function": WEATHER}], "temperature": 0, "max_tokens": 64}
    outcome = send(toolwire.v1_url, CHAT, body, within=150)
    assert outcome.kind == "completed", (outcome.error, outcome.body[-800:])
    return outcome.calls


@pytest.mark.parametrize("stream", [False, True])
def test_prompt_mode_reads_the_call_the_model_writes(qwen_text_server: LlamaCppServer, stream: bool,
                                                     toolwire_factory: Callable[..., ToolwireServer]) -> None:
    calls = ask(toolwire_factory, qwen_text_server, "prompt", stream=stream)
    assert [(name, arguments.get("city")) for name, arguments in calls] == [("get_weather", "Paris")]


def test_auto_mode_takes_llama_servers_refusal_of_tools_as_prompt_mode(
        qwen_text_server: LlamaCppServer, toolwire_factory: Callable[..., ToolwireServer]) -> None:
    """Without ``--jinja`` the server refuses ``tools`` with its own message; toolwire asks again in prompt mode."""
    refused = httpx.post(qwen_text_server.v1_url + "/chat/completions", timeout=60, json={
        "model": "qwen-coder", "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 1,
        "tools": [{"type": "function", "function": WEATHER}]})
    assert refused.status_code >= 400, refused.text
    calls = ask(toolwire_factory, qwen_text_server, "auto", stream=False)
    assert [(name, arguments.get("city")) for name, arguments in calls] == [("get_weather", "Paris")]


@pytest.mark.parametrize("stream", [False, True])
def test_native_mode_with_llama_servers_own_tool_calling(qwen_jinja_server: LlamaCppServer, stream: bool,
                                                         toolwire_factory: Callable[..., ToolwireServer]) -> None:
    calls = ask(toolwire_factory, qwen_jinja_server, "native", stream=stream)
    assert [(name, arguments.get("city")) for name, arguments in calls] == [("get_weather", "Paris")]
