"""The pass-through endpoints (issue 40): ``/v1/embeddings``, ``/v1/completions``, ``/v1/rerank``, ``/v1/audio/*``,
``/tokenize`` and ``/detokenize`` sent on to the model's back end as they came, the model's name as the back end
knows it, the answer relayed; a back end without the endpoint a clear error naming it."""

from __future__ import annotations

import json
import logging
from typing import Any, Iterator

import orjson
import pytest

from app import create_app
from app.settings import Settings
from support.fakes import FakeUpstream, text_chunks
from support.relay_backend import Answer, RelayBackend

EMBEDDING = {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.5, 0.25]}],
             "model": "served-embedder", "usage": {"prompt_tokens": 2, "total_tokens": 2}}


@pytest.fixture
def backend() -> Iterator[RelayBackend]:
    with RelayBackend() as server:
        yield server


def app_for(backend: RelayBackend, **settings: Any) -> Any:
    app = create_app(Settings(upstream_url=backend.v1_url, **settings))
    app.testing = True
    return app.test_client()


def test_embeddings_go_to_the_back_end_under_its_own_model_name(backend: RelayBackend) -> None:
    backend.routes["/v1/embeddings"] = Answer(body=EMBEDDING)
    client = app_for(backend, model_map={"embedder": "served-embedder"})
    answer = client.post("/v1/embeddings", json={"model": "embedder", "input": ["a b"], "encoding_format": "float"},
                         headers={"X-Request-Id": "req-1"})
    assert answer.status_code == 200 and answer.get_json() == EMBEDDING
    assert answer.headers["X-Request-Id"] == "req-1"
    [asked] = backend.asked
    assert asked.path == "/v1/embeddings"
    assert asked.json() == {"model": "served-embedder", "input": ["a b"], "encoding_format": "float"}
    assert asked.headers["x-request-id"]  # the request's id goes on (as a UUID)


def test_a_body_whose_model_needs_no_new_name_goes_on_byte_for_byte(backend: RelayBackend) -> None:
    backend.routes["/v1/completions"] = Answer(body={"choices": [{"text": "x"}]})
    raw = b'{"model": "m",   "prompt": "def f(", "suffix": "\\n", "max_tokens": 3}'
    assert app_for(backend).post("/v1/completions", data=raw, content_type="application/json").status_code == 200
    assert backend.asked[0].body == raw


def test_a_completions_stream_is_relayed_as_it_comes(backend: RelayBackend) -> None:
    events = [{"choices": [{"index": 0, "text": piece, "finish_reason": None}]} for piece in ("de", "f ", "f():")]
    backend.routes["/v1/completions"] = Answer(events=events)
    answer = app_for(backend).post("/v1/completions", json={"model": "m", "prompt": "p", "stream": True},
                                   buffered=False)
    assert answer.status_code == 200 and answer.mimetype == "text/event-stream"
    body = b"".join(answer.response)
    assert body == b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def test_the_tokenizer_is_at_the_back_ends_root(backend: RelayBackend) -> None:
    backend.routes["/tokenize"] = Answer(body={"tokens": [1, 2, 3]})
    backend.routes["/detokenize"] = Answer(body={"content": "abc"})
    client = app_for(backend)
    assert client.post("/tokenize", json={"content": "abc"}).get_json() == {"tokens": [1, 2, 3]}
    assert client.post("/detokenize", json={"tokens": [1, 2, 3]}).get_json() == {"content": "abc"}
    assert [a.path for a in backend.asked] == ["/tokenize", "/detokenize"]
    assert backend.asked[0].json() == {"content": "abc"}  # no model: nothing added


def test_a_back_end_without_the_endpoint_is_a_404_naming_it(backend: RelayBackend) -> None:
    answer = app_for(backend).post("/v1/rerank", json={"model": "m", "query": "q", "documents": ["a"]})
    assert answer.status_code == 404
    error = answer.get_json()["error"]
    assert error["code"] == "unsupported_endpoint"
    assert "POST /v1/rerank" in error["message"] and "'default'" in error["message"] and "404" in error["message"]


@pytest.mark.parametrize("status", [405, 501])
def test_a_back_end_refusing_the_method_is_a_501(backend: RelayBackend, status: int) -> None:
    backend.routes["/v1/embeddings"] = Answer(status=status, body={"error": {"message": "no"}})
    answer = app_for(backend).post("/v1/embeddings", json={"model": "m", "input": "a"})
    assert answer.status_code == 501 and answer.get_json()["error"]["code"] == "unsupported_endpoint"
    assert f"HTTP {status}" in answer.get_json()["error"]["message"]


def test_a_kind_with_no_http_endpoints_is_a_501(make_app: Any) -> None:
    client = make_app(FakeUpstream(text_chunks("hi"))).test_client()
    answer = client.post("/v1/embeddings", json={"model": "m", "input": "a"})
    assert answer.status_code == 501
    assert answer.get_json()["error"]["code"] == "unsupported_endpoint"
    assert "POST /v1/embeddings" in answer.get_json()["error"]["message"]


def test_the_back_ends_refusal_passes_through_in_openais_envelope(backend: RelayBackend) -> None:
    backend.routes["/v1/embeddings"] = Answer(status=400, body={"error": {
        "message": "input is too long", "type": "invalid_request_error", "param": "input", "code": None}})
    answer = app_for(backend).post("/v1/embeddings", json={"model": "m", "input": "a" * 10})
    assert answer.status_code == 400
    assert answer.get_json()["error"]["message"] == "input is too long"
    assert answer.get_json()["error"]["param"] == "input"


def test_a_stream_cut_between_events_ends_with_an_error_event(backend: RelayBackend) -> None:
    events = [{"choices": [{"index": 0, "text": str(n)}]} for n in range(4)]
    backend.routes["/v1/completions"] = Answer(events=events, cut_after=2)
    answer = app_for(backend).post("/v1/completions", json={"model": "m", "prompt": "p", "stream": True},
                                   buffered=False)
    frames = b"".join(answer.response).split(b"\n\n")
    assert [orjson.loads(f[6:]) for f in frames[:2]] == events[:2]
    assert orjson.loads(frames[2][6:])["error"]["type"] == "server_error"
    assert frames[3:] == [b"data: [DONE]", b""]


def test_a_stream_cut_inside_an_event_is_cut_for_the_client_too(backend: RelayBackend) -> None:
    events = [{"choices": [{"index": 0, "text": str(n)}]} for n in range(4)]
    backend.routes["/v1/completions"] = Answer(events=events, cut_after=1, mid_event=True)
    answer = app_for(backend).post("/v1/completions", json={"model": "m", "prompt": "p", "stream": True},
                                   buffered=False)
    with pytest.raises(ConnectionResetError):
        b"".join(answer.response)


def test_the_body_limits_hold(backend: RelayBackend) -> None:
    client = app_for(backend, max_body_bytes=1000)
    assert client.post("/v1/embeddings", json={"model": "m", "input": "a" * 2000}).status_code == 413
    assert client.post("/v1/embeddings", data=b"[1]", content_type="application/json").status_code == 400
    assert backend.asked == []


def test_client_keys_are_asked_for(backend: RelayBackend) -> None:
    client = app_for(backend, api_keys="sk-1")
    assert client.post("/v1/embeddings", json={"model": "m", "input": "a"}).status_code == 401
    assert client.post("/tokenize", json={"content": "a"}).status_code == 401
    backend.routes["/tokenize"] = Answer(body={"tokens": [1]})
    assert client.post("/tokenize", json={"content": "a"}, headers={"Authorization": "Bearer sk-1"}).status_code == 200


def test_routing_by_model_picks_the_back_end(backend: RelayBackend) -> None:
    with RelayBackend() as other:
        other.routes["/v1/embeddings"] = Answer(body=EMBEDDING)
        client = app_for(backend, upstreams={"embedder": {"kind": "openai", "url": other.v1_url, "models": ["nomic"]}})
        assert client.post("/v1/embeddings", json={"model": "nomic", "input": "a"}).status_code == 200
        assert backend.asked == [] and [a.path for a in other.asked] == ["/v1/embeddings"]


def test_an_audio_forms_model_is_read_and_renamed(backend: RelayBackend) -> None:
    backend.routes["/v1/audio/transcriptions"] = Answer(body={"text": "hello"})
    client = app_for(backend, model_map={"whisper": "whisper-large-v3"})
    answer = client.post("/v1/audio/transcriptions", data={"model": "whisper", "file": (__import__("io").BytesIO(
        b"RIFF\x00\x01"), "a.wav")}, content_type="multipart/form-data")
    assert answer.status_code == 200 and answer.get_json() == {"text": "hello"}
    [asked] = backend.asked
    assert b'name="model"\r\n\r\nwhisper-large-v3\r\n' in asked.body and b"RIFF\x00\x01" in asked.body
    assert asked.headers["content-type"].startswith("multipart/form-data; boundary=")


def test_the_access_line_and_metrics_count_a_relay(backend: RelayBackend, json_log: Any) -> None:
    backend.routes["/v1/embeddings"] = Answer(body=EMBEDDING)
    client = app_for(backend, model_map={"embedder": "served-embedder"})
    client.post("/v1/embeddings", json={"model": "embedder", "input": "a"}, buffered=True)
    client.post("/v1/rerank", json={"model": "embedder", "query": "q", "documents": []}, buffered=True)
    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
    access = [line for line in lines if line["logger"] == "toolwire.access"]
    assert [(a["route"], a["status"], a["outcome"], a["model"], a["upstream"]) for a in access] == [
        ("/v1/embeddings", 200, "completed", "embedder", "default"),
        ("/v1/rerank", 404, "unsupported_endpoint", "embedder", "default")]
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'toolwire_requests_total{route="/v1/embeddings",status="200"} 1.0' in metrics


def test_a_back_end_that_refuses_the_connection_falls_back_as_a_generation_does() -> None:
    with RelayBackend() as spare:
        spare.routes["/v1/embeddings"] = Answer(body=EMBEDDING)
        app = create_app(Settings(upstream_url="http://127.0.0.1:1/v1",  # nothing listens there
                                  upstreams={"spare": {"kind": "openai", "url": spare.v1_url}},
                                  model_map={"embedder": {"model": "served-embedder", "fallback": ["spare"]}}))
        answer = app.test_client().post("/v1/embeddings", json={"model": "embedder", "input": "a"})
        assert answer.status_code == 200 and answer.get_json() == EMBEDDING
        assert spare.asked[0].json() == {"model": "served-embedder", "input": "a"}


def test_a_client_that_leaves_mid_stream_is_client_gone(backend: RelayBackend, json_log: Any) -> None:
    backend.routes["/v1/completions"] = Answer(events=[{"choices": [{"text": str(n)}]} for n in range(50)], gap=0.05)
    answer = app_for(backend).post("/v1/completions", json={"model": "m", "prompt": "p", "stream": True},
                                   buffered=False)
    assert next(iter(answer.response)).startswith(b"data: ")
    answer.close()
    access = [json.loads(line) for line in json_log.getvalue().splitlines()
              if json.loads(line)["logger"] == "toolwire.access"]
    assert (access[-1]["outcome"], access[-1]["disconnected"], access[-1]["stream"]) == ("client_gone", True, True)
