"""Shown examples through the API (issue 43 items 5 and 6): code that starts like a call and an example body in a
refusal are answers, streamed and not, never a call, a 502 or an error frame."""

from __future__ import annotations

import json

import pytest

from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks

COMPREHENSION = "[get_weather(c) for c in cities]\n\nThat asks for each city's weather."
REFUSAL = ('I will not look anything up without your confirmation. For reference, the tool takes a body like:\n'
           '{"city": "Oslo"}')


def answer(make_app, text: str, *, stream: bool, **body: object) -> tuple[int, str, list, str | None]:
    """The status, content, calls and finish reason of a Chat answer the upstream writes as ``text``."""
    client = make_app(FakeUpstream(text_chunks(text, size=5))).test_client()
    response = client.post("/v1/chat/completions", json={
        "model": "m", "messages": [{"role": "user", "content": "Weather?"}], "tools": [WEATHER_TOOL],
        "stream": stream, **body})
    if not stream:
        data = response.get_json()
        choice = data["choices"][0] if response.status_code == 200 else {"message": {}}
        return (response.status_code, choice["message"].get("content") or "",
                choice["message"].get("tool_calls") or [], choice.get("finish_reason"))
    content, calls, finish = "", [], None
    for block in response.get_data(as_text=True).split("\n\n"):
        if not block.startswith("data: {"):
            continue
        chunk = json.loads(block[len("data: "):])
        assert "error" not in chunk, chunk
        for choice in chunk["choices"]:
            content += choice["delta"].get("content") or ""
            calls += choice["delta"].get("tool_calls") or []
            finish = choice.get("finish_reason") or finish
    return response.status_code, content, calls, finish


@pytest.mark.parametrize("stream", [False, True])
def test_a_list_comprehension_at_the_start_is_an_answer(make_app, stream):
    assert answer(make_app, COMPREHENSION, stream=stream) == (200, COMPREHENSION, [], "stop")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_an_example_body_in_a_refusal_does_not_meet_a_forced_choice(make_app, stream, choice):
    assert answer(make_app, REFUSAL, stream=stream, tool_choice=choice) == (200, REFUSAL, [], "stop")
