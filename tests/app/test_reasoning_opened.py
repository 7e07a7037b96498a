"""``model_map`` ``opens_reasoning``: a model whose chat template opens ``<think>`` starts inside reasoning."""

from __future__ import annotations

from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks

DRAFT = ('I could call <tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call> '
         "but I know it.</think>It is sunny.")
MODEL_MAP = {"thinker": {"model": "Qwen/Qwen3-8B", "opens_reasoning": True}, "plain": "Qwen/Qwen3-8B"}


def message(make_app, model: str) -> tuple[dict, str]:
    client = make_app(FakeUpstream(text_chunks(DRAFT, size=7)), model_map=MODEL_MAP).test_client()
    response = client.post("/v1/chat/completions", json={
        "model": model, "messages": [{"role": "user", "content": "weather?"}], "tools": [WEATHER_TOOL]})
    assert response.status_code == 200, response.get_json()
    choice = response.get_json()["choices"][0]
    return choice["message"], choice["finish_reason"]


def test_a_draft_in_template_opened_reasoning_is_no_call(make_app):
    msg, finish = message(make_app, "thinker")
    assert (msg["content"], msg.get("tool_calls"), finish) == ("It is sunny.", None, "stop")


def test_other_models_read_the_same_text_as_a_call(make_app):
    msg, finish = message(make_app, "plain")
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["get_weather"] and finish == "tool_calls"
