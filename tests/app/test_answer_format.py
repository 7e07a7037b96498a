"""A JSON answer format in prompt mode, against a back end that enforces ``response_format``.

Such a back end (vLLM guided decoding, llama.cpp grammars, Ollama ``format``) writes JSON from the
first token, so a call block is impossible while it is asked for JSON. toolwire sends the format only
when no call can come (no tools, ``tool_choice: none``) and otherwise teaches it in the prompt.
"""

from __future__ import annotations

import json

import pytest

from app.pipeline.prompt import ANSWER_FORMAT_HEADING
from support.fakes import WEATHER_TOOL, FakeStream, FakeUpstream, text_chunks
from support.responses_calls import post as post_response
from support.scripted_upstream import tool_call_text
from support.tools import WEATHER

SCHEMA = {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}
CHAT_FORMAT = {"type": "json_schema", "json_schema": {"name": "report", "schema": SCHEMA, "strict": True}}
RESPONSES_FORMAT = {"type": "json_schema", "name": "report", "schema": SCHEMA, "strict": True}
JSON_ANSWER = '{"summary": "sunny"}'
CALL = tool_call_text("get_weather", {"city": "Paris"})


class EnforcingUpstream(FakeUpstream):
    """Answers JSON whenever the request carries a JSON ``response_format`` (it enforces it), else a call."""

    def open(self, body: dict, *, request_id: str | None = None) -> FakeStream:
        enforced = (body.get("response_format") or {}).get("type") in ("json_object", "json_schema")
        self.script = text_chunks(JSON_ANSWER if enforced else CALL)
        return super().open(body, request_id=request_id)


def post_chat(client, **body):
    return client.post("/v1/chat/completions", json={"model": "m", "messages": [
        {"role": "user", "content": "Weather in Paris, as a report?"}], **body})


def system_prompt(upstream: EnforcingUpstream) -> str:
    return upstream.bodies[-1]["messages"][0]["content"]


@pytest.mark.parametrize("response_format", [CHAT_FORMAT, {"type": "json_object"}])
def test_with_tools_the_format_is_taught_not_sent_so_the_call_can_come(make_app, response_format):
    upstream = EnforcingUpstream()
    message = post_chat(make_app(upstream).test_client(), tools=[WEATHER_TOOL],
                        response_format=response_format).get_json()["choices"][0]["message"]
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [{"city": "Paris"}]
    assert "response_format" not in upstream.bodies[-1]
    taught = system_prompt(upstream).split(ANSWER_FORMAT_HEADING + "\n")[1]
    assert taught.startswith("When you reply without calling a tool, the reply must be one JSON object")
    assert (json.dumps(SCHEMA, separators=(",", ":")) in taught) == (response_format is CHAT_FORMAT)


@pytest.mark.parametrize("tools", [{}, {"tools": [WEATHER_TOOL], "tool_choice": "none"}], ids=["no tools", "none"])
def test_when_no_call_can_come_the_back_end_gets_the_format_as_sent(make_app, tools):
    upstream = EnforcingUpstream()
    message = post_chat(make_app(upstream).test_client(), response_format=CHAT_FORMAT,
                        **tools).get_json()["choices"][0]["message"]
    assert message["content"] == JSON_ANSWER
    assert upstream.bodies[-1]["response_format"] == CHAT_FORMAT
    assert ANSWER_FORMAT_HEADING not in system_prompt(upstream)


def test_responses_text_format_follows_the_same_rule_and_keeps_strict(make_app):
    upstream = EnforcingUpstream()
    client = make_app(upstream).test_client()
    body = post_response(client, tools=[WEATHER], text={"format": RESPONSES_FORMAT}).get_json()
    assert [(item["type"], item.get("name")) for item in body["output"]] == [("function_call", "get_weather")]
    assert "response_format" not in upstream.bodies[-1]
    assert body["text"] == {"format": RESPONSES_FORMAT}

    body = post_response(client, text={"format": RESPONSES_FORMAT}).get_json()
    assert body["output"][0]["content"][0]["text"] == JSON_ANSWER
    assert upstream.bodies[-1]["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "report", "schema": SCHEMA, "strict": True}}
