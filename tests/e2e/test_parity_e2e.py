"""Parity end to end: the openai SDK against gunicorn/gevent toolwire, the same case on Chat and Responses.

The in-process table (``tests/app/test_parity.py``) covers every decided divergence; here the real
client confirms the ones a user meets first: an image reaches the model as a placeholder (never a 400),
and a ``tool_choice`` naming a tool not offered is the same 400 with the offending ``param``.
"""

from __future__ import annotations

from typing import Any, Callable

import openai
import pytest

from support.scripted_upstream import Script, ScriptedUpstream
from support.tools import WEATHER

pytestmark = pytest.mark.e2e

MODEL = "scripted-model"


def chat_with_image(client: openai.OpenAI) -> str:
    completion = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}])
    return completion.choices[0].message.content or ""


def responses_with_image(client: openai.OpenAI) -> str:
    response = client.responses.create(model=MODEL, store=False, input=[{"role": "user", "content": [
        {"type": "input_text", "text": "What is in this picture?"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}]}])
    return response.output_text


def chat_forcing(client: openai.OpenAI, name: str) -> Any:
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                          tools=[{"type": "function", "function": {
                                              k: v for k, v in WEATHER.items() if k != "type"}}],
                                          tool_choice={"type": "function", "function": {"name": name}})


def responses_forcing(client: openai.OpenAI, name: str) -> Any:
    return client.responses.create(model=MODEL, input="hi", store=False, tools=[WEATHER],
                                   tool_choice={"type": "function", "name": name})


@pytest.mark.parametrize("ask", [chat_with_image, responses_with_image], ids=["chat", "responses"])
def test_an_image_reaches_the_model_as_a_placeholder(upstream: ScriptedUpstream, openai_client: openai.OpenAI,
                                                     ask: Callable[[openai.OpenAI], str]) -> None:
    upstream.enqueue(Script(text="I cannot see images."))
    assert ask(openai_client) == "I cannot see images."
    [exchange] = upstream.chat_requests
    prompt = "\n".join(m["content"] for m in exchange.body["messages"])
    assert "What is in this picture?\n[image]" in prompt
    assert "base64" not in prompt


@pytest.mark.parametrize(("ask", "param"), [(chat_forcing, "tool_choice.function.name"),
                                            (responses_forcing, "tool_choice.name")], ids=["chat", "responses"])
def test_a_forced_tool_not_offered_is_the_same_400(upstream: ScriptedUpstream, openai_client: openai.OpenAI,
                                                   ask: Callable[[openai.OpenAI, str], Any], param: str) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        ask(openai_client, "nope")
    error = info.value.body
    assert error == {"message": f"Invalid value for '{param}': 'nope' is not in 'tools'.",
                     "type": "invalid_request_error", "param": param, "code": "invalid_value"}
    assert upstream.exchanges == []
