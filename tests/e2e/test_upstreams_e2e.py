"""Several back ends behind one toolwire under gunicorn: each model served by its own back end (two
OpenAI-compatible HTTP servers and the demo; Chat and Responses, streamed and not), one back end that
hangs, one that refuses connections and one that answers 500 never slowing the others down, and OpenCode
switching between two models on two back ends through the one base URL.

The default back end is the session's scripted upstream, ``second`` another scripted upstream (its own
server and port), ``lab`` the embedded demo; ``hung`` accepts connections and never answers (a listening
socket nobody accepts from), ``refused`` is a port nothing listens on, ``broken`` answers every request 500.
"""

from __future__ import annotations

import json
import socket
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import openai
import pytest

from support.agents import AGENT_TIME_LIMIT, opencode_run
from support.scripted_upstream import MODEL_ID, Script, ScriptedUpstream, tool_call_text
from support.server import ToolwireServer, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.time_limit(120)]

MESSAGES = [{"role": "user", "content": "Say something."}]


@pytest.fixture(scope="module")
def second() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as server:
        server.default_script = Script(text="Second back end here.", chunks=4)
        yield server


@pytest.fixture(scope="module")
def broken() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as server:
        server.default_script = Script(status=500)
        yield server


@pytest.fixture(scope="module")
def hung_port() -> Iterator[int]:
    """A port whose connections are taken by the kernel and never answered."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    yield listener.getsockname()[1]
    listener.close()


@pytest.fixture(scope="module")
def toolwire(toolwire_factory: Callable[..., ToolwireServer], second: ScriptedUpstream, broken: ScriptedUpstream,
             hung_port: int) -> ToolwireServer:
    upstreams = {
        "second": {"kind": "openai", "url": second.v1_url, "api_key": "sk-second", "models": ["second-model"]},
        "lab": {"kind": "demo", "demo_model": "lab-demo"},
        "hung": {"kind": "openai", "url": f"http://127.0.0.1:{hung_port}/v1", "read_timeout": 6},
        "refused": {"kind": "openai", "url": f"http://127.0.0.1:{free_port()}/v1"},
        "broken": {"kind": "openai", "url": broken.v1_url},
    }
    model_map = {name: {"model": f"{name}-upstream-model", "upstream": name} for name in ("hung", "refused", "broken")}
    model_map["mapped-second"] = {"model": "second-model", "upstream": "second"}
    model_map["resilient"] = {"model": "second-model", "upstream": "refused", "fallback": ["broken", "second"]}
    model_map["cut-midway"] = {"model": MODEL_ID, "fallback": ["second"]}
    return toolwire_factory(TOOLWIRE_UPSTREAMS=json.dumps(upstreams), TOOLWIRE_MODEL_MAP=json.dumps(model_map))


def chat_text(client: openai.OpenAI, model: str, stream: bool) -> tuple[str, str]:
    """The answer's text and model, over Chat."""
    if not stream:
        reply = client.chat.completions.create(model=model, messages=MESSAGES)  # type: ignore[arg-type]
        return reply.choices[0].message.content or "", reply.model
    text, served = "", ""
    for chunk in client.chat.completions.create(model=model, messages=MESSAGES, stream=True):  # type: ignore[arg-type]
        served = chunk.model
        text += "".join(choice.delta.content or "" for choice in chunk.choices)
    return text, served


def responses_text(client: openai.OpenAI, model: str, stream: bool) -> tuple[str, str]:
    """The answer's text and model, over Responses."""
    if not stream:
        reply = client.responses.create(model=model, input="Say something.")
        return reply.output_text, reply.model
    completed: Any = None
    for event in client.responses.create(model=model, input="Say something.", stream=True):
        if event.type == "response.completed":
            completed = event.response
    assert completed is not None
    return completed.output_text, completed.model


@pytest.mark.parametrize("api", [chat_text, responses_text], ids=["chat", "responses"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_each_model_is_served_by_its_own_back_end(toolwire, upstream, second, make_openai_client, api, stream):
    upstream.default_script = Script(text="Default back end here.", chunks=3)
    client = make_openai_client(toolwire)
    before = len(second.chat_requests)
    assert api(client, MODEL_ID, stream) == ("Default back end here.", MODEL_ID)
    assert api(client, "second-model", stream) == ("Second back end here.", "second-model")
    assert api(client, "mapped-second", stream) == ("Second back end here.", "mapped-second")
    text, served = api(client, "lab-demo", stream)
    assert served == "lab-demo" and text and "back end here" not in text
    assert [e.body["model"] for e in upstream.chat_requests] == [MODEL_ID]
    assert [e.body["model"] for e in second.chat_requests[before:]] == ["second-model", "second-model"]
    assert all(e.headers["authorization"] == "Bearer sk-second" for e in second.chat_requests[before:])


def test_models_lists_every_back_end_and_readyz_reports_each(toolwire, upstream):
    started = time.monotonic()
    models = httpx.get(f"{toolwire.v1_url}/models", timeout=10)
    waited = time.monotonic() - started
    ids = {m["id"] for m in models.json()["data"]}
    # the hung back end is left out after the 3 s bound; the map's names for it stay listed
    assert models.status_code == 200 and waited < 5
    assert {MODEL_ID, "second-model", "lab-demo", "hung", "refused", "broken", "mapped-second"} <= ids
    ready = httpx.get(f"{toolwire.url}/readyz", timeout=10)
    assert ready.status_code == 200 and ready.json()["upstreams"] == {
        "default": "ok", "second": "ok", "lab": "ok", "hung": "unavailable", "refused": "unavailable",
        "broken": "ok"}  # broken answers /models; only its generations fail


def timed_chat(url: str, model: str) -> float:
    started = time.monotonic()
    reply = httpx.post(f"{url}/chat/completions", json={"model": model, "messages": MESSAGES}, timeout=15)
    assert reply.status_code == 200, reply.text
    return time.monotonic() - started


def test_a_hung_a_refusing_and_a_failing_back_end_never_slow_the_others(toolwire, upstream, second):
    upstream.default_script = Script(text="Default back end here.", chunks=3)
    baseline = [timed_chat(toolwire.v1_url, model) for model in ("second-model", MODEL_ID, "lab-demo") * 4]
    with ThreadPoolExecutor(8) as pool:
        hanging = [pool.submit(httpx.post, f"{toolwire.v1_url}/chat/completions", timeout=20,
                               json={"model": "hung", "messages": MESSAGES, "stream": stream})
                   for stream in (False, True) * 2]
        time.sleep(0.3)  # the hung requests wait on their back end
        for model in ("refused", "broken"):
            started = time.monotonic()
            failed = httpx.post(f"{toolwire.v1_url}/chat/completions", json={"model": model, "messages": MESSAGES},
                                timeout=10)
            assert failed.status_code in (502, 503) and time.monotonic() - started < 6, failed.text
            assert failed.json()["error"]["code"].startswith("upstream_") or failed.json()["error"]["type"]
        during = [timed_chat(toolwire.v1_url, model) for model in ("second-model", MODEL_ID, "lab-demo") * 4]
        assert not any(f.done() for f in hanging), "the hung back end answered"
        hung = [f.result() for f in hanging]
    assert statistics.median(during) < 3 * statistics.median(baseline) + 0.05, (baseline, during)
    assert max(during) < 1.0, during
    # the hung requests end by their back end's own read timeout (6 s), each with an upstream timeout
    assert all(r.status_code == 504 or "upstream_timeout" in r.text for r in hung), [r.text[:200] for r in hung]
    metrics = httpx.get(f"{toolwire.url}/metrics", timeout=10).text
    for name in ("hung", "refused", "broken", "second", "lab", "default"):
        assert f'toolwire_upstream_requests_total{{outcome=' in metrics
        assert f'upstream="{name}"' in metrics, name


def test_a_model_falls_back_before_its_first_byte_and_never_after(toolwire, upstream, second, broken,
                                                                  make_openai_client):
    client = make_openai_client(toolwire)
    before, broken_before = len(second.chat_requests), len(broken.chat_requests)
    for stream in (False, True):
        # refused (connection refused), then broken (500), then second answers
        assert chat_text(client, "resilient", stream) == ("Second back end here.", "resilient")
    assert len(broken.chat_requests) - broken_before == 2
    assert [e.body["model"] for e in second.chat_requests[before:]] == ["second-model"] * 2
    # the default back end's stream breaks after its first piece went to the client: no fallback
    upstream.enqueue(Script(text="Half an answer that breaks.", chunks=6, close_after_chunks=1))
    with pytest.raises(openai.APIError):
        chat_text(client, "cut-midway", True)
    assert len(second.chat_requests) - before == 2
    log = toolwire.log()
    assert "back end refused failed before its first byte (connect)" in log
    assert "back end broken failed before its first byte (server_error)" in log


@pytest.mark.time_limit(AGENT_TIME_LIMIT)
def test_opencode_switches_between_two_models_on_two_back_ends_through_one_base_url(
        workdir: Path, toolwire, upstream, second) -> None:
    project = workdir / "project"
    upstream.enqueue(Script(text=tool_call_text("bash", {"command": "echo from-default > default.txt",
                                                          "description": "Write it"})),
                     Script(text="Default wrote default.txt.", chunks=4))
    second.enqueue(Script(text=tool_call_text("write", {"filePath": str(project / "second.txt"),
                                                         "content": "from second\n"}), chunks=5),
                   Script(text="Second wrote second.txt.", chunks=4))
    before = len(second.chat_requests)
    models = (MODEL_ID, "second-model")
    runs = [opencode_run(workdir, toolwire.v1_url, "Write your file.", "-m", f"toolwire/{model}", models=models)
            for model in models]
    for result in runs:
        assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}\n{toolwire.log()[-3000:]}"
    assert (project / "default.txt").read_text() == "from-default\n"
    assert (project / "second.txt").read_text() == "from second\n"
    finals = [[json.loads(line)["part"]["text"] for line in r.stdout.splitlines()
               if line.startswith("{") and json.loads(line).get("type") == "text"][-1] for r in runs]
    assert finals == ["Default wrote default.txt.", "Second wrote second.txt."]
    assert [e.body["model"] for e in upstream.chat_requests] == [MODEL_ID] * 2
    assert [e.body["model"] for e in second.chat_requests[before:]] == ["second-model"] * 2
