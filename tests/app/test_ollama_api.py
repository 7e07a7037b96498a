"""Ollama's API (issue 39) in process: ``/api/chat`` and ``/api/generate`` streamed (NDJSON) and not, calls as
Ollama shapes them, results paired to their calls, ``think``, ``format``, ``options``, ``images``, the model
routes, ``/api/embed``, and every refusal in Ollama's ``{"error": "..."}`` envelope."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask import Flask

from app import Toolwire
from app.settings import Settings
from app.surfaces import DEFAULT_SURFACES
from app.ollama.surface import ollama_surface
from app.upstreams.base import ChoiceDelta, UpstreamChunk, UpstreamError
from app.upstreams.http import status_error
from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks
from support.scripted_upstream import tool_call_text

MODEL = "llama3.2"
ASK = [{"role": "user", "content": "Weather in Paris?"}]
PARIS = tool_call_text("get_weather", {"city": "Paris"})
USAGE = {"prompt_tokens": 31, "completion_tokens": 7, "total_tokens": 38}


def lines(response) -> list[dict[str, Any]]:
    """A streamed answer's objects, one a line (the heartbeat's spaces ignored, as JSON parsers do)."""
    assert response.mimetype == "application/x-ndjson"
    raw = response.get_data(as_text=True)
    assert raw.endswith("\n")
    return [json.loads(line) for line in raw.split("\n") if line.strip()]


def chat(make_app, upstream, body: dict[str, Any], **settings: Any):
    return make_app(upstream, **settings).test_client().post("/api/chat", json={"model": MODEL, **body})


def sent(upstream: FakeUpstream) -> dict[str, Any]:
    [body] = upstream.bodies
    return body


def error_of(response, status: int) -> str:
    assert response.status_code == status, response.get_data()
    body = response.get_json()
    assert list(body) == ["error"] and isinstance(body["error"], str)
    return body["error"]


# -- /api/chat -----------------------------------------------------------------------------------------


def test_a_chat_answer_not_streamed_is_one_object_in_ollamas_shape(make_app):
    upstream = FakeUpstream(text_chunks("Sunny in Paris.", usage=USAGE))
    answer = chat(make_app, upstream, {"messages": ASK, "stream": False}).get_json()
    assert answer["model"] == MODEL and answer["created_at"].endswith("Z")
    assert answer["message"] == {"role": "assistant", "content": "Sunny in Paris."}
    assert (answer["done"], answer["done_reason"]) == (True, "stop")
    assert (answer["prompt_eval_count"], answer["eval_count"]) == (31, 7)
    for key in ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration"):
        assert isinstance(answer[key], int) and answer[key] >= 0
    assert answer["total_duration"] >= answer["eval_duration"]


def test_a_chat_streams_by_default_as_ndjson_ending_in_done(make_app):
    upstream = FakeUpstream(text_chunks("Sunny in Paris.", size=4, usage=USAGE))
    objects = lines(chat(make_app, upstream, {"messages": ASK}))
    *pieces, last = objects
    assert all(o["done"] is False and o["message"]["role"] == "assistant" for o in pieces)
    assert "".join(o["message"]["content"] for o in pieces) == "Sunny in Paris."
    assert last["done"] is True and last["done_reason"] == "stop" and last["message"]["content"] == ""
    assert (last["prompt_eval_count"], last["eval_count"]) == (31, 7)
    assert sent(upstream)["stream"] is True


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_a_tool_call_is_one_whole_entry_with_object_arguments_at_every_chunking(make_app, size, stream):
    text = "Let me check." + PARIS + "\n" + tool_call_text("get_weather", {"city": "Oslo"})
    upstream = FakeUpstream(text_chunks(text, size=size))
    response = chat(make_app, upstream, {"messages": ASK, "tools": [WEATHER_TOOL], "stream": stream})
    if stream:
        objects = lines(response)
        content = "".join(o["message"]["content"] for o in objects)
        calls = [c for o in objects for c in o["message"].get("tool_calls", [])]
        assert all(len(o["message"].get("tool_calls", [])) <= 1 for o in objects)
        last = objects[-1]
    else:
        last = response.get_json()
        content, calls = last["message"]["content"], last["message"]["tool_calls"]
    assert content == "Let me check."
    assert [(c["function"]["index"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        (0, "get_weather", {"city": "Paris"}), (1, "get_weather", {"city": "Oslo"})]
    assert all(c["id"].startswith("call_") for c in calls)
    assert last["done_reason"] == "stop"


def folded(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """A stream's lines joined as Ollama's clients join them: content and thinking appended, calls collected."""
    message = {"role": "assistant", "content": "".join(o["message"]["content"] for o in objects)}
    thinking = "".join(o["message"].get("thinking", "") for o in objects)
    calls = [c for o in objects for c in o["message"].get("tool_calls", [])]
    return {**message, **({"thinking": thinking} if thinking else {}), **({"tool_calls": calls} if calls else {})}


ANSWER = ("<think>Paris first.</think>Let me check." + PARIS + "\nand\n"
          + tool_call_text("get_weather", {"city": "Oslo \"Norway\""}))


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, 21, len(ANSWER)])
def test_the_stream_adds_up_to_the_body_at_every_chunking(make_app, size):
    app = make_app(FakeUpstream(text_chunks(ANSWER, size=size)))
    body = {"model": MODEL, "messages": ASK, "tools": [WEATHER_TOOL]}
    whole = app.test_client().post("/api/chat", json={**body, "stream": False}).get_json()
    streamed = lines(app.test_client().post("/api/chat", json=body))

    def without_ids(message: dict[str, Any]) -> dict[str, Any]:
        return {**message, "tool_calls": [c["function"] for c in message.get("tool_calls", [])]}

    assert without_ids(folded(streamed)) == without_ids(whole["message"])
    assert whole["message"]["thinking"] == "Paris first." and len(whole["message"]["tool_calls"]) == 2
    assert whole["message"]["tool_calls"][1]["function"]["arguments"] == {"city": 'Oslo "Norway"'}
    assert streamed[-1]["done_reason"] == whole["done_reason"] == "stop"


def test_tool_results_are_paired_by_id_by_name_or_in_order(make_app):
    upstream = FakeUpstream(text_chunks("Paris is sunny, Oslo rainy, Rome warm."))
    calls = [{"id": "call_kept", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
             {"function": {"name": "get_time", "arguments": {"tz": "CET"}}},
             {"function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]
    messages = [*ASK, {"role": "assistant", "content": "", "tool_calls": calls},
                {"role": "tool", "tool_call_id": "call_kept", "content": "sunny"},  # the id toolwire gave
                {"role": "tool", "tool_name": "get_time", "content": "12:00"},  # Ollama's own way
                {"role": "tool", "content": "warm"}]  # Home Assistant's: neither
    tools = [WEATHER_TOOL, {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
    answer = chat(make_app, upstream, {"messages": messages, "tools": tools, "stream": False}).get_json()
    assert answer["message"]["content"] == "Paris is sunny, Oslo rainy, Rome warm."
    prompt = "\n".join(m["content"] for m in sent(upstream)["messages"])
    assert "get_weather (call_id call_kept):\nsunny" in prompt
    assert "get_time (call_id call_1_1):\n12:00" in prompt
    assert "get_weather (call_id call_1_2):\nwarm" in prompt
    assert '{"city": "Rome"}' in prompt  # the assistant's calls written back


def test_native_mode_sends_the_calls_and_results_as_chat_tool_messages(make_app):
    upstream = FakeUpstream(text_chunks("Sunny."))
    messages = [*ASK, {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                {"role": "tool", "tool_name": "get_weather", "content": "sunny"}]
    chat(make_app, upstream, {"messages": messages, "tools": [WEATHER_TOOL], "stream": False}, tool_mode="native")
    body = sent(upstream)
    assert body["tools"][0]["function"]["name"] == "get_weather"
    assistant, result = body["messages"][1:]
    assert assistant["tool_calls"] == [{"id": "call_1_0", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    assert (result["role"], result["tool_call_id"], result["content"]) == ("tool", "call_1_0", "sunny")


def reasoning_chunks(thought: str, text: str) -> list[UpstreamChunk]:
    return [UpstreamChunk([ChoiceDelta(reasoning=thought)]), *text_chunks(text)]


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize("think", [None, True, False])
def test_thinking_is_message_thinking_unless_think_is_false(make_app, stream, think):
    upstream = FakeUpstream(reasoning_chunks("The user wants weather.", "Sunny."))
    body: dict[str, Any] = {"messages": ASK, "stream": stream, **({} if think is None else {"think": think})}
    response = chat(make_app, upstream, body)
    objects = lines(response) if stream else [response.get_json()]
    thinking = "".join(o["message"].get("thinking", "") for o in objects)
    assert thinking == ("" if think is False else "The user wants weather.")
    assert "".join(o["message"]["content"] for o in objects) == "Sunny."


def test_think_level_is_reasoning_effort_and_an_earlier_thinking_goes_back(make_app):
    upstream = FakeUpstream(text_chunks("Done."))
    messages = [*ASK, {"role": "assistant", "content": "", "thinking": "I should call it.",
                       "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                {"role": "tool", "content": "sunny"}]
    chat(make_app, upstream, {"messages": messages, "tools": [WEATHER_TOOL], "think": "high", "stream": False})
    body = sent(upstream)
    assert body["reasoning_effort"] == "high"
    assert "I should call it." in "\n".join(m["content"] for m in body["messages"])


def test_the_marker_header_gives_a_marker_as_on_chat(make_app):
    upstream = FakeUpstream(text_chunks("ok"))
    make_app(upstream).test_client().post("/api/chat", headers={"X-Toolwire-Marker": "1"}, json={
        "model": MODEL, "messages": ASK, "tools": [WEATHER_TOOL], "stream": False})
    assert '<tool_call marker="' in sent(upstream)["messages"][0]["content"]


def test_options_map_to_the_back_ends_fields(make_app):
    upstream = FakeUpstream(text_chunks("ok"))
    options = {"temperature": 0.2, "top_p": 0.9, "top_k": 20, "seed": 42, "num_predict": 64, "stop": ["\n\n"],
               "num_ctx": 8192, "num_gpu": 1, "repeat_penalty": 1.1}
    chat(make_app, upstream, {"messages": ASK, "options": options, "stream": False, "keep_alive": -1})
    body = sent(upstream)
    assert {k: body[k] for k in ("temperature", "top_p", "top_k", "seed", "max_tokens", "stop")} == {
        "temperature": 0.2, "top_p": 0.9, "top_k": 20, "seed": 42, "max_tokens": 64, "stop": ["\n\n"]}
    for unsent in ("num_ctx", "num_gpu", "repeat_penalty", "keep_alive", "options", "num_predict"):
        assert unsent not in body


def test_num_predict_below_zero_is_no_limit(make_app):
    upstream = FakeUpstream(text_chunks("ok"))
    chat(make_app, upstream, {"messages": ASK, "options": {"num_predict": -1}, "stream": False})
    assert "max_tokens" not in sent(upstream)


def test_an_empty_format_is_no_format(make_app):
    upstream = FakeUpstream(text_chunks('{"name": "get_weather", "arguments": {"city": "Paris"}}'))  # a bare JSON call
    answer = chat(make_app, upstream, {"messages": ASK, "tools": [WEATHER_TOOL], "format": "", "stream": False})
    assert answer.get_json()["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert "response_format" not in sent(upstream)


@pytest.mark.parametrize("fmt, response_format", [
    ("json", {"type": "json_object"}),
    ({"type": "object", "properties": {"age": {"type": "integer"}}},
     {"type": "json_schema", "json_schema": {"name": "format", "schema": {
         "type": "object", "properties": {"age": {"type": "integer"}}}}}),
])
def test_format_is_the_response_format(make_app, fmt, response_format):
    upstream = FakeUpstream(text_chunks('{"age": 22}'))
    answer = chat(make_app, upstream, {"messages": ASK, "format": fmt, "stream": False}).get_json()
    assert answer["message"]["content"] == '{"age": 22}'  # JSON asked for: content, not a call
    assert sent(upstream)["response_format"] == response_format


def test_images_are_refused_for_a_text_back_end_naming_the_message(make_app):
    upstream = FakeUpstream(text_chunks("never"))
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is it?",
                                                             "images": ["iVBORw0KGgo="]}]
    message = error_of(chat(make_app, upstream, {"messages": messages}), 400)
    assert "messages[1].images" in message and "images" in message
    assert upstream.bodies == []


def test_images_reach_a_native_back_end_as_image_parts(make_app):
    upstream = FakeUpstream(text_chunks("A cat."))
    messages = [{"role": "user", "content": "What is it?", "images": ["iVBORw0KGgo="]}]
    chat(make_app, upstream, {"messages": messages, "stream": False}, tool_mode="native")
    [user] = sent(upstream)["messages"]
    assert user["content"] == [{"type": "text", "text": "What is it?"}, {
        "type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]


# -- /api/generate -------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_generate_answers_the_prompt_with_its_system(make_app, stream):
    upstream = FakeUpstream(text_chunks("Because of Rayleigh scattering.", usage=USAGE))
    response = make_app(upstream).test_client().post("/api/generate", json={
        "model": MODEL, "prompt": "Why is the sky blue?", "system": "Be brief.", "stream": stream})
    objects = lines(response) if stream else [response.get_json()]
    assert "".join(o["response"] for o in objects) == "Because of Rayleigh scattering."
    assert "message" not in objects[-1] and objects[-1]["done"] is True and objects[-1]["eval_count"] == 7
    assert [m["role"] for m in sent(upstream)["messages"]] == ["system", "user"]


def test_generate_raw_sends_the_prompt_alone(make_app):
    upstream = FakeUpstream(text_chunks("ok"))
    make_app(upstream).test_client().post("/api/generate", json={
        "model": MODEL, "prompt": "[INST] hi [/INST]", "system": "ignored", "raw": True, "stream": False})
    assert sent(upstream)["messages"] == [{"role": "user", "content": "[INST] hi [/INST]"}]


def test_generate_refuses_a_suffix(make_app):
    upstream = FakeUpstream(text_chunks("never"))
    response = make_app(upstream).test_client().post("/api/generate", json={
        "model": MODEL, "prompt": "def f(", "suffix": "return x"})
    assert "'suffix'" in error_of(response, 400)


# -- the model routes ----------------------------------------------------------------------------------


def test_tags_and_ps_list_the_served_models(make_app):
    client = make_app(FakeUpstream(), model_map={"small": "fake-model"}).test_client()
    tags = client.get("/api/tags").get_json()["models"]
    assert [m["name"] for m in tags] == ["fake-model", "small"]
    assert all(m["model"] == m["name"] and m["size"] == 0 and "details" in m for m in tags)
    running = client.get("/api/ps").get_json()["models"]
    assert [m["name"] for m in running] == ["fake-model", "small"] and all("expires_at" in m for m in running)


@pytest.mark.parametrize("settings, thinking", [({}, False), ({"upstream_opens_reasoning": True}, True),
                                                 ({"tool_format": "harmony"}, True),
                                                 ({"upstream_opens_reasoning": True, "reasoning": "hide"}, False)])
def test_show_reports_tools_and_completion_and_thinking_where_the_format_reasons(make_app, settings, thinking):
    client = make_app(FakeUpstream(), **settings).test_client()
    for body in ({"model": MODEL}, {"name": MODEL}):
        shown = client.post("/api/show", json=body).get_json()
        assert shown["capabilities"] == ["completion", "tools", *(["thinking"] if thinking else [])]
        assert "details" in shown and "model_info" in shown


def test_version_and_the_root_probe(make_app):
    client = make_app(FakeUpstream()).test_client()
    assert client.get("/api/version").get_json() == {"version": "0.32.0"}
    root = client.get("/")
    assert (root.status_code, root.mimetype, root.get_data(as_text=True)) == (200, "text/plain", "Ollama is running")
    assert client.head("/").status_code == 200  # the ollama CLI's heartbeat


# -- /api/embed ----------------------------------------------------------------------------------------


class EmbeddingUpstream(FakeUpstream):
    def __init__(self, failure: UpstreamError | None = None):
        super().__init__()
        self.asked: list[dict[str, Any]] = []
        self.failure = failure

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(body)
        if self.failure:
            raise self.failure
        return {"data": [{"index": i, "embedding": [float(i), 0.5]} for i in reversed(range(len(body["input"])))],
                "usage": {"prompt_tokens": 4}}


def test_embed_asks_the_back_ends_embeddings(make_app):
    upstream = EmbeddingUpstream()
    client = make_app(upstream, model_map={"nomic": "nomic-embed-text"}).test_client()
    answer = client.post("/api/embed", json={"model": "nomic", "input": ["a", "b"]}).get_json()
    assert answer["model"] == "nomic" and answer["embeddings"] == [[0.0, 0.5], [1.0, 0.5]]
    assert answer["prompt_eval_count"] == 4
    assert upstream.asked == [{"model": "nomic-embed-text", "input": ["a", "b"]}]
    one = client.post("/api/embeddings", json={"model": "nomic", "prompt": "a"}).get_json()
    assert one == {"embedding": [0.0, 0.5]}


def test_embed_without_embeddings_is_a_501_naming_the_model(make_app):
    message = error_of(make_app(FakeUpstream()).test_client().post("/api/embed", json={
        "model": MODEL, "input": "hi"}), 501)
    assert f"model '{MODEL}' does not support embeddings" in message


def test_embed_on_a_back_end_answering_404_there_is_a_501(make_app):
    upstream = EmbeddingUpstream(UpstreamError("client_error", "Not Found", status=404))
    message = error_of(make_app(upstream).test_client().post("/api/embed", json={"model": MODEL, "input": "x"}), 501)
    assert "answered 404 at /embeddings" in message


def test_embed_on_a_back_end_answering_501_there_is_a_501(make_app):
    """A 5xx is the client's 502 as a rule; the back end's 501 says it has no such endpoint."""
    upstream = EmbeddingUpstream(status_error(501, b'{"error": {"message": "not implemented"}}'))
    message = error_of(make_app(upstream).test_client().post("/api/embed", json={"model": MODEL, "input": "x"}), 501)
    assert "answered 501 at /embeddings" in message


def test_http_upstream_embeddings_posts_openais_request(serve):
    from support.loopback import Answer

    seen = []

    def handler(request):
        seen.append(request)
        return Answer(200, {"Content-Type": "application/json"},
                      json.dumps({"data": [{"index": 0, "embedding": [0.25]}]}).encode())

    upstream = serve(handler)
    assert upstream.embeddings({"model": "e", "input": ["x"]}) == {"data": [{"index": 0, "embedding": [0.25]}]}
    assert seen[0].path.endswith("/embeddings") and json.loads(seen[0].body) == {"model": "e", "input": ["x"]}


# -- refusals in Ollama's envelope ---------------------------------------------------------------------


@pytest.mark.parametrize("body, param", [
    ({"messages": ASK}, "model"),
    ({"model": MODEL, "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
    ({"model": MODEL, "messages": ASK, "options": {"top_p": 3}}, "options.top_p"),
    ({"model": MODEL, "messages": ASK, "format": "yaml"}, "format"),
    ({"model": MODEL, "messages": ASK, "think": "very"}, "think"),
    ({"model": MODEL, "messages": [{"role": "assistant", "tool_calls": [
        {"function": {"name": "f", "arguments": "not an object"}}]}]}, "messages[0].tool_calls[0].function.arguments"),
    ({"model": MODEL, "messages": ASK, "tools": [{"type": "function", "function": {"name": "bad name"}}]},
     "tools[0].function.name"),
])
def test_a_bad_chat_body_is_a_400_naming_the_parameter(make_app, body, param):
    upstream = FakeUpstream(text_chunks("never"))
    response = make_app(upstream).test_client().post("/api/chat", json=body)
    assert param in error_of(response, 400)
    assert upstream.bodies == []


@pytest.mark.parametrize("path, body, param", [("/api/show", {"model": 5}, "model"), ("/api/show", {}, "model"),
                                               ("/api/embed", {"model": MODEL, "input": [1]}, "input"),
                                               ("/api/generate", {"model": MODEL, "raw": "maybe"}, "raw")])
def test_a_bad_body_elsewhere_is_a_400_naming_the_parameter(make_app, path, body, param):
    assert param in error_of(make_app(FakeUpstream()).test_client().post(path, json=body), 400)


def test_a_body_that_is_not_json_is_a_400(make_app):
    response = make_app(FakeUpstream()).test_client().post("/api/chat", data="nope",
                                                           content_type="application/json")
    error_of(response, 400)


def test_too_many_tools_is_the_same_limit(make_app):
    tools = [{"type": "function", "function": {"name": f"tool_{i}"}} for i in range(3)]
    response = chat(make_app, FakeUpstream(), {"messages": ASK, "tools": tools}, max_tools=2)
    assert "tools" in error_of(response, 400)


def test_an_unknown_api_path_is_a_404_and_a_wrong_method_a_405_in_ollamas_envelope(make_app):
    client = make_app(FakeUpstream()).test_client()
    message = error_of(client.post("/api/nothing", json={"model": MODEL}), 404)
    assert "POST /api/nothing is not supported" in message and "pull" not in message
    wrong_method = client.get("/api/chat")
    assert error_of(wrong_method, 405) and wrong_method.headers["Allow"] == "POST"


@pytest.mark.parametrize("method, path", [("POST", "/api/pull"), ("POST", "/api/push"), ("POST", "/api/create"),
                                          ("POST", "/api/copy"), ("DELETE", "/api/delete"),
                                          ("POST", "/api/blobs/sha256:0123")])
def test_managing_models_is_a_501_saying_toolwire_manages_none(make_app, method, path):
    """They were a 404 naming what is served, as for a path Ollama does not have."""
    upstream = FakeUpstream()
    response = make_app(upstream).test_client().open(path, method=method, json={"model": MODEL})
    assert f"{method} {path}: toolwire does not manage models" in error_of(response, 501)
    assert upstream.bodies == []


@pytest.mark.parametrize("route, empty, answer", [
    ("/api/chat", {}, {"message": {"role": "assistant", "content": ""}}),
    ("/api/chat", {"messages": []}, {"message": {"role": "assistant", "content": ""}}),
    ("/api/generate", {}, {"response": ""}),
    ("/api/generate", {"prompt": "", "stream": True}, {"response": ""}),
], ids=["chat", "chat-empty-list", "generate", "generate-streamed"])
@pytest.mark.parametrize("keep_alive, reason", [
    (0, "unload"), ("0", "unload"), ("0s", "unload"), ("0m0s", "unload"), (0.0, "unload"),
    (None, "load"), ("5m", "load"), (300, "load"), (-1, "load"), ("-1m", "load"),
])
def test_a_request_with_nothing_to_answer_loads_or_unloads_the_model_as_ollama_answers_it(
        make_app, route, empty, answer, keep_alive, reason):
    """Ollama's clients load a model with an empty request and unload it with ``keep_alive`` zero: one JSON
    object, done, with its ``done_reason``; nothing is asked of the back end."""
    upstream = FakeUpstream()
    body = {"model": MODEL, **empty, **({} if keep_alive is None else {"keep_alive": keep_alive})}
    response = make_app(upstream).test_client().post(route, json=body)
    assert response.status_code == 200 and response.mimetype == "application/json"
    got = response.get_json()
    assert got.pop("created_at").endswith("Z")
    assert got == {"model": MODEL, **answer, "done": True, "done_reason": reason}
    assert upstream.bodies == []


@pytest.mark.parametrize("keep_alive", ["soon", "5 m", "1x", True, [0]])
def test_a_keep_alive_that_is_no_duration_is_refused(make_app, keep_alive):
    response = make_app(FakeUpstream()).test_client().post("/api/chat", json={"model": MODEL,
                                                                              "keep_alive": keep_alive})
    assert "keep_alive" in error_of(response, 400)


def test_a_missing_key_is_a_401_in_ollamas_envelope(make_app):
    client = make_app(FakeUpstream(text_chunks("ok")), api_keys="sk-ollama").test_client()
    assert "Authorization: Bearer" in error_of(client.post("/api/chat", json={"model": MODEL, "messages": ASK}), 401)
    assert error_of(client.get("/api/tags"), 401)
    ok = client.post("/api/chat", json={"model": MODEL, "messages": ASK, "stream": False},
                     headers={"Authorization": "Bearer sk-ollama"})
    assert ok.status_code == 200


def test_a_body_over_the_size_limit_is_a_413(make_app):
    response = chat(make_app, FakeUpstream(), {"messages": [{"role": "user", "content": "x" * 4096}]},
                    max_body_bytes=1024)
    assert "1024" in error_of(response, 413)


def test_a_length_cut_is_done_reason_length(make_app):
    upstream = FakeUpstream(text_chunks("Cut sh", finish="length"))
    answer = chat(make_app, upstream, {"messages": ASK, "stream": False}).get_json()
    assert (answer["message"]["content"], answer["done_reason"]) == ("Cut sh", "length")


def test_a_back_end_refusal_keeps_its_status(make_app):
    upstream = FakeUpstream(open_error=UpstreamError("client_error", "context too long", status=400))
    assert error_of(chat(make_app, upstream, {"messages": ASK}), 400) == "context too long"


def test_a_mid_stream_failure_ends_the_stream_with_an_error_line(make_app):
    failure = UpstreamError("server_error", "the back end fell over", status=502)
    upstream = FakeUpstream([*text_chunks("Partial", finish=None), failure])
    objects = lines(chat(make_app, upstream, {"messages": ASK}))
    assert "".join(o["message"]["content"] for o in objects[:-1]) == "Partial"
    assert list(objects[-1]) == ["error"] and "the back end fell over" in objects[-1]["error"]


# -- where it is mounted -------------------------------------------------------------------------------


def test_it_is_at_the_root_beside_v1_and_on_a_prefix_of_its_own():
    host = Flask(__name__)
    upstream = FakeUpstream(text_chunks("ok"))
    surfaces = (*DEFAULT_SURFACES, ollama_surface("/ollama"))  # named ollama_ollama: beside the root one
    Toolwire(host, settings=Settings(), upstream=upstream, surfaces=surfaces)
    client = host.test_client()
    for path in ("/api/version", "/ollama/api/version"):
        assert client.get(path).get_json() == {"version": "0.32.0"}
    assert client.get("/ollama/").get_data(as_text=True) == "Ollama is running"
    assert client.post("/ollama/api/chat", json={"model": MODEL, "messages": ASK, "stream": False}
                       ).get_json()["message"]["content"] == "ok"
    assert "/ollama/api/pull" in error_of(client.post("/ollama/api/pull", json={}), 501)
    assert client.post("/v1/chat/completions", json={"model": MODEL, "messages": ASK}).status_code == 200
