"""The pass-through endpoints (issue 40) under gunicorn+gevent, driven by the real openai-python client:
toolwire as the one base URL an IDE extension such as Continue gives every request to.

- Against llama.cpp's own ``llama-server`` (started with ``--embeddings --pooling mean``, so one server embeds
  and completes): Continue's codebase embeddings (``POST /v1/embeddings``, its chunks as ``input``), its
  autocomplete both ways it asks (a FIM-capable provider's ``prompt`` + ``suffix``, and the legacy
  ``/completions`` request with the model's own fill-in-the-middle template in ``prompt``, both streamed), the
  server's ``/tokenize`` at the root, and its 501 for ``/v1/rerank`` turned into an error naming the endpoint.
- Against a scripted back end (:mod:`support.relay_backend`): the endpoint missing, a stream that breaks off,
  and a back end that goes silent, each a clear error, never a hang.
"""

from __future__ import annotations

import json
import time
from typing import Callable, Iterator

import httpx
import openai
import pytest

from support.llama_cpp_server import LlamaCppServer
from support.relay_backend import Answer, RelayBackend
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

TEST_TIME_LIMIT = 180.0  # a CPU model on a busy 2-core machine
PREFIX = "def add(a, b):\n    "
SUFFIX = "\n\nprint(add(1, 2))\n"
#: Qwen2.5-Coder's fill-in-the-middle template, as Continue's autocomplete renders it for the legacy endpoint.
FIM_PROMPT = f"<|fim_prefix|>{PREFIX}<|fim_suffix|>{SUFFIX}<|fim_middle|>"


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaCppServer]:
    with LlamaCppServer("qwen-coder", n_ctx=2048, extra_args=("--embeddings", "--pooling", "mean")) as server:
        yield server


@pytest.fixture
def toolwire(llama: LlamaCppServer, toolwire_factory: Callable[..., ToolwireServer]) -> ToolwireServer:
    return toolwire_factory(TOOLWIRE_UPSTREAM_URL=llama.v1_url, TOOLWIRE_UPSTREAM_READ_TIMEOUT="150",
                            TOOLWIRE_MODEL_MAP=json.dumps({"coder": {"model": "qwen-coder", "capabilities": [
                                "chat", "tools", "completions", "embeddings"]}}))


def client_for(server: ToolwireServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.v1_url, api_key="test", max_retries=0, timeout=150)


def test_continues_codebase_embeddings(toolwire: ToolwireServer, llama: LlamaCppServer) -> None:
    chunks = ["def add(a, b):\n    return a + b", "class Stack:\n    def push(self, x): ..."]
    answer = client_for(toolwire).embeddings.create(model="coder", input=chunks)
    direct = httpx.post(llama.v1_url + "/embeddings", json={"model": "qwen-coder", "input": chunks}, timeout=60).json()
    assert [e.index for e in answer.data] == [0, 1]
    assert [len(e.embedding) for e in answer.data] == [len(d["embedding"]) for d in direct["data"]] and \
        len(answer.data[0].embedding) > 100
    assert answer.data[0].embedding == pytest.approx(direct["data"][0]["embedding"], abs=1e-4)


def test_autocomplete_with_a_suffix_streams_as_it_comes(toolwire: ToolwireServer) -> None:
    """A FIM-capable provider's request (Continue's DeepSeek and Mistral providers): ``prompt`` and ``suffix``."""
    stream = client_for(toolwire).completions.create(
        model="coder", prompt=PREFIX, suffix=SUFFIX, max_tokens=12, temperature=0, top_p=1, stop=["\n\n"],
        stream=True)
    pieces = [chunk.choices[0].text for chunk in stream if chunk.choices]
    assert len([p for p in pieces if p]) > 3  # token by token, not one relayed lump
    assert "return" in "".join(pieces)


def test_continues_legacy_autocomplete_request(toolwire: ToolwireServer) -> None:
    """Continue's OpenAI provider for autocomplete (``_legacystreamComplete``): the model's FIM template in
    ``prompt``, the chat options, ``stream: true``; it reads ``choices[0].text`` of each event."""
    body = {"model": "coder", "max_tokens": 16, "temperature": 0.01, "stream": True, "stop": ["<|endoftext|>",
            "<|fim_prefix|>", "\n\n\n"], "prompt": FIM_PROMPT}
    texts, arrivals = [], []
    with httpx.stream("POST", toolwire.v1_url + "/completions", json=body, timeout=150,
                      headers={"Authorization": "Bearer test"}) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                texts.append(json.loads(line[6:])["choices"][0]["text"])
                arrivals.append(time.monotonic())
    assert "return a + b" in "".join(texts)
    assert len(texts) > 3 and arrivals[-1] - arrivals[0] > 0  # each event relayed when it came


def test_the_back_ends_tokenizer_at_the_root(toolwire: ToolwireServer, llama: LlamaCppServer) -> None:
    asked = httpx.post(toolwire.url + "/tokenize", json={"content": PREFIX}, timeout=60,
                       headers={"Authorization": "Bearer test"})
    assert asked.status_code == 200
    assert asked.json() == httpx.post(llama.url + "/tokenize", json={"content": PREFIX}, timeout=60).json()
    back = httpx.post(toolwire.url + "/detokenize", json={"tokens": asked.json()["tokens"]}, timeout=60)
    assert back.json()["content"] == PREFIX


def test_the_model_list_says_what_each_model_serves(toolwire: ToolwireServer) -> None:
    listed = {model.id: model.model_extra["capabilities"] for model in client_for(toolwire).models.list()}
    assert listed == {"qwen-coder": ["chat", "tools"],  # the server's own entry says nothing more
                      "coder": ["chat", "tools", "completions", "embeddings"]}  # as the operator declared


def test_an_endpoint_the_server_lacks_is_named(toolwire: ToolwireServer) -> None:
    with pytest.raises(openai.APIStatusError) as refused:
        client_for(toolwire).post("/rerank", cast_to=object,
                                  body={"model": "coder", "query": "add", "documents": ["def add(a, b)"]})
    assert refused.value.status_code == 501
    assert "POST /v1/rerank" in refused.value.message and "'default'" in refused.value.message


# -- faults, against a scripted back end ---------------------------------------------------------------------


@pytest.fixture
def scripted(toolwire_factory: Callable[..., ToolwireServer]) -> Iterator[tuple[RelayBackend, ToolwireServer]]:
    with RelayBackend() as backend:
        yield backend, toolwire_factory(TOOLWIRE_UPSTREAM_URL=backend.v1_url, TOOLWIRE_UPSTREAM_READ_TIMEOUT="2")


def events(count: int) -> list[dict]:
    return [{"id": "c", "object": "text_completion", "created": 0, "model": "m",
             "choices": [{"index": 0, "text": f"t{n}", "finish_reason": None, "logprobs": None}]}
            for n in range(count)]


def test_a_back_end_without_embeddings_is_a_404_naming_it(scripted: tuple[RelayBackend, ToolwireServer]) -> None:
    backend, toolwire = scripted
    with pytest.raises(openai.NotFoundError) as missing:
        client_for(toolwire).embeddings.create(model="m", input="hi")
    assert "POST /v1/embeddings" in missing.value.message and "HTTP 404" in missing.value.message
    assert missing.value.body["code"] == "unsupported_endpoint"


def test_a_stream_that_breaks_off_ends_in_an_error(scripted: tuple[RelayBackend, ToolwireServer]) -> None:
    backend, toolwire = scripted
    backend.routes["/v1/completions"] = Answer(events=events(5), cut_after=2)
    stream = client_for(toolwire).completions.create(model="m", prompt="p", stream=True)
    got = []
    with pytest.raises(openai.APIError) as broke:
        for chunk in stream:
            got.append(chunk.choices[0].text)
    assert got == ["t0", "t1"] and "upstream" in broke.value.message.lower()


def test_a_stream_cut_inside_an_event_is_not_taken_for_whole(scripted: tuple[RelayBackend, ToolwireServer]) -> None:
    backend, toolwire = scripted
    backend.routes["/v1/completions"] = Answer(events=events(5), cut_after=2, mid_event=True)
    stream = client_for(toolwire).completions.create(model="m", prompt="p", stream=True)
    with pytest.raises((httpx.HTTPError, openai.APIError)):
        for _ in stream:
            pass
    time.sleep(0.5)  # the worker's log lines of the cut
    assert "Traceback" not in toolwire.log() and "Socket error" not in toolwire.log()


def test_a_back_end_gone_silent_is_a_timeout_not_a_hang(scripted: tuple[RelayBackend, ToolwireServer]) -> None:
    backend, toolwire = scripted
    backend.routes["/v1/completions"] = Answer(events=events(3), gap=6.0)
    started = time.monotonic()
    with pytest.raises(openai.APIError) as silent:
        for _ in client_for(toolwire).completions.create(model="m", prompt="p", stream=True):
            pass
    assert "timed out" in silent.value.message and time.monotonic() - started < 5.5
