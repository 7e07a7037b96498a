"""Chat Completions end to end: openai SDK → gunicorn/gevent toolwire → scripted upstream.

Every stream the SDK sees is checked against wire-contract section 9 by the recording transport
(``openai_client`` / ``make_openai_client``); raw httpx streams are checked explicitly. Upstream and
client faults (errors, timeouts, cuts, disconnects) are in ``test_faults.py``, for every endpoint.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Callable

import httpx
import openai
import pytest

from support.invariants import SESSION_CALL_IDS, ChatStreamSummary, check_chat_stream, check_error_envelope
from support.scripted_upstream import Exchange, Script, ScriptedUpstream, tool_call_text
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

MODEL = "scripted-model"
WEATHER_PARAMS = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name"}},
    "required": ["city"],
    "additionalProperties": False,
}
TIME_PARAMS = {
    "type": "object",
    "properties": {"tz": {"type": "string", "description": "IANA time zone"}},
    "required": ["tz"],
    "additionalProperties": False,
}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.", "parameters": WEATHER_PARAMS, "strict": True}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "Current time in a time zone.", "parameters": TIME_PARAMS, "strict": True}}
FUNCTIONS = [{"name": "get_weather", "description": "Current weather for a city.", "parameters": WEATHER_PARAMS}]
USER = [{"role": "user", "content": "What's the weather in SF?"}]
TEXT_ONLY_ROLES = {"system", "developer", "user", "assistant"}


SF_CALL = tool_call_text("get_weather", {"city": "SF"})
TOKYO_TIME_CALL = tool_call_text("get_time", {"tz": "Asia/Tokyo"})


def stream_final(client: openai.OpenAI, **kwargs: Any) -> Any:
    """Drive ``chat.completions.stream()`` to ``get_final_completion()``; also return the events."""
    with client.chat.completions.stream(model=MODEL, **kwargs) as stream:
        events = list(stream)
        return stream.get_final_completion(), events


def calls_of(message: Any) -> list[tuple[str, Any]]:
    """``(name, parsed arguments)`` of every tool call of a message."""
    return [(tc.function.name, json.loads(tc.function.arguments)) for tc in message.tool_calls or []]


def assert_text_only_upstream_request(exchange: Exchange, tool_names: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The upstream got a streaming, text-only chat request whose system side names the tools."""
    body = exchange.body
    assert exchange.path == "/v1/chat/completions"
    assert body["stream"] is True
    for key in ("tools", "tool_choice", "functions", "function_call", "parallel_tool_calls"):
        assert key not in body, f"upstream request carries {key!r}"
    messages = body["messages"]
    for message in messages:
        assert message["role"] in TEXT_ONLY_ROLES, message
        assert isinstance(message["content"], str), message
        assert "tool_calls" not in message and "tool_call_id" not in message, message
    system_text = "\n".join(m["content"] for m in messages if m["role"] in ("system", "developer"))
    for name in tool_names:
        assert name in system_text, f"tool {name!r} missing from the injected manifest"
    return messages


def raw_chat(server: ToolwireServer, body: dict[str, Any], headers: dict[str, str] | None = None,
             *, within: float = 8.0) -> tuple[httpx.Response, bytes]:
    """POST a streaming chat request with plain httpx and read the whole body; fail if the stream
    has not ended ``within`` seconds (keep-alives would otherwise keep a stuck stream open)."""
    deadline = time.monotonic() + within
    raw = bytearray()
    with httpx.stream("POST", server.v1_url + "/chat/completions", json={"model": MODEL, "stream": True, **body},
                      headers=headers, timeout=30) as response:
        for piece in response.iter_raw():
            raw += piece
            if time.monotonic() > deadline:
                pytest.fail(f"stream still open after {within} s; received so far:\n{bytes(raw).decode(errors='replace')[-1500:]}")
    return response, bytes(raw)


def checked(response: httpx.Response, raw: bytes, **kwargs: Any) -> ChatStreamSummary:
    """``check_chat_stream`` with the response's status and content type."""
    return check_chat_stream(raw, status=response.status_code, content_type=response.headers.get("content-type"),
                             seen_call_ids=SESSION_CALL_IDS, **kwargs)


# ---- tool calls ----------------------------------------------------------------------------------


def test_one_call(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text=SF_CALL, chunks=7))
    final, events = stream_final(openai_client, messages=USER, tools=[WEATHER])
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert not choice.message.content
    assert calls_of(choice.message) == [("get_weather", {"city": "SF"})]
    (call,) = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.parsed_arguments == {"city": "SF"}
    done = [(e.name, e.parsed_arguments) for e in events if e.type == "tool_calls.function.arguments.done"]
    assert done == [("get_weather", {"city": "SF"})]
    (exchange,) = upstream.chat_requests
    messages = assert_text_only_upstream_request(exchange, ("get_weather",))
    assert messages[-1] == {"role": "user", "content": "What's the weather in SF?"}


def test_two_parallel_calls(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text=SF_CALL + "\n" + TOKYO_TIME_CALL, chunks=5))
    final, _ = stream_final(openai_client, messages=USER, tools=[WEATHER, TIME])
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert calls_of(choice.message) == [("get_weather", {"city": "SF"}), ("get_time", {"tz": "Asia/Tokyo"})]
    assert [tc.index for tc in choice.message.tool_calls] == [0, 1]
    assert len({tc.id for tc in choice.message.tool_calls}) == 2
    assert not choice.message.content


def test_text_before_a_call(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text="Let me check the weather.\n" + SF_CALL, chunks=4))
    final, events = stream_final(openai_client, messages=USER, tools=[WEATHER])
    choice = final.choices[0]
    assert choice.message.content.strip() == "Let me check the weather."
    assert calls_of(choice.message) == [("get_weather", {"city": "SF"})]
    assert choice.finish_reason == "tool_calls"
    content_done = [e.content for e in events if e.type == "content.done"]
    assert [c.strip() for c in content_done] == ["Let me check the weather."]


def test_call_split_into_one_character_chunks(upstream: ScriptedUpstream, openai_client: openai.OpenAI, stream_recorder) -> None:
    # paced, so each piece arrives on its own (pieces that arrive together go on as one)
    upstream.enqueue(Script(text="Sure.\n" + tool_call_text("get_weather", {"city": "San Francisco"}), chunks=1,
                            delay_between_chunks=0.002))
    final, _ = stream_final(openai_client, messages=USER, tools=[WEATHER])
    choice = final.choices[0]
    assert choice.message.content.strip() == "Sure."
    assert calls_of(choice.message) == [("get_weather", {"city": "San Francisco"})]
    assert choice.finish_reason == "tool_calls"
    (record,) = stream_recorder.streams()
    summary = check_chat_stream(bytes(record.body))
    fragments = [tc["function"].get("arguments") for c in summary.chunks for ch in c["choices"]
                 for tc in ch["delta"].get("tool_calls", []) if tc["function"].get("arguments")]
    assert len(fragments) > 1, "arguments should stream incrementally, not as one final blob"


def test_legacy_functions_stream_and_non_stream(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text=SF_CALL, chunks=6), Script(text=SF_CALL, chunks=6))
    name, arguments, finishes = "", "", []
    for chunk in openai_client.chat.completions.create(model=MODEL, messages=USER, functions=FUNCTIONS, stream=True):
        for choice in chunk.choices:
            assert not choice.delta.tool_calls
            if choice.delta.function_call:
                name += choice.delta.function_call.name or ""
                arguments += choice.delta.function_call.arguments or ""
            if choice.finish_reason:
                finishes.append(choice.finish_reason)
    assert (name, json.loads(arguments), finishes) == ("get_weather", {"city": "SF"}, ["function_call"])

    completion = openai_client.chat.completions.create(model=MODEL, messages=USER, functions=FUNCTIONS)
    choice = completion.choices[0]
    assert choice.finish_reason == "function_call"
    assert choice.message.function_call.name == "get_weather"
    assert json.loads(choice.message.function_call.arguments) == {"city": "SF"}
    assert not choice.message.tool_calls
    for exchange in upstream.chat_requests:
        assert_text_only_upstream_request(exchange, ("get_weather",))


def test_follow_up_turn_with_the_tool_result(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text="It is 18 °C and sunny in San Francisco.", chunks=5))
    history = [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_prev123", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "SF"}'}}]},
        {"role": "tool", "tool_call_id": "call_prev123", "content": '{"temp_c": 18, "sky": "sunny"}'},
    ]  # fmt: skip
    final, _ = stream_final(openai_client, messages=history, tools=[WEATHER])
    choice = final.choices[0]
    assert choice.message.content == "It is 18 °C and sunny in San Francisco."
    assert choice.finish_reason == "stop" and not choice.message.tool_calls

    (exchange,) = upstream.chat_requests
    messages = assert_text_only_upstream_request(exchange, ("get_weather",))
    call_positions = [i for i, m in enumerate(messages) if "<tool_call>" in m["content"] and m["role"] == "assistant"]
    assert len(call_positions) == 1, "the earlier call must be rendered as <tool_call> text in an assistant turn"
    rendered = re.search(r"<tool_call>(.*?)</tool_call>", messages[call_positions[0]]["content"], re.S).group(1)
    rendered_call = json.loads(rendered)
    rendered_args = rendered_call["arguments"]
    assert rendered_call["name"] == "get_weather"
    assert (json.loads(rendered_args) if isinstance(rendered_args, str) else rendered_args) == {"city": "SF"}
    result_positions = [i for i, m in enumerate(messages) if '"temp_c": 18' in m["content"] and m["role"] != "system"]
    assert len(result_positions) == 1, "the tool result must reach the upstream once"
    result = messages[result_positions[0]]["content"]
    assert "call_prev123" in result and "get_weather" in result, f"tool result not labelled: {result!r}"
    assert "<tool_call>" not in result
    assert call_positions[0] < result_positions[0]


def test_non_stream_equals_stream(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    text = "Checking both.\n" + SF_CALL + TOKYO_TIME_CALL
    upstream.enqueue(Script(text=text, chunks=3), Script(text=text))
    streamed, _ = stream_final(openai_client, messages=USER, tools=[WEATHER, TIME])
    plain = openai_client.chat.completions.create(model=MODEL, messages=USER, tools=[WEATHER, TIME])
    s, p = streamed.choices[0], plain.choices[0]
    assert (s.message.content or "") == (p.message.content or "")
    assert (p.message.content or "").strip() == "Checking both."
    assert calls_of(s.message) == calls_of(p.message) == [("get_weather", {"city": "SF"}), ("get_time", {"tz": "Asia/Tokyo"})]
    assert s.finish_reason == p.finish_reason == "tool_calls"
    assert s.message.role == p.message.role == "assistant"
    assert all(tc.type == "function" and tc.id.startswith("call_") for tc in p.message.tool_calls)
    assert plain.object == "chat.completion"


def test_n2_one_choice_calls_the_other_does_not(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text=[SF_CALL, "No tool is needed for that."], chunks=4))
    final, _ = stream_final(openai_client, messages=USER, tools=[WEATHER], n=2)
    first, second = sorted(final.choices, key=lambda c: c.index)
    assert (first.index, second.index) == (0, 1)
    assert first.finish_reason == "tool_calls"
    assert calls_of(first.message) == [("get_weather", {"city": "SF"})]
    assert second.finish_reason == "stop"
    assert second.message.content == "No tool is needed for that."
    assert not second.message.tool_calls
    (exchange,) = upstream.chat_requests
    assert exchange.body.get("n") == 2


def test_stream_options_include_usage(upstream: ScriptedUpstream, openai_client: openai.OpenAI, stream_recorder) -> None:
    usage = {"prompt_tokens": 21, "completion_tokens": 3, "total_tokens": 24}
    upstream.enqueue(Script(text="Hello there!", chunks=4, usage=usage))
    final, _ = stream_final(openai_client, messages=USER, tools=[WEATHER], stream_options={"include_usage": True})
    assert final.choices[0].message.content == "Hello there!"
    assert final.usage is not None
    assert (final.usage.prompt_tokens, final.usage.completion_tokens, final.usage.total_tokens) == (21, 3, 24)
    (record,) = stream_recorder.streams()
    assert record.request_body["stream_options"] == {"include_usage": True}


def test_no_usage_chunk_without_include_usage(upstream: ScriptedUpstream, toolwire_server: ToolwireServer) -> None:
    upstream.enqueue(Script(text="Hi.", usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}))
    response, raw = raw_chat(toolwire_server, {"messages": USER})
    summary = checked(response, raw, include_usage=False)
    assert summary.usage is None and summary.choice(0).content == "Hi."


def test_tool_choice_none_leaves_the_sentinel_text_visible(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    text = "I would call " + SF_CALL
    upstream.enqueue(Script(text=text, chunks=6))
    final, _ = stream_final(openai_client, messages=USER, tools=[WEATHER], tool_choice="none")
    choice = final.choices[0]
    assert choice.message.content == text
    assert not choice.message.tool_calls
    assert choice.finish_reason == "stop"


# ---- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": MODEL}, "messages"),
        ({"model": MODEL, "messages": "hello"}, "messages"),
        ({"model": MODEL, "messages": USER, "tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools"),
    ],
)
def test_invalid_request_is_a_400_envelope_with_param(upstream: ScriptedUpstream, toolwire_server: ToolwireServer, body: dict, param: str) -> None:
    response = httpx.post(toolwire_server.v1_url + "/chat/completions", json=body, timeout=10)
    assert response.status_code == 400
    error = check_error_envelope(response.status_code, response.content)
    assert error["type"] == "invalid_request_error"
    assert isinstance(error["param"], str) and error["param"].startswith(param), error
    assert upstream.chat_requests == []


def test_upstream_400_passes_through(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    body = {"error": {"message": "context too long for scripted model", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
    upstream.enqueue(Script(status=400, error_body=body))
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.chat.completions.create(model=MODEL, messages=USER, tools=[WEATHER], stream=True).close()  # drained if it did not raise
    assert caught.value.status_code == 400
    error = check_error_envelope(400, caught.value.response.content)
    assert "context too long for scripted model" in error["message"]


# ---- keep-alives and disconnects ----------------------------------------------------------------------


def test_keepalive_comments_while_the_upstream_is_slow(upstream: ScriptedUpstream, toolwire_server: ToolwireServer) -> None:
    upstream.enqueue(Script(text="Finally here.", delay_after_headers=1.2))
    response, raw = raw_chat(toolwire_server, {"messages": USER})
    summary = checked(response, raw, include_usage=False)
    assert summary.choice(0).content == "Finally here."
    assert len(summary.comments) >= 2, f"expected keep-alives every 0.2 s, got {summary.comments!r}"
    assert set(summary.comments) == {"keep-alive"}


def test_no_keepalive_header_turns_them_off(upstream: ScriptedUpstream, toolwire_server: ToolwireServer) -> None:
    upstream.enqueue(Script(text="Finally here.", delay_after_headers=1.0))
    response, raw = raw_chat(toolwire_server, {"messages": USER}, headers={"X-No-Keepalive": "1"})
    summary = checked(response, raw, include_usage=False)
    assert summary.choice(0).content == "Finally here."
    assert summary.comments == []


# ---- demo back end -----------------------------------------------------------------------------------


def test_demo_backend_calls_the_weather_tool(toolwire_factory: Callable[..., ToolwireServer], make_openai_client) -> None:
    demo = toolwire_factory(TOOLWIRE_UPSTREAM_URL=None)
    client = make_openai_client(demo)
    final, _ = stream_final(client, messages=[{"role": "user", "content": "What's the weather in Paris today?"}], tools=[WEATHER])
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    ((name, arguments),) = calls_of(choice.message)
    assert name == "get_weather"
    assert "Paris" in arguments["city"]


# ---- another tool format -----------------------------------------------------------------------------


def test_use_tool_format_prompt_parse_and_history(upstream: ScriptedUpstream, toolwire_factory: Callable[..., ToolwireServer], make_openai_client) -> None:
    client = make_openai_client(toolwire_factory(TOOLWIRE_TOOL_FORMAT="use_tool"))
    upstream.enqueue(Script(text='<use_tool><name>get_weather</name><args>{"city": "SF"}</args></use_tool>', chunks=5),
                     Script(text="Sunny.", chunks=2))
    final, _ = stream_final(client, messages=USER, tools=[WEATHER])
    choice = final.choices[0]
    assert calls_of(choice.message) == [("get_weather", {"city": "SF"})]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    system_text = "\n".join(m["content"] for m in upstream.chat_requests[0].body["messages"] if m["role"] in ("system", "developer"))
    assert "<use_tool>" in system_text

    (call,) = choice.message.tool_calls
    echoed = {"id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": call.function.arguments}}
    history = [*USER, {"role": "assistant", "content": None, "tool_calls": [echoed]},
               {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    follow_up, _ = stream_final(client, messages=history, tools=[WEATHER])
    assert follow_up.choices[0].message.content == "Sunny."
    messages = assert_text_only_upstream_request(upstream.chat_requests[1], ("get_weather",))
    assistant_text = "\n".join(m["content"] for m in messages if m["role"] == "assistant")
    assert "<use_tool>" in assistant_text and "<tool_call>" not in assistant_text
