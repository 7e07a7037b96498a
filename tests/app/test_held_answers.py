"""Issue 38's faults on non-streamed answers: nothing has gone out yet, so a model's bad call never becomes a 5xx
(``invalid_json`` decides) and a call the back end's ``length`` cut short is dropped, on every API."""

from __future__ import annotations

import json

import pytest

from support.fakes import WEATHER_TOOL, weather_requests, FakeUpstream, text_chunks

BROKEN = '<tool_call>{"name": "get_weather", "arguments": {"city": Paris}}</tool_call>'  # never parses
CUT = 'Checking.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Par'
FUNCTION = WEATHER_TOOL["function"]
REQUESTS = weather_requests("hi")


def answer(make_app, api: str, script: str, *, finish: str = "stop", **settings) -> tuple[int, str, list, str]:
    """The status, the visible text, the calls (name, arguments) and the finish of a non-streamed answer."""
    path, body = REQUESTS[api]
    response = make_app(FakeUpstream(text_chunks(script, finish=finish)), **settings).test_client().post(path, json=body)
    data = response.get_json()
    if response.status_code != 200:
        return response.status_code, "", [], data["error"].get("code") or data["error"].get("type")
    if api == "chat":
        message = data["choices"][0]["message"]
        calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
        return 200, message["content"] or "", calls, data["choices"][0]["finish_reason"]
    if api == "responses":
        text = "".join(part["text"] for item in data["output"] if item["type"] == "message" for part in item["content"])
        calls = [(item["name"], item["arguments"]) for item in data["output"] if item["type"] == "function_call"]
        return 200, text, calls, (data.get("incomplete_details") or {}).get("reason") or data["status"]
    text = "".join(block["text"] for block in data["content"] if block["type"] == "text")
    calls = [(block["name"], json.dumps(block["input"])) for block in data["content"] if block["type"] == "tool_use"]
    return 200, text, calls, data["stop_reason"]


@pytest.mark.parametrize("api", REQUESTS)
def test_a_malformed_call_is_text_not_a_502(make_app, api: str) -> None:
    status, text, calls, finish = answer(make_app, api, BROKEN)
    assert (status, calls) == (200, []), finish
    assert text == BROKEN and finish in ("stop", "completed", "end_turn")


@pytest.mark.parametrize("api", REQUESTS)
def test_a_malformed_call_fails_under_invalid_json_fail(make_app, api: str) -> None:
    status, _, _, code = answer(make_app, api, BROKEN, invalid_json="fail")
    assert (status, code) == (502, "api_error" if api == "messages" else "invalid_json")


@pytest.mark.parametrize("api", REQUESTS)
def test_a_call_cut_by_length_is_dropped(make_app, api: str) -> None:
    status, text, calls, finish = answer(make_app, api, CUT, finish="length")
    assert (status, calls) == (200, [])
    assert text.strip() == "Checking." and finish in ("length", "max_output_tokens", "max_tokens")


def test_a_good_call_before_a_cut_one_is_kept(make_app) -> None:
    good = '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>'
    status, _, calls, finish = answer(make_app, "chat", good + CUT, finish="length")
    assert (status, calls, finish) == (200, [("get_weather", '{"city": "Rome"}')], "length")
