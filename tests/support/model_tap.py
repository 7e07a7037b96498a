"""A recording tap between toolwire and a real model server, on a loopback port.

toolwire sends the same upstream body for a streamed and a non-streamed client request (and for Chat and
Responses), but a real model does not answer the same body twice with the same text (llama.cpp's prefix
cache changes near-tie tokens at temperature 0). The tap forwards the first request with a body to the
model server, streams the answer back as it arrives and records its ``data:`` payloads; an identical
body later gets the recording back. So every variant of one prompt is judged against one model text, and
the recordings can be replayed without the model (``recordings``).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import httpx

READ_TIMEOUT = 300.0


class RelayHandler(BaseHTTPRequestHandler):
    """A loopback relay's HTTP/1.1 handler: quiet, with a chunked body's chunks and one whole answer."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        return None

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send(self, status: int, content_type: str, content: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)


class LoopbackRelay:
    """A threaded HTTP server on a loopback port in front of a model server, serving ``handler`` (a context
    manager: started on entry, stopped on exit)."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def v1_url(self) -> str:
        """The relay's OpenAI base URL."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class ModelTap(LoopbackRelay):
    """Forwards ``POST /v1/chat/completions`` to ``target`` (``http://…/v1``), recording and replaying.

    Fields:
        answers: ``(request body, SSE payloads the model sent)`` per distinct body (compared as JSON values:
            Responses sends ``temperature`` as ``0.0`` where Chat sends ``0``), in order.
        forwarded: how many requests reached the model (the rest were replayed).
    """

    def __init__(self, target: str):
        self.target = target.rstrip("/")
        self.answers: list[tuple[dict[str, Any], list[str]]] = []
        self.forwarded = 0
        self._lock = threading.Lock()
        super().__init__(self._handler())

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        tap = self

        class Handler(RelayHandler):
            def do_GET(self) -> None:  # /v1/models, for readiness
                answer = httpx.get(tap.target + self.path.removeprefix("/v1"), timeout=10)
                self._send(answer.status_code, answer.headers.get("content-type", "application/json"),
                           answer.content)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw)
                with tap._lock:
                    recorded = next((payloads for seen, payloads in tap.answers if seen == body), None)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if recorded is None:
                    recorded = self._forward(raw)
                    with tap._lock:
                        tap.answers.append((body, recorded))
                        tap.forwarded += 1
                else:
                    for payload in recorded:
                        self._chunk(f"data: {payload}\n\n".encode())
                self._chunk(b"")

            def _forward(self, raw: bytes) -> list[str]:
                payloads = []
                headers = {"Content-Type": "application/json",
                           "X-Request-Id": self.headers.get("X-Request-Id", "")}
                with httpx.stream("POST", tap.target + "/chat/completions", content=raw, headers=headers,
                                  timeout=httpx.Timeout(10, read=READ_TIMEOUT)) as answer:
                    for line in answer.iter_lines():
                        if line.startswith("data: "):
                            payloads.append(line[6:])
                            self._chunk(f"{line}\n\n".encode())
                return payloads

        return Handler
