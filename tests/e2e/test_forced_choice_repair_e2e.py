"""A forced tool_choice answered with a JSON call instead of a call block (issue 31), end to end: openai SDK →
gunicorn/gevent toolwire in prompt mode → a scripted upstream writing the small model's text (fault injection:
the live models in test_real_model_e2e.py do not write it on demand).

SmolLM2-135M under a named ``tool_choice`` wrote a sentence and then the call in a ``json`` fence
(``/work/shared/docs/real-model.md`` section 4; the sentence is ours); under ``required`` small models write the
tool's arguments alone. The client gets the call with ``finish_reason: "tool_calls"`` (a Responses
``function_call`` item), streamed or not; a text answer stays text.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from support.scripted_upstream import Script, ScriptedUpstream

pytestmark = pytest.mark.e2e

MODEL = "scripted-model"
TIME = {"name": "get_time", "description": "Current time in a time zone.",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}
WEATHER = {"name": "get_weather", "description": "Current weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
QUESTION = "What time is it?"
FENCED_AFTER_PROSE = 'I will ask the clock.\n```json\n{"name": "get_time", "arguments": {"tz": "Europe/Oslo"}}\n```'
ARGUMENTS_ALONE = '```json\n{"tz": "Europe/Oslo"}\n```'
OSLO = [("get_time", {"tz": "Europe/Oslo"})]


def chat(client: openai.OpenAI, stream: bool, choice: Any) -> tuple[str, str, list[tuple[str, Any]]]:
    """The Chat answer's content, finish reason and calls, from ``create`` or from the SDK's stream helper."""
    request: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": QUESTION}],
                               "tools": [{"type": "function", "function": tool} for tool in (WEATHER, TIME)],
                               "tool_choice": choice}
    if stream:
        with client.chat.completions.stream(**request) as events:
            for _ in events:
                pass
            completion = events.get_final_completion()
    else:
        completion = client.chat.completions.create(**request)
    choice_ = completion.choices[0]
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in choice_.message.tool_calls or []]
    return choice_.message.content or "", choice_.finish_reason, calls


def responses(client: openai.OpenAI, stream: bool, choice: Any) -> tuple[str, str, list[tuple[str, Any]]]:
    """The Response's text, status and function calls, from ``create`` or from the SDK's stream helper."""
    request: dict[str, Any] = {"model": MODEL, "input": QUESTION, "tool_choice": choice,
                               "tools": [{"type": "function", **tool} for tool in (WEATHER, TIME)]}
    if stream:
        with client.responses.stream(**request) as events:
            for _ in events:
                pass
            response = events.get_final_response()
    else:
        response = client.responses.create(**request)
    calls = [(item.name, json.loads(item.arguments)) for item in response.output if item.type == "function_call"]
    return response.output_text, response.status, calls


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("text, choice, before", [
    (FENCED_AFTER_PROSE, {"type": "function", "function": {"name": "get_time"}}, "I will ask the clock."),
    (ARGUMENTS_ALONE, "required", ""),
], ids=["named-fenced-after-prose", "required-arguments-alone"])
def test_chat_gets_the_forced_call(upstream: ScriptedUpstream, openai_client: openai.OpenAI, text: str,
                                   choice: Any, before: str, stream: bool) -> None:
    upstream.enqueue(Script(text=text, chunks=3))
    content, finish, calls = chat(openai_client, stream, choice)
    assert (content.strip(), finish, calls) == (before, "tool_calls", OSLO)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_responses_gets_the_forced_call(upstream: ScriptedUpstream, openai_client: openai.OpenAI,
                                        stream: bool) -> None:
    upstream.enqueue(Script(text=FENCED_AFTER_PROSE, chunks=3))
    text, status, calls = responses(openai_client, stream, {"type": "function", "name": "get_time"})
    assert (status, calls) == ("completed", OSLO)
    assert text.strip() == "I will ask the clock."


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_text_answer_to_a_forced_choice_stays_text(upstream: ScriptedUpstream, openai_client: openai.OpenAI,
                                                     stream: bool) -> None:
    text = "The time is 18:02.\n```json\n{\"hour\": 18}\n```"  # SmolLM2's answer, and JSON that fits no tool
    upstream.enqueue(Script(text=text, chunks=3), Script(text=text, chunks=3))
    content, finish, calls = chat(openai_client, stream, "required")
    assert (content, finish, calls) == (text, "stop", [])
    # asked once more when the answer goes whole (reask_calls=unstreamed), and the second answer stands
    assert len(upstream.chat_requests) == (1 if stream else 2)
