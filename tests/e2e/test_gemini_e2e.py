"""Google's Gemini API end to end: the official ``google-genai`` SDK (pinned in the dev extra) against
gunicorn/gevent toolwire's ``/v1beta``, in front of the scripted text model (prompt mode) and of a back end
that has tools (native mode).

``generate_content`` and ``generate_content_stream`` with function declarations and automatic function
calling off, the function-response follow-up, ``count_tokens``, the model list, and the errors the SDK raises
from Google's envelope (before the first byte and mid-stream); and Google's JS SDK (``@google/genai``, pinned) the same exchanges.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from google import genai
from google.genai import errors, types

from support.agents import GENAI_SDK, npm_library
from support.native_upstream import native_frames
from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

MODEL = "gemini-2.5-flash"
KEY = "sk-gemini"
WEATHER = types.FunctionDeclaration(
    name="get_weather", description="Current weather for a city",
    parameters=types.Schema(type=types.Type.OBJECT, properties={"city": types.Schema(type=types.Type.STRING)},
                            required=["city"]))
TIME = types.FunctionDeclaration(
    name="get_time", description="Current time in a time zone",
    parameters_json_schema={"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]})
ASK = "Weather in Paris and the time in Oslo?"
CALLS = [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "Europe/Oslo"})]
ANSWER = "Checking both.\n" + "\n".join(tool_call_text(name, args) for name, args in CALLS)


def config(**more: Any) -> types.GenerateContentConfig:
    """Both functions, automatic function calling off (the client runs them)."""
    return types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[WEATHER, TIME])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True), **more)


def client_for(server: ToolwireServer, key: str = KEY) -> genai.Client:
    return genai.Client(api_key=key, http_options=types.HttpOptions(
        base_url=server.url, api_version="v1beta", retry_options=types.HttpRetryOptions(attempts=1)))


@pytest.fixture(params=["prompt", "native"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server(toolwire_factory, mode: str) -> ToolwireServer:
    return toolwire_factory(TOOLWIRE_API_KEYS=KEY, TOOLWIRE_TOOL_MODE=mode)


def enqueue_calls(upstream: ScriptedUpstream, mode: str) -> None:
    """The model's two calls: written in the taught format (prompt mode) or as the back end's own calls."""
    if mode == "prompt":
        upstream.enqueue(Script(text=ANSWER, chunks=5))
    else:
        upstream.enqueue(Script(text="Checking both.\n", chunks=5, tool_calls=native_frames(CALLS, chunk=4),
                                finish_reason="tool_calls"))


def follow_up(first: types.Content) -> list[types.Content]:
    """The conversation with the model's calls and the client's results."""
    results = {"get_weather": {"output": "18 C, sunny"}, "get_time": {"output": "14:05"}}
    calls = [part.function_call for part in first.parts or () if part.function_call]
    return [types.Content(role="user", parts=[types.Part(text=ASK)]), first,
            types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
                id=call.id, name=call.name, response=results[call.name or ""])) for call in calls])]


def sent_transcript(upstream: ScriptedUpstream, n: int) -> str:
    return json.dumps(upstream.chat_requests[n].body["messages"])


@pytest.mark.parametrize("streamed", [False, True], ids=["generate", "stream"])
def test_function_calls_and_the_function_response_follow_up(server: ToolwireServer, upstream: ScriptedUpstream,
                                                             mode: str, streamed: bool) -> None:
    client = client_for(server)
    enqueue_calls(upstream, mode)
    if streamed:
        chunks = list(client.models.generate_content_stream(model=MODEL, contents=ASK, config=config()))
        calls = [call for chunk in chunks for call in chunk.function_calls or ()]
        text = "".join(part.text for chunk in chunks for part in chunk.candidates[0].content.parts or ()
                       if part.text)
        finish = chunks[-1].candidates[0].finish_reason
        first = types.Content(role="model", parts=[part for chunk in chunks
                                                   for part in chunk.candidates[0].content.parts or ()])
    else:
        response = client.models.generate_content(model=MODEL, contents=ASK, config=config())
        calls, text = response.function_calls or [], response.candidates[0].content.parts[0].text
        finish, first = response.candidates[0].finish_reason, response.candidates[0].content
        assert response.model_version == MODEL and response.response_id
        assert response.usage_metadata.total_token_count > 0
    assert [(call.name, call.args) for call in calls] == CALLS
    assert all(call.id for call in calls) and text.strip() == "Checking both."
    assert finish == types.FinishReason.STOP
    tools = json.dumps(upstream.chat_requests[0].body.get("tools") or upstream.chat_requests[0].body["messages"])
    assert "get_weather" in tools and "get_time" in tools

    upstream.enqueue(Script(text="Paris: 18 C and sunny; Oslo: 14:05.", chunks=4))
    final = client.models.generate_content(model=MODEL, contents=follow_up(first), config=config())
    assert final.text == "Paris: 18 C and sunny; Oslo: 14:05." and not final.function_calls
    transcript = sent_transcript(upstream, 1)
    assert "18 C, sunny" in transcript and "14:05" in transcript


def test_stream_text_and_thoughts_add_up(server: ToolwireServer, upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="<think>Short answer.</think>Hello from the model.", chunks=3))
    client = client_for(server)  # kept: a client let go closes its connections under the stream
    chunks = list(client.models.generate_content_stream(
        model=MODEL, contents="Hi", config=types.GenerateContentConfig(
            thinking_config=types.ThinkingConfig(include_thoughts=True), system_instruction="Be brief.")))
    parts = [part for chunk in chunks for part in chunk.candidates[0].content.parts or ()]
    assert "".join(p.text for p in parts if p.thought) == "Short answer."
    assert "".join(p.text for p in parts if not p.thought) == "Hello from the model."
    assert chunks[-1].usage_metadata.prompt_token_count > 0
    assert "Be brief." in sent_transcript(upstream, 0)


def test_any_mode_names_the_allowed_function(server: ToolwireServer, upstream: ScriptedUpstream, mode: str) -> None:
    if mode == "prompt":
        upstream.enqueue(Script(text=tool_call_text("get_time", {"tz": "UTC"}), chunks=6))
    else:
        upstream.enqueue(Script(tool_calls=native_frames([("get_time", {"tz": "UTC"})]), finish_reason="tool_calls"))
    client = client_for(server)  # kept: a client let go closes its connections before its request
    response = client.models.generate_content(model=MODEL, contents="Time?", config=config(
        tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(
            mode=types.FunctionCallingConfigMode.ANY, allowed_function_names=["get_time"]))))
    assert [(c.name, c.args) for c in response.function_calls or ()] == [("get_time", {"tz": "UTC"})]


def test_count_tokens_and_the_model_list(server: ToolwireServer, upstream: ScriptedUpstream) -> None:
    client = client_for(server)
    counted = client.models.count_tokens(model=MODEL, contents="How many tokens is this?")
    assert counted.total_tokens and counted.total_tokens > 0
    models = list(client.models.list())
    assert "models/scripted-model" in [m.name for m in models]
    assert client.models.get(model="scripted-model").name == "models/scripted-model"
    with pytest.raises(errors.ClientError) as missing:
        client.models.get(model="no-such-model")
    assert (missing.value.code, missing.value.status) == (404, "NOT_FOUND")


def test_errors_are_raised_from_googles_envelope(server: ToolwireServer, upstream: ScriptedUpstream) -> None:
    client, stranger = client_for(server), client_for(server, "sk-wrong")
    with pytest.raises(errors.ClientError) as unauthenticated:
        stranger.models.generate_content(model=MODEL, contents="Hi")
    assert (unauthenticated.value.code, unauthenticated.value.status) == (401, "UNAUTHENTICATED")
    with pytest.raises(errors.ClientError) as invalid:
        client.models.generate_content(model=MODEL, contents="Hi", config=types.GenerateContentConfig(
            temperature=5))
    assert (invalid.value.code, invalid.value.status) == (400, "INVALID_ARGUMENT")
    assert "generationConfig.temperature" in invalid.value.message
    upstream.enqueue(Script(text="Partial answer", chunks=3, close_after_chunks=2))
    with pytest.raises(errors.APIError) as cut:
        list(client.models.generate_content_stream(model=MODEL, contents="Hi"))
    assert cut.value.code == 502


GENAI_JS = """
import { GoogleGenAI, Type } from '@google/genai';

const [baseUrl, apiKey, model] = process.argv.slice(2);
// The SDK's own API version (v1): the Python SDK's tests above call v1beta.
const ai = new GoogleGenAI({ apiKey, httpOptions: { baseUrl, retryOptions: { attempts: 1 } } });
const ask = 'Weather in Paris and the time in Oslo?';
const config = {
  tools: [{ functionDeclarations: [
    { name: 'get_weather', description: 'Current weather for a city',
      parameters: { type: Type.OBJECT, properties: { city: { type: Type.STRING } }, required: ['city'] } },
    { name: 'get_time', description: 'Current time in a time zone',
      parametersJsonSchema: { type: 'object', properties: { tz: { type: 'string' } }, required: ['tz'] } }] }],
  automaticFunctionCalling: { disable: true },
};
const summary = (parts) => ({ text: parts.filter((p) => p.text).map((p) => p.text).join(''),
                              calls: parts.filter((p) => p.functionCall).map((p) => [p.functionCall.name, p.functionCall.args, p.functionCall.id]) });
const body = await ai.models.generateContent({ model, contents: ask, config });
const parts = [];
for await (const chunk of await ai.models.generateContentStream({ model, contents: ask, config })) {
  parts.push(...(chunk.candidates?.[0]?.content?.parts ?? []));
}
const first = body.candidates[0].content;
const results = first.parts.filter((p) => p.functionCall).map((p) => ({ functionResponse: {
  id: p.functionCall.id, name: p.functionCall.name,
  response: { output: p.functionCall.name === 'get_weather' ? '18 C, sunny' : '14:05' } } }));
const final = await ai.models.generateContent({ model, config, contents: [
  { role: 'user', parts: [{ text: ask }] }, first, { role: 'user', parts: results }] });
console.log(JSON.stringify({ body: summary(first.parts), stream: summary(parts),
                             final: summary(final.candidates[0].content.parts), finish: final.candidates[0].finishReason }));
"""


def test_the_js_sdk_calls_functions_streamed_and_not_and_sends_the_results(server: ToolwireServer,
                                                                           upstream: ScriptedUpstream,
                                                                           mode: str) -> None:
    library = npm_library(*GENAI_SDK)
    script = library / "gemini_probe.mjs"
    script.write_text(GENAI_JS)
    enqueue_calls(upstream, mode)
    enqueue_calls(upstream, mode)
    upstream.enqueue(Script(text="Paris: 18 C and sunny; Oslo: 14:05.", chunks=4))
    result = subprocess.run(["node", str(script), server.url, KEY, MODEL], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = json.loads(result.stdout)
    for answer in (answers["body"], answers["stream"]):
        assert answer["text"].strip() == "Checking both."
        assert [call[:2] for call in answer["calls"]] == [list(call) for call in CALLS]
        assert all(call[2] for call in answer["calls"])
    assert answers["final"] == {"text": "Paris: 18 C and sunny; Oslo: 14:05.", "calls": []}
    assert answers["finish"] == "STOP"
    transcript = sent_transcript(upstream, 2)
    assert "18 C, sunny" in transcript and "14:05" in transcript
