"""The Codex app-server back end end to end, on the real binary.

openai SDK → gunicorn/gevent toolwire (``TOOLWIRE_UPSTREAM_KIND=codex``) → the real ``codex app-server``
(npm ``@openai/codex`` at the pinned version, installed into a cache directory by the test setup) →
Codex's model provider: ``ResponsesModelServer``, a scripted Responses-API server the tests own.
Every stream the SDK sees is checked against the wire contract by the recording transport. The last
sections play a hostile provider (issue 25): one that keeps calling tools, thinks forever, or leaks.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import openai
import pytest

from support.codex_binary import ensure_codex
from support.invariants import check_chat_stream, check_error_envelope
from support.responses_model import ModelScript, ResponsesModelServer
from support.scripted_upstream import tool_call_text
from support.server import ServerStartError, ToolwireServer, free_port, run_toolwire

pytestmark = pytest.mark.e2e

MODEL = "scripted-model"
PROVIDER_KEY = "provider-secret-key"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                   "additionalProperties": False}}}


@pytest.fixture(scope="module")
def codex_launcher() -> Path:
    """The pinned Codex CLI's npm launcher (installed on first use); skips only when npm is missing."""
    launcher, why = ensure_codex()
    if launcher is None:
        pytest.skip(f"NO CODEX E2E TESTS: {why}")
    return launcher


@pytest.fixture(scope="module")
def model_server() -> Iterator[ResponsesModelServer]:
    with ResponsesModelServer() as server:
        yield server


@pytest.fixture
def model(model_server: ResponsesModelServer) -> Iterator[ResponsesModelServer]:
    """The model server, reset before and after the test."""
    model_server.reset()
    yield model_server
    model_server.reset()


@pytest.fixture(scope="module")
def codex_factory(toolwire_factory: Callable[..., ToolwireServer], codex_launcher: Path,
                  model_server: ResponsesModelServer,
                  tmp_path_factory: pytest.TempPathFactory) -> Callable[..., ToolwireServer]:
    """``codex_factory(**settings)``: a toolwire whose back end is the real Codex app-server."""
    work_dir = str(tmp_path_factory.mktemp("codex-work"))
    empty_home = str(tmp_path_factory.mktemp("user-codex-home"))

    def make(**settings: str | None) -> ToolwireServer:
        return toolwire_factory(**{
            "TOOLWIRE_UPSTREAM_KIND": "codex", "TOOLWIRE_CODEX_COMMAND": str(codex_launcher),
            "TOOLWIRE_CODEX_HOME": empty_home, "TOOLWIRE_CODEX_WORK_DIR": work_dir,
            "TOOLWIRE_CODEX_PROVIDER_URL": model_server.v1_url, "TOOLWIRE_CODEX_PROVIDER_API_KEY": PROVIDER_KEY,
            "TOOLWIRE_DEFAULT_UPSTREAM_MODEL": MODEL, **settings})

    return make


@pytest.fixture(scope="module")
def codex_server(codex_factory: Callable[..., ToolwireServer]) -> ToolwireServer:
    return codex_factory()


@pytest.fixture
def client(make_openai_client: Callable[[ToolwireServer], openai.OpenAI], codex_server: ToolwireServer) -> openai.OpenAI:
    return make_openai_client(codex_server)


def app_server_pids(server: ToolwireServer) -> list[int]:
    """The pids of the codex processes the toolwire workers started."""
    found = []
    for worker in server.worker_pids():
        children = Path(f"/proc/{worker}/task/{worker}/children")
        for pid in children.read_text().split() if children.exists() else ():
            if "codex" in Path(f"/proc/{pid}/comm").read_text():
                found.append(int(pid))
    return found


def sse_events(response: httpx.Response) -> Iterator[dict[str, Any] | str]:
    """The parsed ``data:`` payloads of a raw SSE response (``"[DONE]"`` as a string)."""
    for line in response.iter_lines():
        if line.startswith("data: "):
            payload = line[6:]
            yield payload if payload == "[DONE]" else json.loads(payload)


# --- the plain paths -------------------------------------------------------------------------------------


def test_chat_non_stream_goes_through_codex_to_the_model(client: openai.OpenAI, model: ResponsesModelServer) -> None:
    model.default = ModelScript(text="Hello from the scripted model.", chunk_chars=4, usage=(33, 8))
    completion = client.chat.completions.create(model=MODEL, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello"}])
    assert completion.choices[0].message.content == "Hello from the scripted model."
    assert completion.choices[0].finish_reason == "stop"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (33, 8)
    [exchange] = model.exchanges
    assert exchange.headers["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert exchange.body["model"] == MODEL
    assert exchange.body["tools"] == []  # Codex's own tools are all switched off
    assert exchange.input_texts() == [("developer", "Be brief."), ("user", "Say hello")]


def test_chat_stream_and_usage(client: openai.OpenAI, model: ResponsesModelServer) -> None:
    model.default = ModelScript(text="Streaming through Codex works.", chunk_chars=3, usage=(40, 9))
    with client.chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": "Stream"}],
                                        stream_options={"include_usage": True}) as stream:
        deltas = [e.delta for e in stream if e.type == "content.delta"]
        final = stream.get_final_completion()
    assert "".join(deltas) == "Streaming through Codex works."
    assert len(deltas) > 3  # streamed, not one lump
    assert final.choices[0].finish_reason == "stop"
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (40, 9)


def test_responses_stream_and_non_stream(client: openai.OpenAI, model: ResponsesModelServer) -> None:
    model.default = ModelScript(text="Responses via Codex.", chunk_chars=5, usage=(12, 5))
    response = client.responses.create(model=MODEL, input="Hi", instructions="Answer plainly.")
    assert response.output_text == "Responses via Codex."
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 5)
    with client.responses.stream(model=MODEL, input="Hi again") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "Responses via Codex."
    assert final.status == "completed"
    assert model.exchanges[0].input_texts() == [("developer", "Answer plainly."), ("user", "Hi")]


def test_a_tool_call_parsed_out_of_codex_text_and_the_follow_up(client: openai.OpenAI,
                                                                model: ResponsesModelServer) -> None:
    call = tool_call_text("get_weather", {"city": "Paris"})
    model.enqueue(ModelScript(text=f"Let me check.\n{call}", chunk_chars=5),
                  ModelScript(text="It is 18 C and sunny in Paris."))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Paris?"}]
    with client.chat.completions.stream(model=MODEL, messages=messages, tools=[WEATHER]) as stream:
        list(stream)
        first = stream.get_final_completion()
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    [tool_call] = choice.message.tool_calls
    assert (tool_call.function.name, json.loads(tool_call.function.arguments)) == ("get_weather", {"city": "Paris"})
    developer = model.exchanges[0].input_texts()[0]
    assert developer[0] == "developer" and "get_weather" in developer[1]  # the manifest is Codex's base instructions

    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": tool_call.id, "content": "18 C, sunny"}]
    second = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER])
    assert second.choices[0].message.content == "It is 18 C and sunny in Paris."
    roles = [role for role, _ in model.exchanges[1].input_texts()]
    assert roles == ["developer", "user", "assistant", "user"]  # history injected, tool result as the new turn
    assert "get_weather" in model.exchanges[1].input_texts()[2][1]
    assert "18 C, sunny" in model.exchanges[1].input_texts()[3][1]


def test_two_concurrent_requests_share_one_app_server(codex_server: ToolwireServer, model: ResponsesModelServer) -> None:
    model.default = ModelScript(text="echo: ", chunk_chars=2, delay_between_chunks=0.05, echo=True)
    results: dict[str, str] = {}

    def ask(word: str) -> None:
        with openai.OpenAI(base_url=codex_server.v1_url, api_key="t", max_retries=0) as c:
            completion = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": word}])
            results[word] = completion.choices[0].message.content

    threads = [threading.Thread(target=ask, args=(word,)) for word in ("alpha", "bravo")]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    elapsed = time.monotonic() - started
    assert results == {"alpha": "echo: alpha", "bravo": "echo: bravo"}
    # each answer streams for ~0.3 s; run one after the other they would take at least twice that
    lone = [e.received_at for e in model.exchanges]
    assert abs(lone[0] - lone[1]) < 0.3, f"the model requests were not concurrent ({elapsed:.2f} s)"
    assert len(app_server_pids(codex_server)) == 1


def test_models_and_readiness(codex_factory: Callable[..., ToolwireServer]) -> None:
    server = codex_factory(TOOLWIRE_MODEL_MAP=json.dumps({"gpt-4o": MODEL}))
    listed = httpx.get(server.v1_url + "/models", timeout=10).json()
    assert {m["id"] for m in listed["data"]} == {MODEL, "gpt-4o"}
    ready = httpx.get(server.url + "/readyz", timeout=10)
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


def test_n_above_one_is_refused_with_its_param(client: openai.OpenAI, model: ResponsesModelServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, n=2, messages=[{"role": "user", "content": "x"}])
    assert caught.value.body["param"] == "n"
    assert not model.exchanges


# --- stop and max_tokens emulation ------------------------------------------------------------------------


def test_stop_sequence_cuts_the_text_and_interrupts_the_model(client: openai.OpenAI,
                                                              model: ResponsesModelServer) -> None:
    model.default = ModelScript(text="one two END three four five", chunk_chars=3, hang_after_chunks=5)
    completion = client.chat.completions.create(model=MODEL, stop=["END"], messages=[{"role": "user", "content": "x"}])
    assert completion.choices[0].message.content == "one two "
    assert completion.choices[0].finish_reason == "stop"
    [exchange] = model.exchanges
    assert exchange.peer_closed.wait(10), "Codex kept the model request open after the stop sequence"


def test_max_tokens_ends_with_length(client: openai.OpenAI, model: ResponsesModelServer) -> None:
    model.default = ModelScript(text="abcdefghijklmnopqrstuvwxyz", chunk_chars=2, hang_after_chunks=6)
    with client.chat.completions.stream(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "x"}]) as s:
        list(s)
        with pytest.raises(openai.LengthFinishReasonError) as caught:  # how the SDK reports "length"
            s.get_final_completion()
    final = caught.value.completion
    assert final.choices[0].message.content == "abcdefgh"
    assert final.choices[0].finish_reason == "length"
    assert model.exchanges[0].peer_closed.wait(10)


# --- faults --------------------------------------------------------------------------------------------


def test_client_disconnect_interrupts_the_turn_and_closes_the_model_request(codex_server: ToolwireServer,
                                                                            model: ResponsesModelServer) -> None:
    model.default = ModelScript(text="a long answer that never ends", chunk_chars=4, hang_after_chunks=2)
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    with httpx.stream("POST", codex_server.v1_url + "/chat/completions", json=body, timeout=10) as response:
        for event in sse_events(response):
            if isinstance(event, dict) and event["choices"] and event["choices"][0]["delta"].get("content"):
                break
        left_at = time.monotonic()
    [exchange] = model.exchanges
    assert exchange.peer_closed.wait(10), "the model request stayed open after the client left"
    assert exchange.peer_closed_at - left_at < 1.0


def test_app_server_killed_mid_stream_then_the_next_request_works(codex_server: ToolwireServer,
                                                                  model: ResponsesModelServer) -> None:
    model.enqueue(ModelScript(text="this answer is cut short", chunk_chars=4, hang_after_chunks=2),
                  ModelScript(text="A fresh app-server answers."))
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    killed: list[int] = []
    with httpx.stream("POST", codex_server.v1_url + "/chat/completions", json=body, timeout=10) as response:
        raw = ""
        for line in response.iter_lines():
            raw += line + "\n"
            if '"content"' in line and not killed:  # text is streaming: kill Codex under it
                killed += app_server_pids(codex_server)
                os.kill(killed[0], signal.SIGKILL)
    summary = check_chat_stream(raw)
    assert summary.error is not None and summary.error["type"] == "server_error"
    assert raw.rstrip().endswith("data: [DONE]")
    with openai.OpenAI(base_url=codex_server.v1_url, api_key="t", max_retries=0) as c:
        completion = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "again"}])
    assert completion.choices[0].message.content == "A fresh app-server answers."
    assert app_server_pids(codex_server) not in ([], killed)


def test_model_server_down_is_a_clean_502(codex_factory: Callable[..., ToolwireServer]) -> None:
    server = codex_factory(TOOLWIRE_CODEX_PROVIDER_URL=f"http://127.0.0.1:{free_port()}/v1")
    started = time.monotonic()
    response = httpx.post(server.v1_url + "/chat/completions", timeout=15,
                          json={"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "x"}]})
    assert time.monotonic() - started < 15
    assert response.status_code == 502
    error = check_error_envelope(response.status_code, response.content)
    assert "reach" in error["message"]


def test_a_model_codex_does_not_serve_is_a_404(codex_factory: Callable[..., ToolwireServer],
                                               make_openai_client: Callable[[ToolwireServer], openai.OpenAI],
                                               model: ResponsesModelServer) -> None:
    server = codex_factory(TOOLWIRE_DEFAULT_UPSTREAM_MODEL=None, TOOLWIRE_MODEL_MAP=json.dumps({"alias": MODEL}))
    client = make_openai_client(server)
    assert client.chat.completions.create(model="alias", messages=[{"role": "user", "content": "x"}]).choices
    model.exchanges.clear()
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="not-in-the-catalog", messages=[{"role": "user", "content": "x"}])
    assert caught.value.body["param"] == "model" and caught.value.body["code"] == "model_not_found"
    assert not model.exchanges  # never run on Codex's fallback metadata, which compacts long histories


def test_hung_app_server_gets_a_502_then_is_replaced(codex_factory: Callable[..., ToolwireServer],
                                                     model: ResponsesModelServer) -> None:
    server = codex_factory(TOOLWIRE_UPSTREAM_CONNECT_TIMEOUT="1.5")
    assert httpx.get(server.url + "/readyz", timeout=10).status_code == 200  # the app-server runs
    [pid] = app_server_pids(server)
    os.kill(pid, signal.SIGSTOP)  # alive but silent
    try:
        started = time.monotonic()
        response = httpx.post(server.v1_url + "/chat/completions", timeout=15,
                              json={"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
        assert response.status_code == 502
        check_error_envelope(response.status_code, response.content)
        assert time.monotonic() - started < 15
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    completion = httpx.post(server.v1_url + "/chat/completions", timeout=15,
                            json={"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
    assert completion.status_code == 200
    assert app_server_pids(server) not in ([], [pid])


def test_recycling_replaces_the_app_server_without_cutting_a_request(codex_factory: Callable[..., ToolwireServer],
                                                                     model: ResponsesModelServer) -> None:
    server = codex_factory(TOOLWIRE_CODEX_RECYCLE_REQUESTS="1")
    model.enqueue(ModelScript(text="the long answer keeps streaming", chunk_chars=3, delay_between_chunks=0.08),
                  ModelScript(text="short"))
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    with httpx.stream("POST", server.v1_url + "/chat/completions", json=body, timeout=10) as response:
        lines = response.iter_lines()
        raw = ""
        for line in lines:  # the first request is streaming on app-server #1 ...
            raw += line + "\n"
            if '"content"' in line:
                break
        [first_pid] = app_server_pids(server)
        second = httpx.post(server.v1_url + "/chat/completions", timeout=10,  # ... #2 serves the next one
                            json={"model": MODEL, "messages": [{"role": "user", "content": "y"}]})
        assert second.json()["choices"][0]["message"]["content"] == "short"
        raw += "\n".join(lines) + "\n"
    summary = check_chat_stream(raw)
    assert summary.choice(0).content == "the long answer keeps streaming"  # not cut by the recycling
    assert summary.choice(0).finish_reason == "stop"
    deadline = time.monotonic() + 5
    while first_pid in app_server_pids(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first_pid not in app_server_pids(server), "the retired app-server kept running"
    [worker] = server.worker_pids()
    home = Path(server.env["TOOLWIRE_CODEX_WORK_DIR"]) / str(worker)
    while sorted(p.name for p in home.glob("sqlite-*")) != [f"sqlite-{worker}-2"]:  # the old TRACE log goes too
        assert time.monotonic() < deadline, f"state directories left: {sorted(home.glob('sqlite-*'))}"
        time.sleep(0.05)


def test_a_missing_binary_stops_the_start_with_a_clear_message(tmp_path: Path) -> None:
    settings = {"TOOLWIRE_UPSTREAM_KIND": "codex", "TOOLWIRE_CODEX_COMMAND": str(tmp_path / "no-codex-here"),
                "TOOLWIRE_CODEX_WORK_DIR": str(tmp_path), "TOOLWIRE_RESPONSE_STORE_PATH": ""}
    with pytest.raises(ServerStartError) as caught:
        with run_toolwire(settings, timeout=10):
            pass
    assert "no-codex-here' was not found" in str(caught.value)


def test_turns_per_worker_are_bounded(codex_factory: Callable[..., ToolwireServer], model: ResponsesModelServer) -> None:
    server = codex_factory(TOOLWIRE_CODEX_MAX_TURNS="1")
    model.enqueue(ModelScript(text="holding the only turn", chunk_chars=4, hang_after_chunks=1))
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}]}
    with httpx.stream("POST", server.v1_url + "/chat/completions", json={**body, "stream": True}, timeout=10) as held:
        next(held.iter_lines())
        refused = httpx.post(server.v1_url + "/chat/completions", json=body, timeout=10)
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
        check_error_envelope(refused.status_code, refused.content)
    deadline = time.monotonic() + 5  # the turn is released (interrupted, unsubscribed) just after the client left
    while (answer := httpx.post(server.v1_url + "/chat/completions", json=body, timeout=10)).status_code == 429:
        assert time.monotonic() < deadline, "the turn slot was never released"
        time.sleep(0.05)
    assert answer.status_code == 200


def test_a_json_schema_format_becomes_codex_output_schema(client: openai.OpenAI, model: ResponsesModelServer) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
              "additionalProperties": False}
    model.default = ModelScript(text='{"answer": "yes"}')
    response = client.responses.create(model=MODEL, input="Answer in JSON", max_output_tokens=50,
                                       text={"format": {"type": "json_schema", "name": "reply", "schema": schema}})
    assert json.loads(response.output_text) == {"answer": "yes"}
    sent = model.exchanges[0].body["text"]["format"]
    assert sent["type"] == "json_schema" and sent["schema"] == schema


def test_without_configured_models_the_catalog_is_the_binarys_own(codex_factory: Callable[..., ToolwireServer],
                                                                  model: ResponsesModelServer) -> None:
    server = codex_factory(TOOLWIRE_DEFAULT_UPSTREAM_MODEL=None)
    listed = [m["id"] for m in httpx.get(server.v1_url + "/models", timeout=10).json()["data"]]
    assert listed and MODEL not in listed  # what Codex offers with a login, read from the binary at start
    response = httpx.post(server.v1_url + "/chat/completions", timeout=10,
                          json={"model": listed[0], "messages": [{"role": "user", "content": "x"}]})
    assert response.status_code == 200
    assert model.exchanges[0].body["model"] == listed[0]


def test_tool_mode_auto_falls_back_to_prompt_mode_on_codex(codex_factory: Callable[..., ToolwireServer],
                                                           make_openai_client: Callable[[ToolwireServer], openai.OpenAI],
                                                           model: ResponsesModelServer) -> None:
    client = make_openai_client(codex_factory(TOOLWIRE_TOOL_MODE="auto"))
    model.default = ModelScript(text=tool_call_text("get_weather", {"city": "Oslo"}))
    completion = client.chat.completions.create(model=MODEL, tools=[WEATHER],
                                                messages=[{"role": "user", "content": "Weather in Oslo?"}])
    [call] = completion.choices[0].message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Oslo"})
    native = make_openai_client(codex_factory(TOOLWIRE_TOOL_MODE="native"))
    with pytest.raises(openai.BadRequestError) as caught:
        native.chat.completions.create(model=MODEL, tools=[WEATHER], messages=[{"role": "user", "content": "x"}])
    assert caught.value.body["param"] == "tools"


def test_a_model_cut_mid_answer_ends_the_stream_with_an_error(client: openai.OpenAI, codex_server: ToolwireServer,
                                                              model: ResponsesModelServer) -> None:
    model.enqueue(ModelScript(text="the answer is cut here", chunk_chars=4, close_after_chunks=2),
                  ModelScript(text="cut again, on Responses", chunk_chars=4, close_after_chunks=2))
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    with httpx.stream("POST", codex_server.v1_url + "/chat/completions", json=body, timeout=10) as response:
        raw = "".join(line + "\n" for line in response.iter_lines())
    summary = check_chat_stream(raw)
    assert summary.choice(0).content == "the answ"  # the two deltas that came before the cut, never replayed
    assert summary.error is not None and summary.error["type"] == "server_error"
    with client.responses.stream(model=MODEL, input="x") as stream:
        events = [event.type for event in stream]
    assert events[-1] == "response.failed"


def test_a_model_400_before_the_first_byte_is_passed_through(client: openai.OpenAI, model: ResponsesModelServer) -> None:
    model.default = ModelScript(status=400)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, stream=True, messages=[{"role": "user", "content": "x"}])
    assert caught.value.body["message"] == "scripted 400 error"


# --- reasoning -------------------------------------------------------------------------------------------

def test_the_app_servers_reasoning_reaches_both_apis(client: openai.OpenAI, model: ResponsesModelServer) -> None:
    """The provider's raw reasoning → Codex's reasoning deltas → Chat reasoning_content and a Responses item."""
    thought = "The user greets me; a greeting back is enough."
    model.enqueue(ModelScript(text="Hello!", reasoning=thought), ModelScript(text="Hello!", reasoning=thought))
    message = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}]).choices[0].message
    assert (message.model_extra["reasoning_content"], message.content) == (thought, "Hello!")
    with client.responses.stream(model=MODEL, input="Hi") as stream:
        response = stream.get_final_response()
    assert [item.type for item in response.output] == ["reasoning", "message"]
    assert response.output[0].content[0].text == thought and response.output_text == "Hello!"


# --- a hostile provider: every turn is bounded (issue 25) -------------------------------------------------

ASK_TOOL = {"model": MODEL, "messages": [{"role": "user", "content": "List the files."}]}


def settled_count(model: ResponsesModelServer, quiet: float = 0.5) -> int:
    """The number of model requests once none came for ``quiet`` seconds."""
    count = len(model.exchanges)
    while True:
        time.sleep(quiet)
        if len(model.exchanges) == count:
            return count
        count = len(model.exchanges)


def test_a_provider_that_keeps_calling_tools_is_stopped_at_its_second_request(
        codex_factory: Callable[..., ToolwireServer], model: ResponsesModelServer) -> None:
    """Codex answers "unsupported call" to a tool call it never offered and asks again, forever (476 model
    requests in 10 s, the turn never released, then 429 for everyone): toolwire ends the turn."""
    server = codex_factory(TOOLWIRE_CODEX_MAX_TURNS="1")
    model.default = ModelScript(text="", tool_call="shell")
    started = time.monotonic()
    response = httpx.post(server.v1_url + "/chat/completions", json={**ASK_TOOL, "stream": True}, timeout=10)
    assert time.monotonic() - started < 15
    assert response.status_code == 502
    error = check_error_envelope(response.status_code, response.content)
    assert error["code"] == "upstream_tool_loop"
    assert settled_count(model) <= 3  # the second request is where Codex is stopped (a third may be on its way)
    model.default = ModelScript(text="Back to normal.")
    answer = httpx.post(server.v1_url + "/chat/completions", json=ASK_TOOL, timeout=10)  # the only turn slot is free
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"] == "Back to normal."


def test_text_then_a_tool_call_ends_the_stream_with_an_error(codex_factory: Callable[..., ToolwireServer],
                                                             model: ResponsesModelServer) -> None:
    server = codex_factory(TOOLWIRE_CODEX_MAX_TURNS="1")
    model.default = ModelScript(text="Let me run that.", tool_call="shell")
    with httpx.stream("POST", server.v1_url + "/chat/completions", json={**ASK_TOOL, "stream": True},
                      timeout=10) as response:
        raw = "".join(line + "\n" for line in response.iter_lines())
    summary = check_chat_stream(raw)
    assert summary.choice(0).content == "Let me run that."
    assert summary.error is not None and summary.error["code"] == "upstream_tool_loop"
    assert settled_count(model) <= 3


def test_stream_max_seconds_counts_the_wait_for_the_first_output(codex_factory: Callable[..., ToolwireServer],
                                                                  model: ResponsesModelServer) -> None:
    server = codex_factory(TOOLWIRE_STREAM_MAX_SECONDS="1.5")
    model.default = ModelScript(hang_before_output=True)
    for stream in (True, False):
        model.exchanges.clear()
        started = time.monotonic()
        response = httpx.post(server.v1_url + "/chat/completions", json={**ASK_TOOL, "stream": stream}, timeout=10)
        assert 1.4 < time.monotonic() - started < 10
        assert response.status_code == 504
        assert check_error_envelope(response.status_code, response.content)["code"] == "stream_time_limit"
        [exchange] = model.exchanges
        assert exchange.peer_closed.wait(10), "the turn kept its model request open"


def test_a_client_that_leaves_before_the_first_output_releases_the_turn(
        codex_factory: Callable[..., ToolwireServer], model: ResponsesModelServer) -> None:
    server = codex_factory(TOOLWIRE_CODEX_MAX_TURNS="1")
    for stream in (True, False):
        model.exchanges.clear()
        model.enqueue(ModelScript(hang_before_output=True))
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(server.v1_url + "/chat/completions", json={**ASK_TOOL, "stream": stream}, timeout=1)
        left_at = time.monotonic()
        [exchange] = model.wait_for_requests(1)
        assert exchange.peer_closed.wait(10), "the model request stayed open after the client left"
        assert exchange.peer_closed_at - left_at < 1.5
        deadline = time.monotonic() + 3  # the only turn slot is released just after
        while (answer := httpx.post(server.v1_url + "/chat/completions", json=ASK_TOOL, timeout=10)).status_code == 429:
            assert time.monotonic() < deadline, "the turn slot was never released"
            time.sleep(0.05)
        assert answer.status_code == 200


def test_an_app_server_that_dies_at_start_is_started_again_only_after_a_backoff(
        codex_factory: Callable[..., ToolwireServer], codex_launcher: Path, model: ResponsesModelServer,
        tmp_path: Path) -> None:
    """Every request started a new app-server when it died at start: 19 starts/s under 16 clients."""
    starts, broken = tmp_path / "starts", tmp_path / "broken"
    wrapper = tmp_path / "codex-dying-at-start"
    wrapper.write_text(f"""#!/bin/sh
case " $* " in *" --version "*|*" --print-startup-config "*) exec "{codex_launcher}" "$@";; esac
[ -e "{broken}" ] || exec "{codex_launcher}" "$@"
echo start >> "{starts}"
exit 1
""")
    wrapper.chmod(0o755)
    broken.touch()
    server = codex_factory(TOOLWIRE_CODEX_COMMAND=str(wrapper))
    answers: list[tuple[int, str | None, float]] = []
    stop_at = time.monotonic() + 2.5

    def client() -> None:
        with httpx.Client(timeout=10) as http:
            while time.monotonic() < stop_at:
                sent = time.monotonic()
                response = http.post(server.v1_url + "/chat/completions", json=ASK_TOOL)
                answers.append((response.status_code, response.headers.get("Retry-After"), time.monotonic() - sent))
                time.sleep(0.05)

    clients = [threading.Thread(target=client) for _ in range(16)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(10)
    assert len(starts.read_text().splitlines()) <= 3  # at 0 s, then after 1 s and 2 s more (was ~19 a second)
    assert {status for status, _, _ in answers} == {503}
    assert all(retry_after for _, retry_after, _ in answers)
    assert sorted(took for _, _, took in answers)[len(answers) // 2] < 0.5  # answered at once, not after a start
    broken.unlink()  # the binary works again: served once the wait is over
    deadline = time.monotonic() + 5
    while (answer := httpx.post(server.v1_url + "/chat/completions", json=ASK_TOOL, timeout=10)).status_code == 503:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert answer.status_code == 200


@pytest.mark.parametrize("status", [404, 502])
def test_a_provider_error_page_goes_to_the_log_not_to_the_client(codex_server: ToolwireServer,
                                                                 model: ResponsesModelServer, status: int) -> None:
    """The provider's error text (an HTML page naming internal hosts and echoing the key in base64, Codex adding
    the provider URL) reached the client; now the client gets what kind of failure it was and the request id."""
    echoed = base64.b64encode(f"Bearer {PROVIDER_KEY}".encode()).decode()
    model.default = ModelScript(status=status, error_body=f"<html>gw-9.corp.internal:8443 said no to {echoed}</html>")
    request_id = f"leak-check-{status}"
    response = httpx.post(codex_server.v1_url + "/chat/completions", json={**ASK_TOOL, "stream": True},
                          headers={"X-Request-Id": request_id}, timeout=10)
    assert response.status_code == (404 if status == 404 else 502)
    message = check_error_envelope(response.status_code, response.content)["message"]
    assert request_id in message
    for secret in ("corp.internal", model.v1_url.split("//")[1], echoed, PROVIDER_KEY):
        assert secret not in response.text
    deadline = time.monotonic() + 5
    while not (logged := [line for line in codex_server.log().splitlines() if request_id in line and "gw-9" in line]):
        assert time.monotonic() < deadline, "the provider's error was not logged"
        time.sleep(0.1)
    assert echoed[:20] not in logged[0] and PROVIDER_KEY not in logged[0] and "**********" in logged[0]


def peak_rss_kib(pid: int) -> int:
    """The process's peak resident set (``VmHWM``), KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))


def test_a_delta_over_the_event_bound_fails_its_request_and_the_worker_never_holds_it(
        codex_factory: Callable[..., ToolwireServer], model: ResponsesModelServer) -> None:
    """A 64 MiB provider delta grew the worker by 285 MB; the app-server's lines are bounded like SSE events."""
    server = codex_factory(TOOLWIRE_UPSTREAM_MAX_EVENT_BYTES=str(512 * 1024))
    big_question = {"model": MODEL, "messages": [{"role": "user", "content": "q" * (900 * 1024)}]}
    answer = httpx.post(server.v1_url + "/chat/completions", json=big_question, timeout=10)
    assert answer.status_code == 200  # Codex echoes a user message whole (up to 1 MiB): toolwire reads its type
    [worker], [app_server] = server.worker_pids(), app_server_pids(server)
    before = peak_rss_kib(worker)
    delta = 5 * 512 * 1024  # Codex takes seconds for a few MiB in one SSE event (4 MiB: 5 s, 16 MiB: minutes)
    model.default = ModelScript(text="x" * delta, chunk_chars=delta)
    response = httpx.post(server.v1_url + "/chat/completions", json={**ASK_TOOL, "stream": True}, timeout=15)
    error = check_chat_stream(response.text).error  # the message item started: the stream had begun
    assert error is not None and error["code"] == "upstream_too_large"
    assert "TOOLWIRE_UPSTREAM_MAX_EVENT_BYTES" in error["message"]
    assert (peak_rss_kib(worker) - before) * 1024 < delta  # never a copy of the delta in the worker
    model.default = ModelScript(text="small again")
    again = httpx.post(server.v1_url + "/chat/completions", json=ASK_TOOL, timeout=10)
    assert again.json()["choices"][0]["message"]["content"] == "small again"
    assert app_server_pids(server) == [app_server]  # the same app-server: only that request failed


# --- the Codex app-server as one back end of several ----------------------------------------------------


def test_codex_is_one_back_end_beside_an_http_one_and_the_demo(
        toolwire_factory: Callable[..., ToolwireServer], codex_launcher: Path, model: ResponsesModelServer,
        upstream: Any, make_openai_client: Callable[[ToolwireServer], openai.OpenAI],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    from support.scripted_upstream import MODEL_ID, Script

    codex = {"kind": "codex", "codex_command": str(codex_launcher),
             "codex_home": str(tmp_path_factory.mktemp("user-codex-home-named")),
             "codex_provider_url": model.v1_url, "codex_provider_api_key": PROVIDER_KEY}
    server = toolwire_factory(
        TOOLWIRE_UPSTREAMS=json.dumps({"codex": codex, "lab": {"kind": "demo", "demo_model": "lab-demo"}}),
        TOOLWIRE_MODEL_MAP=json.dumps({"via-codex": {"model": MODEL, "upstream": "codex"}}),
        TOOLWIRE_CODEX_WORK_DIR=str(tmp_path_factory.mktemp("codex-work-named")))
    client = make_openai_client(server)
    model.default = ModelScript(text="Hello from behind Codex.", chunk_chars=4)
    upstream.default_script = Script(text="Hello from the HTTP back end.", chunks=3)
    for stream in (False, True):
        for name, expected in (("via-codex", "Hello from behind Codex."),
                               (MODEL_ID, "Hello from the HTTP back end.")):
            if stream:
                text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
                    model=name, messages=[{"role": "user", "content": "Say hello"}], stream=True) if c.choices)
            else:
                text = client.chat.completions.create(
                    model=name, messages=[{"role": "user", "content": "Say hello"}]).choices[0].message.content
            assert text == expected, (name, stream)
        reply = client.responses.create(model="via-codex", input="Say hello", stream=stream)
        if stream:
            reply = [e.response for e in reply if e.type == "response.completed"][-1]  # type: ignore[union-attr]
        assert reply.output_text == "Hello from behind Codex."  # type: ignore[union-attr]
    assert client.chat.completions.create(model="lab-demo", messages=[
        {"role": "user", "content": "hi"}]).model == "lab-demo"
    assert [e.body["model"] for e in upstream.chat_requests] == [MODEL_ID, MODEL_ID]
    assert len(model.exchanges) == 4
    ready = httpx.get(f"{server.url}/readyz", timeout=10).json()
    assert ready["status"] == "ready" and ready["upstreams"] == {"default": "ok", "codex": "ok", "lab": "ok"}



def test_an_input_over_codexs_limit_is_the_clients_error(codex_factory: Callable[..., ToolwireServer],
                                                         model: ResponsesModelServer) -> None:
    """Codex refuses a turn whose input is over 1,048,576 characters (JSON-RPC -32602, ``input_too_large``): the
    client gets a 400 naming ``messages``, not a 502 blaming the back end; no model request is made."""
    server = codex_factory()
    body = {"model": MODEL, "messages": [{"role": "user", "content": "a" * ((1 << 20) + 1)}]}
    for stream in (False, True):
        response = httpx.post(server.v1_url + "/chat/completions", json={**body, "stream": stream}, timeout=30)
        error = check_error_envelope(response.status_code, response.content)
        assert (response.status_code, error["param"], error["code"]) == (400, "messages", "input_too_large")
        assert "1,048,577 characters; at most 1,048,576" in error["message"]
    assert not model.exchanges
