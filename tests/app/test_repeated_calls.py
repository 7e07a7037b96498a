"""Calls a model wrote again (``repeated_calls``, issue 38): under ``drop`` (the default) a call equal to an earlier
one of its answer is sent once, the later calls numbered on; under ``keep`` all are sent but a loop of one call the
token limit cut."""

from __future__ import annotations

import dataclasses
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


def _cities(make_app, answer: str, finish: str, **settings) -> tuple[list[str], dict]:
    request = {"model": "m", "messages": [{"role": "user", "content": "Weather?"}], "tools": [WEATHER_TOOL]}
    choice = make_app(Plays(answer, finish), **settings).test_client().post("/v1/chat/completions",
                                                                            json=request).get_json()["choices"][0]
    calls = choice["message"].get("tool_calls") or []
    return [json.loads(c["function"]["arguments"])["city"] for c in calls], choice


@pytest.mark.parametrize("mode", ["drop", "keep"])
def test_a_loop_cut_by_the_token_limit_keeps_the_call_once(make_app, mode) -> None:
    cities, choice = _cities(make_app, f"[{OSLO}, {OSLO}, {OSLO}, {OSLO}, " + OSLO[:30], "length",
                             repeated_calls=mode)
    assert cities == ["Oslo"] and choice["finish_reason"] == "length"
    cities, _ = _cities(make_app, f"[{ROME}, {OSLO}, {OSLO}, {OSLO}, " + OSLO[:30], "length", repeated_calls=mode)
    assert cities == ["Rome", "Oslo"]


@pytest.mark.parametrize("answer, finish, kept, dropped", [
    (f"[{OSLO}, {OSLO}]", "stop", ["Oslo", "Oslo"], ["Oslo"]),
    (f"[{OSLO}, {OSLO}, {ROME}, " + OSLO[:30], "length", ["Oslo", "Oslo", "Rome"], ["Oslo", "Rome"]),
    (f"[{OSLO}, {ROME}, {OSLO}, {ROME}]", "stop", ["Oslo", "Rome", "Oslo", "Rome"], ["Oslo", "Rome"]),
])
def test_identical_calls_the_model_did_not_loop_on(make_app, answer, finish, kept, dropped) -> None:
    assert _cities(make_app, answer, finish, repeated_calls="keep")[0] == kept
    assert _cities(make_app, answer, finish)[0] == dropped  # the default


def test_the_calls_after_a_dropped_one_are_numbered_on() -> None:
    rome = [(0, dataclasses.replace(event, index=2)) for _, event in _call(2, "Rome")]
    out = list(without_repeats([*_call(0, "Oslo"), *_call(1, "Oslo"), *rome, (0, ChoiceFinished("stop"))], "drop"))
    assert [(type(e).__name__, e.index) for _, e in out if not isinstance(e, ChoiceFinished)] == [
        ("ToolCallStarted", 0), ("ToolCallArgumentsDelta", 0), ("ToolCallEnded", 0), ("ToolCallNote", None),
        ("ToolCallStarted", 1), ("ToolCallArgumentsDelta", 1), ("ToolCallEnded", 1)]
    assert out[3][1].kind == "repeated_call"


def test_a_model_may_keep_its_repeats(make_app) -> None:
    settings = {"model_map": {"m": {"model": "m", "repeated_calls": "keep"}}}
    assert _cities(make_app, f"[{OSLO}, {OSLO}]", "stop", **settings)[0] == ["Oslo", "Oslo"]


@pytest.mark.parametrize("reask, sent", [("unstreamed", 3), ("on", 2)])
def test_a_streamed_answer_is_filtered_when_its_calls_are_held(make_app, reask, sent) -> None:
    request = {"model": "m", "messages": [{"role": "user", "content": "Weather?"}], "tools": [WEATHER_TOOL],
               "stream": True}
    text = make_app(Plays(f"[{OSLO}, {OSLO}, {ROME}]", "stop"), reask_calls=reask).test_client().post(
        "/v1/chat/completions", json=request).get_data(as_text=True)
    assert text.count('"name":"get_weather"') == sent, "an unheld streamed call goes out before its repeat"
    assert ('"index":2' in text) == (sent == 3) and '"index":1' in text


def _call(index: int, city: str) -> list[tuple[int, object]]:
    arguments = json.dumps({"city": city})
    return [(0, ToolCallStarted(index, f"c{index}", "get_weather")), (0, ToolCallArgumentsDelta(index, arguments)),
            (0, ToolCallEnded(index, f"c{index}", "get_weather", arguments))]


def test_choices_are_kept_apart_and_the_drop_is_noted() -> None:
    other = [(1, event) for _, event in _call(0, "Oslo")]
    items = [*_call(0, "Oslo"), *other, *_call(1, "Oslo"), (1, ChoiceFinished("stop")), *_call(2, "Oslo"),
             (0, ToolCallNote("cut", "a call was cut")), (0, ChoiceFinished("length"))]
    out = list(without_repeats(items, "keep"))
    assert [(i, e.index) for i, e in out if isinstance(e, ToolCallEnded)] == [(0, 0), (1, 0)]
    notes = [e for _, e in out if isinstance(e, ToolCallNote)]
    assert [n.kind for n in notes] == ["cut", "repeated_call"] and "2 repeats" in notes[1].message
    assert isinstance(out[-1][1], ChoiceFinished)


def test_text_after_the_repeats_lets_them_go_in_order() -> None:
    items = [*_call(0, "Oslo"), *_call(1, "Oslo"), (0, TextDelta("done")), (0, ChoiceFinished("length"))]
    out = list(without_repeats(items, "keep"))
    assert [type(e).__name__ for _, e in out] == [
        "ToolCallStarted", "ToolCallArgumentsDelta", "ToolCallEnded"] * 2 + ["TextDelta", "ChoiceFinished"]
