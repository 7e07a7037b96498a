"""POST /v1/messages (Anthropic's Messages API) through Flask's test client on a scripted upstream."""

from __future__ import annotations

import json

import pytest

from app.upstreams.base import ChoiceDelta, UpstreamChunk, UpstreamError
from support.fakes import FakeUpstream, text_chunks
from support.messages_stream import check_messages_stream

USER = [{"role": "user", "content": "Weather in Paris?"}]
WEATHER = {"name": "get_weather", "description": "Current weather for a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


def post(client, path="/v1/messages", headers=None, **body):
    body.setdefault("model", "claude-test")
    body.setdefault("messages", USER)
    body.setdefault("max_tokens", 256)
    return client.post(path, json=body, headers=headers)


def anthropic_error(response, status: int, type_: str) -> dict:
    assert response.status_code == status, response.data
    body = response.get_json()
    assert body["type"] == "error" and set(body) == {"type", "error"}
    assert body["error"]["type"] == type_ and body["error"]["message"]
    return body["error"]


# -- requests refused ----------------------------------------------------------------------------------


@pytest.mark.parametrize("body, param", [
    ({"messages": USER, "max_tokens": 5}, "model"),
    ({"model": "m", "messages": USER}, "max_tokens"),
    ({"model": "m", "max_tokens": 5}, "messages"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]},
     "messages[0].content[0].tool_use_id"),
    ({"model": "m", "max_tokens": 5, "messages": USER, "tools": [{"name": "x"}]}, "tools[0].input_schema"),
    ({"model": "m", "max_tokens": 5, "messages": USER, "tool_choice": {"type": "sometimes"}}, "tool_choice.type"),
    ({"model": "m", "max_tokens": 5, "messages": USER, "tools": [WEATHER],
      "tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice.name"),
    ({"model": "m", "max_tokens": 5, "messages": USER, "tools": [WEATHER], "tool_choice": {"type": "tool"}},
     "tool_choice.name"),
    ({"model": "m", "max_tokens": 5, "messages": USER, "tool_choice": {"type": "any"}}, "tool_choice"),
    ({"model": "m", "max_tokens": 5, "messages": USER, "temperature": 1.5}, "temperature"),
])
def test_invalid_request_is_an_anthropic_400_naming_the_param(client, upstream, body, param):
    error = anthropic_error(client.post("/v1/messages", json=body), 400, "invalid_request_error")
    assert error["param"] == param and param in error["message"]
    assert upstream.bodies == []


def test_malformed_json_and_unknown_paths_use_the_anthropic_envelope(client):
    response = client.post("/v1/messages", data=b'{"model": ', content_type="application/json")
    anthropic_error(response, 400, "invalid_request_error")
    anthropic_error(client.post("/v1/messages/batches", json={}), 404, "not_found_error")
    anthropic_error(client.get("/v1/messages"), 405, "invalid_request_error")
    # the OpenAI endpoints keep theirs
    assert "type" not in client.post("/v1/chat/completions", json={}).get_json()


def test_body_too_large_is_413_request_too_large(make_app, upstream):
    client = make_app(upstream, max_body_bytes=200).test_client()
    anthropic_error(post(client, messages=[{"role": "user", "content": "x" * 500}]), 413, "request_too_large")


def test_upstream_refusal_keeps_its_status_in_the_anthropic_envelope(make_app):
    upstream = FakeUpstream(open_error=UpstreamError("rate_limited", "slow down", status=429, retry_after="3"))
    response = post(make_app(upstream).test_client())
    anthropic_error(response, 429, "rate_limit_error")
    assert response.headers["Retry-After"] == "3"


def test_anthropic_server_tools_are_dropped_or_refused(make_app, upstream):
    tools = [WEATHER, {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]
    post(make_app(upstream).test_client(), tools=tools)
    system = upstream.bodies[0]["messages"][0]["content"]
    assert "get_weather" in system and "web_search" not in system
    strict = make_app(upstream, unsupported_tools="fail").test_client()
    error = anthropic_error(post(strict, tools=tools), 400, "invalid_request_error")
    assert error["param"] == "tools[1].type"


def test_the_bash_and_text_editor_tools_are_offered_as_the_functions_the_client_runs(client, upstream):
    tools = [{"type": "bash_20250124", "name": "bash"},
             {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool", "max_characters": 1000},
             {"type": "text_editor_20250124", "name": "str_replace_editor"}]
    upstream.script = text_chunks('<tool_call>{"name": "str_replace_based_edit_tool", "arguments": '
                                  '{"command": "insert", "path": "/w/a.py", "insert_line": 0, "new_str": "x"}}'
                                  '</tool_call>')
    [call] = post(client, tools=tools).get_json()["content"]
    assert call["name"] == "str_replace_based_edit_tool"
    assert call["input"] == {"command": "insert", "path": "/w/a.py", "insert_line": 0, "new_str": "x"}
    manifest = upstream.bodies[0]["messages"][0]["content"].split("## Manifest\n")[1].split("\n## ")[0]
    lines = {}  # each entry: ### NAME, its description, Parameters: {schema}
    for entry in manifest.split("\n\n"):
        head, *rest = entry.splitlines()
        schema = next(line for line in rest if line.startswith("Parameters: "))
        lines[head.removeprefix("### ")] = json.loads(schema.removeprefix("Parameters: "))
    assert set(lines["bash"]["properties"]) == {"command", "restart"}
    assert lines["str_replace_based_edit_tool"]["properties"]["command"]["enum"] == \
        ["view", "create", "str_replace", "insert"]
    assert "undo_edit" in lines["str_replace_editor"]["properties"]["command"]["enum"]  # before 2025-07-28 only


# -- keys ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("headers, status", [
    ({"x-api-key": "sk-one"}, 200),
    ({"Authorization": "Bearer sk-one"}, 200),
    ({"x-api-key": "sk-wrong"}, 401),
    ({}, 401),
])
def test_x_api_key_and_bearer_are_both_client_keys(make_app, upstream, headers, status):
    client = make_app(upstream, api_keys="sk-one").test_client()
    response = post(client, "/v1/messages?beta=true", headers={
        "anthropic-version": "2023-06-01", "anthropic-beta": "claude-code-20250219", **headers})
    if status == 401:
        anthropic_error(response, 401, "authentication_error")
    else:
        assert response.status_code == 200 and response.get_json()["type"] == "message"


# -- what the back end gets --------------------------------------------------------------------------------


def test_transcript_is_flattened_like_the_other_apis(client, upstream):
    """Claude Code's shapes: system blocks with the billing header and cache_control, a system turn inside
    messages, thinking blocks, tool_use / tool_result (string, blocks, is_error), an image."""
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Check Paris."},
                                     {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                  "data": "AAAA"}}]},
        {"role": "system", "content": "Primary working directory: /w", "cache_control": {"type": "ephemeral"}},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "secret plan", "signature": "sig"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny, 21 C"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
             "content": [{"type": "text", "text": "station offline"}], "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "And now?"}]},
    ]
    system = [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332;"},
              {"type": "text", "text": "You are a helpful agent.", "cache_control": {"type": "ephemeral"}}]
    post(client, "/v1/messages?beta=true", messages=messages, system=system, tools=[WEATHER],
         thinking={"type": "adaptive"}, output_config={"effort": "medium"},
         context_management={"edits": []}, metadata={"user_id": "{\"session_id\": \"s\"}"})
    sent = upstream.bodies[0]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert "You are a helpful agent." in sent[0]["content"] and "Primary working directory: /w" in sent[0]["content"]
    assert "billing-header" not in json.dumps(sent)
    assert sent[1]["content"] == "Check Paris.\n[image]"
    assert "secret plan" not in sent[2]["content"]
    assert sent[2]["content"].startswith("Checking.\n<tool_call>")
    assert sent[2]["content"].count('"name": "get_weather"') == 2
    assert "Tool result for get_weather (call_id toolu_1):\nsunny, 21 C" in sent[3]["content"]
    assert "(call_id toolu_2):\nError:\nstation offline" in sent[3]["content"]
    assert sent[3]["content"].endswith("And now?")
    for key in ("metadata", "thinking", "output_config", "context_management", "system", "tools"):
        assert key not in upstream.bodies[0]


def test_parameters_go_to_the_back_end_as_chat_takes_them(make_app, upstream):
    client = make_app(upstream, model_map={"claude-opus-5-5": "qwen3"}).test_client()
    post(client, model="claude-opus-5-5", max_tokens=300, stop_sequences=["END"], temperature=0.5, top_p=0.9,
         top_k=40)
    body = upstream.bodies[0]
    assert body["model"] == "qwen3"
    assert (body["max_tokens"], body["stop"], body["temperature"], body["top_p"], body["top_k"]) == \
        (300, ["END"], 0.5, 0.9, 40)


@pytest.mark.parametrize("settings, sent", [
    ({}, 128000),
    ({"max_output_tokens": 8192}, 8192),
    ({"max_output_tokens": 8192, "model_map": {"claude-opus-5-5": {"model": "q", "max_output_tokens": 4096}}}, 4096),
])
def test_max_tokens_is_clamped_to_the_models_output_limit(make_app, upstream, settings, sent):
    post(make_app(upstream, **settings).test_client(), model="claude-opus-5-5", max_tokens=128000)
    assert upstream.bodies[0]["max_tokens"] == sent


def test_small_max_tokens_is_sent_as_asked_and_a_cut_answer_is_max_tokens(make_app, upstream):
    upstream.script = text_chunks("Hello", finish="length")
    body = post(make_app(upstream, max_output_tokens=8192).test_client(), max_tokens=2).get_json()
    assert upstream.bodies[0]["max_tokens"] == 2
    assert body["stop_reason"] == "max_tokens"


@pytest.mark.parametrize("choice, rule", [
    ({"type": "any"}, "You must call at least one tool in this reply"),
    ({"type": "tool", "name": "get_weather"}, "You must call `get_weather` in this reply."),
    ({"type": "auto", "disable_parallel_tool_use": True}, "Call at most one tool in this reply."),
    ({"type": "none"}, "Tools are disabled for this reply"),
])
def test_tool_choice_becomes_the_turn_rules(client, upstream, choice, rule):
    post(client, tools=[WEATHER], tool_choice=choice)
    assert rule in upstream.bodies[0]["messages"][0]["content"]


# -- answers -------------------------------------------------------------------------------------------------


def test_non_stream_message_with_text_and_a_tool_use(client, upstream):
    upstream.script = text_chunks("Let me check." + CALL, usage={"prompt_tokens": 40, "completion_tokens": 12,
                                                                "prompt_tokens_details": {"cached_tokens": 30}})
    body = post(client, tools=[WEATHER]).get_json()
    assert body["type"] == "message" and body["id"].startswith("msg_") and body["model"] == "claude-test"
    text, call = body["content"]
    assert text == {"type": "text", "text": "Let me check."}
    assert call["type"] == "tool_use" and call["id"].startswith("toolu_")
    assert (call["name"], call["input"]) == ("get_weather", {"city": "Paris"})
    assert (body["stop_reason"], body["stop_sequence"]) == ("tool_use", None)
    assert body["usage"] == {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 30,
                             "output_tokens": 12}


def test_stream_is_anthropics_event_sequence(client, upstream):
    upstream.script = text_chunks("Let me check." + CALL + CALL.replace("Paris", "Oslo"), size=3)
    response = post(client, tools=[WEATHER], stream=True)
    assert response.mimetype == "text/event-stream"
    events = check_messages_stream(response.get_data())
    starts = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert starts == ["text", "tool_use", "tool_use"]
    inputs = ["".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"
                      and e["index"] == i) for i in (1, 2)]
    assert [json.loads(i) for i in inputs] == [{"city": "Paris"}, {"city": "Oslo"}]
    [delta] = [e for e in events if e["type"] == "message_delta"]
    assert delta["delta"]["stop_reason"] == "tool_use"


def test_native_calls_of_the_back_end_are_tool_use_blocks(client, upstream):
    upstream.script = [
        UpstreamChunk([ChoiceDelta(tool_calls=[{"index": 0, "id": "up_1", "type": "function",
                                                "function": {"name": "get_weather", "arguments": ""}}])]),
        UpstreamChunk([ChoiceDelta(tool_calls=[{"index": 0, "function": {"arguments": '{"city": "Oslo"}'}}])]),
        UpstreamChunk([ChoiceDelta(finish_reason="tool_calls")]),
    ]
    [call] = post(client, tools=[WEATHER]).get_json()["content"]
    assert call["input"] == {"city": "Oslo"}


@pytest.mark.parametrize("thinking, shown", [
    (None, False), ({"type": "enabled", "budget_tokens": 1024}, True), ({"type": "adaptive"}, True),
    ({"type": "adaptive", "display": "omitted"}, False), ({"type": "disabled"}, False),
])
def test_reasoning_is_a_thinking_block_when_thinking_is_on(client, upstream, thinking, shown):
    upstream.script = text_chunks("<think>Paris is in France.</think>It is sunny.")
    body = {"thinking": thinking} if thinking else {}
    content = post(client, **body).get_json()["content"]
    thinking_block = {"type": "thinking", "thinking": "Paris is in France.", "signature": ""}
    assert content == ([thinking_block] if shown else []) + [{"type": "text", "text": "It is sunny."}]
    upstream.script = text_chunks("<think>Paris is in France.</think>It is sunny.")
    events = check_messages_stream(post(client, stream=True, **body).get_data())
    assert any(e.get("delta", {}).get("type") == "thinking_delta" for e in events) == shown


def test_a_failure_mid_stream_is_an_error_event(client, upstream):
    upstream.script = [*text_chunks("Hello", finish=None),
                       UpstreamError("server_error", "the back end broke", status=502)]
    events = check_messages_stream(post(client, stream=True).get_data())
    assert events[-1] == {"type": "error", "error": {"type": "api_error", "message": "the back end broke"}}


def test_models_carry_anthropics_fields_for_anthropic_clients(make_app, upstream):
    client = make_app(upstream, model_map={"claude-opus-5-5": "qwen3"}).test_client()
    plain = client.get("/v1/models").get_json()
    assert set(plain) == {"object", "data"}
    listed = client.get("/v1/models", headers={"anthropic-version": "2023-06-01"}).get_json()
    assert [m["id"] for m in listed["data"]] == [m["id"] for m in plain["data"]]
    assert (listed["has_more"], listed["first_id"], listed["last_id"]) == \
        (False, plain["data"][0]["id"], "claude-opus-5-5")
    claude = listed["data"][-1]
    assert (claude["type"], claude["display_name"], claude["created_at"]) == \
        ("model", "claude-opus-5-5", "1970-01-01T00:00:00Z")


def test_count_tokens_estimates_the_prompt_the_back_end_would_get(client, upstream):
    small = client.post("/v1/messages/count_tokens?beta=true", json={"model": "m", "messages": USER}).get_json()
    with_tools = client.post("/v1/messages/count_tokens", json={"model": "m", "messages": USER,
                                                                "tools": [WEATHER]}).get_json()
    assert 0 < small["input_tokens"] < with_tools["input_tokens"] and set(small) == {"input_tokens"}
    assert upstream.bodies == []
    post(client, tools=[WEATHER])
    prompt = sum(len(m["content"]) for m in upstream.bodies[0]["messages"])
    assert with_tools["input_tokens"] == -(-prompt // 4)
