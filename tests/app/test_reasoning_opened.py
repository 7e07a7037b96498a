"""``reasoning_opened_models``: a model whose chat template opens ``<think>`` starts inside reasoning."""

from __future__ import annotations

import pytest

from conftest import WEATHER_TOOL, FakeUpstream, text_chunks

DRAFT = ('I could call <tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call> '
         "but I know it.</think>It is sunny.")


def message(make_app, text: str, model: str, **settings) -> tuple[dict, str]:
    client = make_app(FakeUpstream(text_chunks(text, size=7)), **settings).test_client()
    response = client.post("/v1/chat/completions", json={
        "model": model, "messages": [{"role": "user", "content": "weather?"}], "tools": [WEATHER_TOOL]})
    assert response.status_code == 200, response.get_json()
    choice = response.get_json()["choices"][0]
    return choice["message"], choice["finish_reason"]


@pytest.mark.parametrize("model,settings", [
    ("qwen3", {"reasoning_opened_models": ["qwen3"]}),
    ("fast", {"reasoning_opened_models": ["Qwen/Qwen3-8B"], "model_map": {"fast": "Qwen/Qwen3-8B"}}),
])
def test_a_draft_in_template_opened_reasoning_is_no_call(make_app, model, settings):
    msg, finish = message(make_app, DRAFT, model, **settings)
    assert (msg["content"], msg.get("tool_calls"), finish) == ("It is sunny.", None, "stop")


def test_other_models_read_the_same_text_as_a_call(make_app):
    msg, finish = message(make_app, DRAFT, "llama", reasoning_opened_models=["qwen3"])
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["get_weather"] and finish == "tool_calls"
