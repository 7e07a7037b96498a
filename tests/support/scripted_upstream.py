"""A scripted OpenAI-compatible Chat Completions upstream for end-to-end tests.

``ScriptedUpstream`` is a real HTTP/1.1 server on ``127.0.0.1`` (ephemeral port) running in a
background thread of the test process. Every ``POST /v1/chat/completions`` takes the next ``Script``
from a FIFO queue (or the default script) and answers with a streamed ``chat.completion.chunk`` SSE
body (chunked transfer encoding, one write per frame) or with an HTTP error. Each request is
recorded as an ``Exchange`` (path, headers, JSON body, timings) together with whether and when the
peer closed the connection before the response was finished, which is how tests prove that toolwire
closed its upstream request after a client disconnect.

Frames of one streamed answer, in order:

1. one role frame per choice (``{"role": "assistant", "content": ""}``);
2. the *pieces*: the text pieces of every choice (round-robin over choices when ``n > 1``), then the
   native ``delta.tool_calls`` fragments (choice 0);
3. one finish frame per choice (``"delta": {}`` plus ``finish_reason``);
4. a usage frame (``choices: []``) when the script has ``usage`` or the request asked for it;
5. ``data: [DONE]``.

The body is chunked, or close-delimited when ``framing`` says so (HTTP/1.0, or HTTP/1.1 without a length).

The faults ``hang_after_chunks``, ``close_after_chunks`` and ``malformed_line`` count pieces: ``k``
means "right after the k-th piece frame" (``0`` = right after the role frames).

Leak detection: ``open_connections()`` counts the client ends of TCP connections to this server that
the client (toolwire) has not closed yet, read from ``/proc/net/tcp``, so a test can prove that every
upstream request was closed after a fault (``wait_connections_closed()``).
"""

from __future__ import annotations

import collections
import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Sequence

from support.server import open_client_sockets

MODEL_ID = "scripted-model"
MALFORMED_LINE = b"data: {this is not json\n\n"


@dataclass
class Script:
    """One scripted upstream response.

    Fields:
        text: the model output, or one text per choice (a sequence sets ``n`` to its length).
        chunks: how each text is cut into pieces: ``None`` = one piece, an int = fixed piece size
            (``1`` = one character per frame), a list of strings = explicit pieces that must join
            to ``text`` (with per-choice texts, a list of such lists).
        tool_calls: native ``delta.tool_calls`` lists, one per frame, sent for choice 0 after the text.
        finish_reason: the finish reason of every choice, or one per choice; ``None`` omits the
            finish frames.
        usage: usage object for the final ``choices: []`` frame; when ``None`` a small default
            usage is sent only if the request had ``stream_options.include_usage``.
        n: number of choices for a single ``text``; ``None`` uses the request's ``n`` (default 1).
        status: HTTP status; anything but 200 answers with ``error_body`` as JSON.
        error_body: error JSON (dict or raw string); default is an OpenAI error envelope.
        headers: extra response headers (e.g. ``{"Retry-After": "7"}``).
        delay_before_headers: seconds to wait before the status line.
        delay_after_headers: seconds to wait after the headers, before the first frame.
        delay_between_chunks: seconds to wait before every frame after the first one.
        hang_after_chunks: stop sending after this many pieces and keep the socket open until the
            peer closes it (or the server is reset/stopped).
        close_after_chunks: drop the connection after this many pieces (no terminating chunk, no
            ``[DONE]``).
        malformed_line: inject a non-JSON ``data:`` line after this many pieces.
        drip: send the body one byte per HTTP chunk, waiting this many seconds between bytes.
        empty: a 200 stream whose body ends at once, no event and no ``[DONE]`` (llama-cpp-python raising
            inside its SSE task after the headers).
    """

    text: str | Sequence[str] = ""
    chunks: int | Sequence[str] | Sequence[Sequence[str]] | None = None
    tool_calls: Sequence[Sequence[dict[str, Any]]] | None = None
    finish_reason: str | Sequence[str | None] | None = "stop"
    usage: dict[str, Any] | None = None
    n: int | None = None
    status: int = 200
    error_body: dict[str, Any] | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_before_headers: float = 0.0
    delay_after_headers: float = 0.0
    delay_between_chunks: float = 0.0
    hang_after_chunks: int | None = None
    close_after_chunks: int | None = None
    malformed_line: int | None = None
    drip: float | None = None
    empty: bool = False

    def texts_for(self, request_body: dict[str, Any] | None) -> list[str]:
        """The per-choice texts this script produces for ``request_body``."""
        if not isinstance(self.text, str):
            return list(self.text)
        requested_n = (request_body or {}).get("n") or 1
        return [self.text] * (self.n if self.n is not None else int(requested_n))

    def pieces_for(self, choice: int, text: str) -> list[str]:
        """Cut ``text`` (the text of ``choice``) into the pieces sent as separate frames."""
        if self.chunks is None:
            return [text] if text else []
        if isinstance(self.chunks, int):
            size = self.chunks
            return [text[i : i + size] for i in range(0, len(text), size)]
        spec = list(self.chunks)
        pieces = list(spec[choice]) if spec and not isinstance(spec[0], str) else spec
        if "".join(pieces) != text:
            raise ValueError(f"chunks for choice {choice} do not join to its text: {pieces!r} vs {text!r}")
        return pieces


@dataclass
class Exchange:
    """What the upstream received for one request and how its response went.

    Fields:
        method, path: the request line.
        headers: request headers, lower-cased names.
        body: the request body parsed as JSON (``None`` if empty or not JSON).
        script: the script that answered (``None`` for unscripted routes or an empty queue).
        received_at: ``time.monotonic()`` when the request was read.
        headers_sent_at: when the status line and headers went out.
        finished_at: when the handler stopped working on the response.
        completed: the whole body up to ``[DONE]`` (or the error body) was written.
        pieces_sent: how many piece frames were written.
        peer_closed: set when the peer closed the connection before the response was finished.
        peer_closed_at: ``time.monotonic()`` when that was noticed.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    script: Script | None = None
    received_at: float = 0.0
    headers_sent_at: float | None = None
    finished_at: float | None = None
    completed: bool = False
    pieces_sent: int = 0
    peer_closed: threading.Event = field(default_factory=threading.Event)
    peer_closed_at: float | None = None

    def mark_peer_closed(self) -> None:
        """Record that the peer closed the connection now (first notice wins)."""
        if not self.peer_closed.is_set():
            self.peer_closed_at = time.monotonic()
            self.peer_closed.set()


class _PeerGone(Exception):
    """The peer closed the connection (or the server is being released); stop answering."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128
    allow_reuse_address = True

    def __init__(self, owner: "ScriptedUpstream") -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    _chunked = True  # this answer's body is chunked (else it ends at the close)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Keep the test output quiet."""

    # ---- routing -----------------------------------------------------------------------------

    def do_GET(self) -> None:
        """Serve ``/v1/models``; everything else is a 404 envelope."""
        exchange = self._record(None)
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            model = {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "scripted"}
            self._send_json(exchange, 200, {"object": "list", "data": [model]}, {})
        else:
            self._send_json(exchange, 404, _envelope(f"no route {self.path}", "invalid_request_error"), {})

    def do_POST(self) -> None:
        """Answer ``/v1/chat/completions`` from the script queue; 404 for other paths."""
        body = self._read_body()
        exchange = self._record(body)
        owner = self.server.owner
        if owner.embeddings and self.path.rstrip("/").endswith("/embeddings") and isinstance(body, dict):
            texts = body.get("input") if isinstance(body.get("input"), list) else [body.get("input")]
            data = [{"object": "embedding", "index": i, "embedding": [float(len(str(t))), float(i)]}
                    for i, t in enumerate(texts)]
            self._send_json(exchange, 200, {"object": "list", "data": data, "model": body.get("model"),
                                            "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)}}, {})
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(exchange, 404, _envelope(f"no route {self.path}", "invalid_request_error"), {})
            return
        script = owner._next_script()
        exchange.script = script
        if script is None:
            message = "scripted upstream: no script queued for this request"
            self._send_json(exchange, 500, _envelope(message, "server_error"), {})
            return
        try:
            if script.delay_before_headers:
                self._wait(exchange, script.delay_before_headers)
            if script.status != 200:
                body_obj = script.error_body
                if body_obj is None:
                    body_obj = _envelope(f"scripted upstream error {script.status}", "server_error")
                self._send_json(exchange, script.status, body_obj, script.headers)
                return
            self._stream(exchange, script, body if isinstance(body, dict) else {})
        except _PeerGone:
            self.close_connection = True
        finally:
            exchange.finished_at = time.monotonic()

    # ---- request side ------------------------------------------------------------------------

    def _read_body(self) -> Any:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                raw += self.rfile.read(size)
                self.rfile.readline()
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return bytes(raw)

    def _record(self, body: Any) -> Exchange:
        exchange = Exchange(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            received_at=time.monotonic(),
        )
        self.server.owner._add_exchange(exchange)
        return exchange

    # ---- response side -----------------------------------------------------------------------

    def _send_head(self, exchange: Exchange, status: int, fixed: list[tuple[str, str]], extra: dict[str, str]) -> None:
        """The status line, the ``fixed`` headers, ``Connection: close``, then the script's ``extra``."""
        self.send_response(status)
        for name, value in [*fixed, ("Connection", "close"), *extra.items()]:
            self.send_header(name, value)
        self.end_headers()
        exchange.headers_sent_at = time.monotonic()
        self.close_connection = True

    def _send_json(self, exchange: Exchange, status: int, body: Any, headers: dict[str, str]) -> None:
        payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self._send_head(exchange, status, [("Content-Type", "application/json"),
                                           ("Content-Length", str(len(payload)))], headers)
        try:
            self.wfile.write(payload)
        except OSError:
            exchange.mark_peer_closed()
            return
        exchange.completed = True

    def _stream(self, exchange: Exchange, script: Script, request_body: dict[str, Any]) -> None:
        self._chunked = self.server.owner.framing == "chunked"
        if not self._chunked:
            self.protocol_version = self.server.owner.framing  # the body ends at the close
        framing = [("Transfer-Encoding", "chunked")] if self._chunked else []
        self._send_head(exchange, 200, [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
                                        *framing], script.headers)
        if script.delay_after_headers:
            self._wait(exchange, script.delay_after_headers)

        frames = [] if script.empty else _build_frames(script, request_body)
        for position, (kind, frame) in enumerate(frames):
            if script.delay_between_chunks and position:
                self._wait(exchange, script.delay_between_chunks)
            self._write(exchange, frame, script.drip)
            if kind == "piece":
                exchange.pieces_sent += 1
                self._after_pieces(exchange, script, exchange.pieces_sent)
            elif kind == "role" and frames[position + 1][0] != "role":
                self._after_pieces(exchange, script, 0)
        if self._chunked:
            self._write_raw(exchange, b"0\r\n\r\n")
        exchange.completed = True

    def _after_pieces(self, exchange: Exchange, script: Script, count: int) -> None:
        """Apply the piece-counted faults that trigger after ``count`` pieces."""
        if script.malformed_line == count:
            self._write(exchange, MALFORMED_LINE, script.drip)
        if script.close_after_chunks == count:
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            raise _PeerGone
        if script.hang_after_chunks == count:
            self._wait(exchange, None)

    def _write(self, exchange: Exchange, frame: bytes, drip: float | None) -> None:
        pieces = [frame] if drip is None else [frame[i : i + 1] for i in range(len(frame))]
        for piece in pieces:
            self._write_raw(exchange, b"%x\r\n%s\r\n" % (len(piece), piece) if self._chunked else piece)
            if drip is not None:
                self._wait(exchange, drip)

    def _write_raw(self, exchange: Exchange, data: bytes) -> None:
        if self._peer_closed():
            exchange.mark_peer_closed()
            raise _PeerGone
        try:
            self.wfile.write(data)
        except OSError:
            exchange.mark_peer_closed()
            raise _PeerGone from None

    def _peer_closed(self) -> bool:
        """Whether the peer has closed its side (readable socket with EOF or a reset)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _wait(self, exchange: Exchange, seconds: float | None) -> None:
        """Sleep ``seconds`` (forever if ``None``) but raise ``_PeerGone`` as soon as the peer
        closes the connection or the upstream is released."""
        release = self.server.owner._release
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            if release.is_set():
                raise _PeerGone
            remaining = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if remaining <= 0:
                return
            try:
                readable, _, _ = select.select([self.connection], [], [], remaining)
            except OSError:
                readable = [self.connection]
            if readable:
                if self._peer_closed():
                    exchange.mark_peer_closed()
                    raise _PeerGone
                time.sleep(remaining)


def tool_call_text(name: str, arguments: dict[str, Any]) -> str:
    """A call as a model writes it in the default ``<tool_call>`` format."""
    return f'<tool_call>{{"name": "{name}", "arguments": {json.dumps(arguments)}}}</tool_call>'


def _envelope(message: str, type_: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": None}}


_completion_counter = iter(range(1, 10**9))


def _build_frames(script: Script, request_body: dict[str, Any]) -> list[tuple[str, bytes]]:
    """All SSE frames of one streamed answer as ``(kind, bytes)`` pairs.

    ``kind`` is ``"role"`` (a choice's first frame), ``"piece"`` (text or native tool-call
    fragment) or ``"tail"`` (finish, usage and ``[DONE]`` frames).
    """
    texts = script.texts_for(request_body)
    usage = script.usage
    if usage is None and (request_body.get("stream_options") or {}).get("include_usage"):
        completion = sum(len(t) for t in texts) // 4 + 1
        usage = {"prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion}
    base = {
        "id": f"chatcmpl-scripted-{next(_completion_counter)}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request_body.get("model") or MODEL_ID,
        **({"usage": None} if usage is not None else {}),
    }

    def frame(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        return b"data: " + json.dumps({**base, "choices": choices, **extra}).encode() + b"\n\n"

    def choice(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}

    frames: list[tuple[str, bytes]] = []
    for i in range(len(texts)):
        frames.append(("role", frame([choice(i, {"role": "assistant", "content": ""})])))
    per_choice = [script.pieces_for(i, text) for i, text in enumerate(texts)]
    for k in range(max((len(p) for p in per_choice), default=0)):
        for i, pieces in enumerate(per_choice):
            if k < len(pieces):
                frames.append(("piece", frame([choice(i, {"content": pieces[k]})])))
    for fragments in script.tool_calls or ():
        frames.append(("piece", frame([choice(0, {"tool_calls": list(fragments)})])))
    reasons = script.finish_reason
    if reasons is None or isinstance(reasons, str):
        reasons = [reasons] * len(texts)
    for i, reason in enumerate(reasons):
        if reason is not None:
            frames.append(("tail", frame([choice(i, {}, reason)])))
    if usage is not None:
        frames.append(("tail", frame([], usage=usage)))
    frames.append(("tail", b"data: [DONE]\n\n"))
    return frames


class ScriptedUpstream:
    """The scripted upstream server (see the module docstring).

    Use as a context manager or call ``start()`` / ``stop()``. ``enqueue()`` scripts, read
    ``exchanges`` / ``chat_requests``, and ``reset()`` between tests.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: collections.deque[Script] = collections.deque()
        self._exchanges: list[Exchange] = []
        self._release = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.default_script: Script | None = None
        #: How a streamed body is framed: ``"chunked"``, or ``"HTTP/1.0"`` / ``"HTTP/1.1"`` for a body
        #: with neither length nor chunks, ended by the close (as Python's ``http.server`` sends it).
        self.framing = "chunked"
        #: Answer ``POST /v1/embeddings`` (each input's vector: its length and its index); off, a 404.
        self.embeddings = False

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> "ScriptedUpstream":
        """Bind an ephemeral loopback port and serve in a daemon thread."""
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-upstream", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release hanging responses, stop serving and close the listening socket."""
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "ScriptedUpstream":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port."""
        assert self._server is not None, "upstream not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def v1_url(self) -> str:
        """The OpenAI-compatible base URL (``…/v1``) for ``TOOLWIRE_UPSTREAM_URL``."""
        return self.url + "/v1"

    # ---- scripting ---------------------------------------------------------------------------

    def enqueue(self, *scripts: Script) -> None:
        """Append scripts; each answers one later chat request, first in first out."""
        with self._lock:
            self._queue.extend(scripts)

    def reset(self) -> None:
        """Forget queued scripts, the default and recorded exchanges; release hanging responses."""
        self._release.set()
        with self._lock:
            self._queue.clear()
            self._exchanges.clear()
            self.default_script = None
            self.framing = "chunked"
            self.embeddings = False
        time.sleep(0.06)  # one _wait() poll period: let released handlers notice before re-arming
        self._release.clear()

    def _next_script(self) -> Script | None:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default_script

    @property
    def pending(self) -> int:
        """How many queued scripts no request has taken yet."""
        with self._lock:
            return len(self._queue)

    # ---- records -----------------------------------------------------------------------------

    def _add_exchange(self, exchange: Exchange) -> None:
        with self._lock:
            self._exchanges.append(exchange)

    @property
    def exchanges(self) -> list[Exchange]:
        """Every recorded request since the last reset, in arrival order."""
        with self._lock:
            return list(self._exchanges)

    @property
    def chat_requests(self) -> list[Exchange]:
        """The recorded ``POST …/chat/completions`` requests."""
        return [e for e in self.exchanges if e.method == "POST" and e.path.rstrip("/").endswith("/chat/completions")]

    # ---- connections -------------------------------------------------------------------------

    def open_connections(self) -> int:
        """How many client-side sockets connected to this server are still open (not closed by their
        owner), from ``/proc/net/tcp``. A socket whose peer we closed but its owner did not shows as
        ``CLOSE_WAIT`` and counts: that is a leaked connection."""
        return len(self.open_connection_inodes())

    def open_connection_inodes(self) -> set[int]:
        """The socket inodes of those client ends (match them against ``/proc/<pid>/fd`` to learn
        which process holds each connection)."""
        return open_client_sockets(self.port)

    def wait_connections_closed(self, expected: int = 0, timeout: float = 3.0) -> int:
        """Wait until ``open_connections()`` is at most ``expected``; return the last count."""
        deadline = time.monotonic() + timeout
        while (count := self.open_connections()) > expected and time.monotonic() < deadline:
            time.sleep(0.02)
        return count

    def wait_for_chat_requests(self, count: int, timeout: float = 5.0) -> list[Exchange]:
        """Wait until at least ``count`` chat requests arrived; return them (fails on timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.chat_requests
            if len(found) >= count or time.monotonic() > deadline:
                assert len(found) >= count, f"expected {count} upstream chat requests, got {len(found)}"
                return found
            time.sleep(0.01)
