"""Validate, then re-ask once (issue 38): a scripted back end answers wrong first and right the second time; the
client gets the right call and nothing of the wrong one, streamed and not, on Chat, Responses and Messages."""

from __future__ import annotations

import json

import pytest
from prometheus_client import REGISTRY

from support.fakes import WEATHER_TOOL, weather_requests, FakeStream, FakeUpstream, text_chunks

GOOD = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
WRONG = {
    "invalid_json": '<tool_call>{"name": "get_weather", "arguments": {"city": Oslo}}</tool_call>',
    "schema": '<tool_call>{"name": "get_weather", "arguments": {"town": "Oslo"}}</tool_call>',
    "bare_schema": '[{"name": "get_weather", "arguments": {"town": "Oslo"}}]',  # what a small model writes
}
FUNCTION = WEATHER_TOOL["function"]
REQUESTS = weather_requests("Oslo?")


class Answers(FakeUpstream):
    """A back end that plays its next answer on each request (the last one again once they run out)."""

    def __init__(self, *answers: str):
        super().__init__()
        self.answers = [text_chunks(answer, size=7) for answer in answers]

    def open(self, body: dict, *, request_id: str | None = None) -> FakeStream:
        self.script = self.answers[min(len(self.bodies), len(self.answers) - 1)]
        return super().open(body, request_id=request_id)


def calls_in(api: str, response, stream: bool) -> list[dict]:
    """The calls' arguments the client got (from the body, or the stream's events joined)."""
    if not stream:
        data = response.get_json()
        if api == "chat":
            return [json.loads(c["function"]["arguments"]) for c in data["choices"][0]["message"].get("tool_calls") or []]
        if api == "responses":
            return [json.loads(item["arguments"]) for item in data["output"] if item["type"] == "function_call"]
        return [block["input"] for block in data["content"] if block["type"] == "tool_use"]
    events = [json.loads(line[6:]) for line in response.get_data(as_text=True).splitlines()
              if line.startswith("data: {")]
    if api == "chat":
        fragments = "".join(tc["function"].get("arguments") or "" for e in events for c in e.get("choices", [])
                            for tc in c["delta"].get("tool_calls") or [])
    elif api == "responses":
        fragments = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    else:
        fragments = "".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"
                            and e["delta"]["type"] == "input_json_delta")
    return [json.loads(fragments)] if fragments else []


def reasks(reason: str) -> float:
    return REGISTRY.get_sample_value("toolwire_reasks_total", {"model": "other", "reason": reason}) or 0.0


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("api", REQUESTS)
@pytest.mark.parametrize("wrong", WRONG)
def test_a_wrong_call_is_asked_for_again_and_only_the_right_one_goes_out(make_app, api, stream, wrong) -> None:
    upstream = Answers(WRONG[wrong], GOOD)
    path, body = REQUESTS[api]
    before = reasks("invalid_call")
    response = make_app(upstream, reask_calls="on").test_client().post(path, json={**body, "stream": stream})
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    assert calls_in(api, response, stream) == [{"city": "Oslo"}]
    assert "town" not in text and "city\\\": Oslo" not in text, "nothing of the wrong call went out"
    assert len(upstream.bodies) == 2 and reasks("invalid_call") == before + 1
    told = upstream.bodies[1]["messages"][-1]
    assert told["role"] == "user" and "get_weather" in told["content"]
    assert ("city" in told["content"]) if "schema" in wrong else ("JSON object" in told["content"])


def test_a_forced_choice_unmet_is_asked_for_again(make_app, json_log) -> None:
    upstream = Answers("It is probably cold in Oslo.", GOOD)
    path, body = REQUESTS["chat"]
    forced = {**body, "tool_choice": "required"}
    response = make_app(upstream).test_client().post(path, json=forced, headers={"X-Request-Id": "rid-reask"},
                                                     buffered=True)
    message = response.get_json()["choices"][0]["message"]
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [{"city": "Oslo"}]
    assert "You must call get_weather" in upstream.bodies[1]["messages"][-1]["content"]
    access = [json.loads(line) for line in json_log.getvalue().splitlines() if '"toolwire.access"' in line]
    assert [(a["request_id"], a["reasked"]) for a in access] == [("rid-reask", "forced_choice_unmet")]


def test_only_once(make_app) -> None:
    upstream = Answers(WRONG["invalid_json"])
    path, body = REQUESTS["chat"]
    message = make_app(upstream).test_client().post(path, json=body).get_json()["choices"][0]["message"]
    assert len(upstream.bodies) == 2 and not message.get("tool_calls")
    assert message["content"] == WRONG["invalid_json"], "the second wrong answer is text, as invalid_json says"


def test_a_good_first_answer_is_not_asked_again_and_off_is_off(make_app) -> None:
    path, body = REQUESTS["chat"]
    upstream = Answers(GOOD)
    make_app(upstream).test_client().post(path, json=body)
    assert len(upstream.bodies) == 1
    upstream = Answers(WRONG["schema"], GOOD)
    message = make_app(upstream, reask_calls="off").test_client().post(path, json=body).get_json()["choices"][0][
        "message"]
    assert len(upstream.bodies) == 1 and message["tool_calls"][0]["function"]["arguments"] == '{"town": "Oslo"}'


def test_streams_are_not_held_unless_on(make_app) -> None:
    path, body = REQUESTS["chat"]
    upstream = Answers(WRONG["invalid_json"], GOOD)
    text = make_app(upstream).test_client().post(path, json={**body, "stream": True}).get_data(as_text=True)
    assert len(upstream.bodies) == 1 and "invalid_tool_call" in text, "the default streams as it always did"


def test_a_strict_tool_s_failed_check_is_asked_again_before_its_error(make_app) -> None:
    strict = {"type": "function", "function": {**FUNCTION, "strict": True}}
    path, body = REQUESTS["chat"]
    upstream = Answers(WRONG["schema"], GOOD)
    response = make_app(upstream).test_client().post(path, json={**body, "tools": [strict]})
    assert response.status_code == 200 and len(upstream.bodies) == 2
    assert response.get_json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"city": "Oslo"}'
    upstream = Answers(WRONG["schema"])
    response = make_app(upstream).test_client().post(path, json={**body, "tools": [strict]})
    assert response.status_code == 502 and len(upstream.bodies) == 2, "the second failure is the policy's error"
