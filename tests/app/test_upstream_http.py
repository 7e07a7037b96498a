"""HttpUpstream over httpx.MockTransport: chunk parsing and error mapping."""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer

import httpx
import pytest
from pydantic import SecretStr

from app.upstreams.http import HttpUpstream
from app.upstreams.base import UpstreamError
from support.fakes import WEATHER_TOOL, KeepAliveSSE, chunk, sse


def upstream_for(handler, **kwargs) -> HttpUpstream:
    return HttpUpstream("http://upstream.test/v1/", transport=httpx.MockTransport(handler), **kwargs)


def stream_response(body: bytes, status: int = 200, headers=None) -> httpx.Response:
    return httpx.Response(status, content=body, headers={"content-type": "text/event-stream", **(headers or {})})


def test_streams_chunks_and_sends_the_request():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["url"] = str(request.url)
        seen["auth"] = request.headers.get("authorization")
        seen["rid"] = request.headers.get("x-request-id")
        seen["body"] = json.loads(request.content)
        return stream_response(sse(chunk("Hel"), chunk("lo"), chunk(finish="stop"),
                                   chunk(usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}),
                                   b"[DONE]", chunk("after done is ignored")))

    upstream = upstream_for(handler, api_key=SecretStr("sk-up"))
    stream = upstream.open({"model": "m", "messages": []}, request_id="rid-1")
    chunks = list(stream)
    stream.close()
    assert seen == {"url": "http://upstream.test/v1/chat/completions", "auth": "Bearer sk-up", "rid": "rid-1",
                    "body": {"model": "m", "messages": []}}
    assert [c.choices[0].content for c in chunks[:2]] == ["Hel", "lo"]
    assert chunks[2].choices[0].finish_reason == "stop"
    assert chunks[3].usage["total_tokens"] == 5
    assert len(chunks) == 4


def test_native_tool_calls_and_reasoning_are_parsed():
    calls = [{"index": 0, "id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}]
    body = sse({"choices": [{"index": 1, "delta": {"tool_calls": calls, "reasoning_content": "hmm"},
                             "finish_reason": None}]})
    [c] = list(upstream_for(lambda r: stream_response(body)).open({}))
    assert (c.choices[0].index, c.choices[0].tool_calls, c.choices[0].reasoning) == (1, calls, "hmm")


def test_json_body_instead_of_a_stream_becomes_one_chunk():
    completion = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    [c] = list(upstream_for(lambda r: httpx.Response(200, json=completion)).open({}))
    assert c.choices[0].content == "hi" and c.choices[0].tool_calls[0]["index"] == 0
    assert c.usage["total_tokens"] == 2


@pytest.mark.parametrize("response, kind, status, message", [
    (httpx.Response(400, json={"error": {"message": "context too long", "type": "invalid_request_error",
                                         "param": "messages", "code": "context_length_exceeded"}}),
     "client_error", 400, "context too long"),
    (httpx.Response(404, json={"error": "model not found"}), "client_error", 404, "model not found"),
    (httpx.Response(422, json={"detail": "bad field"}), "client_error", 422, "bad field"),
    (httpx.Response(429, json={"error": {"message": "slow down"}}, headers={"Retry-After": "12"}),
     "rate_limited", 429, "slow down"),
    (httpx.Response(500, text="boom"), "server_error", 502, "The upstream failed (HTTP 500): boom"),
    (httpx.Response(503), "server_error", 502, "The upstream failed (HTTP 503)."),
])
def test_error_statuses_are_mapped(response, kind, status, message):
    with pytest.raises(UpstreamError) as info:
        upstream_for(lambda r: response).open({})
    assert (info.value.kind, info.value.status, info.value.message) == (kind, status, message)
    if status == 429:
        assert info.value.retry_after == "12"
    if status == 400:
        assert (info.value.param, info.value.code) == ("messages", "context_length_exceeded")


@pytest.mark.parametrize("exc, kind, status", [
    (httpx.ConnectError("refused"), "connect", 502),
    (httpx.ConnectTimeout("slow"), "timeout", 504),
    (httpx.ReadTimeout("slow"), "timeout", 504),
])
def test_transport_errors_are_mapped(exc, kind, status):
    def handler(request):
        raise exc

    with pytest.raises(UpstreamError) as info:
        upstream_for(handler).open({})
    assert (info.value.kind, info.value.status) == (kind, status)


class _Broken(httpx.SyncByteStream):
    def __init__(self, first: bytes, exc: Exception):
        self.first, self.exc = first, exc

    def __iter__(self):
        yield self.first
        raise self.exc


@pytest.mark.parametrize("body, kind, status", [
    (_Broken(sse(chunk("a")), httpx.ReadTimeout("idle")), "timeout", 504),
    (_Broken(sse(chunk("a")), httpx.RemoteProtocolError("eof")), "protocol", 502),
    (_Broken(sse(chunk("a")), httpx.ReadError("reset")), "connect", 502),
    (sse(chunk("a")) + b"data: {not json\n\n", "protocol", 502),
    (sse(chunk("a")) + b"data: \xff\xfe\n\n", "protocol", 502),
    (sse(chunk("a"), {"error": {"message": "engine died"}}), "server_error", 502),
])
def test_mid_stream_failures_are_mapped(body, kind, status):
    def handler(request):
        if isinstance(body, bytes):
            return stream_response(body)
        return httpx.Response(200, stream=body, headers={"content-type": "text/event-stream"})

    stream = upstream_for(handler).open({})
    got = []
    with pytest.raises(UpstreamError) as info:
        for c in stream:
            got.append(c)
    assert (info.value.kind, info.value.status) == (kind, status)
    if isinstance(body, _Broken):  # what arrived before the failure was delivered
        assert [c.choices[0].content for c in got] == ["a"]


def test_models_and_ready():
    def handler(request):
        assert request.url.path == "/v1/models"
        return httpx.Response(200, json={"object": "list", "data": [{"id": "qwen", "object": "model"}]})

    upstream = upstream_for(handler)
    assert upstream.models() == [{"id": "qwen", "object": "model"}]
    assert upstream.ready() is True
    assert upstream_for(lambda r: httpx.Response(503)).ready() is False

    def refuse(request):
        raise httpx.ConnectError("refused")

    assert upstream_for(refuse).ready() is False
    with pytest.raises(UpstreamError):
        upstream_for(refuse).models()


def test_through_the_app_with_a_mock_transport(make_app):
    def handler(request):
        return stream_response(sse(chunk("Sunny "), chunk("in Paris."), chunk(finish="stop"), b"[DONE]"))

    client = make_app(upstream_for(handler)).test_client()
    response = client.post("/v1/chat/completions", json={"model": "m", "tools": [WEATHER_TOOL],
                                                         "messages": [{"role": "user", "content": "hi"}]})
    assert response.get_json()["choices"][0]["message"]["content"] == "Sunny in Paris."

    client = make_app(upstream_for(lambda r: httpx.Response(429, json={"error": {"message": "busy"}},
                                                            headers={"Retry-After": "3"}))).test_client()
    response = client.post("/v1/chat/completions", json={"model": "m", "stream": True,
                                                         "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 429 and response.headers["Retry-After"] == "3"
    assert response.get_json()["error"] == {"message": "busy", "type": "rate_limit_error", "param": None,
                                            "code": "rate_limit_exceeded"}


def test_a_finished_stream_hands_its_connection_back():
    """After ``[DONE]`` the body is read to its end, so the next request reuses the connection."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), KeepAliveSSE)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = HttpUpstream(f"http://127.0.0.1:{server.server_port}/v1")
    try:
        for _ in range(2):
            stream = client.open({"model": "m", "messages": [], "stream": True})
            assert [d.content for c in stream for d in c.choices] == ["hi"]
            stream.close()
    finally:
        client.close()
        server.shutdown()
        server.server_close()
    ports = KeepAliveSSE.ports
    assert len(ports) == 2 and ports[0] == ports[1]


def test_a_large_read_is_decoded_in_pieces_so_the_first_event_goes_on_first(monkeypatch):
    from app.upstreams import http as upstream_module
    from app.upstreams.sse import SSEDecoder

    fed: list[int] = []

    class CountingDecoder(SSEDecoder):
        def feed(self, chunk: bytes) -> list[str]:
            fed.append(len(chunk))
            return super().feed(chunk)

    monkeypatch.setattr(upstream_module, "SSEDecoder", CountingDecoder)
    events = [f'{{"n": {i}, "text": "{"é" * (i % 7)}\\r\\n"}}' for i in range(2000)]
    burst = "".join(f"data: {e}\r\n\r\n" for e in events).encode()
    assert len(burst) > 20 * upstream_module.DECODE_BYTES
    payloads = upstream_module._payloads(iter([burst[:100], burst[100:]]))
    assert next(payloads) == events[0]
    assert sum(fed) <= 100 + upstream_module.DECODE_BYTES
    assert [events[0], *payloads] == events
    assert max(fed) <= upstream_module.DECODE_BYTES
