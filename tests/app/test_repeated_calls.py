"""A non-streamed answer cut by ``length`` in a loop of one call keeps the call once (issue 38); two identical
calls the model ended on its own, or followed with something else, are both kept."""

from __future__ import annotations

import json

import pytest

from app.pipeline.repeats import without_repeats
from statemachine import ChoiceFinished, TextDelta, ToolCallArgumentsDelta, ToolCallEnded, ToolCallNote, \
    ToolCallStarted
from support.fakes import FakeStream, FakeUpstream, WEATHER_TOOL, text_chunks

OSLO = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
ROME = '{"name": "get_weather", "arguments": {"city": "Rome"}}'


class Plays(FakeUpstream):
    """A back end that answers with one text and a finish reason."""

    def __init__(self, answer: str, finish: str):
        super().__init__()
        self.answer, self.finish = answer, finish

    def open(self, body: dict, *, request_id: str | None = None) -> FakeStream:
        self.script = text_chunks(self.answer, size=9, finish=self.finish)
        return super().open(body, request_id=request_id)


def _cities(make_app, answer: str, finish: str, **body) -> tuple[list[str], dict]:
    request = {"model": "m", "messages": [{"role": "user", "content": "Weather?"}], "tools": [WEATHER_TOOL], **body}
    choice = make_app(Plays(answer, finish)).test_client().post("/v1/chat/completions",
                                                                json=request).get_json()["choices"][0]
    calls = choice["message"].get("tool_calls") or []
    return [json.loads(c["function"]["arguments"])["city"] for c in calls], choice


def test_a_loop_cut_by_the_token_limit_keeps_the_call_once(make_app) -> None:
    cities, choice = _cities(make_app, f"[{OSLO}, {OSLO}, {OSLO}, {OSLO}, " + OSLO[:30], "length")
    assert cities == ["Oslo"] and choice["finish_reason"] == "length"
    cities, _ = _cities(make_app, f"[{ROME}, {OSLO}, {OSLO}, {OSLO}, " + OSLO[:30], "length")
    assert cities == ["Rome", "Oslo"]


@pytest.mark.parametrize("answer, finish, expected", [
    (f"[{OSLO}, {OSLO}]", "stop", ["Oslo", "Oslo"]),  # the model ended them itself: both meant
    (f"[{OSLO}, {OSLO}, {ROME}, " + OSLO[:30], "length", ["Oslo", "Oslo", "Rome"]),  # something else came after
])
def test_identical_calls_the_model_did_not_loop_on_are_kept(make_app, answer, finish, expected) -> None:
    assert _cities(make_app, answer, finish)[0] == expected


def test_a_stream_is_not_held_for_it(make_app) -> None:
    request = {"model": "m", "messages": [{"role": "user", "content": "Weather?"}], "tools": [WEATHER_TOOL],
               "stream": True}
    text = make_app(Plays(f"[{OSLO}, {OSLO}, {OSLO}, " + OSLO[:30], "length")).test_client().post(
        "/v1/chat/completions", json=request).get_data(as_text=True)
    assert text.count('"name":"get_weather"') == 3, "a streamed call went out before the next one began"


def _call(index: int, city: str) -> list[tuple[int, object]]:
    arguments = json.dumps({"city": city})
    return [(0, ToolCallStarted(index, f"c{index}", "get_weather")), (0, ToolCallArgumentsDelta(index, arguments)),
            (0, ToolCallEnded(index, f"c{index}", "get_weather", arguments))]


def test_choices_are_kept_apart_and_the_drop_is_noted() -> None:
    other = [(1, event) for _, event in _call(0, "Oslo")]
    items = [*_call(0, "Oslo"), *other, *_call(1, "Oslo"), (1, ChoiceFinished("stop")), *_call(2, "Oslo"),
             (0, ToolCallNote("cut", "a call was cut")), (0, ChoiceFinished("length"))]
    out = list(without_repeats(items))
    assert [(i, e.index) for i, e in out if isinstance(e, ToolCallEnded)] == [(0, 0), (1, 0)]
    notes = [e for _, e in out if isinstance(e, ToolCallNote)]
    assert [n.kind for n in notes] == ["cut", "repeated_call"] and "2 repeats" in notes[1].message
    assert isinstance(out[-1][1], ChoiceFinished)


def test_text_after_the_repeats_lets_them_go_in_order() -> None:
    items = [*_call(0, "Oslo"), *_call(1, "Oslo"), (0, TextDelta("done")), (0, ChoiceFinished("length"))]
    out = list(without_repeats(items))
    assert [type(e).__name__ for _, e in out] == [
        "ToolCallStarted", "ToolCallArgumentsDelta", "ToolCallEnded"] * 2 + ["TextDelta", "ChoiceFinished"]
