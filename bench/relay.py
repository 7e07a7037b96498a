"""The minimal pass-through relay: the baseline toolwire is measured against.

Same stack as toolwire (Flask under gunicorn + gevent, httpx upstream client
with toolwire's pool limits and transport, orjson), none of the work: ``POST
/v1/chat/completions`` forwards the body to ``RELAY_UPSTREAM_URL`` +
``/chat/completions``, and streams back each upstream ``data:`` frame after
decoding its JSON and re-encoding it with orjson. No parsing, no state
machine, no pump greenlet. Like toolwire it yields to the hub every 64 frames
(house style 6.6) and closes the upstream response when the body is closed.
It reads the upstream body to its end (past ``[DONE]``), so httpx can reuse
the upstream connection.

Run: ``gunicorn -c gunicorn.conf.py --pythonpath bench relay:app`` with
``RELAY_UPSTREAM_URL=http://127.0.0.1:PORT/v1``. ``GET /healthz`` answers 200.
"""

from __future__ import annotations

import os
import resource
from typing import Iterator

import gevent
import httpx
import orjson
from flask import Flask, Response, request

from app.upstreams.transport import make_transport

COOPERATE_EVERY = 64
DONE = b"data: [DONE]\n\n"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (_hard, _hard))

app = Flask(__name__)
_upstream_url = os.environ["RELAY_UPSTREAM_URL"].rstrip("/") + "/chat/completions"
_client: httpx.Client | None = None


def client() -> httpx.Client:
    """This worker's upstream client, created after the fork (the app is not preloaded)."""
    global _client
    if _client is None:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=100)
        _client = httpx.Client(timeout=httpx.Timeout(300.0, connect=10.0), limits=limits,
                               transport=make_transport(limits))
    return _client


@app.get("/healthz")
def healthz() -> Response:
    """Liveness."""
    return Response(b'{"status":"ok"}', mimetype="application/json")


@app.post("/v1/chat/completions")
def chat_completions() -> Response:
    """Open the upstream stream, then relay its frames."""
    upstream = client().send(
        client().build_request("POST", _upstream_url, content=request.get_data(),
                               headers={"Content-Type": "application/json"}),
        stream=True)
    return Response(relay(upstream), mimetype="text/event-stream", headers=SSE_HEADERS)


def relay(upstream: httpx.Response) -> Iterator[bytes]:
    """Each upstream ``data:`` frame, JSON decoded and re-encoded; ``[DONE]`` passed through.

    The body is read to its end, so the connection goes back to the pool.
    """
    buffer = b""
    count = 0
    try:
        for raw in upstream.iter_bytes():
            frames = (buffer + raw).split(b"\n\n")
            buffer = frames.pop()
            for frame in frames:
                if not frame.startswith(b"data: "):
                    continue
                payload = frame[6:]
                if payload == b"[DONE]":
                    yield DONE
                    continue
                yield b"data: " + orjson.dumps(orjson.loads(payload)) + b"\n\n"
                count += 1
                if count % COOPERATE_EVERY == 0:
                    gevent.sleep(0)
    finally:
        upstream.close()
