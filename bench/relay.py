"""The minimal pass-through relays: the baselines toolwire is measured against.

Same stack as toolwire (Flask under gunicorn + gevent, orjson), none of the
work: ``POST /v1/chat/completions`` forwards the body to ``RELAY_UPSTREAM_URL``
+ ``/chat/completions`` and streams back each upstream ``data:`` frame after
decoding its JSON and re-encoding it with orjson. No parsing, no state
machine, no pump greenlet. Like toolwire it yields to the hub every 64 frames
(house style 6.6) and closes the upstream response when the body is closed.
It reads the upstream body to its end (past ``[DONE]``), so the client can
reuse the upstream connection.

``RELAY_CLIENT`` picks the upstream HTTP client, each used the way a relay
that must not hold events back would use it:

* ``httpx`` (default; the fixed reference): httpx with round 1's pool limits
  and its idle-connection check that never yields (set on a private httpcore
  attribute, as toolwire did until issue 15: kept here unchanged, so the
  reference does not move);
* ``geventhttpclient``: its ``HTTPClient``, read an event at a time (``readline``), its public way to stream;
* ``urllib3``: a ``PoolManager``, ``read1`` (whatever one receive brings).

Run: ``gunicorn -c gunicorn.conf.py --pythonpath bench relay:app`` with
``RELAY_UPSTREAM_URL=http://127.0.0.1:PORT/v1``. ``GET /healthz`` answers 200.
"""

from __future__ import annotations

import os
import resource
import select
from functools import partial
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

import gevent
import orjson
from flask import Flask, Response, request

COOPERATE_EVERY = 64
DONE_FRAME = b"data: [DONE]\n\n"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
READ_BYTES = 65536

_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (_hard, _hard))

app = Flask(__name__)
_upstream = urlsplit(os.environ["RELAY_UPSTREAM_URL"].rstrip("/"))
_client_name = os.environ.get("RELAY_CLIENT", "httpx")
#: ``open(body, path)``: the upstream's answer at ``path`` under its base URL, as body bytes and their closer.
Opener = Callable[[bytes, str], tuple[Iterator[bytes], Callable[[], None]]]
_open: Opener | None = None


@app.get("/healthz")
def healthz() -> Response:
    """Liveness."""
    return Response(b'{"status":"ok"}', mimetype="application/json")


@app.post("/v1/chat/completions")
def chat_completions() -> Response:
    """Open the upstream stream, then relay its frames."""
    global _open
    if _open is None:  # after the fork: the app is not preloaded
        _open = CLIENTS[_client_name]()
    raw, close = _open(request.get_data(), "/chat/completions")
    return Response(relay(raw, close), mimetype="text/event-stream", headers=SSE_HEADERS)


@app.post("/v1/completions")
def completions() -> Response:
    """A pass-through's floor: the upstream's ``/completions`` body relayed as the client reads it, unparsed."""
    global _open
    if _open is None:
        _open = CLIENTS[_client_name]()
    raw, close = _open(request.get_data(), "/completions")
    return Response(passed(raw, close), mimetype="text/event-stream", headers=SSE_HEADERS)


def passed(raw: Iterator[bytes], close: Callable[[], None]) -> Iterator[bytes]:
    """``raw`` as it comes; the upstream response closed at the end."""
    try:
        yield from raw
    finally:
        close()


def relay(raw: Iterator[bytes], close: Callable[[], None]) -> Iterator[bytes]:
    """Each upstream ``data:`` frame, JSON decoded and re-encoded; ``[DONE]`` passed through.

    ``raw`` yields body bytes split anywhere; it is read to its end.
    """
    buffer = b""
    count = 0
    try:
        for data in raw:
            frames = (buffer + data).split(b"\n\n")
            buffer = frames.pop()
            for frame in frames:
                if not frame.startswith(b"data: "):
                    continue
                payload = frame[6:]
                if payload == b"[DONE]":
                    yield DONE_FRAME
                    continue
                yield b"data: " + orjson.dumps(orjson.loads(payload)) + b"\n\n"
                count += 1
                if count % COOPERATE_EVERY == 0:
                    gevent.sleep(0)
    finally:
        close()


# --------------------------------------------------------------------------- clients
# Each factory returns ``open(body, path) -> (body bytes iterator, close)`` for this worker.


def httpx_client() -> Opener:
    """httpx as round 1 used it: no connection cap, 100 kept alive, the non-yielding idle check."""
    import httpx

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=100)
    transport = httpx.HTTPTransport(limits=limits)
    transport._pool._network_backend = _non_yielding_backend()  # round 1's private-attribute fix, kept as is
    client = httpx.Client(timeout=httpx.Timeout(300.0, connect=10.0), limits=limits, transport=transport)
    url = _upstream.geturl()

    def open_(body: bytes, path: str) -> tuple[Iterator[bytes], Callable[[], None]]:
        response = client.send(client.build_request("POST", url + path, content=body,
                                                    headers={"Content-Type": "application/json"}), stream=True)
        return response.iter_bytes(), response.close

    return open_


def geventhttpclient_client() -> Opener:
    """geventhttpclient's ``HTTPClient``; the body read an event at a time with its ``readline``."""
    from geventhttpclient import HTTPClient

    client = HTTPClient(_upstream.hostname, _upstream.port, concurrency=10_000, connection_timeout=10.0,
                        network_timeout=300.0)
    base = _upstream.path

    def open_(body: bytes, path: str) -> tuple[Iterator[bytes], Callable[[], None]]:
        response = client.request("POST", base + path, body=body, headers={"Content-Type": "application/json"})
        return event_reads(response), response.release

    return open_


def event_reads(response: Any) -> Iterator[bytes]:
    """A geventhttpclient body as it arrives, one SSE event at a time (``read(n)`` would wait for ``n``
    bytes): line by line up to the first blank line, which shows the stream's line end, then up to
    each next blank line; then whatever followed the last event."""
    readline = response.readline
    while line := readline(b"\n"):
        yield line
        if line in (b"\n", b"\r\n"):
            blank_line = b"\n\n" if line == b"\n" else b"\r\n\r\n"
            yield from iter(partial(readline, blank_line), b"")
            break
    rest = response.read()
    if rest:
        yield rest


def urllib3_client() -> Opener:
    """urllib3's ``PoolManager``; ``read1`` returns what one receive brought."""
    import urllib3

    pool = urllib3.PoolManager(maxsize=100, retries=False, timeout=urllib3.Timeout(connect=10.0, read=300.0))
    url = _upstream.geturl()

    def open_(body: bytes, path: str) -> tuple[Iterator[bytes], Callable[[], None]]:
        response = pool.request("POST", url + path, body=body, headers={"Content-Type": "application/json"},
                                preload_content=False)
        return iter(lambda: response.read1(READ_BYTES), b""), response.release_conn

    return open_


CLIENTS = {"httpx": httpx_client, "geventhttpclient": geventhttpclient_client, "urllib3": urllib3_client}


def _non_yielding_backend() -> Any:
    """httpcore's sync backend whose streams answer ``is_readable`` with the unpatched ``poll``."""
    import httpcore
    from gevent import monkey

    poll = monkey.get_original("select", "poll")

    def readable(sock: Any) -> bool:
        fd = sock.fileno() if sock is not None else -1
        if fd < 0:
            return True
        poller = poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))

    class Stream(httpcore.NetworkStream):
        def __init__(self, inner: httpcore.NetworkStream):
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self._inner.read(max_bytes, timeout)

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._inner.write(buffer, timeout)

        def close(self) -> None:
            self._inner.close()

        def start_tls(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
            return Stream(self._inner.start_tls(*args, **kwargs))

        def get_extra_info(self, info: str) -> Any:
            if info == "is_readable":
                return readable(self._inner.get_extra_info("socket"))
            return self._inner.get_extra_info(info)

    class Backend(httpcore.SyncBackend):
        def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
            return Stream(super().connect_tcp(*args, **kwargs))

    return Backend()
