"""Hostile clients, hostile back ends, unlucky operators (issue 17), against real gunicorn + gevent.

Each test reproduces one attack or accident and is bounded in time and load (two-core machines).
"""

from __future__ import annotations

import socket
import stat
import subprocess
import sys
import threading
import time

import httpx
import openai
import pytest

from support.invariants import check_error_envelope
from support.scripted_upstream import Script, ScriptedUpstream
from support.server import ToolwireServer, run_toolwire

pytestmark = pytest.mark.e2e

MODEL = "scripted-model"
KEY = "test"
USER = [{"role": "user", "content": "Hello?"}]


@pytest.fixture(scope="module")
def guarded(toolwire_factory) -> ToolwireServer:
    """One worker with client keys and a two-stream cap."""
    return toolwire_factory(TOOLWIRE_API_KEYS=KEY, TOOLWIRE_MAX_CONCURRENT_STREAMS="2")


def _raw_request_head(server: ToolwireServer, content_length: int, authorized: bool) -> socket.socket:
    """A connection that has sent a ``POST`` head declaring ``content_length`` body bytes, and no body yet."""
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    auth = f"Authorization: Bearer {KEY}\r\n" if authorized else ""
    sock.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                  f"{auth}Content-Length: {content_length}\r\n\r\n").encode())
    return sock


def _stream_gaps(server: ToolwireServer, gaps: list[float]) -> None:
    """Read one streamed chat answer from ``server``, appending the silence before every line to ``gaps``."""
    body = {"model": MODEL, "messages": USER, "stream": True}
    with httpx.stream("POST", server.v1_url + "/chat/completions", json=body, timeout=15,
                      headers={"Authorization": f"Bearer {KEY}", "X-No-Keepalive": "1"}) as response:
        last = time.monotonic()
        for _line in response.iter_lines():
            now = time.monotonic()
            gaps.append(now - last)
            last = now


def test_an_early_refusal_closes_the_connection_instead_of_draining_a_huge_body(upstream: ScriptedUpstream,
                                                                               guarded: ToolwireServer) -> None:
    """A key-less 1 GiB upload gets its 401 and is cut off within seconds, while a bystander's stream on the same
    worker keeps flowing (gunicorn used to drain the whole declared body without yielding)."""
    upstream.enqueue(Script(text="x" * 60, chunks=1, delay_between_chunks=0.05))
    gaps: list[float] = []
    bystander = threading.Thread(target=_stream_gaps, args=(guarded, gaps))
    bystander.start()
    upstream.wait_for_chat_requests(1)
    attacker = _raw_request_head(guarded, 1 << 30, authorized=False)
    block, sent, started, cut_after = b"\0" * (1 << 20), 0, time.monotonic(), None
    while time.monotonic() - started < 8 and sent < 1 << 30:
        try:
            sent += attacker.send(block)
        except OSError:
            cut_after = time.monotonic() - started
            break
    attacker.close()
    bystander.join(15)
    assert cut_after is not None and cut_after < 5, f"still accepting the body after {time.monotonic() - started:.1f} s"
    assert len(gaps) > 60 and max(gaps) < 1.0, f"the bystander's stream stalled {max(gaps):.2f} s"


def test_an_honest_oversized_upload_reads_its_413(guarded: ToolwireServer) -> None:
    """The early close lingers long enough for a client that sends its whole body before reading the answer."""
    response = httpx.post(guarded.v1_url + "/chat/completions", content=b" " * (17 << 20), timeout=10,
                          headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    assert response.status_code == 413
    check_error_envelope(413, response.content)


def test_slow_request_bodies_hold_no_stream_slot(upstream: ScriptedUpstream, guarded: ToolwireServer) -> None:
    """Connections still sending their body take no generation slot: with a cap of two and five slow uploads
    open, a normal request is answered."""
    slow = [_raw_request_head(guarded, 100, authorized=True) for _ in range(5)]
    try:
        for sock in slow:
            sock.sendall(b'{"model": ')
        time.sleep(0.3)
        upstream.enqueue(Script(text="Fine."))
        response = httpx.post(guarded.v1_url + "/chat/completions", json={"model": MODEL, "messages": USER},
                              headers={"Authorization": f"Bearer {KEY}"}, timeout=10)
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == "Fine."
    finally:
        for sock in slow:
            sock.close()


def test_instances_do_not_share_gunicorns_per_user_control_socket(tmp_path):
    """Toolwires run by one user must not fight over ``~/.gunicorn/gunicorn.ctl``: none is made unless the
    operator names a path of this instance's own."""
    home = tmp_path / "home"
    home.mkdir()
    with run_toolwire({"HOME": str(home)}):
        assert not (home / ".gunicorn").exists()
    own = tmp_path / "toolwire.ctl"
    with run_toolwire({"HOME": str(home), "TOOLWIRE_CONTROL_SOCKET": str(own)}):
        assert stat.S_ISSOCK(own.stat().st_mode)
    assert not (home / ".gunicorn").exists()


def test_request_heads_are_bounded(upstream: ScriptedUpstream, guarded: ToolwireServer) -> None:
    """Heads of ~800 KiB (100 fields of 8 KiB, gunicorn's defaults) are refused; a heavy real client's pass."""
    auth = {"Authorization": f"Bearer {KEY}"}
    bloated = {**auth, **{f"X-Pad-{i}": "p" * 8000 for i in range(60)}}
    refused = httpx.post(guarded.v1_url + "/chat/completions", json={"model": MODEL, "messages": USER},
                         headers=bloated, timeout=10)
    assert refused.status_code == 431
    upstream.enqueue(Script(text="Fine."))
    heavy = {**auth, **{f"X-Codex-{i}": "m" * 2000 for i in range(14)}}
    answered = httpx.post(guarded.v1_url + "/chat/completions", json={"model": MODEL, "messages": USER},
                          headers=heavy, timeout=10)
    assert answered.status_code == 200


#: Opens N idle connections to HOST:PORT, says how many on stdout, holds them until stdin closes. In its own
#: process, so the test process keeps few file descriptors (the scripted upstream uses select()).
_FLOOD = """
import socket, sys
host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
held = [socket.create_connection((host, port), timeout=10) for _ in range(count)]
print(len(held), flush=True)
sys.stdin.read()
"""


def test_a_flood_of_idle_and_slow_connections_does_not_lock_clients_out(upstream: ScriptedUpstream,
                                                                          toolwire_factory) -> None:
    """1,100 idle connections and 50 slow uploads on one worker (1,000 connections per worker used to be the
    ceiling: everyone else waited for them to time out); a normal client still gets its answer, and a body
    that takes too long gets a 408."""
    server = toolwire_factory(TOOLWIRE_API_KEYS=KEY, TOOLWIRE_BODY_TIMEOUT_SECONDS="1")
    host, port = server.url.removeprefix("http://").split(":")
    flood = subprocess.Popen([sys.executable, "-c", _FLOOD, host, port, "1100"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    slow = [_raw_request_head(server, 100, authorized=True) for _ in range(50)]
    try:
        assert flood.stdout.readline().strip() == "1100"
        upstream.enqueue(Script(text="Still here."))
        response = httpx.post(server.v1_url + "/chat/completions", json={"model": MODEL, "messages": USER},
                              headers={"Authorization": f"Bearer {KEY}"}, timeout=10)
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == "Still here."
        slow[0].sendall(b'{"model"')
        answer = b""
        while b'"request_timeout"' not in answer and (chunk := slow[0].recv(65536)):  # head and body may come apart
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408") and b'"request_timeout"' in answer
    finally:
        flood.communicate(timeout=10)
        for sock in slow:
            sock.close()


CUT_CALL = 'Checking. <tool_call>{"name": "get_weather", "arguments": {"city": "Par'
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.mark.parametrize("stream", [True, False])
def test_a_stream_that_ends_inside_a_call_without_a_finish_reason_fails(
        upstream: ScriptedUpstream, guarded: ToolwireServer, make_openai_client, stream: bool) -> None:
    """No finish reason while a call's arguments were still arriving: the back end was cut off. The answer
    fails as any cut stream does (error frame / ``response.failed`` / 502); it used to end ``stop`` (Chat) or
    ``completed`` (Responses) with the call's unparseable arguments."""
    client = make_openai_client(guarded)
    tools = [{"type": "function", **WEATHER["function"]}]
    upstream.enqueue(Script(text=CUT_CALL, chunks=4, finish_reason=None),
                     Script(text=CUT_CALL, chunks=4, finish_reason=None))
    if stream:
        with pytest.raises(openai.APIError, match="ended inside a tool call"):
            for _ in client.chat.completions.create(model=MODEL, messages=USER, tools=[WEATHER], stream=True):
                pass
        with client.responses.stream(model=MODEL, input="Weather?", tools=tools) as events:
            kinds = [event.type for event in events]
        assert kinds[-1] == "response.failed" and "response.completed" not in kinds
    else:
        with pytest.raises(openai.APIStatusError) as chat:
            client.chat.completions.create(model=MODEL, messages=USER, tools=[WEATHER])
        with pytest.raises(openai.APIStatusError) as responses:
            client.responses.create(model=MODEL, input="Weather?", tools=tools)
        for caught in (chat, responses):
            assert caught.value.status_code == 502
            check_error_envelope(502, caught.value.response.content)


@pytest.mark.parametrize("head, status", [
    (b"NOT A REQUEST LINE\r\n\r\n", 400),
    (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-Pad-%d: p\r\n" % i for i in range(40))
     + b"\r\n", 431),
])
def test_gunicorn_s_own_errors_come_as_openai_envelopes(guarded: ToolwireServer, head: bytes, status: int) -> None:
    """Requests gunicorn refuses before toolwire runs used to get an HTML page."""
    host, port = guarded.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert status_line.split(b" ")[1] == str(status).encode()
    assert b"content-type: application/json" in headers.lower()
    error = check_error_envelope(status, body)
    assert error["message"] and "<" not in error["message"]
