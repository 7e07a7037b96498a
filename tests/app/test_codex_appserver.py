"""``AppServer``'s JSON-RPC plumbing against a small fake app-server (a Python script on stdio).

The real binary is driven in ``tests/e2e/test_codex_e2e.py``; this fake makes the rare paths happen on
demand: a server→client request, a JSON-RPC error, a process that hangs, one that exits; and a leaky one
that quotes the provider key in its errors and stderr.
"""

from __future__ import annotations

import base64
import logging
import sys
import textwrap
from pathlib import Path

import gevent
import pytest

from app.upstreams.base import UpstreamError
from app.upstreams.codex.appserver import GONE, LINE_TOO_LONG, AppServer, AppServerError, AppServerGone
from app.upstreams.codex.backoff import StartBackoff

FAKE = textwrap.dedent('''
    import json, sys

    def send(obj):  # compact, as Codex writes
        sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\\n")
        sys.stdout.flush()

    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"id": rid, "result": {"userAgent": "fake"}})
        elif method == "emit":
            send({"method": "note", "params": {"threadId": "other", "n": 0}})
            send({"method": "note", "params": {"threadId": "t1", "n": 1}})
            send({"method": "item/tool/call", "id": 0, "params": {"threadId": "t1"}})
            reply = json.loads(sys.stdin.readline())
            send({"method": "reply", "params": {"threadId": "t1", "reply": reply}})
            send({"id": rid, "result": {}})
        elif method == "fail":
            send({"id": rid, "error": {"code": -32600, "message": "thread not found: x"}})
        elif method == "long":  # lines over the bound: a delta, a user message echoed whole, a response
            big = "x" * msg["params"]["size"]
            send({"method": "item/agentMessage/delta", "params": {"threadId": "t1", "delta": big}})
            send({"method": "item/started", "params": {"item": {"type": "userMessage", "text": big},
                                                       "threadId": "t2"}})
            send({"method": "note", "params": {"threadId": "t2", "n": 2}})
            send({"id": rid, "result": {"echo": big}})
        elif method == "exit":
            sys.exit(3)
        # "hang" and the "initialized" notification: no answer
''')


def start_fake(tmp_path: Path, **options) -> AppServer:
    script = tmp_path / "fake_app_server.py"
    script.write_text(FAKE)
    server = AppServer([sys.executable, str(script)], env={}, cwd=str(tmp_path), name="fake", **options)
    server.initialize(timeout=10)
    return server


@pytest.fixture
def server(tmp_path: Path):
    server = start_fake(tmp_path)
    yield server
    server.stop(timeout=5)


def drain(queue) -> list:
    items = []
    while not queue.empty():
        items.append(queue.get())
    return items


def test_notifications_go_to_their_thread_and_server_requests_are_refused(server: AppServer):
    queue = server.subscribe("t1")
    assert server.call("emit", {}, timeout=10) == {}
    notes = drain(queue)
    assert [n["method"] for n in notes] == ["note", "reply"]  # "other" had no subscriber: dropped
    reply = notes[1]["params"]["reply"]
    assert reply["id"] == 0 and reply["error"]["code"] == -32601  # no tools to serve: refused at once


def test_a_json_rpc_error_is_raised_with_its_message(server: AppServer):
    with pytest.raises(AppServerError, match="thread not found"):
        server.call("fail", {}, timeout=10)
    assert server.alive


def test_a_hung_server_is_killed_and_everyone_waiting_is_told(server: AppServer):
    queue = server.subscribe("t1")
    other = gevent.spawn(server.call, "hang", {}, timeout=30)
    gevent.sleep(0.1)
    with pytest.raises(AppServerGone, match="did not answer hang"):
        server.call("hang", {}, timeout=0.3)
    with pytest.raises(AppServerGone):
        other.get(timeout=5)  # the other caller learns at once, not after its own 30 s
    assert queue.get(timeout=5) is GONE
    assert not server.alive


def test_lines_over_the_bound_are_read_past_and_fail_only_whom_they_were_for(tmp_path: Path):
    """A 64 MiB provider delta grew the worker by 285 MB: no line is held past ``max_line_bytes``."""
    server = start_fake(tmp_path, max_line_bytes=64 * 1024)
    try:
        first, second = server.subscribe("t1"), server.subscribe("t2")
        with pytest.raises(AppServerError, match="over the 65536 allowed"):
            server.call("long", {"size": 3 * 1024 * 1024}, timeout=10)
        [too_long] = drain(first)
        assert too_long["method"] == LINE_TOO_LONG and too_long["params"]["limit"] == 64 * 1024
        assert too_long["params"]["bytes"] > 3 * 1024 * 1024
        # t2's echoed user message is cut to what toolwire reads of it (the item's type); what follows still comes
        assert drain(second) == [{"method": "item/started", "params": {"item": {"type": "userMessage"}}},
                                 {"method": "note", "params": {"threadId": "t2", "n": 2}}]
        with pytest.raises(AppServerError, match="thread not found"):  # the connection still works after all three
            server.call("fail", {}, timeout=10)
    finally:
        server.stop(timeout=5)


def test_an_exited_server_fails_calls_and_new_subscriptions(server: AppServer):
    with pytest.raises(AppServerGone):
        server.call("exit", {}, timeout=10)
    gevent.sleep(0.1)
    assert not server.alive
    assert server.subscribe("late").get(timeout=1) is GONE
    with pytest.raises(AppServerGone):
        server.call("fail", {}, timeout=1)


# --- the provider key never reaches a client through a Codex error ---------------------------------------

LEAKY = textwrap.dedent('''
    import base64, json, os, sys

    KEY = os.environ["TOOLWIRE_CODEX_PROVIDER_KEY"]
    MODE = os.environ["LEAKY_MODE"]

    def send(obj):
        sys.stdout.write(json.dumps(obj) + "\\n")
        sys.stdout.flush()

    if MODE == "start":
        sys.stderr.write(f"Error: provider refused Authorization: Bearer {KEY}\\n")
        sys.exit(1)
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"id": rid, "result": {"userAgent": "leaky"}})
        elif method == "model/list":
            send({"id": rid, "error": {"code": -32603, "message": f"catalog fetch with key {KEY} failed"}})
        elif method == "thread/start":
            send({"id": rid, "result": {"thread": {"id": "t1"}}})
        elif method == "turn/start":
            send({"id": rid, "result": {"turn": {"id": "u1"}}})
            if MODE == "400":  # the provider's raw 400 body, echoing the key in message, param and code
                body = {"error": {"message": f"Incorrect API key provided: {KEY}", "param": KEY, "code": KEY}}
                error = {"message": json.dumps(body), "codexErrorInfo": "other"}
            else:  # an HTML error page naming an internal host and echoing the Authorization header
                auth = base64.b64encode(f"Bearer {KEY}".encode()).decode()
                error = {"message": f"unexpected status 502 Bad Gateway: <html>gw-7.internal.corp refused "
                                    f"{auth}</html>, url: http://10.1.2.3:8443/v1/responses",
                         "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 502}}}
            send({"method": "turn/completed", "params": {"threadId": "t1",
                  "turn": {"id": "u1", "status": "failed", "error": error}}})
''')
KEY = "sk-codex-provider-0123456789"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def leaky_upstream(tmp_path: Path, monkeypatch, mode: str):
    from app.upstreams.codex.home import write_home
    from app.upstreams.codex.upstream import CodexUpstream

    script = tmp_path / "leaky-codex"
    script.write_text(f"#!{sys.executable}\n{LEAKY}")
    script.chmod(0o755)
    monkeypatch.setenv("LEAKY_MODE", mode)
    home = write_home(tmp_path / "home", models=["m"], provider_url="http://127.0.0.1:9/v1", provider_key=True,
                      user_home=tmp_path / "user")
    return CodexUpstream(str(script), home, provider_key=KEY, rpc_timeout=10)


@pytest.mark.parametrize("mode", ["400", "502"])
def test_a_failed_turn_quoting_the_provider_key_is_masked(tmp_path: Path, monkeypatch, caplog, mode: str):
    """Issue 17 item 10: the HTTP upstream masked its key in quoted errors, the Codex back end did not. Issue 25
    item 9: nor did it keep the provider's error page (internal hosts, its URL, the key in base64) to itself."""
    upstream = leaky_upstream(tmp_path, monkeypatch, mode)
    try:
        with caplog.at_level(logging.WARNING), pytest.raises(UpstreamError) as caught:
            upstream.open(CHAT, request_id="req-25")
        with pytest.raises(UpstreamError) as listed:
            upstream.models()
    finally:
        upstream.close()
    error = caught.value
    encoded = base64.b64encode(f"Bearer {KEY}".encode()).decode()
    for text in (error.message, str(error), error.param, error.code, listed.value.message, caplog.text):
        assert KEY not in (text or "") and encoded[8:-4] not in (text or "")
    if mode == "400":  # a JSON error object is quoted, as the HTTP upstream quotes one
        assert error.status == 400 and error.param == "**********"
        assert error.message == "Incorrect API key provided: **********"
    else:
        assert (error.kind, error.status) == ("server_error", 502)
        assert error.message == "Codex's model provider failed (HTTP 502); request req-25: the details are in " \
                                "toolwire's log."
        assert "gw-7.internal.corp refused" in caplog.text and "**********" in caplog.text
        assert all(record.request_id == "req-25" for record in caplog.records if "turn failed" in record.message)


def test_an_app_server_that_prints_the_key_and_dies_is_logged_masked_and_backs_off(tmp_path: Path, monkeypatch,
                                                                                  caplog):
    upstream = leaky_upstream(tmp_path, monkeypatch, "start")
    with caplog.at_level(logging.DEBUG), pytest.raises(UpstreamError) as caught:
        upstream.open(CHAT)
    error = caught.value
    assert (error.status, error.retry_after) == (503, "1")
    assert "provider refused" not in error.message  # its stderr goes to the log, not to the client
    assert "provider refused Authorization: Bearer **********" in caplog.text and KEY not in caplog.text
    with pytest.raises(UpstreamError) as again:
        upstream.open(CHAT)
    assert again.value.status == 503 and again.value.retry_after == "1"
    assert caplog.text.count("did not start") == 1  # not started again during the wait


def test_start_backoff_doubles_up_to_its_ceiling_and_resets():
    backoff = StartBackoff(first=1, ceiling=30)
    assert [backoff.failed(now=0) for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff.left(now=10) == 20 and backoff.left(now=31) == 0
    backoff.succeeded()
    assert backoff.left(now=0) == 0 and backoff.failed(now=0) == 1
