"""Parity end to end: the openai, anthropic, ollama and google-genai libraries against gunicorn/gevent toolwire,
the same case on Chat, Responses, Messages, Ollama's /api/chat and (its first two cases) Gemini.

The in-process table (``tests/app/test_parity.py``) covers every decided divergence of Chat and Responses;
here the real clients confirm the ones a user meets first: the same model text gives the same text and
calls on every API, a follow-up with the same calls and results reaches the model as the same
transcript, an image reaches the model as a placeholder (never a 400), and a ``tool_choice`` naming a tool
not offered is the same 400 with the offending ``param``.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import anthropic
import httpx
import ollama
import openai
import pytest
from google import genai
from google.genai import types

from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text
from support.server import ToolwireServer
from support.tools import TIME, WEATHER

pytestmark = pytest.mark.e2e

MODEL = "scripted-model"
#: One model answer: text, a call, text between, a second call (cut into uneven pieces).
ANSWER = ("Let me look both up.\n" + tool_call_text("get_weather", {"city": "Paris"}) + "\nand\n"
          + tool_call_text("get_time", {"tz": "Europe/Paris"}))
ASK = "Weather and time in Paris?"
RESULTS = {"call_w": "18 C, sunny", "call_t": "14:05"}
CALLS = [("call_w", "get_weather", {"city": "Paris"}), ("call_t", "get_time", {"tz": "Europe/Paris"})]


@pytest.fixture
def clients(make_openai_client: Callable[[ToolwireServer], openai.OpenAI],
            make_anthropic_client: Callable[..., anthropic.Anthropic], toolwire_server: ToolwireServer) -> dict[str, Any]:
    return {"openai": make_openai_client(toolwire_server), "messages": make_anthropic_client(toolwire_server),
            "ollama": ollama.Client(host=toolwire_server.url), "root": toolwire_server.url,
            "gemini": genai.Client(api_key="test", http_options=types.HttpOptions(
                base_url=toolwire_server.url, api_version="v1beta", retry_options=types.HttpRetryOptions(attempts=1)))}


def chat_answer(clients: dict[str, Any]) -> tuple[str, list[tuple[str, dict]]]:
    tools = [{"type": "function", "function": {k: v for k, v in t.items() if k != "type"}} for t in (WEATHER, TIME)]
    message = clients["openai"].chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": ASK}], tools=tools).choices[0].message
    return message.content or "", [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls]


def responses_answer(clients: dict[str, Any]) -> tuple[str, list[tuple[str, dict]]]:
    response = clients["openai"].responses.create(model=MODEL, input=ASK, store=False, tools=[WEATHER, TIME])
    calls = [(item.name, json.loads(item.arguments)) for item in response.output if item.type == "function_call"]
    return response.output_text, calls


def messages_answer(clients: dict[str, Any]) -> tuple[str, list[tuple[str, dict]]]:
    tools = [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
             for t in (WEATHER, TIME)]
    with clients["messages"].messages.stream(model=MODEL, max_tokens=512, tools=tools,
                                             messages=[{"role": "user", "content": ASK}]) as stream:
        message = stream.get_final_message()
    text = "".join(b.text for b in message.content if b.type == "text")
    return text, [(b.name, b.input) for b in message.content if b.type == "tool_use"]


def gemini_answer(clients: dict[str, Any]) -> tuple[str, list[tuple[str, dict]]]:
    declarations = [types.FunctionDeclaration(name=t["name"], description=t["description"],
                                              parameters_json_schema=t["parameters"]) for t in (WEATHER, TIME)]
    chunks = list(clients["gemini"].models.generate_content_stream(
        model=MODEL, contents=ASK, config=types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=declarations)],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))))
    parts = [part for chunk in chunks for part in chunk.candidates[0].content.parts or ()]
    return "".join(p.text for p in parts if p.text), [(p.function_call.name, p.function_call.args)
                                                      for p in parts if p.function_call]


def ollama_answer(clients: dict[str, Any]) -> tuple[str, list[tuple[str, dict]]]:
    tools = [{"type": "function", "function": {k: v for k, v in t.items() if k != "type"}} for t in (WEATHER, TIME)]
    parts = list(clients["ollama"].chat(model=MODEL, messages=[{"role": "user", "content": ASK}], tools=tools,
                                        stream=True))
    return ("".join(p.message.content or "" for p in parts),
            [(c.function.name, dict(c.function.arguments)) for p in parts for c in p.message.tool_calls or ()])


def chat_follow_up(clients: dict[str, Any]) -> None:
    calls = [{"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in CALLS]
    clients["openai"].chat.completions.create(model=MODEL, messages=[
        {"role": "user", "content": ASK}, {"role": "assistant", "content": "Let me look both up.", "tool_calls": calls},
        *({"role": "tool", "tool_call_id": i, "content": RESULTS[i]} for i, _, _ in CALLS)])


def responses_follow_up(clients: dict[str, Any]) -> None:
    clients["openai"].responses.create(model=MODEL, store=False, input=[
        {"role": "user", "content": ASK},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look both up."}]},
        *({"type": "function_call", "call_id": i, "name": n, "arguments": json.dumps(a)} for i, n, a in CALLS),
        *({"type": "function_call_output", "call_id": i, "output": RESULTS[i]} for i, _, _ in CALLS)])


def messages_follow_up(clients: dict[str, Any]) -> None:
    clients["messages"].messages.create(model=MODEL, max_tokens=512, messages=[
        {"role": "user", "content": ASK},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me look both up."},
                                          *({"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in CALLS)]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": RESULTS[i]}
                                     for i, _, _ in CALLS]}])


def gemini_follow_up(clients: dict[str, Any]) -> None:
    clients["gemini"].models.generate_content(model=MODEL, contents=[
        types.Content(role="user", parts=[types.Part(text=ASK)]),
        types.Content(role="model", parts=[types.Part(text="Let me look both up."), *(
            types.Part(function_call=types.FunctionCall(id=i, name=n, args=a)) for i, n, a in CALLS)]),
        types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
            id=i, name=n, response={"output": RESULTS[i]})) for i, n, _ in CALLS])])



def ollama_follow_up(clients: dict[str, Any]) -> None:
    """Ollama's API carries the ids as its server does (``tool_calls[].id``, ``tool_call_id``); the ``ollama``
    Python library's types have no such fields, so this one goes as the JSON Ollama's API defines."""
    calls = [{"id": i, "function": {"name": n, "arguments": a}} for i, n, a in CALLS]
    response = httpx.post(clients["root"] + "/api/chat", timeout=10, json={"model": MODEL, "stream": False, "messages": [
        {"role": "user", "content": ASK}, {"role": "assistant", "content": "Let me look both up.", "tool_calls": calls},
        *({"role": "tool", "tool_call_id": i, "tool_name": n, "content": RESULTS[i]} for i, n, _ in CALLS)]})
    assert response.status_code == 200, response.text


def test_the_same_model_text_gives_the_same_text_and_calls_on_every_api(upstream: ScriptedUpstream,
                                                                        clients: dict[str, Any]) -> None:
    answers = []
    for ask in (chat_answer, responses_answer, messages_answer, ollama_answer, gemini_answer):
        upstream.enqueue(Script(text=ANSWER, chunks=["Let me lo", "ok both up.\n<tool", "_call>{\"name\": \"get_w",
                                                     ANSWER[len("Let me look both up.\n<tool_call>{\"name\": \"get_w"):]]))
        answers.append(ask(clients))
    assert all(answer == answers[0] for answer in answers[1:])
    text, calls = answers[0]
    assert text.startswith("Let me look both up.")
    assert calls == [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "Europe/Paris"})]


def test_a_follow_up_reaches_the_model_as_the_same_transcript_on_every_api(upstream: ScriptedUpstream,
                                                                           clients: dict[str, Any]) -> None:
    for follow_up in (chat_follow_up, responses_follow_up, messages_follow_up, ollama_follow_up, gemini_follow_up):
        upstream.enqueue(Script(text="It is 18 C and 14:05 in Paris."))
        follow_up(clients)
    prompts = [exchange.body["messages"] for exchange in upstream.chat_requests]
    assert len(prompts) == 5 and all(prompt == prompts[0] for prompt in prompts[1:])
    assert "Tool result for get_time (call_id call_t):\n14:05" in prompts[0][-1]["content"]


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


def messages_with_image(client: anthropic.Anthropic) -> str:
    message = client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}])
    return message.content[0].text


def chat_forcing(client: openai.OpenAI, name: str) -> Any:
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                          tools=[{"type": "function", "function": {
                                              k: v for k, v in WEATHER.items() if k != "type"}}],
                                          tool_choice={"type": "function", "function": {"name": name}})


def responses_forcing(client: openai.OpenAI, name: str) -> Any:
    return client.responses.create(model=MODEL, input="hi", store=False, tools=[WEATHER],
                                   tool_choice={"type": "function", "name": name})


@pytest.mark.parametrize("ask", [chat_with_image, responses_with_image, messages_with_image],
                         ids=["chat", "responses", "messages"])
def test_an_image_reaches_the_model_as_a_placeholder(upstream: ScriptedUpstream, clients: dict[str, Any],
                                                     ask: Callable[[Any], str]) -> None:
    upstream.enqueue(Script(text="I cannot see images."))
    assert ask(clients["messages" if ask is messages_with_image else "openai"]) == "I cannot see images."
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


def test_a_forced_tool_not_offered_is_the_same_400_on_messages(upstream: ScriptedUpstream,
                                                               clients: dict[str, Any]) -> None:
    tools = [{"name": WEATHER["name"], "input_schema": WEATHER["parameters"]}]
    with pytest.raises(anthropic.BadRequestError) as info:
        clients["messages"].messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}],
                                            tools=tools, tool_choice={"type": "tool", "name": "nope"})
    assert info.value.body == {"type": "error", "error": {
        "type": "invalid_request_error", "param": "tool_choice.name",
        "message": "Invalid value for 'tool_choice.name': 'nope' is not in 'tools'."}}
    assert upstream.exchanges == []
