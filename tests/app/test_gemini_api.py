"""Google's Gemini API (``/v1beta/models/{model}:generateContent`` and its stream, ``:countTokens``, the model
list) through Flask's test client on a scripted upstream."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.gemini.plan import json_schema
from app.upstreams.base import ChoiceDelta, UpstreamChunk, UpstreamError
from support.fakes import FakeUpstream, text_chunks

KEY = {"x-goog-api-key": "sk-test"}
USER = [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}]
WEATHER = {"name": "get_weather", "description": "Current weather for a city",
           "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}, "required": ["city"]}}
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
GENERATE = "/v1beta/models/gemini-test:generateContent"
STREAM = "/v1beta/models/gemini-test:streamGenerateContent"


def post(client, path: str = GENERATE, headers: dict | None = None, **body: Any):
    body.setdefault("contents", USER)
    return client.post(path, json=body, headers=headers)


def google_error(response, status: int, status_name: str) -> dict:
    assert response.status_code == status, response.data
    body = response.get_json()
    assert set(body) == {"error"} and body["error"]["code"] == status and body["error"]["status"] == status_name
    assert body["error"]["message"]
    return body["error"]


def sse_chunks(raw: bytes) -> list[dict]:
    """The ``data:`` chunks of an ``alt=sse`` stream (each event ends in a blank line)."""
    text = raw.decode()
    assert text.endswith("\r\n\r\n")
    return [json.loads(event.strip()[len("data: "):]) for event in text.split("\r\n\r\n") if event.strip()]


def merged(chunks: list[dict]) -> dict:
    """The stream's chunks as one response: parts joined as the body joins them, the last chunk's finish."""
    parts: list[dict] = []
    for chunk in chunks:
        for part in chunk["candidates"][0]["content"]["parts"]:
            last = parts[-1] if parts else None
            if "text" in part and last is not None and "text" in last and last.get("thought") == part.get("thought"):
                last["text"] += part["text"]
            else:
                parts.append(dict(part))
    last = chunks[-1]
    return {"parts": parts, "finishReason": last["candidates"][0]["finishReason"], "usage": last["usageMetadata"]}


# -- requests refused, in Google's envelope -------------------------------------------------------------


@pytest.mark.parametrize("body, param", [
    ({"contents": []}, "contents"),
    ({"contents": [{"role": "robot", "parts": [{"text": "hi"}]}]}, "contents[0].role"),
    ({"contents": [{"role": "model", "parts": [{"functionCall": {"args": {}}}]}]}, "contents[0].parts[0].functionCall.name"),
    ({"tools": [{"functionDeclarations": [{"name": "has space"}]}]}, "tools[0].functionDeclarations[0].name"),
    ({"tools": [{"functionDeclarations": [WEATHER, WEATHER]}]}, "tools[0].functionDeclarations[1].name"),
    ({"toolConfig": {"functionCallingConfig": {"mode": "SOMETIMES"}}}, "toolConfig.functionCallingConfig.mode"),
    ({"toolConfig": {"functionCallingConfig": {"mode": "ANY"}}}, "toolConfig.functionCallingConfig.mode"),
    ({"tools": [{"functionDeclarations": [WEATHER]}],
      "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather", "nope"]}}},
     "toolConfig.functionCallingConfig.allowedFunctionNames[1]"),
    ({"generationConfig": {"temperature": 3}}, "generationConfig.temperature"),
    ({"generationConfig": {"maxOutputTokens": 0}}, "generationConfig.maxOutputTokens"),
    ({"generationConfig": {"candidateCount": 2}}, "generationConfig.candidateCount"),
    ({"generationConfig": {"responseMimeType": "text/html"}}, "generationConfig.responseMimeType"),
    ({"generationConfig": {"stopSequences": ["a", "b", "c", "d", "e", "f"]}}, "generationConfig.stopSequences"),
], ids=["no-contents", "role", "call-name", "function-name", "duplicate", "mode", "any-without-tools",
        "allowed-not-declared", "temperature", "max-output", "candidates", "mime", "stops"])
def test_invalid_request_is_invalid_argument_naming_the_field(client, upstream, body, param):
    error = google_error(post(client, headers=KEY, **body), 400, "INVALID_ARGUMENT")
    assert param in error["message"]
    assert error["details"][0]["fieldViolations"][0]["field"] == param
    assert upstream.bodies == []


def test_malformed_json_unknown_paths_and_wrong_methods_answer_in_googles_envelope(client):
    bad = client.post(GENERATE, data=b"{nope", headers={**KEY, "Content-Type": "application/json"})
    google_error(bad, 400, "INVALID_ARGUMENT")
    google_error(client.post("/v1beta/models/gemini-test:embedContent", json={}, headers=KEY), 404, "NOT_FOUND")
    google_error(client.get("/v1beta/files", headers=KEY), 404, "NOT_FOUND")
    wrong = client.put(GENERATE, json={}, headers=KEY)
    assert google_error(wrong, 405, "INVALID_ARGUMENT") and "POST" in wrong.headers["Allow"]


def test_google_tools_are_dropped_or_refused(make_app, upstream):
    body = {"contents": USER, "tools": [{"googleSearch": {}}, {"functionDeclarations": [WEATHER]}]}
    assert make_app(upstream).test_client().post(GENERATE, json=body, headers=KEY).status_code == 200
    assert "googleSearch" not in json.dumps(upstream.bodies[0]) and "get_weather" in json.dumps(upstream.bodies[0])
    refused = make_app(upstream, unsupported_tools="fail").test_client().post(GENERATE, json=body, headers=KEY)
    assert "tools[0].googleSearch" in google_error(refused, 400, "INVALID_ARGUMENT")["message"]


def test_an_upstream_refusal_keeps_its_status_in_googles_envelope(make_app):
    upstream = FakeUpstream(open_error=UpstreamError("client_error", "context too long", status=400,
                                                     code="context_length_exceeded", param="messages"))
    error = google_error(post(make_app(upstream).test_client(), headers=KEY), 400, "INVALID_ARGUMENT")
    assert error["message"] == "context too long"
    gone = FakeUpstream(open_error=UpstreamError("connect", "connection refused", status=502))
    google_error(post(make_app(gone).test_client(), headers=KEY), 502, "UNAVAILABLE")


@pytest.mark.parametrize("headers, path, status", [
    ({}, GENERATE, 401),
    ({"x-goog-api-key": "sk-wrong"}, GENERATE, 401),
    (KEY, GENERATE, 200),
    ({}, GENERATE + "?key=sk-test", 200),
    ({"Authorization": "Bearer sk-test"}, GENERATE, 200),
])
def test_the_key_is_taken_from_x_goog_api_key_the_key_parameter_or_a_bearer_token(make_app, upstream, headers,
                                                                                    path, status):
    response = post(make_app(upstream, api_keys="sk-test").test_client(), path, headers=headers)
    assert response.status_code == status
    if status == 401:
        error = google_error(response, 401, "UNAUTHENTICATED")
        assert headers or "x-goog-api-key: YOUR_KEY" in error["message"]


def test_the_body_limits_name_the_gemini_fields(make_app, upstream):
    tools = [{"functionDeclarations": [{**WEATHER, "name": f"tool_{i}"} for i in range(2)]},
             {"functionDeclarations": [{**WEATHER, "name": "tool_2"}]}]
    error = google_error(post(make_app(upstream, max_tools=2).test_client(), headers=KEY, tools=tools), 400,
                         "INVALID_ARGUMENT")
    assert "'tools'" in error["message"]
    big = {**WEATHER, "parametersJsonSchema": {"type": "object", "description": "x" * 2000}}
    error = google_error(post(make_app(upstream, max_tool_schema_bytes=1000).test_client(), headers=KEY,
                              tools=[{"functionDeclarations": [big]}]), 400, "INVALID_ARGUMENT")
    assert "tools[0].functionDeclarations[0].parametersJsonSchema" in error["message"]


# -- the transcript and the parameters ------------------------------------------------------------------


def test_the_transcript_reaches_the_back_end_as_chat_messages(make_app, upstream):
    contents = [
        {"role": "user", "parts": [{"text": "Weather in Paris and Oslo?"}]},
        {"role": "model", "parts": [{"text": "thinking it over", "thought": True}, {"text": "Checking."},
                                    {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
                                    {"functionCall": {"id": "c2", "name": "get_weather", "args": {"city": "Oslo"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "c2", "name": "get_weather", "response": {"output": "-3 C"}}},
                                   {"functionResponse": {"name": "get_weather", "response": {"temp": 18}}},
                                   {"text": "And this?"},
                                   {"inlineData": {"mimeType": "image/png", "data": "iVBOR"}}]},
    ]
    app = make_app(upstream, tool_mode="native")
    response = app.test_client().post(GENERATE, headers=KEY, json={
        "contents": contents, "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Use tools."}]},
        "tools": [{"functionDeclarations": [WEATHER]}]})
    assert response.status_code == 200, response.data
    messages = upstream.bodies[0]["messages"]
    assert messages[0] == {"role": "system", "content": "Be brief.\n\nUse tools."}
    assistant = messages[2]
    assert assistant["content"] == "Checking." and "thinking it over" not in json.dumps(messages)
    assert [(c["id"], json.loads(c["function"]["arguments"])) for c in assistant["tool_calls"]] == \
        [("call_1", {"city": "Paris"}), ("c2", {"city": "Oslo"})]
    # paired by id, then by name: the id-less result answers the open call_1
    assert messages[3:5] == [{"role": "tool", "tool_call_id": "c2", "content": "-3 C"},
                             {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 18}'}]
    assert messages[5]["content"][0] == {"type": "text", "text": "And this?"}
    assert messages[5]["content"][1]["type"] == "image_url"
    tool = upstream.bodies[0]["tools"][0]["function"]
    assert tool["parameters"] == {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_openapi_schemas_become_json_schema():
    schema = {"type": "OBJECT", "propertyOrdering": ["a", "b"], "properties": {
        "a": {"type": "ARRAY", "items": {"type": "INTEGER", "format": "int32"}},
        "b": {"type": "STRING", "nullable": True, "enum": ["x", "y"]},
        "c": {"anyOf": [{"type": "NUMBER"}, {"type": "BOOLEAN"}]}}, "required": ["a"]}
    assert json_schema(schema) == {"type": "object", "properties": {
        "a": {"type": "array", "items": {"type": "integer", "format": "int32"}},
        "b": {"type": ["string", "null"], "enum": ["x", "y"]},
        "c": {"anyOf": [{"type": "number"}, {"type": "boolean"}]}}, "required": ["a"]}


def test_parameters_json_schema_is_offered_as_it_is(make_app, upstream):
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"],
              "additionalProperties": False}
    post(make_app(upstream, tool_mode="native").test_client(), headers=KEY,
         tools=[{"functionDeclarations": [{"name": "read_file", "parametersJsonSchema": schema}]}])
    assert upstream.bodies[0]["tools"][0]["function"]["parameters"] == schema


def test_generation_config_goes_to_the_back_end_as_chat_takes_it(make_app, upstream):
    post(make_app(upstream).test_client(), headers=KEY, generation_config={
        "temperature": 0.2, "topP": 0.9, "topK": 20, "maxOutputTokens": 77, "stopSequences": ["END"], "seed": 7,
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object", "properties": {"a": {"type": "string"}}}})
    sent = upstream.bodies[0]
    assert (sent["temperature"], sent["top_p"], sent["top_k"], sent["max_tokens"], sent["stop"], sent["seed"]) == \
        (0.2, 0.9, 20, 77, ["END"], 7)
    assert sent["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "response", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}


def test_response_schema_in_the_openapi_subset_is_sent_as_json_schema(make_app, upstream):
    post(make_app(upstream).test_client(), headers=KEY, generationConfig={
        "responseMimeType": "application/json", "responseSchema": {"type": "ARRAY", "items": {"type": "STRING"}}})
    assert upstream.bodies[0]["response_format"]["json_schema"]["schema"] == {"type": "array",
                                                                              "items": {"type": "string"}}


@pytest.mark.parametrize("config, rule", [
    ({"mode": "NONE"}, "do not call any tool"),
    ({"mode": "ANY"}, "must"),
    ({"mode": "ANY", "allowedFunctionNames": ["get_weather"]}, "get_weather"),
])
def test_function_calling_config_becomes_the_turn_rules(client, upstream, config, rule):
    response = post(client, headers=KEY, tools=[{"functionDeclarations": [WEATHER]}],
                    toolConfig={"functionCallingConfig": config})
    assert response.status_code == 200
    prompt = "\n".join(m["content"] for m in upstream.bodies[0]["messages"])
    assert rule in prompt


# -- answers --------------------------------------------------------------------------------------------


def test_an_answer_with_text_and_a_function_call(client, upstream):
    upstream.script = text_chunks("Let me check." + CALL, usage={"prompt_tokens": 40, "completion_tokens": 12,
                                                                "total_tokens": 52})
    response = post(client, headers=KEY, tools=[{"functionDeclarations": [WEATHER]}])
    assert response.status_code == 200
    body = response.get_json()
    candidate = body["candidates"][0]
    assert candidate["content"]["role"] == "model" and candidate["finishReason"] == "STOP"
    text, call = candidate["content"]["parts"]
    assert text == {"text": "Let me check."}
    assert call["functionCall"]["name"] == "get_weather" and call["functionCall"]["args"] == {"city": "Paris"}
    assert call["functionCall"]["id"]
    assert body["usageMetadata"] == {"promptTokenCount": 40, "candidatesTokenCount": 12, "totalTokenCount": 52}
    assert body["modelVersion"] == "gemini-test" and body["responseId"]


def test_a_cut_answer_is_max_tokens(client, upstream):
    upstream.script = text_chunks("Hello", finish="length")
    body = post(client, headers=KEY, generationConfig={"maxOutputTokens": 1}).get_json()
    assert body["candidates"][0]["finishReason"] == "MAX_TOKENS"


def test_the_model_may_be_named_with_its_models_prefix(make_app, upstream):
    client = make_app(upstream, model_map={"gemini-test": "fake-small"}).test_client()
    assert post(client, "/v1beta/models/gemini-test:generateContent", headers=KEY).status_code == 200
    assert upstream.bodies[0]["model"] == "fake-small"


@pytest.mark.parametrize("size", [1, 2, 3, 7, 10_000])
def test_the_sse_stream_adds_up_to_the_answer_at_every_chunk_size(make_app, size):
    text = "<think>Paris is in France.</think>Let me check." + CALL + CALL.replace("Paris", "Oslo")
    thinking = {"thinkingConfig": {"includeThoughts": True}}
    tools = [{"functionDeclarations": [WEATHER]}]
    upstream = FakeUpstream(text_chunks(text, size=size))
    client = make_app(upstream).test_client()
    whole = post(client, headers=KEY, tools=tools, generationConfig=thinking).get_json()
    upstream.script = text_chunks(text, size=size)
    streamed = post(client, STREAM + "?alt=sse", headers=KEY, tools=tools, generationConfig=thinking)
    assert streamed.status_code == 200 and streamed.mimetype == "text/event-stream"
    chunks = sse_chunks(streamed.data)
    answer = merged(chunks)
    parts = whole["candidates"][0]["content"]["parts"]
    # call ids are fresh per answer; everything else is the same
    strip = [{k: ({**v, "id": "-"} if k == "functionCall" else v) for k, v in p.items()} for p in parts]
    assert [{k: ({**v, "id": "-"} if k == "functionCall" else v) for k, v in p.items()} for p in answer["parts"]] == strip
    assert strip == [{"text": "Paris is in France.", "thought": True}, {"text": "Let me check."},
                     {"functionCall": {"id": "-", "name": "get_weather", "args": {"city": "Paris"}}},
                     {"functionCall": {"id": "-", "name": "get_weather", "args": {"city": "Oslo"}}}]
    assert answer["finishReason"] == whole["candidates"][0]["finishReason"] == "STOP"
    assert answer["usage"] == whole["usageMetadata"]
    assert all(c["modelVersion"] == "gemini-test" and c["responseId"] for c in chunks)
    assert len({c["responseId"] for c in chunks}) == 1


def test_without_alt_sse_the_stream_is_one_json_array(client, upstream):
    upstream.script = text_chunks("Hello there, world.", size=4)
    streamed = post(client, STREAM, headers=KEY)
    assert streamed.status_code == 200 and streamed.mimetype == "application/json"
    chunks = json.loads(streamed.data)
    assert isinstance(chunks, list) and len(chunks) > 2
    assert "".join(p["text"] for c in chunks for p in c["candidates"][0]["content"]["parts"]) == "Hello there, world."
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP" and "usageMetadata" in chunks[-1]


def test_thoughts_are_hidden_unless_asked_for(client, upstream):
    upstream.script = text_chunks("<think>Paris is in France.</think>It is sunny.")
    parts = post(client, headers=KEY).get_json()["candidates"][0]["content"]["parts"]
    assert parts == [{"text": "It is sunny."}]


def test_native_calls_of_the_back_end_are_function_calls(make_app):
    call = {"index": 0, "id": "call_n1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    upstream = FakeUpstream([UpstreamChunk([ChoiceDelta(index=0, tool_calls=[call])]),
                             UpstreamChunk([ChoiceDelta(index=0, finish_reason="tool_calls")])])
    body = post(make_app(upstream, tool_mode="native").test_client(), headers=KEY,
                tools=[{"functionDeclarations": [WEATHER]}]).get_json()
    [part] = body["candidates"][0]["content"]["parts"]
    assert part["functionCall"]["name"] == "get_weather" and part["functionCall"]["args"] == {"city": "Paris"}


@pytest.mark.parametrize("alt", ["?alt=sse", ""])
def test_a_failure_mid_stream_is_a_last_chunk_in_googles_envelope(client, upstream, alt):
    upstream.script = [*text_chunks("Hello", finish=None),
                       UpstreamError("server_error", "the back end fell over", status=502)]
    response = post(client, STREAM + alt, headers=KEY)
    assert response.status_code == 200
    chunks = sse_chunks(response.data) if alt else json.loads(response.data)
    assert chunks[-1]["error"]["status"] == "UNAVAILABLE" and "fell over" in chunks[-1]["error"]["message"]


# -- countTokens and the model list ---------------------------------------------------------------------


def test_count_tokens_estimates_the_prompt_the_back_end_would_get(client, upstream):
    plain = client.post("/v1beta/models/gemini-test:countTokens", json={"contents": USER}, headers=KEY)
    assert plain.status_code == 200 and plain.get_json()["totalTokens"] > 0
    tools = {"contents": USER, "tools": [{"functionDeclarations": [WEATHER]}]}
    wrapped = client.post("/v1beta/models/gemini-test:countTokens", json={"generateContentRequest": tools},
                          headers=KEY)
    assert wrapped.get_json()["totalTokens"] > plain.get_json()["totalTokens"]  # the tools' block counts
    assert upstream.bodies == []
    refused = client.post("/v1beta/models/gemini-test:countTokens", headers=KEY,
                          json={"generateContentRequest": {"contents": "hi"}})
    assert "generateContentRequest.contents" in google_error(refused, 400, "INVALID_ARGUMENT")["message"]


def test_models_are_listed_in_pages_and_got_one_by_one(make_app, upstream):
    client = make_app(upstream, model_map={"alpha": "fake-model", "beta": "fake-model"}).test_client()
    listed = client.get("/v1beta/models", headers=KEY).get_json()
    names = [m["name"] for m in listed["models"]]
    assert names == ["models/fake-model", "models/alpha", "models/beta"] and "nextPageToken" not in listed
    assert "generateContent" in listed["models"][0]["supportedGenerationMethods"]
    first = client.get("/v1beta/models?pageSize=2", headers=KEY).get_json()
    assert [m["name"] for m in first["models"]] == names[:2]
    rest = client.get(f"/v1beta/models?pageSize=2&pageToken={first['nextPageToken']}", headers=KEY).get_json()
    assert [m["name"] for m in rest["models"]] == names[2:] and "nextPageToken" not in rest
    assert client.get("/v1beta/models/alpha", headers=KEY).get_json()["name"] == "models/alpha"
    google_error(client.get("/v1beta/models/nope", headers=KEY), 404, "NOT_FOUND")
    bad = client.get("/v1beta/models?pageToken=xyz", headers=KEY)
    assert "pageToken" in google_error(bad, 400, "INVALID_ARGUMENT")["message"]


def test_the_model_routes_are_also_at_v1_where_the_js_sdk_calls_them(make_app, upstream):
    client = make_app(upstream).test_client()
    answer = post(client, "/v1/models/gemini-test:generateContent", headers=KEY).get_json()
    assert answer["candidates"][0]["content"]["parts"] == [{"text": "Hello there, world."}]
    google_error(post(client, "/v1/models/gemini-test:generateContent", headers=KEY, contents=[]), 400,
                 "INVALID_ARGUMENT")
    assert client.get("/v1/models/fake-model", headers=KEY).get_json()["name"] == "models/fake-model"
    # the shared list: Gemini's shape for a client sending x-goog-api-key, OpenAI's for the others
    assert client.get("/v1/models", headers=KEY).get_json()["models"][0]["name"] == "models/fake-model"
    assert client.get("/v1/models").get_json()["object"] == "list"
