"""A scripted back end for the pass-through endpoints' faults (``/v1/embeddings``, ``/v1/completions``,
``/tokenize``…): a real HTTP/1.1 server on ``127.0.0.1`` in a thread of the test process.

Every ``POST`` is recorded (path, headers, raw body) and answered by :attr:`RelayBackend.routes`: a path's
:class:`Answer` is a JSON body, or an SSE stream of ``events`` written one at a time with ``gap`` seconds between,
optionally broken off after ``cut_after`` of them (the connection closed mid-body, the chunked body unfinished;
``mid_event``: in the middle of the next event). A path with no answer gets a 404, as a server without that
endpoint gives.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Answer:
    """One path's answer: ``status`` with the JSON ``body``, or (``events`` given) a 200 SSE stream of them."""

    status: int = 200
    body: Any = None
    events: list[Any] | None = None
    gap: float = 0.0
    cut_after: int | None = None
    mid_event: bool = False
    content_type: str | None = None


@dataclass
class Asked:
    """One request the back end got."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)

    def json(self) -> Any:
        return json.loads(self.body)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._json(200, {"object": "list", "data": self.server.owner.models})
        else:
            self._json(404, {"error": {"message": f"File Not Found: {self.path}", "type": "not_found_error"}})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        owner = self.server.owner
        owner.asked.append(Asked(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        answer = owner.routes.get(self.path)
        if answer is None:
            self._json(404, {"error": {"message": f"File Not Found: {self.path}", "type": "not_found_error"}})
        elif answer.events is None:
            self._json(answer.status, answer.body, answer.content_type)
        else:
            self._stream(answer)

    def _json(self, status: int, body: Any, content_type: str | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type or "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, answer: Answer) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        frames = [b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n" for e in answer.events]
        for number, frame in enumerate(frames):
            if answer.cut_after is not None and number == answer.cut_after:
                if answer.mid_event:
                    self._chunk(frame[:len(frame) // 2])
                self.close_connection = True
                return
            self._chunk(frame)
            if answer.gap:
                time.sleep(answer.gap)
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: "RelayBackend"


class RelayBackend:
    """The server: ``routes`` maps a path (``/v1/embeddings``, ``/tokenize``) to its :class:`Answer`; ``asked``
    lists the requests it got; ``models`` is its model list."""

    def __init__(self) -> None:
        self.routes: dict[str, Answer] = {}
        self.asked: list[Asked] = []
        #: The entries of its ``GET /v1/models``.
        self.models: list[dict[str, Any]] = []
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "RelayBackend":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def v1_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"
