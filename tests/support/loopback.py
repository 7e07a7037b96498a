"""A tiny threaded HTTP/1.1 server on 127.0.0.1 for the upstream client's unit tests.

Each request is answered with what ``handler(Seen)`` returns: an
:class:`Answer` whose body goes out as one ``Content-Length`` body or as
chunks, and whose connection then stays open for the next request, or is
closed, reset or left hanging. TLS when given an ``ssl.SSLContext``.
"""

from __future__ import annotations

import json
import socket
import socketserver
import ssl
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Seen:
    """One request as the server read it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    port: int


@dataclass
class Answer:
    """What to send.

    Fields:
        status: the status code.
        headers: extra headers.
        body: one body (sent with ``Content-Length``), or a list of pieces (each one HTTP chunk).
        then: after the body: ``"keep"`` (keep-alive), ``"close"`` (close the connection, and with
            chunks before the last chunk), ``"reset"`` (an RST instead of the last chunk) or
            ``"hang"`` (send nothing more for ``hang_seconds``, then close).
        hang_seconds: how long ``"hang"`` lasts.
        piece_delay: seconds between two pieces of a chunked body.
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | list[bytes] = b""
    then: str = "keep"
    hang_seconds: float = 2.0
    piece_delay: float = 0.0


def sse_answer(body: bytes, **kwargs) -> Answer:
    """An ``text/event-stream`` answer of ``body`` in one chunk."""
    return Answer(headers={"Content-Type": "text/event-stream"}, body=[body], **kwargs)


def json_answer(status: int, obj_bytes: bytes, **headers: str) -> Answer:
    """A JSON answer."""
    return Answer(status, {"Content-Type": "application/json", **headers}, obj_bytes)


class LoopbackServer:
    """Serves ``handler`` on a free loopback port until :meth:`close`.

    Attributes:
        seen: every request, in order.
        url: ``http(s)://127.0.0.1:PORT/v1``.
    """

    def __init__(self, handler: Callable[[Seen], Answer], *, tls: ssl.SSLContext | None = None):
        self.handler = handler
        self.seen: list[Seen] = []
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                try:  # a handshake the client refuses (the TLS tests) is theirs to report, not a server error
                    sock = tls.wrap_socket(self.request, server_side=True) if tls else self.request
                    outer._serve(sock, self.client_address[1])
                except (OSError, ssl.SSLError):
                    pass

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()

    def _serve(self, sock: socket.socket, port: int) -> None:
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = sock.recv(65536)
                if not data:
                    return
                buf += data
            head, _, buf = buf.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _version = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
            length = int(headers.get("content-length", 0))
            while len(buf) < length:
                buf += sock.recv(65536)
            body, buf = buf[:length], buf[length:]
            seen = Seen(method, path, headers, body, port)
            self.seen.append(seen)
            answer = self.handler(seen)
            if not self._answer(sock, answer):
                return

    @staticmethod
    def _answer(sock: socket.socket, answer: Answer) -> bool:
        """Send ``answer``; whether the connection stays open."""
        chunked = isinstance(answer.body, list)
        head = f"HTTP/1.1 {answer.status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in answer.headers.items())
        head += "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {len(answer.body)}\r\n"
        sock.sendall(head.encode() + b"\r\n")
        for count, piece in enumerate(answer.body if chunked else [answer.body]):
            if count and answer.piece_delay:
                time.sleep(answer.piece_delay)
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
        if answer.then == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()  # now: socketserver would shut the writing side down first (a FIN, not an RST)
            return False
        if answer.then == "hang":
            time.sleep(answer.hang_seconds)
            return False
        if chunked and answer.then == "keep":
            sock.sendall(b"0\r\n\r\n")
        return answer.then == "keep"


def internal_service(secret: str) -> LoopbackServer:
    """An "internal" HTTP service only this host can reach, serving a JSON schema that holds ``secret``
    (what a hostile request would have the server fetch for it)."""
    schema = json.dumps({"type": "string", "enum": [secret]}).encode()
    return LoopbackServer(lambda seen: Answer(headers={"Content-Type": "application/json"}, body=schema))
