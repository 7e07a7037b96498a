"""The conformance plans served by Python's ``http.server``, the way a plain Python back end sends them.

``python python_http_server.py PLANS PORT HTTP/1.0|HTTP/1.1``. The body has neither ``Content-Length``
nor chunked coding: it ends when the server closes the connection (HTTP/1.0, or HTTP/1.1 without a
length, RFC 9112 6.3 rule 8).
"""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, for support.backend_model

from support.backend_model import load_plans, unknown_model  # noqa: E402


def make_server(plans: dict[str, dict[str, Any]], port: int, protocol: str) -> ThreadingHTTPServer:
    """A server on ``127.0.0.1:port`` answering with ``plans`` in ``protocol``'s close-delimited framing."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = protocol

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            """Quiet."""

        def do_POST(self) -> None:
            """The plan the request's model names, its body ended by the close."""
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            entry = plans.get(request.get("model"))
            if entry is None:
                entry = {"status": 404, "headers": {"Content-Type": "application/json"}, "pause": 0,
                         "writes": [unknown_model(request.get("model"))]}
            self.send_response(entry["status"])
            for name, value in entry["headers"].items():
                self.send_header(name, value)
            self.end_headers()
            for number, data in enumerate(entry["writes"]):
                if number and entry["pause"]:
                    time.sleep(entry["pause"])
                self.wfile.write(data)
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


if __name__ == "__main__":
    make_server(load_plans(sys.argv[1]), int(sys.argv[2]), sys.argv[3]).serve_forever()
