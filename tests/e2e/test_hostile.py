"""Hostile clients, hostile back ends, unlucky operators (issue 17), against real gunicorn + gevent.

Each test reproduces one attack or accident and is bounded in time and load (two-core machines).
"""

from __future__ import annotations

import socket
import stat
import threading
import time

import httpx
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
    """Two toolwires run by one user must not fight over ``~/.gunicorn/gunicorn.ctl``: none is made
    unless the operator names a path of this instance's own."""
    home = tmp_path / "home"
    home.mkdir()
    with run_toolwire({"HOME": str(home)}), run_toolwire({"HOME": str(home)}):
        assert not (home / ".gunicorn").exists()
    own = tmp_path / "toolwire.ctl"
    with run_toolwire({"HOME": str(home), "TOOLWIRE_CONTROL_SOCKET": str(own)}):
        assert stat.S_ISSOCK(own.stat().st_mode)
    assert not (home / ".gunicorn").exists()
