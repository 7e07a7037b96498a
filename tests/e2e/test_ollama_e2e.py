"""Ollama's API end to end: Ollama's own Python library (``ollama``, pinned in the dev extra) and JavaScript library
(npm ``ollama``, pinned in ``support.agents``) against gunicorn/gevent toolwire at its root, in front of the
scripted text model; and Home Assistant's Ollama conversation agent's exact requests, replayed with the library
it uses.

Each case runs against a back end without tools (prompt mode: the model writes its calls as text) and one with
them (native mode: the back end sends ``tool_calls``), except where only one mode means anything.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any, Callable

import httpx
import ollama
import pytest

from support.agents import OLLAMA_JS, npm_library
from support.native_upstream import native_frames
from support.scripted_upstream import MODEL_ID, Script, ScriptedUpstream, tool_call_text
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

MODEL = "qwen3:8b"
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
MODES = ["prompt", "native"]


def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city's name
    """
    return f"18 C and sunny in {city}"


def call_script(mode: str, name: str, arguments: dict[str, Any], *, text: str = "") -> Script:
    """The model's answer calling ``name``: as text (prompt mode) or as the back end's ``tool_calls``."""
    if mode == "prompt":
        return Script(text=text + tool_call_text(name, arguments), chunks=4)
    return Script(text=text, tool_calls=native_frames([(name, arguments)], chunk=3), finish_reason="tool_calls")


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def server(mode: str, toolwire_factory: Callable[..., ToolwireServer]) -> ToolwireServer:
    return toolwire_factory(TOOLWIRE_TOOL_MODE=mode)


@pytest.fixture
def client(server: ToolwireServer) -> ollama.Client:
    return ollama.Client(host=server.url)  # what OLLAMA_HOST=http://toolwire:PORT gives


def sent_messages(upstream: ScriptedUpstream, n: int = 0) -> list[dict[str, Any]]:
    return upstream.chat_requests[n].body["messages"]


# --- the Python library ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["chat", "stream"])
def test_chat_text(client: ollama.Client, upstream: ScriptedUpstream, stream: bool) -> None:
    upstream.enqueue(Script(text="It is sunny.", chunks=3, usage={"prompt_tokens": 12, "completion_tokens": 4,
                                                                  "total_tokens": 16}))
    if stream:
        parts = list(client.chat(model=MODEL, messages=ASK, stream=True))
        text, last = "".join(p.message.content or "" for p in parts), parts[-1]
        assert all(not p.done for p in parts[:-1])
    else:
        last = client.chat(model=MODEL, messages=ASK)
        text = last.message.content
    assert text == "It is sunny." and last.done and last.done_reason == "stop"
    assert (last.prompt_eval_count, last.eval_count) == (12, 4) and last.model == MODEL


@pytest.mark.parametrize("stream", [False, True], ids=["chat", "stream"])
def test_chat_with_tools_gives_a_call_with_object_arguments(client: ollama.Client, upstream: ScriptedUpstream,
                                                            mode: str, stream: bool) -> None:
    upstream.enqueue(call_script(mode, "get_weather", {"city": "Paris"}))
    if stream:
        parts = list(client.chat(model=MODEL, messages=ASK, tools=[get_weather], stream=True))
        calls = [c for p in parts for c in p.message.tool_calls or ()]
    else:
        calls = client.chat(model=MODEL, messages=ASK, tools=[get_weather]).message.tool_calls or []
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [("get_weather", {"city": "Paris"})]
    sent = upstream.chat_requests[0].body
    if mode == "native":
        assert sent["tools"][0]["function"]["name"] == "get_weather"
    else:
        assert "tools" not in sent and "get_weather" in sent["messages"][0]["content"]


def test_a_tool_loop_reaches_a_final_answer(client: ollama.Client, upstream: ScriptedUpstream, mode: str) -> None:
    upstream.enqueue(call_script(mode, "get_weather", {"city": "Paris"}, text="Checking."),
                     Script(text="It is 18 C and sunny in Paris.", chunks=5))
    messages: list[Any] = list(ASK)
    tools = {"get_weather": get_weather}
    for _ in range(3):
        response = client.chat(model=MODEL, messages=messages, tools=list(tools.values()))
        messages.append(response.message)
        if not response.message.tool_calls:
            break
        for call in response.message.tool_calls:
            result = tools[call.function.name](**call.function.arguments)
            messages.append({"role": "tool", "content": result, "tool_name": call.function.name})
    assert response.message.content == "It is 18 C and sunny in Paris."
    second = sent_messages(upstream, 1)
    if mode == "native":
        assert second[-1]["role"] == "tool" and second[-1]["content"] == "18 C and sunny in Paris"
        assert second[-1]["tool_call_id"] == second[-2]["tool_calls"][0]["id"]
    else:
        assert "Tool result for get_weather" in second[-1]["content"] and "18 C and sunny" in second[-1]["content"]


@pytest.mark.parametrize("mode", ["prompt"], indirect=True)
def test_heartbeats_while_the_model_is_silent_do_not_break_the_librarys_reading(
        client: ollama.Client, server: ToolwireServer, upstream: ScriptedUpstream, mode: str) -> None:
    slow = Script(text="Slow but sure.", chunks=4, delay_after_headers=0.7, delay_between_chunks=0.3)
    upstream.enqueue(slow, slow)
    raw = httpx.post(server.url + "/api/chat", json={"model": MODEL, "messages": ASK}, timeout=10).text
    assert raw.startswith(" ") and " {" in raw  # heartbeats went out (0.2 s) before and between the lines
    parts = list(client.chat(model=MODEL, messages=ASK, stream=True))
    assert "".join(p.message.content or "" for p in parts) == "Slow but sure." and parts[-1].done


def test_thinking_comes_as_message_thinking(client: ollama.Client, upstream: ScriptedUpstream, mode: str) -> None:
    upstream.enqueue(Script(text="<think>The user wants weather.</think>Sunny.", chunks=4))
    parts = list(client.chat(model=MODEL, messages=ASK, think=True, stream=True))
    assert "".join(p.message.thinking or "" for p in parts) == "The user wants weather."
    assert "".join(p.message.content or "" for p in parts) == "Sunny."


def test_generate_with_system_and_format(client: ollama.Client, upstream: ScriptedUpstream, mode: str) -> None:
    upstream.enqueue(Script(text='{"age": 22}', chunks=2))
    answer = client.generate(model=MODEL, prompt="How old?", system="Answer in JSON.", format="json")
    assert answer.response == '{"age": 22}' and answer.done
    sent = upstream.chat_requests[0].body
    assert sent["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]


@pytest.mark.parametrize("mode", ["prompt"], indirect=True)
def test_embed_asks_the_back_ends_embeddings(client: ollama.Client, upstream: ScriptedUpstream, mode: str) -> None:
    upstream.embeddings = True
    answer = client.embed(model=MODEL, input=["hello", "hi"])
    assert answer.embeddings == [[5.0, 0.0], [2.0, 1.0]] and answer.model == MODEL
    [asked] = [e for e in upstream.exchanges if e.path.endswith("/embeddings")]
    assert asked.body == {"model": MODEL, "input": ["hello", "hi"]}
    assert client.embeddings(model=MODEL, prompt="hello").embedding == [5.0, 0.0]


def test_show_list_and_ps(client: ollama.Client, mode: str) -> None:
    shown = client.show(MODEL)
    assert {"completion", "tools"} <= set(shown.capabilities or ())
    names = [m.model for m in client.list().models]
    assert names and all(isinstance(name, str) for name in names)
    assert [m.model for m in client.ps().models] == names


@pytest.mark.parametrize("mode", ["prompt"], indirect=True)
def test_errors_raise_the_librarys_response_error(client: ollama.Client, upstream: ScriptedUpstream,
                                                  mode: str) -> None:
    with pytest.raises(ollama.ResponseError) as refused:
        client.chat(model=MODEL, messages=[{"role": "user", "content": "see", "images": [b"\x89PNG"]}])
    assert refused.value.status_code == 400 and "messages[0].images" in refused.value.error
    with pytest.raises(ollama.ResponseError) as no_embeddings:
        client.embed(model=MODEL, input="hi")
    assert no_embeddings.value.status_code == 501  # the scripted back end has no /v1/embeddings
    upstream.enqueue(Script(text="Partial answer that breaks", chunks=4, close_after_chunks=2))
    with pytest.raises(ollama.ResponseError) as broken:
        list(client.chat(model=MODEL, messages=ASK, stream=True))
    assert broken.value.error


@pytest.mark.parametrize("mode", ["prompt"], indirect=True)
def test_loading_and_unloading_a_model_answer_as_ollama_does(client: ollama.Client, upstream: ScriptedUpstream,
                                                            mode: str) -> None:
    """What the library's users write to load a model and to unload it (an empty request; ``keep_alive=0``):
    done, with Ollama's ``done_reason``, and nothing asked of the back end."""
    for stream in (False, True):
        loaded = client.chat(model=MODEL, stream=stream)
        unloaded = client.generate(model=MODEL, keep_alive=0, stream=stream)
        if stream:
            [loaded], [unloaded] = list(loaded), list(unloaded)
        assert (loaded.done, loaded.done_reason, loaded.message.role) == (True, "load", "assistant")
        assert (unloaded.done, unloaded.done_reason, unloaded.response) == (True, "unload", "")
    assert client.chat(model=MODEL, messages=[], keep_alive="0s").done_reason == "unload"
    assert client.generate(model=MODEL, keep_alive="5m").done_reason == "load"
    assert upstream.chat_requests == []


@pytest.mark.parametrize("mode", ["prompt"], indirect=True)
def test_managing_models_raises_a_501_saying_toolwire_manages_none(client: ollama.Client, mode: str) -> None:
    """pull, push, create, copy and delete were a 404 naming the routes served (as for a path Ollama lacks)."""
    for manage in (lambda: client.pull(MODEL), lambda: client.push(MODEL), lambda: client.delete(MODEL),
                   lambda: client.copy(MODEL, "mine"), lambda: client.create("mine", from_=MODEL),
                   lambda: list(client.pull(MODEL, stream=True))):
        with pytest.raises(ollama.ResponseError) as refused:
            manage()
        assert refused.value.status_code == 501 and "toolwire does not manage models" in refused.value.error


# --- the JavaScript library -----------------------------------------------------------------------------------

JS_SCRIPT = r"""
import { Ollama } from 'ollama';
const ollama = new Ollama({ host: process.argv[2] });
const tools = [JSON.parse(process.argv[3])];
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
const calls = [];
for await (const part of await ollama.chat({ model: 'qwen3:8b', messages, tools, stream: true }))
  for (const call of part.message.tool_calls ?? []) calls.push(call);
const body = await ollama.chat({ model: 'qwen3:8b', messages, tools });
messages.push(body.message);
for (const call of body.message.tool_calls ?? [])
  messages.push({ role: 'tool', tool_name: call.function.name, content: '18 C and sunny in ' + call.function.arguments.city });
const final = await ollama.chat({ model: 'qwen3:8b', messages, tools });
const shown = await ollama.show({ model: 'qwen3:8b' });
const listed = await ollama.list();
console.log(JSON.stringify({ streamed: calls.map(c => [c.function.name, c.function.arguments]),
  body: (body.message.tool_calls ?? []).map(c => [c.function.name, c.function.arguments]),
  final: final.message.content, capabilities: shown.capabilities, models: listed.models.map(m => m.model) }));
"""


@pytest.mark.time_limit(120)
def test_the_javascript_library_streams_calls_loops_and_lists(tmp_path, server: ToolwireServer,
                                                              upstream: ScriptedUpstream, mode: str) -> None:
    library = npm_library(*OLLAMA_JS)
    script = library / "ollama_probe.mjs"
    script.write_text(JS_SCRIPT)
    upstream.enqueue(call_script(mode, "get_weather", {"city": "Paris"}),
                     call_script(mode, "get_weather", {"city": "Paris"}),
                     Script(text="It is 18 C and sunny in Paris.", chunks=5))
    result = subprocess.run(["node", str(script), server.url, json.dumps(WEATHER)], capture_output=True, text=True,
                            timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout)
    assert answer["streamed"] == answer["body"] == [["get_weather", {"city": "Paris"}]]
    assert answer["final"] == "It is 18 C and sunny in Paris."
    assert {"completion", "tools"} <= set(answer["capabilities"]) and answer["models"]
    assert "18 C and sunny in Paris" in json.dumps(sent_messages(upstream, 2)[-1])


# --- Home Assistant's Ollama conversation agent ---------------------------------------------------------------

#: The tools Home Assistant's Assist API builds from exposed entities (homeassistant/helpers/llm.py, its intents'
#: voluptuous schemas as OpenAPI via _format_tool in homeassistant/components/ollama/entity.py).
HA_TOOLS = [
    {"type": "function", "function": {
        "name": "HassTurnOn", "description": "Turns on/opens/presses a device or entity. For locks, this performs "
                                             "a 'lock' action. Use for requests like 'turn on', 'activate'.",
        "parameters": {"type": "object", "properties": {
            "name": {"type": "string"}, "area": {"type": "string"}, "floor": {"type": "string"},
            "domain": {"type": "array", "items": {"type": "string", "enum": ["light", "switch", "fan"]}},
            "device_class": {"type": "array", "items": {"type": "string", "enum": ["outlet", "switch"]}}},
            "required": []}}},
    {"type": "function", "function": {
        "name": "HassTurnOff", "description": "Turns off/closes a device or entity.",
        "parameters": {"type": "object", "properties": {
            "name": {"type": "string"}, "area": {"type": "string"},
            "domain": {"type": "array", "items": {"type": "string", "enum": ["light", "switch", "fan"]}}},
            "required": []}}},
    {"type": "function", "function": {
        "name": "GetLiveContext", "description": "Provides real-time information about the CURRENT state, value, "
                                                 "or mode of devices, sensors, entities, or areas.",
        "parameters": {"type": "object", "properties": {}, "required": []}}},
]
HA_SYSTEM = ("You are a voice assistant for Home Assistant.\nAnswer questions about the world truthfully.\n"
             "Answer in plain text. Keep it simple and to the point.\nCurrent time is 20:15:00. Today's date is "
             "2026-11-29.\nStatic Context: An overview of the areas and the devices in this smart home:\n"
             "- names: Kitchen Light\n  domain: light\n  areas: Kitchen\n")


async def home_assistant_turn(host: str, messages: list[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    """One round of Home Assistant's chat loop (OllamaBaseLLMEntity._async_handle_chat_log): the streamed chat
    with its exact arguments, each chunk read as _transform_stream reads it; the message it appends and the
    tool calls it runs."""
    client = ollama.AsyncClient(host=host)
    stream = await client.chat(model=MODEL, messages=list(messages), tools=HA_TOOLS, stream=True, keep_alive=-1,
                               options={"num_ctx": 8192}, think=None, format=None)
    content, calls = "", []
    async for response in stream:
        message = response["message"]
        if (tool_calls := message.get("tool_calls")) is not None:
            calls += [{"tool_name": c["function"]["name"], "tool_args": dict(c["function"]["arguments"])}
                      for c in tool_calls]
        content += message.get("content") or ""
    replayed = ollama.Message(role="assistant", content=content, tool_calls=[
        ollama.Message.ToolCall(function=ollama.Message.ToolCall.Function(name=c["tool_name"],
                                                                           arguments=c["tool_args"]))
        for c in calls] or None)
    return [*messages, replayed], calls


def test_home_assistant_turns_on_the_kitchen_light(server: ToolwireServer, upstream: ScriptedUpstream,
                                                   mode: str) -> None:
    turn_on = {"name": "Kitchen Light", "domain": ["light"]}
    upstream.enqueue(call_script(mode, "HassTurnOn", turn_on), Script(text="The kitchen light is on.", chunks=4))
    messages: list[Any] = [ollama.Message(role="system", content=HA_SYSTEM),
                           ollama.Message(role="user", content="Turn on the kitchen light")]
    messages, calls = asyncio.run(home_assistant_turn(server.url, messages))
    assert calls == [{"tool_name": "HassTurnOn", "tool_args": turn_on}]
    # Home Assistant answers with the intent's result as a tool message with no tool_name nor id.
    result = {"data": {"success": [{"name": "Kitchen Light", "type": "entity", "id": "light.kitchen"}],
                       "failed": []}, "error": None}
    messages.append(ollama.Message(role="tool", content=json.dumps(result)))
    messages, calls = asyncio.run(home_assistant_turn(server.url, messages))
    assert calls == [] and messages[-1].content == "The kitchen light is on."
    first, second = upstream.chat_requests[0].body, upstream.chat_requests[1].body
    assert first["stream"] is True and "num_ctx" not in first and "keep_alive" not in first
    follow_up = second["messages"]
    if mode == "native":
        assert [t["function"]["name"] for t in first["tools"]] == ["HassTurnOn", "HassTurnOff", "GetLiveContext"]
        assert follow_up[-1]["role"] == "tool" and follow_up[-1]["tool_call_id"] == \
            follow_up[-2]["tool_calls"][0]["id"]
    else:
        assert "HassTurnOn" in first["messages"][0]["content"] and "Kitchen Light" in first["messages"][0]["content"]
        assert follow_up[-1]["content"].startswith("Tool result for HassTurnOn")


@pytest.mark.parametrize("mode", ["prompt"], indirect=True)
def test_home_assistant_setup_and_polling_find_the_model_behind_a_key(
        toolwire_factory: Callable[..., ToolwireServer], mode: str) -> None:
    """The config flow's connection check and model step (``client.list()``, the model chosen among
    ``model_info["model"]``, else it would ``pull``) and the coordinator's poll (``list()`` and ``ps()``), with the
    key Home Assistant sends as a Bearer token; without it, the 401 it reports as ``invalid_auth``."""
    server = toolwire_factory(TOOLWIRE_API_KEYS="sk-home")

    async def setup(key: str | None) -> tuple[set[str], set[str]]:
        client = ollama.AsyncClient(host=server.url, headers={"Authorization": f"Bearer {key}"} if key else None)
        listed = await client.list()
        loaded = await client.ps()
        return {m["model"] for m in listed.get("models", [])}, {m.model for m in loaded.models}

    installed, loaded = asyncio.run(setup("sk-home"))
    assert MODEL_ID in installed and loaded == installed
    with pytest.raises(ollama.ResponseError) as refused:
        asyncio.run(setup(None))
    assert refused.value.status_code == 401
