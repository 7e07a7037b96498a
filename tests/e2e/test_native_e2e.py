"""Native tool mode end to end: a tool-capable back end in every dialect, both endpoints, stream or not.

toolwire runs under gunicorn/gevent in front of the scripted upstream, which plays a back end
with tool support (``support.native_upstream``: every quirk, and combinations, at several
chunkings). Every answer is judged by the wire-contract checkers, and its normalised form (ids
and timestamps replaced, a call's consecutive argument deltas joined) must equal the answer to the
same calls streamed the way OpenAI streams them: whatever the back end's dialect, the client sees
what OpenAI would send. The openai SDK's typed stream helpers read every dialect too.

``auto`` mode meets back ends that refuse tools with the exact errors llama.cpp, Ollama and vLLM
send, and falls back to prompt mode once per (upstream, model).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Callable

import httpx
import openai
import pytest

from support.endpoints import CHAT, RESPONSES, Endpoint, send
from support.invariants import check_chat_stream
from support.native_upstream import OPENAI, QUIRK_SETS, native_frames, quirk_name
from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

WEATHER = {"name": "get_weather", "description": "Current weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
TIME = {"name": "get_time", "description": "Current time in a time zone.",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}
TOOLS = [WEATHER, TIME]
CALLS = [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "Europe/Paris \"CET\""})]
CHUNKINGS = (None, 1, 5)
ENDPOINTS = (CHAT, RESPONSES)

# What real servers answer when a model cannot take tools (found in their issue trackers).
OLLAMA_REFUSAL = Script(status=400, error_body={"error": {
    "message": "registry.ollama.ai/library/gemma3:4b does not support tools", "type": "api_error",
    "param": None, "code": None}})
LLAMA_CPP_REFUSAL = Script(status=500, error_body={"error": {
    "code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}})
LLAMA_CPP_OLD_REFUSAL = Script(status=500, error_body={"code": 500, "message": "Unsupported param: tools",
                                                       "type": "server_error"})
VLLM_REFUSAL = Script(status=400, error_body={
    "object": "error", "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
                                  "to be set", "type": "BadRequestError", "param": None, "code": 400})

# llama-cpp-python 0.3.36 (issue 31 fault 4): a tool choice it cannot stream raises after the 200 headers.
LLAMA_CPP_PYTHON_EMPTY = Script(empty=True)

AUTO_MODELS = {f"auto-{n}": {"tool_mode": "auto"}
               for n in ("ollama", "llama", "llama-old", "vllm", "llama-python", "other", "ok")}


@pytest.fixture(scope="module")
def native(toolwire_factory: Callable[..., ToolwireServer]) -> ToolwireServer:
    """toolwire whose default tool mode is native, with per-model auto and prompt entries."""
    model_map = {**AUTO_MODELS, "prompt-model": {"model": "scripted-model", "tool_mode": "prompt"}}
    return toolwire_factory(TOOLWIRE_TOOL_MODE="native", TOOLWIRE_MODEL_MAP=json.dumps(model_map))


def body(endpoint: Endpoint, *, stream: bool, model: str = "scripted-model", **extra: Any) -> dict[str, Any]:
    request = endpoint.body("Weather in Paris, and the time?", TOOLS, stream=stream)
    request["model"] = model
    if endpoint is CHAT and stream:
        request["stream_options"] = {"include_usage": True}
    return {**request, **extra}


# ---- the client's view, normalised ------------------------------------------------------------------

_VOLATILE = {"created", "created_at", "completed_at", "sequence_number", "system_fingerprint"}
_IDS = {"id", "call_id", "item_id"}


def normalised(raw: bytes, *, stream: bool) -> list[Any]:
    """The answer with ids numbered by first appearance, timestamps dropped, argument deltas joined."""
    ids: dict[str, str] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: (ids.setdefault(v, f"<id{len(ids)}>") if k in _IDS and isinstance(v, str) else walk(v))
                    for k, v in value.items() if k not in _VOLATILE}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    if not stream:
        return [walk(json.loads(raw))]
    events = [walk(json.loads(line[6:])) for line in raw.decode().split("\n")
              if line.startswith("data: ") and line != "data: [DONE]"]
    joined: list[Any] = []
    for event in events:
        key, text = _arguments_piece(event)
        if key is not None and joined and _arguments_piece(joined[-1])[0] == key:
            joined[-1] = _with_arguments(joined[-1], _arguments_piece(joined[-1])[1] + text)
        else:
            joined.append(event)
    return joined


def _arguments_piece(event: Any) -> tuple[Any, str]:
    """``(call key, text)`` when ``event`` carries only a piece of a call's arguments."""
    if event.get("type") == "response.function_call_arguments.delta":
        return ("responses", event["item_id"]), event["delta"]
    choices = event.get("choices") or []
    if len(choices) == 1 and set(choices[0].get("delta") or {}) == {"tool_calls"}:
        calls = choices[0]["delta"]["tool_calls"]
        if len(calls) == 1 and set(calls[0]) == {"index", "function"} and set(calls[0]["function"]) == {"arguments"}:
            return ("chat", calls[0]["index"]), calls[0]["function"]["arguments"]
    return None, ""


def _with_arguments(event: dict[str, Any], text: str) -> dict[str, Any]:
    if "delta" in event and event.get("type"):
        return {**event, "delta": text}
    call = event["choices"][0]["delta"]["tool_calls"][0]
    return {**event, "choices": [{**event["choices"][0], "delta": {"tool_calls": [
        {**call, "function": {"arguments": text}}]}}]}


def answer(server: ToolwireServer, upstream: ScriptedUpstream, endpoint: Endpoint, script: Script, *,
           stream: bool, model: str = "scripted-model") -> tuple[Any, list[Any]]:
    """Send one request against ``script``; the checked outcome and the normalised answer."""
    upstream.enqueue(script)
    outcome = send(server.v1_url, endpoint, body(endpoint, stream=stream, model=model))
    assert outcome.kind == "completed", outcome.error or outcome.body[-800:]
    return outcome, normalised(outcome.body, stream=stream)


_REFERENCES: dict[tuple[str, bool, int | None], list[Any]] = {}


@pytest.mark.parametrize("chunk", CHUNKINGS, ids=lambda c: f"chunk{c}")
@pytest.mark.parametrize("stream", (True, False), ids=("stream", "whole"))
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.name)
@pytest.mark.parametrize("quirks", QUIRK_SETS, ids=quirk_name)
def test_every_dialect_reaches_the_client_as_openai_sends_it(native: ToolwireServer, upstream: ScriptedUpstream,
                                                             quirks: frozenset[str], endpoint: Endpoint,
                                                             stream: bool, chunk: int | None) -> None:
    # The back end says "stop" after its calls, as several do; the client must see "tool_calls".
    quirky = Script(tool_calls=native_frames(CALLS, quirks=quirks, chunk=chunk), finish_reason="stop")
    outcome, seen = answer(native, upstream, endpoint, quirky, stream=stream)
    assert outcome.calls == CALLS
    assert outcome.text == ""
    key = (endpoint.name, stream, chunk)
    if key not in _REFERENCES:  # the same calls streamed as OpenAI streams them, once per shape
        clean = Script(tool_calls=native_frames(CALLS, quirks=OPENAI, chunk=chunk), finish_reason="tool_calls")
        _REFERENCES[key] = answer(native, upstream, endpoint, clean, stream=stream)[1]
    assert seen == _REFERENCES[key]
    if endpoint is CHAT:
        finishes = [c["finish_reason"] for e in seen for c in e.get("choices") or () if c.get("finish_reason")]
        assert finishes == ["tool_calls"]


@pytest.mark.parametrize("stream", (True, False), ids=("stream", "whole"))
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.name)
@pytest.mark.parametrize("quirks", QUIRK_SETS, ids=quirk_name)
def test_the_sdk_typed_helpers_read_every_dialect(native: ToolwireServer, upstream: ScriptedUpstream,
                                                  make_openai_client: Callable[[ToolwireServer], openai.OpenAI],
                                                  quirks: frozenset[str], endpoint: Endpoint, stream: bool) -> None:
    upstream.enqueue(Script(tool_calls=native_frames(CALLS, quirks=quirks, chunk=3), finish_reason="stop"))
    client = make_openai_client(native)
    assert endpoint.sdk(client, "Weather in Paris, and the time?", TOOLS, stream=stream) == CALLS


def test_the_back_end_gets_real_tools_and_a_real_transcript_on_chat(native: ToolwireServer,
                                                                    upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="It is sunny."))
    messages = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    request = {"model": "scripted-model", "messages": messages, "tools": [{"type": "function", "function": WEATHER}],
               "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": False,
               "temperature": 0.2}
    response = httpx.post(native.v1_url + "/chat/completions", json=request, timeout=10)
    assert response.status_code == 200, response.text
    sent = upstream.chat_requests[-1].body
    assert sent["tools"] == [{"type": "function", "function": WEATHER}]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["parallel_tool_calls"] is False and sent["temperature"] == 0.2
    # (the call's turn goes with "content": "", which llama-cpp-python needs, issue 31 fault 6)
    assert sent["messages"] == [{**messages[0], "role": "system"}, messages[1], {**messages[2], "content": ""},
                                messages[3]]
    assert "# Tools" not in json.dumps(sent["messages"]), "no manifest in native mode"


def test_legacy_functions_go_as_tools_and_come_back_as_function_call(native: ToolwireServer,
                                                                     upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(tool_calls=native_frames([CALLS[0]], quirks={"cumulative", "no_index"}, chunk=4)))
    messages = [{"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": None, "function_call": {"name": "get_weather", "arguments": "{}"}},
                {"role": "function", "name": "get_weather", "content": "rain"}]
    request = {"model": "scripted-model", "messages": messages, "functions": [WEATHER], "stream": True}
    response = httpx.post(native.v1_url + "/chat/completions", json=request, timeout=10)
    summary = check_chat_stream(response.content, legacy=True, status=response.status_code,
                                content_type=response.headers.get("content-type"))
    choice = summary.choices[0]
    assert (choice.function_call.name, choice.function_call.args) == CALLS[0]
    assert choice.finish_reason == "function_call"
    sent = upstream.chat_requests[-1].body
    assert sent["tools"] == [{"type": "function", "function": WEATHER}] and "functions" not in sent
    assert sent["parallel_tool_calls"] is False
    call_id = sent["messages"][1]["tool_calls"][0]["id"]
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": call_id, "content": "rain"}


def test_responses_tools_and_items_reach_the_back_end_in_chat_shape(native: ToolwireServer,
                                                                    upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="Done."))
    request = {"model": "scripted-model", "store": False, "tools": [{"type": "function", **WEATHER, "strict": True}],
               "tool_choice": {"type": "function", "name": "get_weather"}, "instructions": "Be brief.",
               "input": [{"type": "message", "role": "user", "content": "Weather in Paris?"},
                         {"type": "function_call", "call_id": "call_9", "name": "get_weather",
                          "arguments": '{"city":"Paris"}'},
                         {"type": "function_call_output", "call_id": "call_9", "output": "sunny"}]}
    response = httpx.post(native.v1_url + "/responses", json=request, timeout=10)
    assert response.status_code == 200, response.text
    sent = upstream.chat_requests[-1].body
    assert sent["tools"] == [{"type": "function", "function": {**WEATHER, "strict": True}}]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_9", "content": "sunny"},
    ]


@pytest.mark.parametrize("stream", (True, False), ids=("stream", "whole"))
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.name)
@pytest.mark.parametrize("text", [
    pytest.param('Let me check. <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
                 id="tool_call"),
    pytest.param('Let me check. <function=get_weather>{"city": "Paris"}</function>', id="function"),
])
def test_a_call_the_back_end_left_in_its_text_is_still_a_call(native: ToolwireServer, upstream: ScriptedUpstream,
                                                              endpoint: Endpoint, stream: bool, text: str) -> None:
    upstream.enqueue(Script(text=text, chunks=3, tool_calls=native_frames([CALLS[1]], chunk=4), finish_reason="stop"))
    outcome = send(native.v1_url, endpoint, body(endpoint, stream=stream))
    assert outcome.kind == "completed"
    assert outcome.calls == [CALLS[0], CALLS[1]]
    assert outcome.text.strip() == "Let me check."


def test_a_model_in_prompt_mode_next_to_native_ones(native: ToolwireServer, upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text=tool_call_text("get_weather", {"city": "Paris"})))
    outcome = send(native.v1_url, CHAT, body(CHAT, stream=True, model="prompt-model"))
    assert outcome.calls == [CALLS[0]]
    sent = upstream.chat_requests[-1].body
    assert "tools" not in sent and sent["model"] == "scripted-model"
    assert "get_weather" in sent["messages"][0]["content"]


# ---- auto mode -----------------------------------------------------------------------------------

def tool_mode_logged(server: ToolwireServer, request_id: str) -> str | None:
    """The ``tool_mode`` of the access line of ``request_id`` (written when the body closes: waited for)."""
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        for line in server.log().splitlines():
            if line.startswith("{") and '"toolwire.access"' in line and f'"{request_id}"' in line:
                return json.loads(line)["tool_mode"]
        time.sleep(0.05)
    return None


def fallbacks(server: ToolwireServer, model: str) -> float:
    text = httpx.get(server.url + "/metrics", timeout=10).text
    found = re.search(rf'toolwire_tool_mode_fallbacks_total\{{model="{re.escape(model)}"\}} ([0-9.]+)', text)
    return float(found.group(1)) if found else 0.0


@pytest.mark.parametrize("model, refusal", [
    ("auto-ollama", OLLAMA_REFUSAL), ("auto-llama", LLAMA_CPP_REFUSAL), ("auto-llama-old", LLAMA_CPP_OLD_REFUSAL),
    ("auto-vllm", VLLM_REFUSAL), ("auto-llama-python", LLAMA_CPP_PYTHON_EMPTY)])
def test_auto_falls_back_to_prompt_mode_once_and_remembers(native: ToolwireServer, upstream: ScriptedUpstream,
                                                           model: str, refusal: Script) -> None:
    before = fallbacks(native, model)
    prompt_answer = Script(text=tool_call_text("get_weather", {"city": "Paris"}), chunks=4)
    upstream.enqueue(refusal, prompt_answer)
    first = send(native.v1_url, CHAT, body(CHAT, stream=True, model=model), headers={"X-Request-Id": f"fb-{model}"})
    assert first.kind == "completed" and first.calls == [CALLS[0]]
    assert tool_mode_logged(native, f"fb-{model}") == "prompt"
    tried, retried = upstream.chat_requests
    assert "tools" in tried.body and "tools" not in retried.body
    assert "get_weather" in retried.body["messages"][0]["content"], "the retry carries the manifest"
    assert fallbacks(native, model) == before + 1

    upstream.enqueue(Script(text=tool_call_text("get_time", {"tz": "UTC"})))
    second = send(native.v1_url, RESPONSES, body(RESPONSES, stream=False, model=model))
    assert second.calls == [("get_time", {"tz": "UTC"})]
    assert len(upstream.chat_requests) == 3 and "tools" not in upstream.chat_requests[-1].body
    assert fallbacks(native, model) == before + 1, "remembered: no second refusal"


def test_auto_passes_other_errors_through_and_native_mode_never_retries(native: ToolwireServer,
                                                                        upstream: ScriptedUpstream) -> None:
    other = Script(status=400, error_body={"error": {"message": "max_tokens is too large", "type": "invalid_request_error",
                                                     "param": "max_tokens", "code": None}})
    upstream.enqueue(other)
    refused = send(native.v1_url, CHAT, body(CHAT, stream=True, model="auto-other"))
    assert refused.kind == "envelope" and refused.status == 400 and refused.error["param"] == "max_tokens"
    upstream.enqueue(OLLAMA_REFUSAL)
    refused = send(native.v1_url, RESPONSES, body(RESPONSES, stream=True, model="native-refused"))
    assert refused.kind == "envelope" and "does not support tools" in refused.error["message"]
    assert len(upstream.chat_requests) == 2, "no retry in either case"


@pytest.mark.parametrize("stream", (True, False), ids=("stream", "whole"))
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.name)
def test_an_empty_200_stream_is_a_failure_never_an_empty_answer(native: ToolwireServer, upstream: ScriptedUpstream,
                                                                endpoint: Endpoint, stream: bool) -> None:
    """Issue 31, fault 4: no event and no ``[DONE]`` after the 200 headers is the back end failing. Native mode
    asks once more in prompt mode first (llama-cpp-python's ``chatml-function-calling`` does this with tools:
    test_native_llama_cpp_python.py); an empty answer to that too fails."""
    upstream.enqueue(LLAMA_CPP_PYTHON_EMPTY, LLAMA_CPP_PYTHON_EMPTY)  # (the worker's first request asks twice)
    outcome = send(native.v1_url, endpoint, body(endpoint, stream=stream))
    assert outcome.kind in ("stream_error", "envelope"), outcome.body[-500:]
    assert "without sending an event" in outcome.error["message"]
    assert "tools" not in upstream.chat_requests[-1].body, "the prompt-mode answer was the empty one"


def test_a_client_cannot_put_a_model_in_prompt_mode_for_everyone(native: ToolwireServer,
                                                                  upstream: ScriptedUpstream) -> None:
    """A back end's 400 that quotes the client's own text ("tools not supported" sent in a field it validates)
    is no refusal; and a real refusal is remembered only once the prompt-mode retry was taken (a retry that
    fails for another field of the request leaves the model native for the other clients)."""
    model = "auto-other"
    quoting = Script(status=400, error_body={"object": "error", "type": "BadRequestError", "param": None, "code": 400,
                                             "message": "1 validation error: seed: Input should be a valid integer "
                                                        "[type=int_parsing, input_value='tools not supported']"})
    upstream.enqueue(quoting)
    refused = send(native.v1_url, CHAT, body(CHAT, stream=True, model=model))
    assert refused.kind == "envelope" and refused.status == 400
    assert len(upstream.chat_requests) == 1, "no prompt-mode retry for an error about another field"

    other_field = Script(status=400, error_body={"error": {"message": "max_tokens is too large", "param": "max_tokens",
                                                           "type": "invalid_request_error", "code": None}})
    upstream.enqueue(OLLAMA_REFUSAL, other_field)
    refused = send(native.v1_url, CHAT, body(CHAT, stream=True, model=model))
    assert refused.kind == "envelope" and refused.error["param"] == "max_tokens"
    assert "tools" not in upstream.chat_requests[-1].body, "the refusal was retried in prompt mode"

    upstream.enqueue(Script(tool_calls=native_frames(CALLS[:1], chunk=4)))
    outcome = send(native.v1_url, CHAT, body(CHAT, stream=True, model=model))
    assert outcome.calls == CALLS[:1]
    assert "tools" in upstream.chat_requests[-1].body, "the next client is still served natively"
    assert fallbacks(native, model) == 0


def test_auto_stays_native_on_a_back_end_with_tools(native: ToolwireServer, upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(tool_calls=native_frames(CALLS, quirks={"cumulative"}, chunk=2)))
    outcome = send(native.v1_url, RESPONSES, body(RESPONSES, stream=True, model="auto-ok"),
                   headers={"X-Request-Id": "auto-ok"})
    assert outcome.calls == CALLS
    assert tool_mode_logged(native, "auto-ok") == "native"
    assert "tools" in upstream.chat_requests[-1].body


@pytest.mark.parametrize("stream", (True, False), ids=("stream", "whole"))
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.name)
def test_a_repeat_that_does_not_extend_the_arguments_is_an_error_never_a_merge(
        toolwire_factory: Callable[..., ToolwireServer], upstream: ScriptedUpstream, endpoint: Endpoint,
        stream: bool) -> None:
    """Under ``TOOLWIRE_INVALID_JSON=fail`` the broken call ends the answer with an error (the default
    ``text`` policy ends the call as invalid: tests/statemachine/test_native_calls.py)."""
    strict = toolwire_factory(TOOLWIRE_TOOL_MODE="native", TOOLWIRE_INVALID_JSON="fail")
    frames = [[{"index": 0, "id": "a", "type": "function", "function": {"name": "get_weather", "arguments": '{"ci'}}],
              [{"index": 0, "function": {"name": "get_weather", "arguments": '{"city": "Pa'}}],
              [{"index": 0, "function": {"name": "get_weather", "arguments": '{"town": "Paris"}'}}]]
    upstream.enqueue(Script(tool_calls=frames, finish_reason="stop"))
    outcome = send(strict.v1_url, endpoint, body(endpoint, stream=stream))
    assert outcome.kind == ("stream_error" if stream else "envelope"), outcome.body[-500:]
    # (Responses stream events carry only published error codes: there the code travels in the message.)
    assert outcome.error["message"].startswith("the back end repeated a call's arguments")
    assert outcome.error["code"] == "invalid_json" or outcome.error["message"].endswith("(invalid_json)")
    assert b"town" not in outcome.body
