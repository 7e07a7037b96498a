"""Tool modes, in process: settings, what a native back end gets, refusal detection, the fallback memory."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from app.cli import describe
from app.pipeline.driver import ChoiceDriver
from app.pipeline.native import FALLBACKS, FallbackMemory, native_messages, native_tools, refuses_tools
from app.profile import model_profile
from app.settings import ModelRoute, Settings
from app.upstreams.base import UpstreamError
from app.upstreams.openai_chat import parse_chunk
from statemachine import ChoiceFinished, ParserConfig, TextDelta, ToolCallEnded, ToolChoice, ToolSpec
from support.loopback import json_answer

WEATHER = ToolSpec(name="get_weather", description="Weather.", parameters={"type": "object"}, strict=True)
SHELL = ToolSpec(name="shell", parameters={"type": "object"})
PATCH = ToolSpec(name="apply_patch", description="Patch files.", kind="custom", input_format={"type": "text"})


def test_model_map_takes_names_and_objects_and_sets_modes_per_model() -> None:
    settings = Settings(tool_mode="auto", model_map={
        "gpt-4o": "qwen2.5", "qwen": {"model": "qwen3:32b", "tool_mode": "native"}, "plain": {"tool_mode": "prompt"}},
        default_upstream_model="fallback")
    profiles = [model_profile(settings, m) for m in ("gpt-4o", "qwen", "plain", "other")]
    assert [p.upstream_model for p in profiles] == ["qwen2.5", "qwen3:32b", "fallback", "fallback"]
    assert [p.tool_mode for p in profiles] == [
        "auto", "native", "prompt", "auto"]
    assert settings.model_map["qwen"] == ModelRoute(model="qwen3:32b", tool_mode="native")
    shown = dict((name, value) for name, value, _ in describe(settings))
    assert json.loads(shown["model_map"])["qwen"] == {"model": "qwen3:32b", "tool_mode": "native"}
    assert Settings().tool_mode == "prompt", "prompt stays the default"


@pytest.mark.parametrize("value", [{"model": "x", "tool_mode": "natve"}, {"modle": "x"}])
def test_a_bad_model_map_object_is_refused(value: dict) -> None:
    with pytest.raises(ValidationError):
        Settings(model_map={"m": value})


@pytest.mark.parametrize("choice, sent", [
    (ToolChoice("auto"), "auto"),
    (ToolChoice("required"), "required"),
    (ToolChoice("none"), "none"),
    (ToolChoice("required", frozenset({"shell"})), {"type": "function", "function": {"name": "shell"}}),
    (ToolChoice("auto", frozenset({"shell", "get_weather"})), {"type": "allowed_tools", "allowed_tools": {
        "mode": "auto", "tools": [{"type": "function", "function": {"name": "get_weather"}},
                                  {"type": "function", "function": {"name": "shell"}}]}}),
])
def test_native_tools_in_chat_shape(choice: ToolChoice, sent: object) -> None:
    config = ParserConfig.for_tools([WEATHER, SHELL, PATCH], tool_choice=choice)
    fields = native_tools(config)
    assert fields["tools"] == [
        {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                          "parameters": {"type": "object"}, "strict": True}},
        {"type": "function", "function": {"name": "shell", "parameters": {"type": "object"}}},
        {"type": "custom", "custom": {"name": "apply_patch", "description": "Patch files.", "format": {"type": "text"}}},
    ]
    assert fields["tool_choice"] == sent
    assert "parallel_tool_calls" not in fields
    assert native_tools(ParserConfig.for_tools([SHELL], parallel_tool_calls=False))["parallel_tool_calls"] is False
    assert native_tools(ParserConfig()) == {}


def test_native_custom_tools_keep_the_chat_shape() -> None:
    """A grammar nests under ``grammar`` on the Chat wire; a forced custom tool is named as one."""
    grammar = ToolSpec(name="apply_patch", kind="custom",
                       input_format={"type": "grammar", "syntax": "lark", "definition": "start: x"})
    fields = native_tools(ParserConfig.for_tools([grammar], tool_choice=ToolChoice("required",
                                                                                    frozenset({"apply_patch"}))))
    assert fields["tools"] == [{"type": "custom", "custom": {"name": "apply_patch", "format": {
        "type": "grammar", "grammar": {"syntax": "lark", "definition": "start: x"}}}}]
    assert fields["tool_choice"] == {"type": "custom", "custom": {"name": "apply_patch"}}


def test_native_messages_keep_calls_and_convert_legacy_ones() -> None:
    messages = [
        {"role": "developer", "content": "Rules."},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": None, "function_call": {"name": "shell", "arguments": "{}"}},
        {"role": "function", "name": "shell", "content": "ok"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "shell", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "done"},
    ]
    out = native_messages(messages)
    assert out[0] == {"role": "system", "content": "Rules."}
    assert out[1] == messages[1] and out[4:] == messages[4:]
    legacy_id = out[2]["tool_calls"][0]["id"]
    assert out[2] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": legacy_id, "type": "function", "function": {"name": "shell", "arguments": "{}"}}]}
    assert out[3] == {"role": "tool", "tool_call_id": legacy_id, "content": "ok"}
    assert messages[0]["role"] == "developer", "the client's messages are not changed"


@pytest.mark.parametrize("assistant", [
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                                                           "function": {"name": "shell", "arguments": "{}"}}]},
    {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "shell", "arguments": "{}"}}]},
])
def test_an_assistant_turn_with_calls_goes_with_empty_string_content(assistant: dict) -> None:
    """Issue 31, fault 6: llama-cpp-python's server answers 500 (pydantic: content must be a string) to
    ``content: null`` beside ``tool_calls``, and its templates raise without ``content``: every native
    agent loop broke at its second request. ``""`` is valid OpenAI and accepted."""
    out = native_messages([{"role": "user", "content": "hi"}, assistant, {"role": "tool", "tool_call_id": "c",
                                                                          "content": "ok"}])
    assert out[1] == {**assistant, "content": ""}
    assert native_messages([{"role": "assistant", "content": None}])[0]["content"] is None, "no calls: as sent"


@pytest.mark.parametrize("kind, message, refused", [
    ("server_error", "The upstream failed (HTTP 500): tools param requires --jinja flag", True),
    ("server_error", "The upstream failed (HTTP 500): Unsupported param: tools", True),
    ("client_error", "registry.ollama.ai/library/gemma3:4b does not support tools", True),
    ("client_error", "stablelm2:latest does not support tools", True),
    ("client_error", '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set', True),
    ("client_error", "Function calling is not supported for this model.", True),
    ("client_error", "This model's maximum context length is 4096 tokens.", False),
    ("client_error", "No tool call found for function call output with call_id 'x'.", False),
    ("client_error", "Invalid 'tools[0].function.name': string does not match pattern.", False),
    ("server_error", "The upstream failed (HTTP 503).", False),
    ("rate_limited", "tools are not supported", False),
    ("auth", "The upstream refused toolwire's credentials (HTTP 401).", False),
])
def test_tools_refusals_are_recognised(kind: str, message: str, refused: bool) -> None:
    assert refuses_tools(UpstreamError(kind, message, status=400)) is refused


@pytest.mark.parametrize("message, status, param", [
    # pydantic (vLLM, FastAPI servers) quoting the value a client sent in another field
    ("1 validation error for ChatCompletionRequest\nseed\n  Input should be a valid integer, unable to parse "
     "string as an integer [type=int_parsing, input_value='tools not supported', input_type=str]", 400, None),
    ("[{'type': 'int_parsing', 'loc': ('body', 'seed'), 'msg': 'Input should be a valid integer', "
     "'input': 'the model does not support tools'}]", 422, None),
    ('Invalid value for "user": "x\\" --jinja \\"" is too long', 400, None),
    ("Invalid value: tools are not supported here", 400, "seed"),  # the error is about another parameter
    ("registry.ollama.ai/library/gemma3:4b does not support tools", 404, None),  # not a refusal status
])
def test_a_refusal_is_not_read_in_what_the_back_end_quotes_or_in_another_parameter_s_error(
        message: str, status: int, param: str | None) -> None:
    assert not refuses_tools(UpstreamError("client_error", message, status=status, param=param))
    assert refuses_tools(UpstreamError("client_error", "stablelm2 does not support tools", status=status,
                                       param="tools")) is (status != 404)


def test_the_fallback_memory_forgets_after_its_window_and_stays_bounded() -> None:
    memory = FallbackMemory(size=2)
    memory.remember(("u", "a"), now=100.0)
    assert memory.prompt_only(("u", "a"), 60, now=159.0)
    assert not memory.prompt_only(("u", "a"), 60, now=160.0)
    assert not memory.prompt_only(("u", "a"), 60, now=100.0), "forgotten once expired"
    for model in ("a", "b", "c"):
        memory.remember(("u", model), now=200.0)
    assert [memory.prompt_only(("u", m), 60, now=201.0) for m in ("a", "b", "c")] == [False, True, True]


def test_a_legacy_function_call_delta_is_a_native_fragment() -> None:
    chunk = parse_chunk({"choices": [{"index": 0, "delta": {"function_call": {"name": "shell", "arguments": ""}}}]})
    assert chunk.choices[0].tool_calls == [{"function": {"name": "shell", "arguments": ""}}]


def test_a_back_end_that_answers_whole_with_tool_calls_yields_the_calls(serve) -> None:
    """A server that ignores ``stream: true`` sends one completion: its calls (object arguments, no index,
    ``finish_reason: "stop"``) come out as a streamed OpenAI answer would."""
    completion = {"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
            {"id": "x", "type": "function", "function": {"name": "shell", "arguments": '{"cmd": "ls"}'}}]}}]}
    stream = serve(lambda seen: json_answer(200, json.dumps(completion).encode())).open({"model": "m", "messages": []})
    events = list(ChoiceDriver(stream, ParserConfig.for_tools([WEATHER, SHELL])))
    ended = [(e.name, e.arguments, e.valid) for _, e in events if isinstance(e, ToolCallEnded)]
    assert ended == [("get_weather", '{"city":"Oslo"}', True), ("shell", '{"cmd": "ls"}', True)]
    assert events[0][1] == TextDelta("Checking.") and events[-1][1] == ChoiceFinished("tool_calls")


def _native_call(arguments: str) -> list:
    from app.upstreams.base import ChoiceDelta, UpstreamChunk
    return [UpstreamChunk([ChoiceDelta(tool_calls=[{"index": 0, "id": "a", "type": "function", "function": {
        "name": "get_weather", "arguments": arguments}}])]), UpstreamChunk([ChoiceDelta(finish_reason="stop")])]


@pytest.mark.parametrize("mode, script", [
    ("native", '{"city": "Par'),  # never closes (issue 25 item 13)
    ("native", '{ "city": "time.get_local_timezone(12, 3),\n" }'),  # llama-cpp-python's grammar: a raw newline
    ("prompt", '<tool_call>{"name": "get_weather", "arguments": {"city": "Par'),
])
def test_a_sent_call_whose_arguments_never_parse_fails_the_answer(make_app, mode: str, script: str) -> None:
    """Issue 31, fault 5: such a call went out with ``finish_reason: "stop"`` (Responses: ``completed``);
    once streamed it can be neither run nor taken back, so the stream fails (its error frame /
    ``response.failed``), in either tool mode. A non-streamed answer sent nothing yet: issue 38 says no 5xx
    there, the call is held and ``invalid_json`` decides (``text``: the block is content, no call)."""
    from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks

    def client():
        chunks = _native_call(script) if mode == "native" else text_chunks(script)
        return make_app(FakeUpstream(chunks), tool_mode=mode).test_client()

    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER_TOOL]}
    answer = client().post("/v1/chat/completions", json=chat)
    message = answer.get_json()["choices"][0]["message"]
    assert answer.status_code == 200 and not message.get("tool_calls")
    assert answer.get_json()["choices"][0]["finish_reason"] == "stop"
    assert (message["content"] or "") == ("" if mode == "native" else script)
    streamed = client().post("/v1/chat/completions", json={**chat, "stream": True}).get_data(as_text=True)
    assert '"invalid_tool_call"' in streamed and '"finish_reason":"stop"' not in streamed.replace(" ", "")
    responses = {"model": "m", "input": "hi", "tools": [{"type": "function", **WEATHER_TOOL["function"]}],
                 "stream": True}
    events = client().post("/v1/responses", json=responses).get_data(as_text=True)
    assert "response.failed" in events and "response.completed" not in events


def test_a_call_cut_by_length_still_finishes_length(make_app) -> None:
    from app.upstreams.base import ChoiceDelta, UpstreamChunk
    from support.fakes import WEATHER_TOOL, FakeUpstream

    chunks = [*_native_call('{"city": "Par')[:1], UpstreamChunk([ChoiceDelta(finish_reason="length")])]
    client = make_app(FakeUpstream(chunks), tool_mode="native").test_client()
    answer = client.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "x"}],
                                                       "tools": [WEATHER_TOOL]})
    assert answer.status_code == 200 and answer.get_json()["choices"][0]["finish_reason"] == "length"


def test_stop_after_tools_can_be_set_per_model(make_app) -> None:
    """Issue 31: ``stop_after_tools: first`` per model (a small model repeats its call until max_tokens)."""
    from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks

    calls = "".join(f'<tool_call>{{"name": "get_weather", "arguments": {{"city": "{city}"}}}}</tool_call>'
                    for city in ("Paris", "Rome", "Oslo"))
    app = make_app(FakeUpstream(text_chunks(calls)), model_map={"small": {"stop_after_tools": "first"}})
    counts = {}
    for model in ("small", "other"):
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER_TOOL]}
        counts[model] = len(app.test_client().post("/v1/chat/completions", json=body).get_json()["choices"][0]
                            ["message"]["tool_calls"])
    assert counts == {"small": 1, "other": 3}


def test_a_forced_call_is_constrained_by_the_back_ends_json_schema_when_the_model_says_so(make_app) -> None:
    """Issue 31: forced tool_choice (``required`` or named) never met on the small models; with
    ``constrain_calls`` the back end's JSON-schema constraint (llama.cpp's grammar) writes the call, which
    toolwire reads as a bare call object."""
    from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks

    answer = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    upstream = FakeUpstream(text_chunks(answer))
    app = make_app(upstream, model_map={"small": {"constrain_calls": True}})
    body = {"model": "small", "messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER_TOOL],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
    message = app.test_client().post("/v1/chat/completions", json=body).get_json()["choices"][0]["message"]
    assert [json.loads(call["function"]["arguments"]) for call in message["tool_calls"]] == [{"city": "Oslo"}]
    schema = upstream.bodies[-1]["response_format"]["schema"]
    assert upstream.bodies[-1]["response_format"]["type"] == "json_object"
    assert schema["properties"] == {"name": {"const": "get_weather"}, "arguments": WEATHER_TOOL["function"]["parameters"]}
    for model, choice in (("small", "auto"), ("other", "required")):
        app.test_client().post("/v1/chat/completions", json={**body, "model": model, "tool_choice": choice})
        assert "response_format" not in upstream.bodies[-1], "only a forced call, only where the model says so"


def test_native_mode_in_front_of_a_back_end_that_cannot_stream_tool_calls_answers_in_prompt_mode(make_app) -> None:
    """Issue 38: native mode in front of llama-cpp-python's ``chatml-function-calling`` answered 502
    ``upstream_empty_stream`` (its stream of a tool request ends empty after the 200 headers). Such a back end is
    asked again in prompt mode, and stays so for the fallback window."""
    from support.fakes import WEATHER_TOOL, FakeStream, FakeUpstream, text_chunks

    class EmptyWithTools(FakeUpstream):
        def open(self, body: dict, *, request_id: str | None = None) -> FakeStream:
            stream = super().open(body, request_id=request_id)
            if "tools" in body:
                def confirm() -> None:
                    raise UpstreamError("protocol", "The upstream's stream ended before its first event.",
                                        code="upstream_empty_stream")
                stream.confirm = confirm  # type: ignore[method-assign]
            return stream

    FALLBACKS.clear()
    upstream = EmptyWithTools(text_chunks('<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'))
    client = make_app(upstream, tool_mode="native").test_client()
    body = {"model": "m", "messages": [{"role": "user", "content": "Oslo?"}], "tools": [WEATHER_TOOL]}
    for stream in (False, True):
        answer = client.post("/v1/chat/completions", json={**body, "stream": stream})
        assert answer.status_code == 200 and "get_weather" in answer.get_data(as_text=True)
    assert ["tools" in sent for sent in upstream.bodies] == [True, False, False], "remembered: prompt mode at once"
    refusing = FakeUpstream(open_error=UpstreamError("client_error", "tools are not supported", status=400))
    answer = make_app(refusing, tool_mode="native").test_client().post("/v1/chat/completions", json=body)
    assert answer.status_code == 400, "native mode takes no other refusal to prompt mode"
    FALLBACKS.clear()
