"""POST /v1/chat/completions through Flask's test client on a scripted upstream."""

from __future__ import annotations

import gc
import json

import gevent
import pytest

from app.upstreams.base import ChoiceDelta, UpstreamChunk, UpstreamError
from statemachine import ModelOutputError
from support.fakes import WEATHER_TOOL, FakeStream, FakeUpstream, text_chunks
from support.invariants import check_chat_stream

USER = [{"role": "user", "content": "Weather in Paris?"}]
CALL_TEXT = 'Let me check.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


def frames(body: bytes) -> list[str]:
    """The ``data`` payloads and comment lines of an SSE body, in order."""
    out = []
    for block in body.decode().split("\n\n"):
        if not block:
            continue
        assert "\n" not in block, block
        out.append(block[len("data: "):] if block.startswith("data: ") else block)
    return out


def chunks(body: bytes) -> list[dict]:
    return [json.loads(f) for f in frames(body) if f not in ("[DONE]",) and not f.startswith(":")]


def post(client, **body):
    body.setdefault("model", "m")
    body.setdefault("messages", USER)
    return client.post("/v1/chat/completions", json=body)


# -- request validation -----------------------------------------------------------------------


@pytest.mark.parametrize("body, param", [
    ({"messages": USER}, "model"),
    ({"model": "m"}, "messages"),
    ({"model": "m", "messages": []}, "messages"),
    ({"model": "m", "messages": [{"content": "hi"}]}, "messages[0].role"),
    ({"model": "m", "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
    ({"model": "m", "messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
    ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
    ({"model": "m", "messages": USER, "tools": [{"type": "function", "function": {}}]}, "tools[0].function.name"),
    ({"model": "m", "messages": USER, "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"model": "m", "messages": USER, "tools": [{"type": "custom"}]}, "tools[0].custom"),
    ({"model": "m", "messages": USER, "tool_choice": "sometimes"}, "tool_choice"),
    ({"model": "m", "messages": USER, "tools": [WEATHER_TOOL],
      "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice.function.name"),
    ({"model": "m", "messages": USER, "tool_choice": "required"}, "tool_choice"),
    ({"model": "m", "messages": USER, "tools": [WEATHER_TOOL], "functions": [WEATHER_TOOL["function"]]},
     "functions"),
    ({"model": "m", "messages": USER, "functions": [WEATHER_TOOL["function"]], "function_call": {"name": "x"}},
     "function_call.name"),
    ({"model": "m", "messages": USER, "temperature": 7}, "temperature"),
    ({"model": "m", "messages": USER, "n": 0}, "n"),
    ({"model": "m", "messages": USER, "stream": "yes please"}, "stream"),
])
def test_invalid_request_is_400_naming_the_param(client, upstream, body, param):
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert param in error["message"]
    assert upstream.bodies == []


def test_malformed_json_is_400_invalid_json(client):
    response = client.post("/v1/chat/completions", data=b'{"model": ', content_type="application/json")
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_json"


def test_non_object_body_is_400(client):
    response = client.post("/v1/chat/completions", json=[1, 2])
    assert response.status_code == 400
    assert response.get_json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("method, path, status, code", [
    ("get", "/v1/nowhere", 404, "not_found"),
    ("get", "/v1/chat/completions", 405, "method_not_allowed"),
])
def test_flask_errors_use_the_envelope(client, method, path, status, code):
    response = getattr(client, method)(path)
    assert response.status_code == status
    assert response.get_json() == {"error": {"message": response.get_json()["error"]["message"],
                                             "type": "invalid_request_error", "param": None, "code": code}}


def test_body_too_large_is_413_in_the_envelope(make_app, upstream):
    client = make_app(upstream, max_body_bytes=100).test_client()
    response = post(client, messages=[{"role": "user", "content": "x" * 500}])
    assert response.status_code == 413
    assert response.get_json()["error"]["code"] == "request_entity_too_large"


# -- upstream body ---------------------------------------------------------------------------------


def test_upstream_body_has_no_tool_keys_and_passes_parameters_through(make_app, upstream):
    client = make_app(upstream, model_map={"gpt-4o": "qwen"}).test_client()
    post(client, model="gpt-4o", tools=[WEATHER_TOOL], tool_choice="auto", parallel_tool_calls=False,
         temperature=0.2, stop=["END"], max_tokens=50, max_completion_tokens=60, seed=7, top_p=0.9,
         response_format={"type": "text"}, n=1)
    [body] = upstream.bodies
    assert not {"tools", "tool_choice", "functions", "function_call", "parallel_tool_calls"} & set(body)
    assert body["model"] == "qwen"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert (body["temperature"], body["stop"], body["max_tokens"], body["max_completion_tokens"], body["seed"],
            body["top_p"], body["response_format"]) == (0.2, ["END"], 50, 60, 7, 0.9, {"type": "text"})
    assert "get_weather" in body["messages"][0]["content"]  # the manifest went to the system message


def test_non_stream_request_still_streams_from_the_upstream(client, upstream):
    post(client, stream=False)
    assert upstream.bodies[0]["stream"] is True


# -- non-streaming ---------------------------------------------------------------------------------


def test_non_stream_text_shape(client, upstream):
    upstream.script = text_chunks("Hello there.", usage={"prompt_tokens": 11, "completion_tokens": 3,
                                                          "total_tokens": 14})
    response = post(client, model="client-model")
    assert response.status_code == 200
    assert response.headers["X-Request-Id"]
    body = response.get_json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["model"] == "client-model"
    [choice] = body["choices"]
    assert choice["index"] == 0 and choice["finish_reason"] == "stop" and choice["logprobs"] is None
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == "Hello there."
    assert "tool_calls" not in choice["message"]
    assert body["usage"] == {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    assert upstream.streams[0].closed


def test_non_stream_tool_call_shape(client, upstream):
    upstream.script = text_chunks('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>')
    body = post(client, tools=[WEATHER_TOOL]).get_json()
    [choice] = body["choices"]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["content"] is None
    [call] = message["tool_calls"]
    assert call["id"].startswith("call_") and call["type"] == "function"
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}


def test_usage_is_estimated_when_the_upstream_sends_none(client, upstream):
    upstream.script = text_chunks("x" * 40)
    usage = post(client).get_json()["usage"]
    assert usage["completion_tokens"] == 10
    assert usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_native_upstream_tool_calls_are_passed_through(client, upstream):
    upstream.script = [
        UpstreamChunk([ChoiceDelta(tool_calls=[{"index": 0, "id": "up_1", "type": "function",
                                                "function": {"name": "get_weather", "arguments": ""}}])]),
        UpstreamChunk([ChoiceDelta(tool_calls=[{"index": 0, "function": {"arguments": '{"city": "Oslo"}'}}])]),
        UpstreamChunk([ChoiceDelta(finish_reason="tool_calls")]),
    ]
    [choice] = post(client, tools=[WEATHER_TOOL]).get_json()["choices"]
    [call] = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    assert choice["finish_reason"] == "tool_calls"


# -- streaming ---------------------------------------------------------------------------------------


def test_stream_text_shape(client, upstream):
    upstream.script = text_chunks("Hello there, world.", usage={"prompt_tokens": 9, "completion_tokens": 4,
                                                                 "total_tokens": 13})
    response = post(client, stream=True, stream_options={"include_usage": True})
    assert response.status_code == 200
    assert response.mimetype == "text/event-stream"
    assert response.headers["Cache-Control"] == "no-cache" and response.headers["X-Accel-Buffering"] == "no"
    assert "Content-Length" not in response.headers
    body = response.get_data()
    check_chat_stream(body, include_usage=True, legacy=False)
    assert b"event:" not in body
    items = frames(body)
    assert items[-1] == "[DONE]" and items.count("[DONE]") == 1
    parsed = chunks(body)
    assert len({(c["id"], c["created"], c["model"]) for c in parsed}) == 1
    assert all(c["object"] == "chat.completion.chunk" and c["usage"] is None for c in parsed[:-1])
    deltas = [c["choices"][0]["delta"] for c in parsed[:-1]]
    assert deltas[0]["role"] == "assistant"
    assert all("role" not in d for d in deltas[1:])
    finishes = [c["choices"][0]["finish_reason"] for c in parsed[:-1]]
    assert finishes[:-1] == [None] * (len(finishes) - 1) and finishes[-1] == "stop"
    assert deltas[-1] == {}
    assert "".join(d.get("content", "") for d in deltas) == "Hello there, world."
    assert parsed[-1]["choices"] == [] and parsed[-1]["usage"] == {"prompt_tokens": 9, "completion_tokens": 4,
                                                                    "total_tokens": 13}


def test_stream_without_include_usage_has_no_usage(client, upstream):
    body = post(client, stream=True).get_data()
    check_chat_stream(body, include_usage=False)
    assert all("usage" not in c and c["choices"] for c in chunks(body))


def test_stream_tool_call_shape_matches_non_stream(client, upstream):
    upstream.script = text_chunks(CALL_TEXT, size=3)
    body = post(client, stream=True, tools=[WEATHER_TOOL]).get_data()
    summary = check_chat_stream(body, include_usage=False, legacy=False)
    parsed = chunks(body)
    calls = [tc for c in parsed for tc in c["choices"][0]["delta"].get("tool_calls", [])]
    header, *rest = calls
    assert set(header) == {"index", "id", "type", "function"}
    assert header["function"] == {"name": "get_weather", "arguments": ""}
    assert all(set(tc) == {"index", "function"} and set(tc["function"]) == {"arguments"} for tc in rest)
    assert json.loads("".join(tc["function"]["arguments"] for tc in rest)) == {"city": "Paris"}
    assert parsed[-1]["choices"][0]["finish_reason"] == "tool_calls"

    upstream.script = text_chunks(CALL_TEXT, size=7)
    [choice] = post(client, tools=[WEATHER_TOOL]).get_json()["choices"]
    assert choice["message"]["content"] == summary.choices[0].content == "Let me check."
    assert choice["message"]["tool_calls"][0]["function"]["arguments"] == \
        "".join(tc["function"]["arguments"] for tc in rest)


def test_stream_with_n_choices_keeps_them_apart(client, upstream):
    script = []
    for a, b in zip(text_chunks("first answer"), text_chunks(CALL_TEXT, index=1)):
        script += [a, b]
    script += text_chunks(CALL_TEXT, index=1)[len(text_chunks("first answer")):]
    upstream.script = script
    body = post(client, stream=True, n=2, tools=[WEATHER_TOOL]).get_data()
    summary = check_chat_stream(body, include_usage=False)
    assert summary.choices[0].content == "first answer" and summary.choices[0].finish_reason == "stop"
    assert summary.choices[1].finish_reason == "tool_calls"
    assert upstream.bodies[0]["n"] == 2


def test_legacy_functions_stream_and_non_stream(client, upstream):
    request = {"functions": [WEATHER_TOOL["function"]], "function_call": "auto"}
    upstream.script = text_chunks(CALL_TEXT)
    body = post(client, stream=True, **request).get_data()
    check_chat_stream(body, legacy=True)
    parsed = chunks(body)
    first_call = next(c["choices"][0]["delta"] for c in parsed if "function_call" in c["choices"][0]["delta"])
    assert first_call["function_call"] == {"name": "get_weather", "arguments": ""}
    assert not any("tool_calls" in c["choices"][0]["delta"] for c in parsed)
    assert parsed[-1]["choices"][0]["finish_reason"] == "function_call"

    upstream.script = text_chunks(CALL_TEXT)
    [choice] = post(client, **request).get_json()["choices"]
    assert choice["finish_reason"] == "function_call"
    assert "tool_calls" not in choice["message"]
    assert choice["message"]["function_call"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}


def test_empty_choice_still_gets_role_and_finish(client, upstream):
    upstream.script = [UpstreamChunk([ChoiceDelta(finish_reason="stop")])]
    parsed = chunks(post(client, stream=True).get_data())
    assert [c["choices"][0]["delta"] for c in parsed] == [{"role": "assistant", "content": ""}, {}]


def test_choice_without_finish_reason_is_finished_at_eof(client, upstream):
    upstream.script = text_chunks("cut", finish=None)
    parsed = chunks(post(client, stream=True).get_data())
    assert parsed[-1]["choices"][0]["finish_reason"] == "stop"


def test_stop_after_first_call_closes_the_upstream_early(make_app):
    upstream = FakeUpstream(text_chunks(CALL_TEXT + " and more text" * 20, size=4))
    client = make_app(upstream, stop_after_tools="first").test_client()
    body = post(client, stream=True, tools=[WEATHER_TOOL]).get_data()
    check_chat_stream(body)
    assert chunks(body)[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert upstream.streams[0].closed
    assert upstream.delivered < len(upstream.script)


# -- keep-alives and disconnects -------------------------------------------------------------------


def test_keepalive_comments_while_upstream_is_silent(make_app):
    upstream = FakeUpstream([0.35, *text_chunks("late")])
    client = make_app(upstream, heartbeat_seconds=0.1).test_client()
    items = frames(post(client, stream=True).get_data())
    assert items.count(": keep-alive") >= 2
    assert items[-1] == "[DONE]"


def test_keepalive_opt_out_header(make_app):
    upstream = FakeUpstream([0.3, *text_chunks("late")])
    client = make_app(upstream, heartbeat_seconds=0.05).test_client()
    response = client.post("/v1/chat/completions", json={"model": "m", "messages": USER, "stream": True},
                           headers={"X-No-Keepalive": "1"})
    assert not any(f.startswith(":") for f in frames(response.get_data()))


def test_frames_ready_together_go_out_in_one_write(make_app):
    """The body writes at the upstream's pauses: after the first content (which goes out at once), everything
    produced before a wait goes out as one write."""
    upstream = FakeUpstream([*text_chunks("one two three ", size=3, finish=None), 0.05,
                             *text_chunks("four five", size=3)])
    client = make_app(upstream, heartbeat_seconds=0).test_client()
    response = client.post("/v1/chat/completions", json={"model": "m", "messages": USER, "stream": True},
                           buffered=False)
    writes = list(response.response)
    assert len(writes) == 3
    assert [content(write) for write in writes] == ["one", " two three ", "four five"]
    assert frames(writes[2])[-1] == "[DONE]"


def content(write: bytes) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks(write) if c["choices"])


#: In a :class:`_StallingUpstream`'s script: the next event takes longer than the test, with no pause before it
#: (the rest of a large read already in is still being parsed, or a receive that never comes).
STALL = "stall"


class _StallingStream(FakeStream):
    def __iter__(self):
        for item in super().__iter__():
            if item == STALL:
                gevent.sleep(30)
            else:
                yield item


class _StallingUpstream(FakeUpstream):
    def open(self, body: dict, *, request_id: str | None = None) -> FakeStream:
        stream = _StallingStream(self)
        self.streams.append(stream)
        return stream


@pytest.mark.parametrize("path, body, wait", [
    ("/v1/chat/completions", {"messages": USER, "stream": True}, []),
    ("/v1/responses", {"input": "hi", "stream": True}, []),
    ("/v1/messages", {"messages": USER, "max_tokens": 64, "stream": True}, [0.05]),  # the opening goes first
])
def test_the_first_content_goes_out_before_the_rest_of_a_ready_batch(make_app, path, body, wait):
    """Issue 30: the first content frame is written as soon as it is made, not with the ready frames behind it
    (a batch of them cost a 500-chunk stream's first content a millisecond at concurrency 1); also when the
    opening frames went out alone at a wait before it."""
    upstream = _StallingUpstream([*wait, *text_chunks("Hello", finish=None), STALL, *text_chunks(" world")])
    client = make_app(upstream, heartbeat_seconds=0).test_client()
    sent = b""
    with gevent.Timeout(2):  # a BaseException: the body cannot turn it into an error frame
        response = client.post(path, json={"model": "m", **body}, buffered=False)
        writes = iter(response.response)
        while b"Hello" not in sent:
            sent += next(writes)
    response.close()
    assert upstream.streams[0].closed


def test_a_long_run_of_ready_frames_goes_out_before_the_other_streams_run(make_app, monkeypatch):
    """Past ``COOPERATE_EVERY`` ready frames the body writes them, then lets the other streams run: writing
    after that turn would hold a new stream's first byte for a whole round of the hub (at 512 streams, its
    time to first byte was 1.5x a relay's)."""
    from app.pipeline import streaming

    order: list[int | str] = []
    upstream = FakeUpstream(text_chunks("word " * 150, size=1))
    client = make_app(upstream, heartbeat_seconds=0).test_client()
    monkeypatch.setattr(streaming.gevent, "sleep", lambda seconds=0: order.append("turn"))
    response = client.post("/v1/chat/completions", json={"model": "m", "messages": USER, "stream": True},
                           buffered=False)
    for write in response.response:
        order.append(len(frames(write)))
    assert order[:4] == [1, streaming.COOPERATE_EVERY, "turn", streaming.COOPERATE_EVERY]  # the first content at once
    assert order[-1] != "turn" and frames(write)[-1] == "[DONE]"


def test_a_stream_takes_no_greenlet_of_its_own(make_app):
    """The request's greenlet pulls the upstream itself, keep-alives included (no pump per stream)."""
    import greenlet

    def live() -> set[int]:
        return {id(o) for o in gc.get_objects() if isinstance(o, greenlet.greenlet) and not o.dead}

    upstream = FakeUpstream([0.3, *text_chunks("late")])
    client = make_app(upstream, heartbeat_seconds=0.05).test_client()
    gevent.sleep(0)  # the hub (and the main greenlet's object) exist before counting
    before = live()
    response = client.post("/v1/chat/completions", json={"model": "m", "messages": USER, "stream": True},
                           buffered=False)
    reader = gevent.spawn(list, response.response)
    gevent.sleep(0.15)
    new = live() - before  # greenlets of earlier tests that end meanwhile do not count
    writes = reader.get(timeout=5)
    assert new == {id(reader)}  # the reader spawned here, nothing else
    assert b": keep-alive" in b"".join(writes) and frames(writes[-1])[-1] == "[DONE]"


def test_client_disconnect_closes_the_upstream(make_app):
    upstream = FakeUpstream([*text_chunks("a" * 20, size=1, finish=None), 5, *text_chunks("never")])
    client = make_app(upstream, heartbeat_seconds=0).test_client()
    response = client.post("/v1/chat/completions", json={"model": "m", "messages": USER, "stream": True},
                           buffered=False)
    stream = iter(response.response)
    next(stream)
    response.close()
    gevent.sleep(0.05)
    assert upstream.streams[0].closed


# -- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("error, status, headers", [
    (UpstreamError("client_error", "context too long", status=400, code="context_length_exceeded"), 400, {}),
    (UpstreamError("rate_limited", "slow down", status=429, retry_after="7"), 429, {"Retry-After": "7"}),
    (UpstreamError("server_error", "upstream 500", status=502), 502, {}),
    (UpstreamError("timeout", "too slow", status=504), 504, {}),
])
@pytest.mark.parametrize("stream", [False, True])
def test_upstream_errors_before_headers(make_app, error, status, headers, stream):
    client = make_app(FakeUpstream(open_error=error)).test_client()
    response = post(client, stream=stream)
    assert response.status_code == status
    assert response.mimetype == "application/json"
    body = response.get_json()["error"]
    assert set(body) == {"message", "type", "param", "code"} and body["message"] == error.message
    for key, value in headers.items():
        assert response.headers[key] == value


def test_upstream_failure_mid_stream_is_one_error_frame_then_done(make_app):
    upstream = FakeUpstream([*text_chunks("partial", finish=None), UpstreamError("protocol", "bad JSON")])
    client = make_app(upstream).test_client()
    response = post(client, stream=True)
    assert response.status_code == 200
    items = frames(response.get_data())
    assert items[-1] == "[DONE]"
    error = json.loads(items[-2])["error"]
    assert error["message"] == "bad JSON" and error["type"] == "server_error"
    assert upstream.streams[0].closed


def test_unexpected_failure_mid_stream_hides_the_details(make_app):
    upstream = FakeUpstream([*text_chunks("partial", finish=None), RuntimeError("secret internals")])
    response = post(make_app(upstream).test_client(), stream=True)
    body = response.get_data().decode()
    assert "secret internals" not in body and "Traceback" not in body
    assert json.loads(frames(response.get_data())[-2])["error"]["type"] == "server_error"


def test_unexpected_failure_before_headers_is_a_bare_500(make_app):
    response = post(make_app(FakeUpstream([RuntimeError("secret internals")])).test_client())
    assert response.status_code == 500
    assert "secret" not in response.get_data(as_text=True)
    assert response.get_json()["error"]["type"] == "server_error"


STRICT_TOOL = {"type": "function", "function": {**WEATHER_TOOL["function"], "strict": True}}
BAD_STRICT_CALL = '<tool_call>{"name": "get_weather", "arguments": {"town": 5}}</tool_call>'


def test_model_output_error_is_502_before_headers(make_app):
    upstream = FakeUpstream(text_chunks(BAD_STRICT_CALL))
    response = post(make_app(upstream).test_client(), tools=[STRICT_TOOL])
    assert response.status_code == 502
    assert response.get_json()["error"]["type"] == "server_error"


def test_model_output_error_mid_stream_is_an_error_frame(make_app):
    upstream = FakeUpstream(text_chunks(BAD_STRICT_CALL))
    items = frames(post(make_app(upstream).test_client(), tools=[STRICT_TOOL], stream=True).get_data())
    assert items[-1] == "[DONE]"
    assert json.loads(items[-2])["error"]["message"]


def test_model_output_error_maps_to_its_hint(make_app):
    upstream = FakeUpstream([ModelOutputError("arguments do not match", code="schema_mismatch")])
    response = post(make_app(upstream).test_client())
    assert response.status_code == 502
    assert response.get_json()["error"]["code"] == "schema_mismatch"


def test_choices_first_appear_in_index_order(client, upstream):
    # Choice 0 holds its opener back while choice 1's text is already visible.
    script = text_chunks("<tool_call>", finish=None) + text_chunks("plain words", index=1)
    upstream.script = script + text_chunks('{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>')
    body = post(client, stream=True, n=2, tools=[WEATHER_TOOL]).get_data()
    summary = check_chat_stream(body)
    first_seen = list(dict.fromkeys(c["choices"][0]["index"] for c in chunks(body)))
    assert first_seen == [0, 1]
    assert summary.choices[0].finish_reason == "tool_calls" and summary.choices[1].content == "plain words"


def test_choices_the_upstream_never_sent_are_still_finished(client, upstream):
    upstream.script = text_chunks("only one")
    body = post(client, stream=True, n=2).get_data()
    summary = check_chat_stream(body)
    assert summary.choices[1].finish_reason == "stop"
    assert len(post(client, n=2).get_json()["choices"]) == 2


@pytest.mark.parametrize("response_format, calls", [
    ({"type": "json_object"}, 0),
    ({"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}}, 0),
    ({"type": "text"}, 1),
])
def test_json_output_requests_keep_a_bare_json_answer_as_content(make_app, response_format, calls):
    answer = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    upstream = FakeUpstream(text_chunks(answer))
    body = post(make_app(upstream).test_client(), tools=[WEATHER_TOOL], response_format=response_format).get_json()
    message = body["choices"][0]["message"]
    assert len(message.get("tool_calls") or []) == calls
    assert (message["content"] == answer) == (calls == 0)
    # A JSON format is taught in the prompt while a call may come (tests/app/test_answer_format.py)
    assert upstream.bodies[0].get("response_format") == (None if calls == 0 else response_format)
