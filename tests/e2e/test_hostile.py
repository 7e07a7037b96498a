"""Hostile clients, hostile back ends, unlucky operators (issue 17), against real gunicorn + gevent.

Each test reproduces one attack or accident and is bounded in time and load (two-core machines).
"""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from typing import Callable, Iterator

import httpx
import openai
import pytest
import redis

from support.invariants import check_error_envelope
from support.redis_server import RedisServer
from support.scripted_upstream import Script, ScriptedUpstream
from support.server import ToolwireServer, run_toolwire
from support.store_items import fill, tiny_filesystem

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
    error = check_error_envelope(status, _gunicorn_refusal(guarded, head, status))
    assert error["message"] and "<" not in error["message"]


#: Each surface's error envelope, read: its message (the checks that it is that envelope made on the way).
ENVELOPE_MESSAGES: dict[str, Callable[[dict], str]] = {
    "messages": lambda body: body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    and body["error"]["message"],
    "ollama": lambda body: list(body) == ["error"] and isinstance(body["error"], str) and body["error"],
    "gemini": lambda body: body["error"]["status"] == "INVALID_ARGUMENT" and body["error"]["message"],
}


@pytest.mark.parametrize("path, envelope", [
    ("/v1/messages", "messages"), ("/v1/messages/", "messages"), ("/v1/messages/count_tokens", "messages"),
    ("/api/chat", "ollama"), ("/api/pull", "ollama"), ("/v1beta/models/m:generateContent", "gemini"),
])
def test_gunicorn_s_own_errors_on_a_surface_s_path_come_in_its_envelope(guarded: ToolwireServer, path: str,
                                                                         envelope: str) -> None:
    """A request gunicorn refuses for its head (two Content-Length headers) got OpenAI's envelope on every path
    but the Messages API's two: it is answered as the route (or the path a surface claims) would answer."""
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n".encode()
            + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}")
    message = ENVELOPE_MESSAGES[envelope](json.loads(_gunicorn_refusal(guarded, head, 400)))
    assert message and "<" not in message


def test_a_messages_body_that_does_not_arrive_in_time_is_anthropic_s_408(toolwire_factory) -> None:
    """The request's own time limit for its body answers in the envelope of the API it was for."""
    server = toolwire_factory(TOOLWIRE_API_KEYS=KEY, TOOLWIRE_BODY_TIMEOUT_SECONDS="1")
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall((f"POST /v1/messages HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                      f"x-api-key: {KEY}\r\nContent-Length: 100\r\n\r\n{{\"model\"").encode())
        answer = b""
        while b"request_timeout" not in answer and b"}}" not in answer and (chunk := sock.recv(65536)):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
    body = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert body["type"] == "error" and "did not arrive in time" in body["error"]["message"], body


def test_a_messages_path_no_route_takes_is_anthropic_s_404(guarded: ToolwireServer) -> None:
    """POST /v1/messages/ (a trailing slash) was Werkzeug's 404 in OpenAI's envelope."""
    response = httpx.post(guarded.v1_url + "/messages/", json={"model": MODEL, "max_tokens": 8, "messages": USER},
                          headers={"x-api-key": KEY}, timeout=10)
    assert response.status_code == 404
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error", body
    assert "POST /v1/messages, POST /v1/messages/count_tokens" in body["error"]["message"]


def _gunicorn_refusal(server: ToolwireServer, head: bytes, status: int) -> bytes:
    """The JSON body of gunicorn's answer to ``head`` sent raw, checked to be ``status``."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert status_line.split(b" ")[1] == str(status).encode(), answer[:300]
    assert b"content-type: application/json" in headers.lower()
    return body


#: The store quota the flood tests set, and the input of one flooded response (what it mostly weighs).
STORE_QUOTA = 2 * 1024 * 1024
FLOOD_INPUT = 200_000
ALICE, BOB = "sk-alice-0123456789", "sk-bob-0123456789"


def _flood(client: openai.OpenAI, count: int, after_each: Callable[[], object] = lambda: None) -> list[str]:
    """``count`` stored responses of ``FLOOD_INPUT`` bytes of input each, one after the other (``after_each``
    called after each); their ids."""
    ids = []
    for i in range(count):
        ids.append(client.responses.create(model=MODEL, input=f"{i} " + "x" * FLOOD_INPUT, store=True).id)
        after_each()
    return ids


def _kept(client: openai.OpenAI, ids: list[str]) -> list[bool]:
    """For each id, whether ``client`` can still retrieve it (with its output) or gets 404."""
    kept = []
    for response_id in ids:
        try:
            kept.append(client.responses.retrieve(response_id).output_text == "Stored.")
        except openai.NotFoundError:
            kept.append(False)
    return kept


def _check_oldest_evicted(client: openai.OpenAI, ids: list[str], quota: int) -> list[str]:
    """The responses ``client`` can still read are the newest ones, at least three, within ``quota``; their ids."""
    kept = _kept(client, ids)
    survivors = sum(kept)
    assert kept == [False] * (len(kept) - survivors) + [True] * survivors, f"not oldest-first: {kept}"
    assert 3 <= survivors and survivors * FLOOD_INPUT <= quota, f"{survivors} of {len(kept)} kept"
    return ids[-survivors:]


def _check_too_large_is_not_stored(client: openai.OpenAI, quota: int, newest: list[str]) -> None:
    """A response larger than ``quota`` on its own says ``store: false``, is not retrievable, and evicts none of
    the ``newest``."""
    huge = client.responses.create(model=MODEL, input="x" * (quota + 1000), store=True)
    assert huge.output_text == "Stored." and huge.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(huge.id)
    assert _kept(client, newest) == [True] * len(newest)


def test_a_flood_of_stored_responses_keeps_the_sqlite_file_within_the_quota(
        upstream: ScriptedUpstream, toolwire_factory, make_openai_client, tmp_path_factory) -> None:
    """40 responses of 200 KB into a 2 MiB store on two workers: the oldest are evicted, the newest stay
    readable, the file stays within the quota and its WAL within its 4 MiB, and deleting gives the space back
    (the file used to keep every byte for 30 days)."""
    path = tmp_path_factory.mktemp("flooded") / "responses.sqlite3"
    wal = path.with_name(path.name + "-wal")
    server = toolwire_factory(TOOLWIRE_RESPONSE_STORE_URL=f"sqlite:///{path}", WEB_CONCURRENCY="2",
                              TOOLWIRE_RESPONSE_STORE_MAX_BYTES=str(STORE_QUOTA))
    client = make_openai_client(server)
    upstream.default_script = Script(text="Stored.")
    sizes: list[tuple[int, int]] = []
    ids = _flood(client, 40, lambda: sizes.append((path.stat().st_size, wal.stat().st_size)))
    assert max(db for db, _ in sizes) <= STORE_QUOTA * 1.1  # page and index overhead
    assert max(log for _, log in sizes) <= 4 * 1024 * 1024 + 2 * FLOOD_INPUT  # its limit and the last write
    newest = _check_oldest_evicted(client, ids, STORE_QUOTA)
    _check_too_large_is_not_stored(client, STORE_QUOTA, newest)
    for response_id in newest:
        client.responses.delete(response_id)
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        # the size the file is cut to at the next checkpoint (in WAL mode the shrink is written to the WAL first)
        pages = db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]
    assert pages <= STORE_QUOTA / 4


def _redis_bytes(client: redis.Redis) -> int:
    """What toolwire's keys take in Redis, bytes."""
    return sum(client.memory_usage(key, samples=0) or 0 for key in client.scan_iter("toolwire:*"))


def test_a_flood_of_stored_responses_keeps_redis_within_the_quota(
        upstream: ScriptedUpstream, toolwire_factory, make_openai_client, redis_server: RedisServer) -> None:
    """The SQLite flood against Redis: the keys toolwire keeps stay near the 2 MiB quota, the oldest responses
    are evicted and the newest stay readable."""
    server = toolwire_factory(TOOLWIRE_RESPONSE_STORE_URL=redis_server.url,
                              TOOLWIRE_RESPONSE_STORE_MAX_BYTES=str(STORE_QUOTA))
    client = make_openai_client(server)
    upstream.default_script = Script(text="Stored.")
    used: list[int] = []
    with contextlib.closing(redis_server.client()) as server_client:
        ids = _flood(client, 40, lambda: used.append(_redis_bytes(server_client)))
    assert max(used) <= STORE_QUOTA * 1.25  # the allocator rounds a 200 KB value up to its 224 KiB size class
    newest = _check_oldest_evicted(client, ids, STORE_QUOTA)
    _check_too_large_is_not_stored(client, STORE_QUOTA, newest)


def test_a_key_flooding_the_store_evicts_only_its_own_responses(
        upstream: ScriptedUpstream, toolwire_factory, make_openai_client, tmp_path_factory) -> None:
    """With a 1 MiB quota per key, Alice's 20 responses of 200 KB evict her own oldest; Bob's earlier
    responses all stay, readable by Bob only."""
    path = tmp_path_factory.mktemp("per-key") / "responses.sqlite3"
    quota = 1024 * 1024
    server = toolwire_factory(TOOLWIRE_RESPONSE_STORE_URL=f"sqlite:///{path}", TOOLWIRE_API_KEYS=f"{ALICE},{BOB}",
                              TOOLWIRE_RESPONSE_STORE_MAX_BYTES_PER_KEY=str(quota))
    alice, bob = (make_openai_client(server).with_options(api_key=key) for key in (ALICE, BOB))
    upstream.default_script = Script(text="Stored.")
    bobs = _flood(bob, 3)
    newest = _check_oldest_evicted(alice, _flood(alice, 20), quota)
    _check_too_large_is_not_stored(alice, quota, newest)
    assert _kept(bob, bobs) == [True] * 3
    assert _kept(alice, bobs) == [False] * 3 and _kept(bob, newest) == [False] * len(newest)


@contextlib.contextmanager
def _store_on_a_small_disk(upstream: ScriptedUpstream, tmp_path,
                           **settings: str) -> Iterator[tuple[ToolwireServer, str]]:
    """A toolwire whose SQLite store lives on a 40 MiB tmpfs (its 8 MiB reserve included); the mount's path."""
    disk = tmp_path / "disk"
    upstream.default_script = Script(text="Stored.")
    with tiny_filesystem(disk, "40m"), run_toolwire({
            "TOOLWIRE_UPSTREAM_URL": upstream.v1_url, "TOOLWIRE_RESPONSE_STORE_URL": f"sqlite:///{disk}/r.sqlite3",
            "TOOLWIRE_GRACEFUL_TIMEOUT": "1", **settings}) as server:
        yield server, str(disk)


def _store_until_full(client: openai.OpenAI) -> list[str]:
    """Store responses of ``FLOOD_INPUT`` bytes until one comes back ``store: false`` (after a filler took the
    disk, SQLite still writes into the room its WAL file already has); the ids stored."""
    ids = []
    for _ in range(40):
        created = client.responses.create(model=MODEL, input="x" * FLOOD_INPUT, store=True)
        if not created.store:
            return ids
        ids.append(created.id)
    raise AssertionError("the store never filled up")


def test_delete_works_on_a_full_disk(upstream: ScriptedUpstream, make_openai_client, tmp_path) -> None:
    """Once the disk is full, storing fails (``store: false``) but DELETE still frees responses, one larger than
    the 8 MiB reserve too (it used to fail: SQLite writes a deletion to its WAL first, and Debian's SQLite
    wrote every freed page there)."""
    with _store_on_a_small_disk(upstream, tmp_path) as (server, disk):
        client = make_openai_client(server)
        ids = [client.responses.create(model=MODEL, input="x" * 10_000_000, store=True).id, *_flood(client, 4)]
        fill(disk)
        ids += _store_until_full(client)
        for response_id in ids[:3]:
            client.responses.delete(response_id)  # raises unless 2xx
        assert _kept(client, ids) == [False] * 3 + [True] * (len(ids) - 3)


def test_expired_responses_make_room_on_a_full_disk(upstream: ScriptedUpstream, make_openai_client,
                                                    tmp_path) -> None:
    """A write that finds the disk full purges what expired, so the next one is stored (the purge used to be
    part of the failing write: a full disk stayed full)."""
    with _store_on_a_small_disk(upstream, tmp_path, TOOLWIRE_RESPONSE_RETENTION_SECONDS="1") as (server, disk):
        client = make_openai_client(server)
        _flood(client, 10)
        fill(disk)
        _store_until_full(client)
        time.sleep(1.2)  # everything stored has expired
        # the first write may find the disk still full (and purge); the next one has room
        stored = [client.responses.create(model=MODEL, input="room again", store=True) for _ in range(2)]
        assert stored[-1].store is True and client.responses.retrieve(stored[-1].id).output_text == "Stored."
