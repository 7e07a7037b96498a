"""Each model family's format through the service (the Flask app, a played upstream) under many chunkings.

``TOOLWIRE_TOOL_FORMAT`` names the family: the prompt teaches its format and
the family's special tokens never reach the message content.
"""

from __future__ import annotations

import json

import pytest

from harness import chunkings
from test_register_format import _PlayingUpstream

SF = {"city": "SF"}
CASES = {
    "deepseek": ("Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
                 '{"city": "SF"}\n```<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}'
                 "<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "<｜tool▁calls▁begin｜>"),
    "kimi_k2": ("Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                '<|tool_call_argument_begin|>{"city": "SF"}<|tool_call_end|><|tool_call_begin|>functions.get_time:1'
                "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
                "<|tool_calls_section_begin|>"),
    "mistral": ('Checking.[TOOL_CALLS]get_weather[ARGS]{"city": "SF"}[TOOL_CALLS]get_time[ARGS]{}', "[TOOL_CALLS]"),
}


@pytest.mark.parametrize("family", sorted(CASES))
def test_family_through_the_service(family, monkeypatch, tmp_path):
    from app import create_app
    from app.http import extension
    from app.settings import Settings

    text, opener = CASES[family]
    runs = chunkings(text, random_splits=6, two_split_limit=0)
    upstream = _PlayingUpstream([chunks for _, chunks in runs])
    monkeypatch.setattr(extension, "make_upstream", lambda _settings: upstream)
    app = create_app(Settings(tool_format=family, response_store_path=str(tmp_path / "r.sqlite3")))
    client = app.test_client()
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
             for n in ("get_weather", "get_time")]
    for label, _ in runs:
        response = client.post("/v1/chat/completions", json={
            "model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools})
        assert response.status_code == 200, (label, response.get_json())
        choice = response.get_json()["choices"][0]
        calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                 for c in choice["message"]["tool_calls"]]
        assert (choice["message"]["content"], calls, choice["finish_reason"]) == (
            "Checking.", [("get_weather", SF), ("get_time", {})], "tool_calls"), label
    assert opener in upstream.prompts[0]  # the prompt taught the family's format
