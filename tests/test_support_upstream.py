"""Self-tests of the scripted upstream (tests/support/scripted_upstream.py), driven with plain httpx."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest

from support.invariants import check_chat_stream
from support.scripted_upstream import MALFORMED_LINE, Script, ScriptedUpstream


def post(upstream: ScriptedUpstream, body: dict | None = None, **kwargs) -> httpx.Response:
    """POST a chat request and read the whole answer."""
    body = body or {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(upstream.v1_url + "/chat/completions", json=body, timeout=kwargs.pop("timeout", 5.0), **kwargs)


def data_payloads(raw: bytes) -> list[str]:
    """The ``data:`` payloads of an SSE body."""
    return [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]


def test_streams_pieces_as_separate_frames_and_records_the_request(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="Hello world", chunks=3))
    response = post(upstream, {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["transfer-encoding"] == "chunked"
    payloads = data_payloads(response.content)
    contents = [json.loads(p)["choices"][0]["delta"].get("content") for p in payloads[:-1]]
    assert contents == ["", "Hel", "lo ", "wor", "ld", None]
    assert payloads[-1] == "[DONE]"
    summary = check_chat_stream(response.content, include_usage=False, legacy=False)
    assert summary.choice(0).content == "Hello world"
    assert summary.choice(0).finish_reason == "stop"
    (exchange,) = upstream.chat_requests
    assert exchange.body["messages"] == [{"role": "user", "content": "hi"}]
    assert exchange.headers["content-type"] == "application/json"
    # the client can read the last chunk before the server thread records that it wrote it
    deadline = time.monotonic() + 5
    while not exchange.completed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert exchange.completed and exchange.pieces_sent == 4 and not exchange.peer_closed.is_set()


def test_explicit_pieces_per_choice_usage_and_native_tool_calls(upstream: ScriptedUpstream) -> None:
    fragments = [
        [{"index": 0, "id": "call_up1", "type": "function", "function": {"name": "f", "arguments": ""}}],
        [{"index": 0, "function": {"arguments": '{"a": 1}'}}],
    ]
    usage = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    upstream.enqueue(
        Script(text=["ab", "xyz"], chunks=[["a", "b"], ["x", "yz"]], tool_calls=fragments,
               finish_reason=["tool_calls", "stop"], usage=usage)
    )
    response = post(upstream)
    summary = check_chat_stream(response.content, include_usage=True)
    assert summary.choice(0).content == "ab"
    assert summary.choice(1).content == "xyz"
    assert [(c.name, c.args) for c in summary.choice(0).tool_calls] == [("f", {"a": 1})]
    assert (summary.choice(0).finish_reason, summary.choice(1).finish_reason) == ("tool_calls", "stop")
    assert summary.usage == usage


def test_single_text_follows_the_requested_n_and_default_usage(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="same"))
    body = {"model": "m", "n": 2, "stream": True, "stream_options": {"include_usage": True}, "messages": []}
    summary = check_chat_stream(post(upstream, body).content, include_usage=True)
    assert [summary.choice(i).content for i in (0, 1)] == ["same", "same"]
    assert isinstance(summary.usage["total_tokens"], int)


def test_pieces_must_join_to_the_text(upstream: ScriptedUpstream) -> None:
    with pytest.raises(ValueError, match="do not join"):
        Script(text="abc", chunks=["ab", "x"]).pieces_for(0, "abc")


def test_error_status_with_headers_and_body(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(status=429, headers={"Retry-After": "3"}), Script(status=400, error_body={"error": {"message": "bad"}}))
    first = post(upstream)
    assert first.status_code == 429
    assert first.headers["retry-after"] == "3"
    assert first.json()["error"]["message"] == "scripted upstream error 429"
    second = post(upstream)
    assert (second.status_code, second.json()) == (400, {"error": {"message": "bad"}})


def test_fifo_then_default_then_500_when_nothing_is_scripted(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="one"), Script(text="two"))
    upstream.default_script = Script(text="fallback")
    texts = [check_chat_stream(post(upstream).content).choice(0).content for _ in range(3)]
    assert texts == ["one", "two", "fallback"]
    upstream.default_script = None
    assert post(upstream).status_code == 500
    assert upstream.pending == 0


def test_close_after_chunks_drops_the_connection_without_done(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="abcdef", chunks=1, close_after_chunks=2))
    received = b""
    with pytest.raises(httpx.RemoteProtocolError):
        with httpx.stream("POST", upstream.v1_url + "/chat/completions", json={"messages": []}, timeout=5) as response:
            for chunk in response.iter_bytes():
                received += chunk
    payloads = data_payloads(received)
    assert [json.loads(p)["choices"][0]["delta"]["content"] for p in payloads] == ["", "a", "b"]
    (exchange,) = upstream.chat_requests
    assert not exchange.completed and not exchange.peer_closed.is_set()


def test_malformed_line_is_injected_after_the_given_piece(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="abc", chunks=1, malformed_line=1))
    raw = post(upstream).content
    frames = raw.split(b"\n\n")
    assert frames[2] + b"\n\n" == MALFORMED_LINE
    assert b'"content": "a"' in frames[1] and b'"content": "b"' in frames[3]


def test_hang_until_the_peer_closes_is_recorded_promptly(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="abcdef", chunks=1, hang_after_chunks=2))
    with httpx.stream("POST", upstream.v1_url + "/chat/completions", json={"messages": []}, timeout=5) as response:
        seen = b""
        for chunk in response.iter_bytes():
            seen += chunk
            if b'"content": "b"' in seen:
                break
        closed_at = time.monotonic()
    (exchange,) = upstream.chat_requests
    assert exchange.peer_closed.wait(2.0), "upstream did not notice the client closing"
    assert exchange.peer_closed_at - closed_at < 0.5
    assert exchange.pieces_sent == 2 and not exchange.completed


def test_delay_before_headers_notices_a_peer_that_gave_up(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="late", delay_before_headers=3.0))
    with pytest.raises(httpx.ReadTimeout):
        post(upstream, timeout=httpx.Timeout(5.0, read=0.3))
    (exchange,) = upstream.chat_requests
    assert exchange.peer_closed.wait(2.0)
    assert exchange.headers_sent_at is None


def test_delays_between_chunks_and_after_headers(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="abc", chunks=1, delay_after_headers=0.3, delay_between_chunks=0.1))
    arrivals = []
    start = time.monotonic()
    with httpx.stream("POST", upstream.v1_url + "/chat/completions", json={"messages": []}, timeout=5) as response:
        assert time.monotonic() - start < 0.25, "headers must not wait for delay_after_headers"
        for line in response.iter_lines():
            if line.startswith("data: "):
                arrivals.append(time.monotonic() - start)
    assert arrivals[0] >= 0.3
    assert all(b - a >= 0.08 for a, b in zip(arrivals, arrivals[1:]))


def test_drip_sends_one_byte_per_chunk(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="hi", drip=0.001))
    reads = []
    with httpx.stream("POST", upstream.v1_url + "/chat/completions", json={"messages": []}, timeout=10) as response:
        for chunk in response.iter_raw():
            reads.append(chunk)
    body = b"".join(reads)
    assert check_chat_stream(body).choice(0).content == "hi"
    assert len(reads) > 20  # arrived in many pieces instead of one write per frame


def test_models_and_unknown_routes(upstream: ScriptedUpstream) -> None:
    models = httpx.get(upstream.v1_url + "/models", timeout=5)
    assert models.status_code == 200
    assert models.json()["data"][0]["id"] == "scripted-model"
    assert httpx.post(upstream.v1_url + "/embeddings", json={}, timeout=5).status_code == 404
    assert [e.path for e in upstream.exchanges] == ["/v1/models", "/v1/embeddings"]


def test_serves_many_concurrent_streams(upstream: ScriptedUpstream) -> None:
    upstream.default_script = Script(text="abcd", chunks=1, delay_between_chunks=0.25)
    results: list[str] = []

    def one() -> None:
        results.append(check_chat_stream(post(upstream).content).choice(0).content)

    gate = threading.Barrier(20)

    def one_after_all_connected() -> None:
        gate.wait()
        one()

    threads = [threading.Thread(target=one_after_all_connected) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["abcd"] * 20
    # Served in parallel, not one after another: every stream was received before the first one ended
    # (each takes 0.75 s of pauses), whatever the machine's load.
    exchanges = upstream.exchanges
    assert len(exchanges) == 20
    deadline = time.monotonic() + 5  # a handler stamps finished_at just after its last byte reached the client
    while any(e.finished_at is None for e in exchanges) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert max(e.received_at for e in exchanges) < min(e.finished_at for e in exchanges)


def test_reset_releases_a_hanging_response(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="ab", chunks=1, hang_after_chunks=1))
    errors: list[Exception] = []

    def read() -> None:
        try:
            post(upstream, timeout=10)
        except httpx.HTTPError as exc:
            errors.append(exc)

    thread = threading.Thread(target=read)
    thread.start()
    upstream.wait_for_chat_requests(1)
    time.sleep(0.1)
    upstream.reset()
    thread.join(timeout=3)
    assert not thread.is_alive()
    assert len(errors) == 1  # the body was cut off


def test_open_connections_counts_client_ends_until_their_owner_closes_them(upstream: ScriptedUpstream) -> None:
    assert upstream.open_connections() == 0
    upstream.enqueue(Script(text="hi"))
    sock = socket.create_connection(("127.0.0.1", upstream.port))
    assert upstream.open_connections() == 1
    body = b'{"model": "m", "stream": true}'
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    upstream.wait_for_chat_requests(1)
    deadline = time.monotonic() + 5
    while not upstream.chat_requests[0].completed and time.monotonic() < deadline:
        time.sleep(0.01)
    # The server finished and closed its end; ours is now CLOSE_WAIT: still open, i.e. leaked.
    time.sleep(0.1)
    assert upstream.open_connections() == 1
    assert upstream.wait_connections_closed(timeout=0.2) == 1
    sock.close()
    assert upstream.wait_connections_closed() == 0
