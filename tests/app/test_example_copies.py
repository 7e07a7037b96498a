"""A call that copies the tool block's worked example is not a call (issue 38).

A small model asked something none of the tools can do answers with the worked example's own placeholder values
(``calculate_tip(bill_total=1.5, tip_percentage=1.5)`` to find a restaurant); a held call with them goes out as the
text it was. A call whose values the conversation gave, even the example's, is the user's and goes out.
"""

from __future__ import annotations

import json

import pytest

from app.pipeline.plan import prompt_format
from app.pipeline.prompt import example_arguments
from statemachine import ParserConfig, ToolChoice, ToolSpec, get_format
from support.fakes import FakeStream, FakeUpstream, text_chunks

TIP = {"type": "function", "function": {
    "name": "calculate_tip", "description": "The tip for a bill.",
    "parameters": {"type": "object", "required": ["bill_total", "tip_percentage"],
                   "properties": {"bill_total": {"type": "number"}, "tip_percentage": {"type": "number"},
                                  "split": {"type": "integer", "description": "Default is 1."}}}}}
COPY = '[{"name": "calculate_tip", "arguments": {"bill_total": 1.5, "tip_percentage": 1.5}}]'


class Plays(FakeUpstream):
    """A back end that answers every request with one text."""

    def __init__(self, answer: str):
        super().__init__()
        self.answer = answer

    def open(self, body: dict, *, request_id: str | None = None) -> FakeStream:
        self.script = text_chunks(self.answer, size=6)
        return super().open(body, request_id=request_id)


def _ask(make_app, question: str, answer: str = COPY, **body):
    upstream = Plays(answer)
    request = {"model": "m", "messages": [{"role": "user", "content": question}], "tools": [TIP], **body}
    response = make_app(upstream).test_client().post("/v1/chat/completions", json=request)
    assert response.status_code == 200
    return upstream, response


def test_the_copied_example_is_text_not_a_call(make_app) -> None:
    upstream, response = _ask(make_app, "Find the best sushi restaurant in Los Angeles.")
    prompt = upstream.bodies[0]["messages"][0]["content"]
    assert '"bill_total": 1.5, "tip_percentage": 1.5' in prompt, "the example the model copied is the taught one"
    choice = response.get_json()["choices"][0]
    assert not choice["message"].get("tool_calls") and choice["finish_reason"] == "stop"
    assert choice["message"]["content"] == COPY, "nothing is lost: the model's text is the answer"
    assert len(upstream.bodies) == 1, "asking again does not help: the model writes the example again (measured)"


def test_the_same_values_the_user_gave_are_a_call(make_app) -> None:
    _, response = _ask(make_app, "My bill was 1.5 dollars; what is a 1.5 percent tip?")
    calls = response.get_json()["choices"][0]["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"bill_total": 1.5, "tip_percentage": 1.5}]


def test_a_streamed_call_is_not_held_for_it_unless_reask_is_on(make_app) -> None:
    """A streamed call's arguments go out as they come (``reask_calls: unstreamed``): nothing holds them to check."""
    _, response = _ask(make_app, "Find sushi.", stream=True)
    assert '"name":"calculate_tip"' in response.get_data(as_text=True)
    upstream = Plays(COPY)
    request = {"model": "m", "messages": [{"role": "user", "content": "Find sushi."}], "tools": [TIP], "stream": True}
    text = make_app(upstream, reask_calls="on").test_client().post("/v1/chat/completions",
                                                                  json=request).get_data(as_text=True)
    assert "tool_calls" not in text and '"finish_reason":"stop"' in text


@pytest.mark.parametrize("path, body", [
    ("/v1/responses", {"input": "Find sushi.", "store": False,
                       "tools": [{"type": "function", **TIP["function"]}]}),
    ("/v1/messages", {"max_tokens": 64, "messages": [{"role": "user", "content": "Find sushi."}],
                      "tools": [{"name": "calculate_tip", "input_schema": TIP["function"]["parameters"]}]}),
])
def test_every_api_reads_it_as_text(make_app, path: str, body: dict) -> None:
    data = make_app(Plays(COPY)).test_client().post(path, json={"model": "m", **body}).get_json()
    kinds = [item["type"] for item in data.get("output") or data.get("content")]
    assert "function_call" not in kinds and "tool_use" not in kinds and COPY in json.dumps(data).replace("\\", "")


def _config(*tools: ToolSpec, **kwargs) -> ParserConfig:
    return ParserConfig.for_tools(list(tools), **kwargs)


TIP_SPEC = ToolSpec("calculate_tip", parameters=TIP["function"]["parameters"])
WEATHER = ToolSpec("get_weather", parameters={"type": "object", "required": ["city"],
                                              "properties": {"city": {"type": "string"}}})
MODE = ToolSpec("set_mode", parameters={"type": "object", "required": ["mode"],
                                        "properties": {"mode": {"enum": ["on", "off"]}}})


def test_the_examples_listed_are_those_with_made_up_values_the_conversation_does_not_give() -> None:
    config = _config(TIP_SPEC, WEATHER, MODE)
    fmt = prompt_format(config)
    user = [{"role": "user", "content": "Find sushi."}]
    assert example_arguments(config, fmt, user) == {"calculate_tip": ({"bill_total": 1.5, "tip_percentage": 1.5},),
                                                    "get_weather": ({"city": "<city>"},)}
    said = [{"role": "user", "content": [{"type": "text", "text": "A bill of 1.5, please."}]}]
    assert example_arguments(config, fmt, said) == {"get_weather": ({"city": "<city>"},)}
    assert example_arguments(_config(TIP_SPEC), fmt, user) == {"calculate_tip": (
        {"bill_total": 1.5, "tip_percentage": 1.5}, {"bill_total": 2.5, "tip_percentage": 2.5})}, \
        "one tool: its second call shows other values"
    assert example_arguments(_config(MODE), fmt, user) == {}, "an enum's value is the schema's, not made up"
    forced = _config(TIP_SPEC, WEATHER, MODE, tool_choice=ToolChoice("required", frozenset({"set_mode"})))
    assert example_arguments(forced, fmt, user) == {}, "the example shows the forced tool only"
    assert example_arguments(_config(TIP_SPEC, marker="m1"), fmt, user) == {
        "calculate_tip": ({"bill_total": 1.5, "tip_percentage": 1.5},)}, "a marked prompt shows one call"
    assert example_arguments(config, get_format("pythonic"), user) == {}, "BFCL's abstract shape shows no values"


def test_an_earlier_call_s_values_are_the_conversation_s() -> None:
    """The same call again, after the model made it once with the example's values, is not a copy of the example."""
    config = _config(TIP_SPEC)
    earlier = [{"role": "user", "content": "Tip?"},
               {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                   "name": "calculate_tip", "arguments": '{"bill_total": 1.5, "tip_percentage": 1.5}'}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "ok"}, {"role": "user", "content": "Again."}]
    assert example_arguments(config, prompt_format(config), earlier) == {
        "calculate_tip": ({"bill_total": 2.5, "tip_percentage": 2.5},)}, "only the second example call is listed"
