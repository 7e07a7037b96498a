"""Hostile back ends (issue 17 #3, #7–#10), against real gunicorn + gevent and a raw loopback upstream this
module owns: it answers each request with whatever bytes a test scripts, at whatever pace.

Every test is bounded in time and load (two-core machines): toolwire's limits are set low here.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import httpx
import pytest

from support.invariants import check_error_envelope
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

KEY = "sk-upstream-secret-4242"
USER = [{"role": "user", "content": "Hello?"}]
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

#: ``handler(connection)``, called once the request (head and body) was read.
Handler = Callable[[socket.socket], None]


def chunked(data: bytes) -> bytes:
    """``data`` as one HTTP chunk."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(content: str | None = None, **choice: object) -> bytes:
    """One chunked ``chat.completion.chunk`` SSE event."""
    delta = {"content": content} if content is not None else {}
    body = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, **choice}]}
    return chunked(b"data: " + json.dumps(body).encode() + b"\n\n")


class RawUpstream(socketserver.ThreadingTCPServer):
    """Reads one request per connection, then runs the current :data:`Handler` on the connection.

    ``closed`` is set when a handler's write failed: toolwire closed the upstream request.
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _RawRequest)
        self.handler: Handler = lambda conn: None
        self.closed = threading.Event()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def v1_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _RawRequest(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        conn, data = self.request, b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536) or b"\r\n\r\n"
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            body += conn.recv(65536)
        try:
            self.server.handler(conn)
        except OSError:
            self.server.closed.set()


@pytest.fixture(scope="module")
def raw_upstream() -> Iterator[RawUpstream]:
    server = RawUpstream()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def raw(raw_upstream: RawUpstream) -> RawUpstream:
    raw_upstream.closed.clear()
    return raw_upstream


@pytest.fixture(scope="module")
def hostile(toolwire_factory, raw_upstream: RawUpstream) -> ToolwireServer:
    """One worker on the raw upstream, with low limits."""
    return toolwire_factory(WEB_CONCURRENCY="1", TOOLWIRE_UPSTREAM_URL=raw_upstream.v1_url,
                            TOOLWIRE_UPSTREAM_API_KEY=KEY, TOOLWIRE_MAX_CONCURRENT_STREAMS="2",
                            TOOLWIRE_UPSTREAM_IDLE_CONTENT_SECONDS="3", TOOLWIRE_STREAM_MAX_SECONDS="6",
                            TOOLWIRE_STREAM_WRITE_TIMEOUT_SECONDS="1",
                            TOOLWIRE_UPSTREAM_MAX_EVENT_BYTES=str(1 << 20),
                            TOOLWIRE_UPSTREAM_MAX_BODY_BYTES=str(4 << 20))


def post(server: ToolwireServer, path: str = "/chat/completions") -> httpx.Response:
    """One unstreamed request for "Hello?"."""
    body = {"messages": USER} if path == "/chat/completions" else {"input": "Hello?"}
    return httpx.post(server.v1_url + path, json={"model": "m", **body}, timeout=15)


def stream_lines(server: ToolwireServer, path: str = "/chat/completions", **body: object) -> list[str]:
    """The ``data:`` payloads of one streamed answer (keep-alive comments left out)."""
    with httpx.stream("POST", server.v1_url + path, json={"model": "m", "stream": True, **body},
                      timeout=15) as response:
        assert response.status_code == 200, response.read()
        return [line[6:] for line in response.iter_lines() if line.startswith("data: ")]


def final_error(lines: list[str]) -> dict:
    """The ``error`` of a Chat stream's last event before ``[DONE]`` (an error frame)."""
    last = json.loads([line for line in lines if line != "[DONE]"][-1])
    assert "error" in last, lines[-3:]
    return last["error"]


def pings_forever(conn: socket.socket) -> None:
    """One word, then only keep-alive comments (for up to 15 s)."""
    conn.sendall(HEAD + event("Hi"))
    for _ in range(150):
        time.sleep(0.1)
        conn.sendall(chunked(b": keep-alive\n\n"))


def test_a_stream_of_keep_alive_comments_ends_at_the_idle_limit(raw: RawUpstream, hostile: ToolwireServer) -> None:
    """An upstream that answers and then only sends comments is cut after the idle-content limit: streamed,
    the client gets an error frame and the upstream request is closed; not streamed, a 504 (#7)."""
    raw.handler = pings_forever
    started = time.monotonic()
    lines = stream_lines(hostile, messages=USER)
    assert json.loads(lines[0])["choices"][0]["delta"]["content"] == "Hi"
    assert final_error(lines)["code"] == "upstream_timeout"
    assert time.monotonic() - started < 20
    assert raw.closed.wait(15)
    response = post(hostile)
    assert response.status_code == 504
    assert check_error_envelope(504, response.content)["code"] == "upstream_timeout"


def test_a_stream_that_never_ends_meets_the_total_limit(raw: RawUpstream, hostile: ToolwireServer) -> None:
    """Content every 0.2 s for ever (never idle) ends at TOOLWIRE_STREAM_MAX_SECONDS: an error frame on Chat,
    ``response.failed`` on Responses, a 504 unstreamed (#7)."""
    def words_forever(conn: socket.socket) -> None:
        conn.sendall(HEAD)
        for _ in range(75):
            conn.sendall(event("word "))
            time.sleep(0.2)

    raw.handler = words_forever
    started = time.monotonic()
    lines = stream_lines(hostile, messages=USER, stream_options={"include_usage": True})
    error = final_error(lines)
    assert error["code"] == "stream_time_limit" and len(lines) > 5
    assert "past its 6-second limit" in error["message"], "the configured limit, not the time left after the wait"
    assert time.monotonic() - started < 20
    assert raw.closed.wait(15)
    events = stream_lines(hostile, "/responses", input="Hello?")
    assert json.loads(events[-1])["type"] == "response.failed"
    response = post(hostile)
    assert response.status_code == 504
    error = check_error_envelope(504, response.content)
    assert error["code"] == "stream_time_limit" and "past its 6-second limit" in error["message"]


def _stalled_reader(server: ToolwireServer) -> socket.socket:
    """A client that sends a streaming request, reads the response head and then never reads again."""
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    body = json.dumps({"model": "m", "messages": USER, "stream": True}).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    assert sock.recv(64).startswith(b"HTTP/1.1 200")
    return sock


def test_a_client_that_stops_reading_is_cut_and_gives_its_slot_back(raw: RawUpstream,
                                                                    hostile: ToolwireServer) -> None:
    """Two clients that stop reading while the upstream keeps sending fill both stream slots; after the write
    timeout their streams are cut, the upstream requests closed and a normal request is answered (#3)."""
    def floods(conn: socket.socket) -> None:
        conn.sendall(HEAD)
        word = "x" * 4000
        for _ in range(20000):  # ~80 MB if nobody stops it
            conn.sendall(event(word))

    raw.handler = floods
    stalled = [_stalled_reader(hostile) for _ in range(2)]
    try:
        assert raw.closed.wait(30), "the upstream of a stalled stream is still being read"

        def answers(conn: socket.socket) -> None:
            conn.sendall(HEAD + event("Fine.", finish_reason="stop") + chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n")

        raw.handler = answers
        deadline = time.monotonic() + 30  # each stalled write times out after 1 s, later on a loaded machine
        while (response := post(hostile)).status_code == 429 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == "Fine."
        log = hostile.log()
        assert "a client stopped reading" in log and "Socket error processing request" not in log
    finally:
        for sock in stalled:
            sock.close()


def _worker_rss_kib(server: ToolwireServer) -> int:
    [pid] = server.worker_pids()
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))


def test_upstream_buffers_are_bounded_and_the_memory_given_back(raw: RawUpstream, hostile: ToolwireServer) -> None:
    """A 100 MB SSE line without a newline, a 100 MB JSON answer and a 100 MB error page are each a 502 naming
    the cause, read no further than the bound; the worker does not keep the memory (#8)."""
    block = b"x" * (1 << 20)

    def long_line(conn: socket.socket) -> None:
        conn.sendall(HEAD + chunked(b"data: {\"choices\": [{\"delta\": {\"content\": \""))
        for _ in range(100):
            conn.sendall(chunked(block))

    def huge_json(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                     % (100 << 20) + b'{"choices": [{"message": {"content": "')
        for _ in range(100):
            conn.sendall(block)

    def huge_error(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 500 Oops\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % (100 << 20))
        for _ in range(100):
            conn.sendall(block)

    post(hostile)  # a warm worker (the first requests grow it for reasons of their own)
    before = _worker_rss_kib(hostile)
    for handler, code in ((long_line, "upstream_too_large"), (huge_json, "upstream_too_large"),
                          (huge_error, "upstream_server_error")):
        raw.handler = handler
        response = post(hostile)
        error = check_error_envelope(502, response.content)
        assert response.status_code == 502 and error["code"] == code, response.text
        assert raw.closed.wait(15), f"{handler.__name__}: toolwire read on"
        raw.closed.clear()
    grown = (_worker_rss_kib(hostile) - before) / 1024
    assert grown < 40, f"the worker grew {grown:.0f} MB"


def test_a_gzip_bomb_is_refused_unread(raw: RawUpstream, hostile: ToolwireServer) -> None:
    """toolwire asks for identity and never inflates: a gzip answer is a 502 naming the encoding (#8)."""
    import gzip

    bomb = gzip.compress(b"\0" * (256 << 20), 9)

    def gzipped(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(bomb), bomb))

    raw.handler = gzipped
    response = post(hostile)
    assert response.status_code == 502
    assert "gzip" in check_error_envelope(502, response.content)["message"]


def test_invented_choices_are_refused(raw: RawUpstream, hostile: ToolwireServer) -> None:
    """10,000 choices for an ``n=1`` request: a 502 at the first index past ``n``, not 10,000 parsers (#8)."""
    def many(conn: socket.socket) -> None:
        conn.sendall(HEAD)
        for start in range(0, 10_000, 1000):
            choices = [{"index": i, "delta": {"content": "x"}} for i in range(start, start + 1000)]
            body = json.dumps({"object": "chat.completion.chunk", "choices": choices}).encode()
            conn.sendall(chunked(b"data: " + body + b"\n\n"))
        conn.sendall(b"0\r\n\r\n")

    raw.handler = many
    response = post(hostile)
    assert response.status_code == 502
    error = check_error_envelope(502, response.content)
    assert error["code"] == "upstream_invalid_choice" and "n=1" in error["message"]


def test_a_redirect_is_a_502_naming_its_location(raw: RawUpstream, hostile: ToolwireServer) -> None:
    """An http→https redirect used to become an empty 200 with finish_reason stop (#9)."""
    raw.handler = lambda conn: conn.sendall(b"HTTP/1.1 301 Moved\r\nLocation: https://llm.example/v1/chat/"
                                            b"completions\r\nContent-Length: 0\r\n\r\n")
    response = post(hostile)
    assert response.status_code == 502
    error = check_error_envelope(502, response.content)
    assert error["code"] == "upstream_redirect" and "https://llm.example/v1/chat/completions" in error["message"]


def test_neither_the_upstream_key_nor_an_html_page_reaches_the_client(raw: RawUpstream,
                                                                      hostile: ToolwireServer) -> None:
    """A mid-stream error echoing toolwire's upstream key is masked; an upstream HTML error page (with internal
    addresses) is replaced by a generic message, on both endpoints (#10)."""
    echo = json.dumps({"error": {"message": f"Invalid key {KEY} at 10.0.0.7"}}).encode()
    raw.handler = lambda conn: conn.sendall(HEAD + event("a") + chunked(b"data: " + echo + b"\n\n"))
    lines = stream_lines(hostile, messages=USER)
    assert KEY not in "".join(lines) and "Invalid key" in final_error(lines)["message"]
    page = b"<html><body>502 Bad Gateway from 10.0.0.7:8080 (nginx/1.2)</body></html>"
    raw.handler = lambda conn: conn.sendall(b"HTTP/1.1 502 Bad\r\nContent-Type: text/html\r\nContent-Length: %d"
                                            b"\r\n\r\n%s" % (len(page), page))
    for path in ("/chat/completions", "/responses"):
        response = post(hostile, path)
        assert response.status_code == 502
        assert "10.0.0.7" not in response.text and "html" not in response.text
        assert check_error_envelope(502, response.content)["message"] == "The upstream failed (HTTP 502)."
