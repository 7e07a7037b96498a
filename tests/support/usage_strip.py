"""A back end that reports no usage: a loopback relay in front of a real model server that removes ``usage`` from
its Chat streams (and keeps what it removed) and passes every other request (``/apply-template``,
``/tokenize``, ``/v1/models``) through unchanged."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx

from support.model_tap import READ_TIMEOUT, LoopbackRelay, RelayHandler


class UsageStripper(LoopbackRelay):
    """Relays to the server at ``target`` (its root URL, no ``/v1``).

    Fields:
        removed: the usage objects taken out of the Chat streams relayed, in order.
    """

    def __init__(self, target: str):
        self.target = target.rstrip("/")
        self.removed: list[dict[str, Any]] = []
        super().__init__(self._handler())

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        relay = self

        class Handler(RelayHandler):
            def do_GET(self) -> None:
                answer = httpx.get(relay.target + self.path, timeout=10)
                self._send(answer.status_code, answer.headers.get("content-type", "application/json"),
                           answer.content)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/v1/chat/completions":
                    answer = httpx.post(relay.target + self.path, content=raw, timeout=60,
                                        headers={"Content-Type": "application/json"})
                    self._send(answer.status_code, answer.headers.get("content-type", "application/json"),
                               answer.content)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                with httpx.stream("POST", relay.target + self.path, content=raw,
                                  headers={"Content-Type": "application/json"},
                                  timeout=httpx.Timeout(10, read=READ_TIMEOUT)) as answer:
                    for line in answer.iter_lines():
                        if line.startswith("data: {"):
                            payload = json.loads(line[6:])
                            if payload.get("usage"):
                                relay.removed.append(payload.pop("usage"))
                            line = "data: " + json.dumps(payload)
                        if line:
                            self._chunk(f"{line}\n\n".encode())
                self._chunk(b"")

        return Handler
