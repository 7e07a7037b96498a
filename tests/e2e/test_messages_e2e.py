"""Anthropic's Messages API end to end: the official ``anthropic`` SDK against gunicorn/gevent toolwire in
front of the scripted text model.

Non-stream and stream (the SDK's stream helpers and ``get_final_message()``), a tool_use, parallel
tool_uses, the tool_result follow-up, every ``tool_choice``, the error envelopes (before the first byte
and mid-stream), ``ping`` heartbeats and ``count_tokens``. Every exchange the SDK makes is recorded and
checked against Anthropic's grammar (``support.messages_stream``) at teardown.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import anthropic
import httpx
import pytest

from support.messages_stream import check_messages_stream
from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

MODEL = "claude-opus-5-5"
WEATHER = {"name": "get_weather", "description": "Current weather for a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                            "additionalProperties": False}}
TIME = {"name": "get_time", "description": "Current time in a time zone",
        "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}
ASK = [{"role": "user", "content": "Weather in Paris and Oslo?"}]
PARIS = tool_call_text("get_weather", {"city": "Paris"})
OSLO = tool_call_text("get_weather", {"city": "Oslo"})


@pytest.fixture
def client(make_anthropic_client: Callable[..., anthropic.Anthropic], toolwire_server: ToolwireServer) -> anthropic.Anthropic:
    return make_anthropic_client(toolwire_server)


def system_prompt(upstream: ScriptedUpstream, n: int = 0) -> str:
    return upstream.chat_requests[n].body["messages"][0]["content"]


# --- answers ------------------------------------------------------------------------------------------


def test_non_stream_text(client: anthropic.Anthropic, upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="Hello from the model.", usage={"prompt_tokens": 21, "completion_tokens": 5,
                                                                 "total_tokens": 26}))
    message = client.messages.create(model=MODEL, max_tokens=1024, system="Be brief.", messages=ASK)
    assert message.content[0].type == "text" and message.content[0].text == "Hello from the model."
    assert (message.stop_reason, message.model) == ("end_turn", MODEL)
    assert (message.usage.input_tokens, message.usage.output_tokens) == (21, 5)
    sent = upstream.chat_requests[0].body
    assert sent["model"] == MODEL  # no TOOLWIRE_MODEL_MAP: the name is sent as it came
    assert sent["max_tokens"] == 1024 and "Be brief." in sent["messages"][0]["content"]


def test_stream_helpers_and_get_final_message(client: anthropic.Anthropic, upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="Streaming works fine.", chunks=3))
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=ASK) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Streaming works fine." and final.content[0].text == text
    assert final.stop_reason == "end_turn" and final.usage.output_tokens > 0


@pytest.mark.parametrize("streamed", [False, True], ids=["create", "stream"])
def test_tool_use_and_parallel_tool_uses(client: anthropic.Anthropic, upstream: ScriptedUpstream,
                                         streamed: bool) -> None:
    upstream.enqueue(Script(text="Checking both." + PARIS + "\n" + OSLO, chunks=4))
    kwargs: dict[str, Any] = {"model": MODEL, "max_tokens": 1024, "messages": ASK, "tools": [WEATHER, TIME]}
    if streamed:
        with client.messages.stream(**kwargs) as stream:
            message = stream.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    assert [block.type for block in message.content] == ["text", "tool_use", "tool_use"]
    assert message.content[0].text == "Checking both."
    assert [(b.name, b.input) for b in message.content[1:]] == [("get_weather", {"city": "Paris"}),
                                                                 ("get_weather", {"city": "Oslo"})]
    assert all(b.id.startswith("toolu_") for b in message.content[1:])
    assert message.stop_reason == "tool_use"
    assert "get_time" in system_prompt(upstream) and "get_weather" in system_prompt(upstream)


def test_tool_result_follow_up(client: anthropic.Anthropic, upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text=PARIS), Script(text="It is sunny in Paris (21 C)."))
    first = client.messages.create(model=MODEL, max_tokens=1024, messages=ASK, tools=[WEATHER])
    [call] = first.content
    follow_up = [*ASK, {"role": "assistant", "content": [block.model_dump() for block in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                               "content": "sunny, 21 C"}]}]
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=follow_up, tools=[WEATHER]) as stream:
        answer = stream.get_final_message()
    assert answer.content[0].text == "It is sunny in Paris (21 C)." and answer.stop_reason == "end_turn"
    sent = upstream.chat_requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[2]["content"] == PARIS  # the call written back exactly as the model wrote it
    assert sent[3]["content"].startswith(f"Tool result for get_weather (call_id {call.id}):\nsunny, 21 C")


@pytest.mark.parametrize("choice, rule", [
    ({"type": "auto"}, None),
    ({"type": "any"}, "You must call at least one tool in this reply"),
    ({"type": "tool", "name": "get_time"}, "You must call `get_time` in this reply."),
    ({"type": "none"}, "Tools are disabled for this reply"),
])
def test_tool_choice_variants(client: anthropic.Anthropic, upstream: ScriptedUpstream, choice: dict,
                              rule: str | None) -> None:
    upstream.enqueue(Script(text="Fine."), Script(text="Fine."))  # (a forced choice unmet is asked again once)
    client.messages.create(model=MODEL, max_tokens=64, messages=ASK, tools=[WEATHER, TIME], tool_choice=choice)
    assert len(upstream.chat_requests) == (2 if choice["type"] in ("any", "tool") else 1)
    prompt = system_prompt(upstream)
    for other in ("You must call", "Tools are disabled"):
        assert (other in prompt) == (rule is not None and rule.startswith(other))
    if rule:
        assert rule in prompt


def test_disable_parallel_tool_use_keeps_one_call(client: anthropic.Anthropic, upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text=PARIS + OSLO))
    message = client.messages.create(model=MODEL, max_tokens=64, messages=ASK, tools=[WEATHER],
                                     tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    assert [(b.type, getattr(b, "input", None)) for b in message.content] == [("tool_use", {"city": "Paris"})]
    assert "Call at most one tool in this reply." in system_prompt(upstream)


def test_beta_client_models_and_count_tokens(client: anthropic.Anthropic, upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="Beta is fine."))
    message = client.beta.messages.create(model=MODEL, max_tokens=64, messages=ASK,
                                          betas=["claude-code-20250219", "interleaved-thinking-2025-05-14"])
    assert message.content[0].text == "Beta is fine."
    assert upstream.chat_requests[0].path.endswith("/chat/completions")
    assert "scripted-model" in [model.id for model in client.models.list()]
    counted = client.messages.count_tokens(model=MODEL, messages=ASK, tools=[WEATHER])
    assert counted.input_tokens > client.messages.count_tokens(model=MODEL, messages=ASK).input_tokens > 0


# --- errors and heartbeats ----------------------------------------------------------------------------


def test_errors_are_the_sdks_typed_exceptions(client: anthropic.Anthropic, upstream: ScriptedUpstream,
                                              make_anthropic_client: Callable[..., anthropic.Anthropic],
                                              toolwire_factory: Callable[..., ToolwireServer]) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model=MODEL, max_tokens=64, messages=ASK, tools=[WEATHER],
                               tool_choice={"type": "tool", "name": "nope"})
    assert info.value.body["error"]["type"] == "invalid_request_error"
    assert info.value.body["error"]["param"] == "tool_choice.name"
    upstream.enqueue(Script(status=429, headers={"Retry-After": "1"}))
    with pytest.raises(anthropic.RateLimitError):
        client.messages.create(model=MODEL, max_tokens=64, messages=ASK)
    keyed = make_anthropic_client(toolwire_factory(TOOLWIRE_API_KEYS="sk-claude"), api_key="sk-wrong")
    with pytest.raises(anthropic.AuthenticationError) as info:
        keyed.messages.create(model=MODEL, max_tokens=64, messages=ASK)
    assert info.value.body["error"]["type"] == "authentication_error"
    upstream.enqueue(Script(text="Keys work."))
    good = make_anthropic_client(toolwire_factory(TOOLWIRE_API_KEYS="sk-claude"), api_key="sk-claude")  # sent as x-api-key
    assert good.messages.create(model=MODEL, max_tokens=64, messages=ASK).content[0].text == "Keys work."


def test_a_back_end_cut_mid_stream_raises_in_the_sdk(client: anthropic.Anthropic, upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="This answer is cut off before its end.", chunks=4, close_after_chunks=3))
    with pytest.raises(anthropic.APIStatusError) as info:
        with client.messages.stream(model=MODEL, max_tokens=64, messages=ASK) as stream:
            for _ in stream.text_stream:
                pass
    assert info.value.body["error"]["type"] == "api_error"


def test_pings_are_the_heartbeat(toolwire_server: ToolwireServer, upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="slow", chunks=2, delay_after_headers=0.7))
    body = {"model": MODEL, "max_tokens": 64, "messages": ASK, "stream": True}
    response = httpx.post(toolwire_server.url + "/v1/messages?beta=true", json=body, timeout=10,
                          headers={"x-api-key": "test", "anthropic-version": "2023-06-01"})
    events = check_messages_stream(response.content)
    assert b": keep-alive" not in response.content
    assert [e["type"] for e in events].count("ping") >= 3  # one after message_start, then every 0.2 s
    assert "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta") == "slow"
    assert json.loads(json.dumps(events[0]))["message"]["usage"]["input_tokens"] > 0
