"""HttpUpstream against a loopback server: the request sent, chunk parsing, error mapping, connection reuse."""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
import tracemalloc

import pytest
from pydantic import SecretStr

from app.upstreams.base import IDLE, PAUSE, ChoiceDelta, Pause, UpstreamError
from app.upstreams.http import Bounds, HttpUpstream, upstream_request_id
from app.upstreams.openai_chat import OPENAI_CHAT, parse_chunk
from app.upstreams.transport import Timeouts
from support.fakes import WEATHER_TOOL, chunk, sse
from support.loopback import Answer, json_answer, sse_answer


def test_streams_chunks_and_sends_the_request(serve):
    body = sse(chunk("Hel"), chunk("lo"), chunk(finish="stop"),
               chunk(usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}),
               b"[DONE]", chunk("after done is ignored"))
    upstream = serve(lambda seen: sse_answer(body), api_key=SecretStr("sk-up"))
    stream = upstream.open({"model": "m", "messages": []}, request_id="rid-1")
    chunks = list(stream)
    stream.close()
    [seen] = upstream.server.seen
    assert (seen.method, seen.path, seen.headers["authorization"], seen.headers["x-request-id"]) == (
        "POST", "/v1/chat/completions", "Bearer sk-up", upstream_request_id("rid-1"))
    assert (seen.headers["accept"], seen.headers["content-type"]) == ("text/event-stream", "application/json")
    assert json.loads(seen.body) == {"model": "m", "messages": []}
    assert [c.choices[0].content for c in chunks[:2]] == ["Hel", "lo"]
    assert chunks[2].choices[0].finish_reason == "stop"
    assert chunks[3].usage["total_tokens"] == 5
    assert len(chunks) == 4


def test_events_split_across_http_chunks_and_line_ends_of_every_kind(serve):
    body = sse(chunk("a"), chunk("b")) + b'data: {"choices": [{"delta": {"content": "c"}}]}\r\n\r\n'
    body += b'data: {"choices": [{"delta": {"content": "d"}}]}'  # the last event lacks its line end
    pieces = [body[i:i + 7] for i in range(0, len(body), 7)]
    upstream = serve(lambda seen: Answer(headers={"Content-Type": "text/event-stream"}, body=pieces))
    assert [c.choices[0].content for c in upstream.open({})] == ["a", "b", "c", "d"]


def test_native_tool_calls_and_reasoning_are_parsed(serve):
    calls = [{"index": 0, "id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}]
    body = sse({"choices": [{"index": 1, "delta": {"tool_calls": calls, "reasoning_content": "hmm"},
                             "finish_reason": None}]})
    [c] = list(serve(lambda seen: sse_answer(body)).open({}))
    assert (c.choices[0].index, c.choices[0].tool_calls, c.choices[0].reasoning) == (1, calls, "hmm")


@pytest.mark.parametrize("delta, content, reasoning", [
    ({"role": "assistant", "content": "hi"}, "hi", None),  # text only: the quick path
    ({}, None, None),
    ({"content": "hi", "reasoning": "hmm"}, "hi", "hmm"),  # anything more: the full reading
    ({"content": None, "thinking": "hmm"}, None, "hmm"),
])
def test_a_chunk_reads_the_same_on_either_path(delta, content, reasoning):
    [choice] = parse_chunk({"choices": [{"index": 2, "delta": delta, "finish_reason": "stop"}]}).choices
    assert choice == ChoiceDelta(index=2, content=content, finish_reason="stop", reasoning=reasoning)


def test_json_body_instead_of_a_stream_becomes_one_chunk(serve):
    completion = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    [c] = list(serve(lambda seen: json_answer(200, json.dumps(completion).encode())).open({}))
    assert c.choices[0].content == "hi" and c.choices[0].tool_calls[0]["index"] == 0
    assert c.usage["total_tokens"] == 2


@pytest.mark.parametrize("answer, kind, status, message", [
    (json_answer(400, b'{"error": {"message": "context too long", "type": "invalid_request_error", '
                      b'"param": "messages", "code": "context_length_exceeded"}}'),
     "client_error", 400, "context too long"),
    (json_answer(404, b'{"error": "model not found"}'), "client_error", 404, "model not found"),
    (json_answer(422, b'{"detail": "bad field"}'), "client_error", 422, "bad field"),
    (json_answer(429, b'{"error": {"message": "slow down"}}', **{"Retry-After": "12"}),
     "rate_limited", 429, "slow down"),
    (json_answer(500, b'{"error": {"message": "boom"}}'), "server_error", 502, "The upstream failed (HTTP 500): boom"),
    (Answer(502, headers={"Content-Type": "text/html"}, body=b"<html>nginx at 10.1.2.3:8080</html>"),
     "server_error", 502, "The upstream failed (HTTP 502)."),
    (Answer(404, headers={"Content-Type": "text/html"}, body=b"<html>no route on 10.1.2.3</html>"),
     "client_error", 404, "The upstream rejected the request (HTTP 404)."),
    (json_answer(422, b'{"error": {"message": "' + b"x" * 70000 + b'"}}'),
     "client_error", 422, "The upstream rejected the request (HTTP 422)."),
    (Answer(503), "server_error", 502, "The upstream failed (HTTP 503)."),
])
def test_error_statuses_are_mapped(serve, answer, kind, status, message):
    with pytest.raises(UpstreamError) as info:
        serve(lambda seen: answer).open({})
    assert (info.value.kind, info.value.status, info.value.message) == (kind, status, message)
    if status == 429:
        assert info.value.retry_after == "12"
    if status == 400:
        assert (info.value.param, info.value.code) == ("messages", "context_length_exceeded")
        assert info.value.type == "invalid_request_error"


def test_connect_failures_are_mapped(serve):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: refused
        with pytest.raises(UpstreamError) as info:
            HttpUpstream(f"http://127.0.0.1:{port}/v1").open({})
    assert (info.value.kind, info.value.status) == ("connect", 502)
    with pytest.raises(UpstreamError) as info:
        HttpUpstream("http://upstream.invalid/v1").open({})  # the name does not resolve
    assert (info.value.kind, info.value.status) == ("connect", 502)


def test_a_request_the_upstream_does_not_take_in_hits_the_write_timeout():
    """A back end that accepts but never reads: sending a body larger than the socket buffers times out."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        accepted = []
        threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
        upstream = HttpUpstream(f"http://127.0.0.1:{listener.getsockname()[1]}/v1",
                                timeouts=Timeouts(write=0.3, read=30))
        started = time.monotonic()
        with pytest.raises(UpstreamError) as info:
            upstream.open({"messages": [{"role": "user", "content": "x" * 32_000_000}]})
        assert (info.value.kind, info.value.status) == ("timeout", 504)
        assert time.monotonic() - started < 10
        upstream.close()
        for conn, _ in accepted:
            conn.close()


def test_the_request_body_is_not_held_while_the_answer_is_awaited(serve):
    """orjson's output keeps its whole growth buffer (16 KiB for this 2 KiB prompt with one non-ASCII
    character). Held through the wait for the answer, a burst of streams left one such buffer per stream
    as a hole in the heap (docs/upstream-client.md): the request lets it go once it is copied out."""
    held: list[int] = []

    def answer(seen):  # runs while the client waits for the answer's head
        snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, "*/app/upstreams/*")])
        held.extend(trace.size for trace in snapshot.traces if trace.size >= 8192)
        return sse_answer(sse(chunk("ok")))

    upstream = serve(answer)
    tracemalloc.start()
    try:
        stream = upstream.open({"messages": [{"role": "system", "content": "x" * 2000 + "\u2026"}]})
        assert [c.choices[0].content for c in stream] == ["ok"]
    finally:
        tracemalloc.stop()
    assert len(upstream.server.seen[0].body) > 2000
    assert held == []


def test_no_answer_before_the_read_timeout_is_a_timeout(serve):
    def hang(seen):
        time.sleep(1.0)
        return sse_answer(b"")

    upstream = serve(hang, timeouts=Timeouts(read=0.2))
    with pytest.raises(UpstreamError) as info:
        upstream.open({})
    assert (info.value.kind, info.value.status) == ("timeout", 504)


@pytest.mark.parametrize("answer, kind, status", [
    (sse_answer(sse(chunk("a")), then="hang", hang_seconds=1.0), "timeout", 504),
    (sse_answer(sse(chunk("a")).replace(b"\n", b"\r\n"), then="hang", hang_seconds=1.0), "timeout", 504),
    (sse_answer(sse(chunk("a")) + sse(chunk("a")).replace(b"\n", b"\r\n")[:-2], then="hang", hang_seconds=1.0),
     "timeout", 504),
    (sse_answer(sse(chunk("a")), then="close"), "protocol", 502),
    (sse_answer(sse(chunk("a")), then="reset"), "connect", 502),
    (sse_answer(sse(chunk("a")) + b"data: {not json\n\n"), "protocol", 502),
    (sse_answer(sse(chunk("a")) + b"data: \xff\xfe\n\n"), "protocol", 502),
    (sse_answer(sse(chunk("a"), {"error": {"message": "engine died"}})), "server_error", 502),
])
def test_mid_stream_failures_are_mapped(serve, answer, kind, status):
    stream = serve(lambda seen: answer, timeouts=Timeouts(read=0.3)).open({})
    got = []
    with pytest.raises(UpstreamError) as info:
        for c in stream:
            got.append(c)
    assert (info.value.kind, info.value.status) == (kind, status)
    assert [c.choices[0].content for c in got] == ["a"]  # what arrived before the failure was delivered


def test_models_and_ready(serve):
    listing = json_answer(200, b'{"object": "list", "data": [{"id": "qwen", "object": "model"}]}')
    upstream = serve(lambda seen: listing)
    assert upstream.models() == [{"id": "qwen", "object": "model"}]
    assert upstream.ready() is True
    assert [(s.method, s.path, s.headers["accept"]) for s in upstream.server.seen] == [
        ("GET", "/v1/models", "application/json")] * 2
    assert serve(lambda seen: Answer(503)).ready() is False
    with pytest.raises(UpstreamError):
        serve(lambda seen: json_answer(200, b'{"data": 3}')).models()


def test_ready_gives_up_after_its_timeout(serve, monkeypatch):
    from app.upstreams import http as upstream_module

    monkeypatch.setattr(upstream_module, "READY_TIMEOUT", 0.2)
    upstream = serve(lambda seen: (time.sleep(5.0), Answer(200))[1])
    started = time.monotonic()
    assert upstream.ready() is False
    assert time.monotonic() - started < 3
    refused = HttpUpstream("http://127.0.0.1:9/v1")
    assert refused.ready() is False
    with pytest.raises(UpstreamError):
        refused.models()


def test_through_the_app_on_a_loopback_upstream(make_app, serve):
    body = sse(chunk("Sunny "), chunk("in Paris."), chunk(finish="stop"), b"[DONE]")
    client = make_app(serve(lambda seen: sse_answer(body))).test_client()
    response = client.post("/v1/chat/completions", json={"model": "m", "tools": [WEATHER_TOOL],
                                                         "messages": [{"role": "user", "content": "hi"}]})
    assert response.get_json()["choices"][0]["message"]["content"] == "Sunny in Paris."

    busy = json_answer(429, b'{"error": {"message": "busy"}}', **{"Retry-After": "3"})
    client = make_app(serve(lambda seen: busy)).test_client()
    response = client.post("/v1/chat/completions", json={"model": "m", "stream": True,
                                                         "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 429 and response.headers["Retry-After"] == "3"
    assert response.get_json()["error"] == {"message": "busy", "type": "rate_limit_error", "param": None,
                                            "code": "rate_limit_exceeded"}


def test_a_finished_stream_hands_its_connection_back(serve):
    """After ``[DONE]`` the body is read to its end, so the next request reuses the connection."""
    upstream = serve(lambda seen: sse_answer(sse(chunk("hi", finish="stop"), b"[DONE]")))
    for _ in range(2):
        stream = upstream.open({"model": "m", "messages": [], "stream": True})
        assert [d.content for c in stream for d in c.choices] == ["hi"]
        stream.close()
    ports = [seen.port for seen in upstream.server.seen]
    assert len(ports) == 2 and ports[0] == ports[1]


def test_an_abandoned_stream_closes_its_connection(serve):
    """Closing a stream before its end closes the connection (the upstream stops generating)."""
    upstream = serve(lambda seen: sse_answer(sse(chunk("a"), chunk("b")), then="hang", hang_seconds=5.0))
    for _ in range(2):
        stream = upstream.open({})
        assert next(iter(stream)).choices[0].content == "a"
        stream.close()
    ports = [seen.port for seen in upstream.server.seen]
    assert len(ports) == 2 and ports[0] != ports[1]


def test_a_connection_the_server_closed_is_not_reused(serve):
    upstream = serve(lambda seen: Answer(headers={"Content-Type": "text/event-stream", "Connection": "close"},
                                         body=sse(chunk("hi")), then="close"))
    for _ in range(2):
        stream = upstream.open({"model": "m", "messages": [], "stream": True})
        assert [d.content for c in stream for d in c.choices] == ["hi"]
        stream.close()
    ports = [seen.port for seen in upstream.server.seen]
    assert len(ports) == 2 and ports[0] != ports[1]


def test_an_idle_connection_the_server_closed_later_is_not_reused(serve):
    """A keep-alive connection the server drops while it sits in the pool is noticed before reuse."""
    closed = threading.Event()

    def answer(seen):
        if len(upstream.server.seen) == 1:
            threading.Timer(0.1, closed.set).start()
            return Answer(headers={"Content-Type": "text/event-stream"}, body=sse(chunk("hi")), then="close")
        return sse_answer(sse(chunk("hi")))

    upstream = serve(answer)
    for _ in range(2):
        assert [d.content for c in upstream.open({}) for d in c.choices] == ["hi"]
        closed.wait(5)
        time.sleep(0.1)
    ports = [seen.port for seen in upstream.server.seen]
    assert len(ports) == 2 and ports[0] != ports[1]


def test_a_large_read_is_decoded_in_pieces_so_the_first_event_goes_on_first(serve):
    from app.upstreams import http as upstream_module
    from app.upstreams.sse import SSEDecoder

    fed: list[int] = []

    class CountingDecoder(SSEDecoder):
        def feed(self, chunk: bytes) -> list[bytes]:
            fed.append(len(chunk))
            return super().feed(chunk)

    counted = dataclasses.replace(OPENAI_CHAT, framing=CountingDecoder)
    texts = [f"{i} {'é' * (i % 7)}\r\n" for i in range(2000)]
    # raw UTF-8 (not \u escapes), so the pieces' edges also cut characters in two
    burst = sse(*(json.dumps(chunk(text), ensure_ascii=False).encode() for text in texts)).replace(b"\n\n",
                                                                                                  b"\r\n\r\n")
    assert "é".encode() in burst
    assert len(burst) > 20 * upstream_module.DECODE_BYTES
    chunks = iter(serve(lambda seen: sse_answer(burst), dialect=counted).open({}))
    assert next(chunks).choices[0].content == texts[0]
    assert sum(fed) <= 2 * upstream_module.DECODE_BYTES  # a piece of the first read or two, not the whole burst
    assert [texts[0], *(c.choices[0].content for c in chunks)] == texts
    assert max(fed) <= upstream_module.DECODE_BYTES and sum(fed) == len(burst)


def test_a_redirect_is_a_502_naming_its_location(serve):
    """An http→https redirect must not become an empty answer (issue 17 #9)."""
    answer = Answer(301, headers={"Location": "https://llm.internal/v1/chat/completions"})
    with pytest.raises(UpstreamError) as info:
        serve(lambda seen: answer).open({})
    assert (info.value.kind, info.value.status, info.value.code) == ("protocol", 502, "upstream_redirect")
    assert "'https://llm.internal/v1/chat/completions'" in info.value.message


def test_the_key_is_masked_in_every_upstream_message(serve):
    """Mid-stream error objects and error bodies that echo toolwire's upstream key never carry it on (#10)."""
    key = "sk-secret-123456"
    echo = {"error": {"message": f"bad key {key}", "param": key, "code": key}}
    upstream = serve(lambda seen: sse_answer(sse(chunk("a"), echo)), api_key=SecretStr(key))
    with pytest.raises(UpstreamError) as info:
        list(upstream.open({}))
    assert key not in info.value.message and "bad key" in info.value.message
    upstream = serve(lambda seen: json_answer(400, json.dumps(echo).encode()), api_key=SecretStr(key))
    with pytest.raises(UpstreamError) as info:
        upstream.open({})
    assert key not in f"{info.value.message} {info.value.param} {info.value.code}"


def test_compressed_bodies_are_refused_not_inflated(serve):
    """toolwire asks for identity; a gzip body (a bomb, maybe) is a 502, never inflated (#8)."""
    upstream = serve(lambda seen: Answer(headers={"Content-Type": "text/event-stream", "Content-Encoding": "gzip"},
                                        body=[b"\x1f\x8b" + b"\0" * 100]))
    with pytest.raises(UpstreamError) as info:
        upstream.open({})
    assert (info.value.status, info.value.code) == (502, "upstream_content_encoding")
    assert upstream.server.seen[0].headers["accept-encoding"] == "identity"


@pytest.mark.parametrize("body, headers", [
    ([b"data: " + b"x" * 4096] * 64, {"Content-Type": "text/event-stream"}),  # one line that never ends
    ([b'{"choices": [' + b" " * 4096] * 64, {"Content-Type": "application/json"}),  # a whole body too long
])
def test_upstream_buffers_are_bounded(serve, body, headers):
    """An event, line or JSON body past its bound is a 502 naming the cause, not held whole (#8)."""
    upstream = serve(lambda seen: Answer(headers=headers, body=body),
                     bounds=Bounds(max_event_bytes=65536, max_body_bytes=65536))
    with pytest.raises(UpstreamError) as info:
        list(upstream.open({}))
    assert (info.value.status, info.value.code) == (502, "upstream_too_large")
    assert "65536 bytes" in info.value.message


def test_a_huge_model_list_is_not_ready_rather_than_an_error(serve):
    upstream = serve(lambda seen: Answer(headers={"Content-Type": "application/json"}, body=[b" " * 65536] * 4),
                     bounds=Bounds(max_body_bytes=65536))
    assert upstream.ready() is False


def test_keep_alive_comments_alone_end_at_the_idle_limit(serve):
    """An upstream that only sends comments is cut after ``idle_content`` seconds (#7)."""
    upstream = serve(lambda seen: Answer(headers={"Content-Type": "text/event-stream"},
                                         body=[sse(chunk("a"))] + [b": ping\n\n"] * 400, piece_delay=0.02),
                     bounds=Bounds(idle_content=0.3))
    started = time.monotonic()
    with pytest.raises(UpstreamError) as info:
        for piece in upstream.open({}):
            assert piece.choices[0].content == "a"
    assert (info.value.kind, info.value.status) == ("timeout", 504)
    assert time.monotonic() - started < 5  # the pings would go on for 8 s


def test_a_4xx_envelope_keeps_its_type_and_nothing_else_does(serve):
    """Of a 4xx envelope the message, type, param and code pass through; an unknown type does not (#10)."""
    for type_, expected in (("not_found_error", "not_found_error"), ("<script>", None)):
        body = json.dumps({"error": {"message": "no such model", "type": type_}}).encode()
        with pytest.raises(UpstreamError) as info:
            serve(lambda seen: json_answer(404, body)).open({})
        assert (info.value.message, info.value.type) == ("no such model", expected)


# -- pauses: the stream says when it waits, and keeps its connection through silences ------------------------------


def pulled(stream, *, waiting: bool) -> list:
    """The stream's items (chunks by their text or finish); when ``waiting``, its consumer waits for the back
    end itself after each pause (``wait``), in its own frame."""
    items = []
    for item in stream:
        for one in item if isinstance(item, tuple) else (item,):  # (a chunk, its pause): a PausedChunk
            items.append(one if isinstance(one, Pause) else one.choices[0].content or one.choices[0].finish_reason)
        if waiting and isinstance(items[-1], Pause):
            stream.wait()
    return items


@pytest.mark.parametrize("waiting", [False, True])
def test_a_pausing_stream_says_pause_before_each_wait_and_idle_once_a_tick(serve, waiting):
    """Silences shorter than the read timeout are IDLE ticks, not failures: the response stays usable
    and, complete, gives its connection back; a consumer that waits after each pause gets the same."""
    pieces = [sse(chunk("a")), sse(chunk("b"), chunk(finish="stop"), b"[DONE]")]
    upstream = serve(lambda seen: Answer(headers={"Content-Type": "text/event-stream"}, body=pieces,
                                         piece_delay=0.35), timeouts=Timeouts(read=2.0))
    for _ in range(2):
        stream = upstream.open({})
        stream.pause_every(0.1)
        items = pulled(stream, waiting=waiting)
        stream.close()
        assert items[items.index("a") + 1] is PAUSE  # the event that came is followed by a pause, then ticks
        ticks = items[items.index("a") + 2:items.index("b")]
        assert len(ticks) >= 2 and set(ticks) == {IDLE}
        assert items[-2:] == ["b", "stop"]
    ports = [seen.port for seen in upstream.server.seen]
    assert len(ports) == 2 and ports[0] == ports[1]


@pytest.mark.parametrize("then, kind", [("hang", "timeout"), ("close", "protocol"), ("reset", "connect")])
def test_a_failure_met_while_the_consumer_waits_is_the_next_pull_s(serve, then, kind):
    upstream = serve(lambda seen: sse_answer(sse(chunk("a")), then=then, hang_seconds=3.0),
                     timeouts=Timeouts(read=0.5))
    for waiting in (False, True):
        stream = upstream.open({})
        stream.pause_every(0.1)
        with pytest.raises(UpstreamError) as info:
            pulled(stream, waiting=waiting)
        assert info.value.kind == kind


def test_a_pausing_stream_still_times_out_after_the_whole_silence(serve):
    upstream = serve(lambda seen: sse_answer(sse(chunk("a")), then="hang", hang_seconds=15.0),
                     timeouts=Timeouts(read=0.5))
    stream = upstream.open({})
    stream.pause_every(0.1)
    started, ticks = time.monotonic(), 0
    with pytest.raises(UpstreamError) as info:
        for item in stream:
            ticks += item is IDLE
    assert (info.value.kind, info.value.status) == ("timeout", 504)
    assert 1 <= ticks <= 5 and time.monotonic() - started < 5  # the pauses did not restart the 0.5 s


@pytest.mark.parametrize("waiting", [False, True])
def test_bytes_between_silent_ticks_end_the_silence(serve, waiting):
    """An event every 0.2 s, ticks of 0.1 s, a 1 s read timeout: half the waits are silent, but no silence lasts,
    whether the stream's own wait or its consumer's got the bytes (the consumer's once summed the ticks)."""
    pieces = [sse(chunk("w")) for _ in range(10)] + [sse(chunk(finish="stop"), b"[DONE]")]
    upstream = serve(lambda seen: Answer(headers={"Content-Type": "text/event-stream"}, body=pieces,
                                         piece_delay=0.2), timeouts=Timeouts(read=1.0))
    stream = upstream.open({})
    stream.pause_every(0.1)
    items = pulled(stream, waiting=waiting)
    stream.close()
    assert items.count("w") == 10 and items[-1] == "stop" and IDLE in items


def test_a_stream_not_asked_to_pause_yields_chunks_only(serve):
    pieces = [sse(chunk("a")), sse(chunk("b"), b"[DONE]")]
    upstream = serve(lambda seen: Answer(headers={"Content-Type": "text/event-stream"}, body=pieces,
                                         piece_delay=0.2))
    assert [c.choices[0].content for c in upstream.open({})] == ["a", "b"]


def test_a_request_on_a_kept_alive_connection_the_server_closed_unseen_is_sent_again():
    """A server that closes a kept-alive connection as the next request comes (its close raced the pool's check
    of that idle connection, as llama-cpp-python's server does): the request goes once more, on a new connection."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"data\":[]}"
    connections = []

    def serve_one(conn):
        with conn:
            for served in range(2):
                request = b""
                while b"\r\n\r\n" not in request:
                    request += conn.recv(65536) or b"\r\n\r\n"
                if served:  # the second request on it: closed, nothing answered
                    return
                conn.sendall(answer)

    with socket.create_server(("127.0.0.1", 0)) as listener:
        def accept():
            while True:
                conn, _ = listener.accept()
                connections.append(conn)
                threading.Thread(target=serve_one, args=(conn,), daemon=True).start()
        threading.Thread(target=accept, daemon=True).start()
        upstream = HttpUpstream(f"http://127.0.0.1:{listener.getsockname()[1]}/v1")
        for _ in range(3):
            response = upstream.connection.request("GET", "/models")
            assert (response.status_code, response.read_body()) == (200, b'{"data":[]}')
        upstream.close()
    assert len(connections) == 3  # each request after the first answered on a new connection
