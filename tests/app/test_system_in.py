"""``system_in``: the system text (tool block, client system messages) in the first user turn for chat templates
that drop system messages or have no system role (issue 31).

llama-cpp-python's ``gemma`` chat format drops every system message, so a Gemma 3 model served by it never saw
a tool (``/work/shared/docs/real-model.md`` section 1); Gemma 3's own template writes the system text at the
start of the first user turn, which ``first_user`` does on toolwire's side, whatever the server's template.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from app.pipeline.prompt import TOOL_BLOCK_TITLE, build_upstream_messages
from app.profile import model_profile
from app.settings import Settings
from statemachine import ParserConfig, ToolSpec, get_format

WEATHER = ToolSpec("get_weather", "Current weather for a city.",
                   {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
CONFIG = ParserConfig.for_tools([WEATHER])
GEMMA = get_format("gemma")
TRANSCRIPT = [{"role": "system", "content": "Answer briefly."},
              {"role": "user", "content": "What's the weather in Rome?"},
              {"role": "assistant", "content": "It is 18 °C and clear in Rome."},
              {"role": "user", "content": "And in Paris?"}]


def test_first_user_opens_the_first_user_turn_with_the_system_text() -> None:
    default = build_upstream_messages(TRANSCRIPT, CONFIG, GEMMA)
    moved = build_upstream_messages(TRANSCRIPT, CONFIG, GEMMA, system_in="first_user")
    assert [m["role"] for m in default] == ["system", "user", "assistant", "user"]
    assert [m["role"] for m in moved] == ["user", "assistant", "user"]
    system = default[0]["content"]
    assert system.startswith(TOOL_BLOCK_TITLE) and system.endswith("Answer briefly.")
    # what Gemma 3's template makes of the default: the system text, a blank line, the first user turn
    assert moved[0]["content"] == f"{system}\n\n{TRANSCRIPT[1]['content']}"
    assert moved[1:] == default[2:]


@pytest.mark.parametrize("messages, roles", [
    ([{"role": "system", "content": "Be brief."}], ["user"]),
    ([{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Hi"}], ["assistant", "user"]),
    ([{"role": "user", "content": ""}], ["user"]),
])
def test_the_system_text_finds_a_user_turn_or_becomes_one(messages: list[dict[str, Any]], roles: list[str]) -> None:
    moved = build_upstream_messages(messages, CONFIG, GEMMA, system_in="first_user")
    assert [m["role"] for m in moved] == roles
    carrier = next(m for m in moved if m["role"] == "user")
    assert carrier["content"].startswith(TOOL_BLOCK_TITLE) and not carrier["content"].endswith("\n")


@pytest.mark.parametrize("model_map, model, expected", [
    ({"g": {"tool_format": "gemma"}}, "g", "first_user"),  # Gemma 3's family has no system role
    ({"g": {"model": "gemma3:270m", "tool_format": "auto"}}, "g", "first_user"),
    ({"g": {"tool_format": "gemma", "system_in": "system"}}, "g", "system"),
    ({"q": {"tool_format": "tool_call", "system_in": "first_user"}}, "q", "first_user"),
    ({}, "qwen3", "system"),  # the default is unchanged for every other model
    ({"g": {"model": "gemma-4-e4b", "tool_format": "auto"}}, "g", "system"),  # Gemma 4 has a system role
])
def test_system_in_for_a_model(model_map: dict[str, Any], model: str, expected: str) -> None:
    assert model_profile(Settings(model_map=model_map), model).system_in == expected


def test_the_back_end_of_a_gemma_model_gets_no_system_message(make_app: Callable[..., Any]) -> None:
    from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks

    upstream = FakeUpstream(text_chunks('```tool_code\nget_weather(city="Paris")\n```'))
    app = make_app(upstream, model_map={"gemma3": {"tool_format": "gemma"}})
    body = {"model": "gemma3", "messages": TRANSCRIPT, "tools": [WEATHER_TOOL]}
    answer = app.test_client().post("/v1/chat/completions", json=body).get_json()
    assert answer["choices"][0]["finish_reason"] == "tool_calls"
    sent = upstream.bodies[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"].startswith(TOOL_BLOCK_TITLE) and sent[0]["content"].endswith(
        "Answer briefly.\n\nWhat's the weather in Rome?")
    app.test_client().post("/v1/chat/completions", json={**body, "model": "other"})
    assert upstream.bodies[-1]["messages"][0]["role"] == "system"
