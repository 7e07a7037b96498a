"""Fault suite: upstream and client failures against real gunicorn + gevent, for every endpoint.

Each case runs streaming and non-streaming, with plain httpx (the answer is checked against the
wire contract and classified) and with the openai SDK (its error type is checked; its traffic is
contract-checked by the recording transport). After every case: no upstream connection is left
open, the worker did not crash (``/healthz``, no new ``Booting worker``, no ``Traceback`` in the
log) and the master is alive.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import httpx
import openai
import pytest

from support.endpoints import CHAT, RESPONSES, Endpoint, Outcome, send
from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text
from support.server import ToolwireServer, free_port, run_toolwire

pytestmark = pytest.mark.e2e

ENDPOINTS = [CHAT, RESPONSES]

PROMPT = "What's the weather in SF, and the time in Tokyo?"
WEATHER = {"name": "get_weather", "description": "Current weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
TIME = {"name": "get_time", "description": "Current time in a time zone.",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}
TOOLS = [WEATHER, TIME]
SF = ("get_weather", {"city": "SF"})
SF_CALL = tool_call_text(*SF)
# A complete call, text, then a call cut inside its arguments.
CUT_PIECES = [SF_CALL, "\nAnd the time: ", '<tool_call>{"name": "get_time", "argu']
SHORT_READ = {"TOOLWIRE_UPSTREAM_READ_TIMEOUT": "0.5"}


@dataclass(frozen=True)
class Fault:
    """One fault case.

    Fields:
        id: the test id.
        script: what the upstream does (``None``: no request reaches it).
        stream_kind: the ``Outcome.kind`` a streaming client must see.
        status: the HTTP status of the error envelope (before a stream starts, and for a
            non-streaming request); ``None`` when the answer succeeds.
        settings: toolwire settings for this case.
        calls: the tool calls complete upstream before the fault, which must reach the client.
    """

    id: str
    script: Script | None
    stream_kind: str
    status: int | None
    settings: dict[str, str] = field(default_factory=dict)
    calls: tuple[tuple[str, Any], ...] = ()

    def kind(self, stream: bool) -> str:
        """The expected outcome kind."""
        return self.stream_kind if stream else "envelope" if self.status else "completed"


FAULTS = [
    Fault("upstream-500", Script(status=500), "envelope", 502),
    Fault("upstream-429-retry-after", Script(status=429, headers={"Retry-After": "7"}), "envelope", 429),
    Fault("connection-refused", None, "envelope", 502,
          settings={"TOOLWIRE_UPSTREAM_URL": f"http://127.0.0.1:{free_port()}/v1"}),
    Fault("closed-mid-stream", Script(text="".join(CUT_PIECES), chunks=CUT_PIECES, close_after_chunks=3),
          "stream_error", 502, calls=(SF,)),
    Fault("malformed-sse-line", Script(text=SF_CALL + "\nmore", chunks=[SF_CALL, "\nmore"], malformed_line=1),
          "stream_error", 502, calls=(SF,)),
    Fault("hang-before-headers", Script(text="late", delay_before_headers=3.0), "envelope", 504, SHORT_READ),
    Fault("hang-mid-stream", Script(text=SF_CALL + "never ends", chunks=[SF_CALL, "never ", "ends"], hang_after_chunks=1),
          "stream_error", 504, SHORT_READ, calls=(SF,)),
    Fault("drip-1-byte-per-second", Script(text="slow", drip=1.0), "stream_error", 504, SHORT_READ),
    Fault("drip-every-byte-its-own-chunk", Script(text="Let me check.\n" + SF_CALL, drip=0.0005), "completed", None,
          calls=(SF,)),
]


@pytest.fixture(params=ENDPOINTS, ids=lambda e: e.name)
def endpoint(request: pytest.FixtureRequest) -> Endpoint:
    """Each endpoint in turn."""
    return request.param


@pytest.fixture(params=[True, False], ids=["stream", "non-stream"])
def stream(request: pytest.FixtureRequest) -> bool:
    """Streaming, then not."""
    return request.param


@contextlib.contextmanager
def no_damage(server: ToolwireServer, upstream: ScriptedUpstream) -> Iterator[None]:
    """After the block: every upstream connection closed, worker and master alive, nothing logged
    as a crash."""
    offset, boots = len(server.log()), server.worker_boots()
    yield
    assert upstream.wait_connections_closed() == 0, "an upstream connection was left open"
    assert httpx.get(server.url + "/healthz", timeout=5).status_code == 200
    assert server.process.poll() is None, "the gunicorn master died"
    assert server.worker_boots() == boots, "a worker died and was replaced"
    assert "Traceback" not in server.log()[offset:], server.log()[offset:][-3000:]


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.id)
def test_fault_ends_in_a_well_formed_outcome(fault: Fault, endpoint: Endpoint, stream: bool, upstream: ScriptedUpstream,
                                             toolwire_factory: Callable[..., ToolwireServer], make_openai_client) -> None:
    server = toolwire_factory(**fault.settings)
    expected = fault.kind(stream)
    with no_damage(server, upstream):
        if fault.script is not None:
            upstream.enqueue(fault.script, fault.script)
        outcome = send(server.v1_url, endpoint, endpoint.body(PROMPT, TOOLS, stream=stream))
        assert outcome.kind == expected, outcome
        if expected == "envelope":
            assert outcome.status == fault.status
        if fault.status == 429:
            assert outcome.headers.get("retry-after") == "7"
            assert outcome.error["type"] == "rate_limit_error"
        if expected == "stream_error":
            assert isinstance(outcome.error.get("message"), str) and outcome.error["message"]
        assert outcome.calls == ([] if expected == "envelope" else list(fault.calls)), "a complete tool call went missing"

        client = make_openai_client(server)
        if expected == "completed":
            assert endpoint.sdk(client, PROMPT, TOOLS, stream=stream) == list(fault.calls)
        else:
            with pytest.raises(openai.APIStatusError if expected == "envelope" else openai.APIError) as caught:
                endpoint.sdk(client, PROMPT, TOOLS, stream=stream)
            assert getattr(caught.value, "status_code", None) == (fault.status if expected == "envelope" else None)
        assert len(upstream.chat_requests) == (0 if fault.script is None else 2), "toolwire must not retry"


def read_until(response: httpx.Response, marker: bytes, within: float = 5.0) -> bytes:
    """Read the body until ``marker`` has arrived; fail after ``within`` seconds."""
    deadline, raw = time.monotonic() + within, b""
    for piece in response.iter_raw():
        raw += piece
        if marker in raw:
            return raw
        assert time.monotonic() < deadline, f"{marker!r} not received within {within} s: {raw[-500:]!r}"
    raise AssertionError(f"the stream ended before {marker!r}: {raw[-500:]!r}")


@pytest.mark.parametrize(
    ("script", "first_piece"),
    [
        (Script(text="word " * 60, chunks=5, delay_between_chunks=0.1), b"word "),
        (Script(text="A partial answer", chunks=4, hang_after_chunks=1), b"A pa"),
    ],
    ids=["upstream-streaming", "upstream-silent"],
)
def test_client_disconnect_closes_the_upstream_request_within_a_second(
        endpoint: Endpoint, upstream: ScriptedUpstream, toolwire_server: ToolwireServer, script: Script, first_piece: bytes) -> None:
    with no_damage(toolwire_server, upstream):
        upstream.enqueue(script)
        with httpx.Client(timeout=10) as client:
            with client.stream("POST", toolwire_server.v1_url + endpoint.path, json=endpoint.body(PROMPT, [], stream=True)) as response:
                assert response.status_code == 200
                read_until(response, first_piece)
                left_at = time.monotonic()
        (exchange,) = upstream.chat_requests
        assert exchange.peer_closed.wait(10.0), "toolwire never closed its upstream request"
        assert exchange.peer_closed_at - left_at < 1.0
        assert not exchange.completed


def test_a_dripping_upstream_keeps_the_stream_alive_until_the_client_leaves(
        endpoint: Endpoint, upstream: ScriptedUpstream, toolwire_factory: Callable[..., ToolwireServer]) -> None:
    server = toolwire_factory(TOOLWIRE_UPSTREAM_READ_TIMEOUT="3")
    with no_damage(server, upstream):
        upstream.enqueue(Script(text="slow", drip=1.0))
        with httpx.Client(timeout=10) as client:
            with client.stream("POST", server.v1_url + endpoint.path, json=endpoint.body(PROMPT, [], stream=True)) as response:
                assert response.status_code == 200
                raw = read_until(response, b": keep-alive\n\n" * 8)
                left_at = time.monotonic()
        (exchange,) = upstream.chat_requests
        assert left_at - exchange.received_at > 1.4, "no byte gap was waited through"
        assert b'"error":{' not in raw, "a 1 s gap under a 3 s read timeout is not a timeout"
        assert exchange.peer_closed.wait(10.0), "toolwire never closed its upstream request"
        assert exchange.peer_closed_at - left_at < 1.0
        assert not exchange.completed


# ---- worker restarts under load -----------------------------------------------------------------

LOAD_STREAMS = 8
LONG_ANSWER = Script(text=SF_CALL + " and some words after it" * 3, chunks=4, delay_between_chunks=0.08)


def open_streams(base_url: str, endpoint: Endpoint, count: int) -> tuple[list[Outcome | BaseException | None], list[threading.Thread]]:
    """Start ``count`` streaming requests in threads; their outcomes land in the returned list."""
    outcomes: list[Outcome | BaseException | None] = [None] * count

    def run(i: int) -> None:
        try:
            outcomes[i] = send(base_url, endpoint, endpoint.body(PROMPT, TOOLS, stream=True), within=40)
        except BaseException as exc:  # reported by the test
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    return outcomes, threads


def streams_per_worker(server: ToolwireServer, upstream: ScriptedUpstream) -> dict[int, int]:
    """How many open upstream connections each worker holds."""
    open_inodes = upstream.open_connection_inodes()
    return {pid: len(server.socket_inodes(pid) & open_inodes) for pid in server.worker_pids()}


def wait_all_streaming(server: ToolwireServer, upstream: ScriptedUpstream) -> dict[int, int]:
    """Wait until every load stream holds an upstream connection; return them per worker."""
    upstream.wait_for_chat_requests(LOAD_STREAMS, timeout=10)
    deadline = time.monotonic() + 5
    while sum((per_worker := streams_per_worker(server, upstream)).values()) < LOAD_STREAMS:
        assert time.monotonic() < deadline, f"only {per_worker} upstream connections found"
        time.sleep(0.02)
    return per_worker


def join_all(threads: list[threading.Thread], outcomes: list[Any]) -> list[Outcome]:
    """Wait for every stream to end; fail on a stream that raised instead of ending."""
    for thread in threads:
        thread.join(timeout=16)
    for outcome in outcomes:
        if not isinstance(outcome, Outcome):
            raise AssertionError(f"a load stream did not end cleanly: {outcome!r}")
    return outcomes


def assert_serves(server: ToolwireServer, endpoint: Endpoint, upstream: ScriptedUpstream) -> None:
    """A few fresh requests succeed with the expected tool call."""
    upstream.default_script = Script(text=SF_CALL, chunks=6)
    for stream in (True, False, True):
        outcome = send(server.v1_url, endpoint, endpoint.body(PROMPT, TOOLS, stream=stream))
        assert (outcome.kind, outcome.calls) == ("completed", [SF]), outcome


@pytest.fixture
def two_workers(upstream: ScriptedUpstream) -> Iterator[ToolwireServer]:
    """A private toolwire with two workers (the tests kill and reload them)."""
    settings = {"TOOLWIRE_UPSTREAM_URL": upstream.v1_url, "TOOLWIRE_HEARTBEAT_SECONDS": "0.2",
                "TOOLWIRE_UPSTREAM_READ_TIMEOUT": "10", "TOOLWIRE_GRACEFUL_TIMEOUT": "10", "WEB_CONCURRENCY": "2"}
    with run_toolwire(settings) as server:
        deadline = time.monotonic() + 10
        while len(server.worker_pids()) < 2:
            assert time.monotonic() < deadline, "the second worker did not start"
            time.sleep(0.05)
        yield server


def test_killed_worker_breaks_only_its_own_streams(endpoint: Endpoint, upstream: ScriptedUpstream, two_workers: ToolwireServer) -> None:
    server = two_workers
    upstream.default_script = LONG_ANSWER
    outcomes, threads = open_streams(server.v1_url, endpoint, LOAD_STREAMS)
    per_worker = wait_all_streaming(server, upstream)
    victim = max(per_worker, key=per_worker.get)
    os.kill(victim, signal.SIGKILL)
    results = join_all(threads, outcomes)

    broken = [o for o in results if o.kind == "broken"]
    completed = [o for o in results if o.kind == "completed"]
    assert len(broken) == per_worker[victim], f"{per_worker=}, kinds {[o.kind for o in results]}"
    assert len(completed) == LOAD_STREAMS - per_worker[victim]
    assert all(o.calls == [SF] for o in completed), "a stream on the surviving worker lost its tool call"
    assert upstream.wait_connections_closed() == 0, "an upstream connection was left open"
    assert server.process.poll() is None, "the gunicorn master died"
    assert_serves(server, endpoint, upstream)


@pytest.mark.time_limit(90)  # two workers started, then replaced while the streams run: bounded, but long on a busy box
def test_graceful_reload_lets_running_streams_finish(endpoint: Endpoint, upstream: ScriptedUpstream, two_workers: ToolwireServer) -> None:
    server = two_workers
    upstream.default_script = LONG_ANSWER
    old_workers = set(server.worker_pids())
    outcomes, threads = open_streams(server.v1_url, endpoint, LOAD_STREAMS)
    wait_all_streaming(server, upstream)
    os.kill(server.process.pid, signal.SIGHUP)
    results = join_all(threads, outcomes)

    assert [(o.kind, o.calls) for o in results] == [("completed", [SF])] * LOAD_STREAMS
    deadline = time.monotonic() + 10
    while set(server.worker_pids()) & old_workers or len(server.worker_pids()) < 2:
        assert time.monotonic() < deadline, f"workers not replaced: {server.worker_pids()} (old {old_workers})"
        time.sleep(0.05)
    assert upstream.wait_connections_closed() == 0, "an upstream connection was left open"
    assert server.process.poll() is None, "the gunicorn master died"
    assert_serves(server, endpoint, upstream)
    assert "Traceback" not in server.log()


def test_shutdown_ends_the_streams_still_open_at_the_graceful_timeout(endpoint: Endpoint,
                                                                     upstream: ScriptedUpstream) -> None:
    """SIGTERM under real gunicorn: a stream that would outlive ``TOOLWIRE_GRACEFUL_TIMEOUT`` (its upstream
    hangs) ends before it with the endpoint's error frame and terminator, never cut mid-body."""
    graceful = 3
    settings = {"TOOLWIRE_UPSTREAM_URL": upstream.v1_url, "TOOLWIRE_HEARTBEAT_SECONDS": "0.2",
                "TOOLWIRE_GRACEFUL_TIMEOUT": str(graceful)}
    upstream.default_script = Script(text=SF_CALL + " and then", chunks=[SF_CALL, " and", " then"],
                                     hang_after_chunks=2)
    with run_toolwire(settings) as server:
        outcomes, threads = open_streams(server.v1_url, endpoint, LOAD_STREAMS)
        wait_all_streaming(server, upstream)
        stopped = time.monotonic()
        os.kill(server.process.pid, signal.SIGTERM)
        results = join_all(threads, outcomes)
        ended = time.monotonic() - stopped
        assert server.process.wait(timeout=graceful + 2) == 0
        log = server.log()
    # each checked by the wire contract (Responses names its code in the message: its codes are an enum)
    assert [(o.kind, o.status) for o in results] == [("stream_error", 200)] * LOAD_STREAMS
    assert all("server_shutting_down" in o.error["code"] + o.error["message"] for o in results), results[0].error
    assert all(o.calls == [SF] for o in results), "a call sent before the stop was lost"
    if endpoint is CHAT:
        assert all(o.body.endswith(b"data: [DONE]\n\n") for o in results)
    assert ended < graceful, f"the streams ended {ended:.1f} s after SIGTERM, not before the graceful timeout"
    assert "Worker graceful timeout" not in log and "Traceback" not in log, log
    assert upstream.wait_connections_closed() == 0, "an upstream connection was left open"
