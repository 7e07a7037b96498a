"""A small model's teaching end to end (issue 31): a model_map entry's compact manifest and example exchange
reach the back end, and only the back end (openai SDK -> gunicorn/gevent toolwire -> scripted upstream)."""

from __future__ import annotations

import json
from typing import Callable

import openai
import pytest

from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text
from support.server import ToolwireServer
from support.tools import TIME, WEATHER

pytestmark = pytest.mark.e2e

EXAMPLE = {"user": "What's the weather in Rome?", "tool": "get_weather", "arguments": {"city": "Rome"},
           "result": '{"temperature_c": 18}', "answer": "It is 18 °C in Rome."}
ROUTES = {"small": {"model": "scripted-model", "tool_manifest": "compact", "example_exchange": EXAMPLE},
          "large": "scripted-model"}
QUESTION = "And in Paris?"


def chat_tool(tool: dict) -> dict:
    """A Responses-shaped tool of support.tools in Chat's shape."""
    return {"type": "function", "function": {key: value for key, value in tool.items() if key != "type"}}


@pytest.fixture
def client(toolwire_factory: Callable[..., ToolwireServer],
           make_openai_client: Callable[[ToolwireServer], openai.OpenAI]) -> openai.OpenAI:
    return make_openai_client(toolwire_factory(TOOLWIRE_MODEL_MAP=json.dumps(ROUTES)))


def test_the_small_model_gets_signatures_and_the_example_before_the_question(upstream: ScriptedUpstream,
                                                                             client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text=tool_call_text("get_weather", {"city": "Paris"}), chunks=7))
    answer = client.chat.completions.create(model="small", messages=[{"role": "user", "content": QUESTION}],
                                            tools=[chat_tool(WEATHER)])
    (call,) = answer.choices[0].message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris"})
    assert "Rome" not in answer.model_dump_json()
    system, *turns = upstream.chat_requests[-1].body["messages"]
    assert "get_weather(city: string" in system["content"] and '"properties"' not in system["content"]
    assert [(m["role"], m["content"].splitlines()[0]) for m in turns] == [
        ("user", EXAMPLE["user"]),
        ("assistant", tool_call_text("get_weather", {"city": "Rome"})),
        ("user", "Tool result for get_weather:"),
        ("assistant", EXAMPLE["answer"]),
        ("user", QUESTION)]


def test_the_example_is_never_stored_so_a_continuation_sends_it_once(upstream: ScriptedUpstream, client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text="Sunny.", chunks=3), Script(text="Still sunny.", chunks=3))
    first = client.responses.create(model="small", input=QUESTION, tools=[WEATHER])
    assert "Rome" not in client.responses.retrieve(first.id).model_dump_json()
    client.responses.create(model="small", input="And tomorrow?", previous_response_id=first.id, tools=[WEATHER])
    text = "\n".join(m["content"] for m in upstream.chat_requests[-1].body["messages"])
    assert text.count(EXAMPLE["user"]) == 1 and "Sunny." in text


def test_other_models_and_other_tools_get_no_example(upstream: ScriptedUpstream, client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text="Noon."), Script(text="Noon."))
    for model, tool in (("large", WEATHER), ("small", TIME)):
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": QUESTION}],
                                       tools=[chat_tool(tool)])
        assert [m["role"] for m in upstream.chat_requests[-1].body["messages"]] == ["system", "user"]
    assert '"properties"' in upstream.chat_requests[0].body["messages"][0]["content"]  # large: the JSON manifest
