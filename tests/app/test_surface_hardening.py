"""Issue 43: the new surfaces (the Messages API, marker mode, shown examples, injected transcripts) held to the
old ones' standard. Each section reproduces one finding of the issue."""

from __future__ import annotations

import sys

import pytest

from app.upstreams.codex.emulation import StopRules
from support.fakes import FakeUpstream, text_chunks

USER = [{"role": "user", "content": "Hi."}]


def messages(client, **body):
    return client.post("/v1/messages", json={"model": "m", "max_tokens": 64, "messages": USER, **body})


def anthropic_400(response, param: str, message: str = "") -> dict:
    assert response.status_code == 400, response.data
    body = response.get_json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error", body
    assert body["error"]["param"] == param and message in body["error"]["message"], body
    return body["error"]


# -- item 1: stop_sequences ------------------------------------------------------------------------------

@pytest.mark.parametrize(("stops", "param", "message"), [
    (["a", "b", "c", "d", "e"], "stop_sequences", "at most 4 stop sequences"),
    ([f"s{i:07}" for i in range(100_000)], "stop_sequences", "at most 4 stop sequences"),
    (["ok", "x" * 257], "stop_sequences[1]", "at most 256 characters"),
    (["x" * 1000], "stop_sequences[0]", "at most 256 characters"),
], ids=["five", "100k", "long", "1000-chars"])
def test_too_many_or_too_long_stop_sequences_are_an_anthropic_400(make_app, stops, param, message):
    upstream = FakeUpstream(text_chunks("never"))
    anthropic_400(messages(make_app(upstream).test_client(), stop_sequences=stops), param, message)
    assert upstream.bodies == []


def test_four_stop_sequences_of_256_characters_are_sent_on(make_app):
    upstream = FakeUpstream(text_chunks("Hello."))
    stops = ["a", "b", "c", "x" * 256]
    assert messages(make_app(upstream).test_client(), stop_sequences=stops).status_code == 200
    assert upstream.bodies[0]["stop"] == stops


@pytest.mark.parametrize("length", [256, 5_000, sys.getrecursionlimit() * 4])
def test_a_long_emulated_stop_sequence_is_held_and_matched_without_recursion(length):
    stop = "ab" * (length // 2)
    rules = StopRules((stop,))
    assert rules.feed("one " + stop[:-1]) == ("one ", None)  # all but its last character: held back
    assert rules.feed("b") == ("", "stop")
    rules = StopRules((stop,))
    assert rules.feed("one " + stop[:-1]) == ("one ", None)
    assert rules.feed("x") == (stop[:-1] + "x", None)  # not it after all: let go


# -- item 7: two tools of one name -----------------------------------------------------------------------

WEATHER = {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


@pytest.mark.parametrize(("tools", "param"), [
    ([WEATHER, {**WEATHER, "description": "the other one"}], "tools[1].name"),
    ([{"name": "bash", "input_schema": {"type": "object"}}, {"type": "bash_20250124", "name": "bash"}], "tools[1].name"),
], ids=["custom-twice", "custom-and-bash"])
def test_two_tools_of_one_name_are_an_anthropic_400(make_app, tools, param):
    upstream = FakeUpstream(text_chunks("never"))
    error = anthropic_400(messages(make_app(upstream).test_client(), tools=tools), param, "already used")
    assert "bash" in error["message"] or "get_weather" in error["message"]
    assert upstream.bodies == []
