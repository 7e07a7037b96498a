"""A tool the provider would run is dropped visibly on every API (issue 40): named on the access line, and a
request whose tools were all dropped is a 400 naming ``tools`` in the API's own envelope, not an answer as if
nothing had been asked (Responses: tests/app/test_shell_apply_patch.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.fakes import FakeUpstream, text_chunks

WEATHER = {"name": "get_weather", "description": "Current weather for a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
GEMINI = "/v1beta/models/gemini-test:generateContent"
GOOGLE_KEY = {"x-goog-api-key": "sk-test"}
DECLARED = {"functionDeclarations": [{"name": "get_weather", "parameters": {"type": "object"}}]}


def messages(client: Any, **body: Any) -> Any:
    return client.post("/v1/messages", buffered=True, json={"model": "claude-test", "max_tokens": 64,
                                             "messages": [{"role": "user", "content": "hi"}], **body})


def gemini(client: Any, **body: Any) -> Any:
    contents = [{"role": "user", "parts": [{"text": "hi"}]}]
    return client.post(GEMINI, buffered=True, headers=GOOGLE_KEY, json={"contents": contents, **body})


def access_lines(json_log: Any) -> list[dict]:
    return [line for line in map(json.loads, json_log.getvalue().splitlines()) if line["logger"] == "toolwire.access"]


@pytest.mark.parametrize("tools, dropped", [([WEATHER, WEB_SEARCH], ["web_search"]),
                                            ([WEATHER, {"type": "web_fetch_20250910", "name": "f"}], ["web_fetch"])])
def test_messages_names_its_dropped_server_tools_on_the_access_line(make_app: Any, json_log: Any, tools: list,
                                                                    dropped: list) -> None:
    assert messages(make_app(FakeUpstream(text_chunks("ok"))).test_client(), tools=tools).status_code == 200
    assert access_lines(json_log)[-1]["dropped_tools"] == dropped


def test_messages_refuses_a_request_whose_tools_were_all_dropped(make_app: Any, json_log: Any) -> None:
    client = make_app(FakeUpstream(text_chunks("never"))).test_client()
    refused = messages(client, tools=[WEB_SEARCH])
    assert refused.status_code == 400
    body = refused.get_json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "web_search would run on Anthropic's side" in body["error"]["message"]
    assert access_lines(json_log)[-1]["dropped_tools"] == ["web_search"]
    assert messages(client, tools=[WEB_SEARCH], tool_choice={"type": "none"}).status_code == 200


def test_gemini_names_its_dropped_tools_and_refuses_when_none_is_left(make_app: Any, json_log: Any) -> None:
    client = make_app(FakeUpstream(text_chunks("ok"))).test_client()
    assert gemini(client, tools=[{"googleSearch": {}}, DECLARED]).status_code == 200
    assert access_lines(json_log)[-1]["dropped_tools"] == ["googleSearch"]
    refused = gemini(client, tools=[{"googleSearch": {}}, {"codeExecution": {}}])
    assert refused.status_code == 400
    error = refused.get_json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and "googleSearch, codeExecution" in error["message"]
    assert gemini(client, tools=[{"googleSearch": {}}],
                  toolConfig={"functionCallingConfig": {"mode": "NONE"}}).status_code == 200
