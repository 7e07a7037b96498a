"""A scripted OpenAI Responses-API model server (``POST /v1/responses``) for Codex e2e tests.

Codex speaks only the Responses API to its model provider, so the tests point Codex's provider at
this loopback server. It runs in a background thread of the test process; every request takes the
next ``ModelScript`` from a FIFO queue (or the default one) and streams ``response.*`` SSE events
the way OpenAI sends them: ``response.created``, ``response.in_progress``,
``response.output_item.added`` (a message), ``response.content_part.added``, one
``response.output_text.delta`` per piece, ``response.output_text.done``, ``response.content_part.done``,
``response.output_item.done``, ``response.completed`` (with usage). ``POST /v1/chat/completions`` streams
the same answer in the same pieces as Chat Completions chunks, so a benchmark can set a Codex turn
against the same model reached straight over HTTP. ``python tests/support/responses_model.py --port N``
serves the default script until killed.

Each request is kept as a ``ModelExchange`` (JSON body, headers, and whether and when Codex closed
the connection before the answer ended), which is how a test proves that an interrupted Codex turn
closed its model request.
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
from typing import Any


@dataclass
class ModelScript:
    """One scripted model answer.

    Fields:
        text: the answer text.
        chunk_chars: characters per ``response.output_text.delta``.
        delay_between_chunks: seconds before every delta after the first.
        hang_after_chunks: stop after this many deltas and hold the connection open until the peer
            closes it (or the server stops).
        close_after_chunks: drop the connection after this many deltas (no ``response.completed``).
        status: anything but 200 answers with an OpenAI error envelope of that status.
        error_body: with ``status``, this body (``text/html``) instead of the envelope: a gateway's error page.
        usage: ``input_tokens`` / ``output_tokens`` reported in ``response.completed``.
        echo: answer ``text`` followed by the last user message (so concurrent requests get distinct answers).
        hang_before_output: send ``response.created`` and ``response.in_progress``, then nothing (as
            ``hang_after_chunks``): a model that takes its time to think.
        tool_call: after the text, call this function natively (a ``function_call`` output item), as a
            hostile or confused provider would though it was offered no tools.
        reasoning: raw reasoning streamed as a ``reasoning`` item (``reasoning_text``) before the message.
    """

    text: str = "Hello from the scripted model."
    chunk_chars: int = 8
    delay_between_chunks: float = 0.0
    hang_after_chunks: int | None = None
    close_after_chunks: int | None = None
    status: int = 200
    error_body: str | None = None
    usage: tuple[int, int] = (21, 7)
    echo: bool = False
    hang_before_output: bool = False
    tool_call: str | None = None
    reasoning: str = ""


@dataclass
class ModelExchange:
    """One request the model server received.

    Fields:
        body: the JSON request body.
        headers: request headers, lower-cased names.
        received_at: ``time.monotonic()`` when it arrived.
        peer_closed: set when the peer closed the connection before the answer ended.
        peer_closed_at: ``time.monotonic()`` when that was noticed.
    """

    body: Any
    headers: dict[str, str]
    received_at: float
    peer_closed: threading.Event = field(default_factory=threading.Event)
    peer_closed_at: float | None = None

    def input_texts(self) -> list[tuple[str, str]]:
        """``(role, text)`` of every message item Codex sent the model, in order."""
        found = []
        for item in self.body.get("input") or ():
            if item.get("type") == "message":
                text = "".join(part.get("text", "") for part in item.get("content") or ())
                found.append((item.get("role"), text))
        return found


class ResponsesModelServer:
    """The loopback Responses-API server; use as a context manager.

    Args:
        port: the loopback port (0: a free one).

    Attributes:
        v1_url: ``http://127.0.0.1:<port>/v1`` (Codex's provider ``base_url``).
        exchanges: every request received, oldest first (while ``keep_exchanges``).
        default: the script used when the queue is empty.
        keep_exchanges: record requests (a long benchmark run turns it off).
    """

    def __init__(self, port: int = 0) -> None:
        self.default = ModelScript()
        self.keep_exchanges = True
        self.exchanges: list[ModelExchange] = []
        self._queue: collections.deque[ModelScript] = collections.deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _Server(self, port)
        self.v1_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, name="responses-model", daemon=True)

    def __enter__(self) -> "ResponsesModelServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def enqueue(self, *scripts: ModelScript) -> None:
        """Answer the next requests with ``scripts``, in order."""
        with self._lock:
            self._queue.extend(scripts)

    def reset(self) -> None:
        """Forget queued scripts and recorded exchanges; restore the default script."""
        with self._lock:
            self._queue.clear()
            self.exchanges.clear()
            self.default = ModelScript()

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[ModelExchange]:
        """The exchanges once at least ``count`` arrived (``AssertionError`` after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while len(self.exchanges) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"model server got {len(self.exchanges)} requests, expected {count}")
            time.sleep(0.01)
        return list(self.exchanges)

    def _take(self, exchange: ModelExchange) -> ModelScript:
        with self._lock:
            if self.keep_exchanges:
                self.exchanges.append(exchange)
            return self._queue.popleft() if self._queue else self.default


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, owner: ResponsesModelServer, port: int) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", port), _Handler)


class _PeerGone(Exception):
    """The peer closed the connection."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Quiet."""

    def do_POST(self) -> None:
        """Stream the next script's answer to ``/v1/responses``."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        exchange = ModelExchange(body=json.loads(raw or b"{}"), headers={k.lower(): v for k, v in self.headers.items()},
                                 received_at=time.monotonic())
        script = self.server.owner._take(exchange)
        route = self.path.rstrip("/")
        if not route.endswith(("/responses", "/chat/completions")):
            self._send_error(404, f"no route {self.path}")
            return
        if script.status != 200:
            self._send_error(script.status, f"scripted {script.status} error", page=script.error_body)
            return
        try:
            if route.endswith("/chat/completions"):
                self._stream_chat(exchange, script)
            else:
                self._stream(exchange, script)
        except _PeerGone:
            exchange.peer_closed_at = exchange.peer_closed_at or time.monotonic()
            exchange.peer_closed.set()
        except (BrokenPipeError, ConnectionResetError):
            exchange.peer_closed_at = time.monotonic()
            exchange.peer_closed.set()
        self.close_connection = True

    def _send_error(self, status: int, message: str, page: str | None = None) -> None:
        body = page.encode() if page is not None else json.dumps({"error": {
            "message": message, "type": "invalid_request_error", "param": None, "code": None}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html" if page is not None else "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

    def _stream_chat(self, exchange: ModelExchange, script: ModelScript) -> None:
        self._start_sse()
        base = {"id": f"chatcmpl-{id(exchange):x}", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": exchange.body.get("model", "scripted-model")}

        def send(delta: dict[str, Any], finish: str | None = None) -> None:
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()

        send({"role": "assistant", "content": ""})
        for count, piece in enumerate(_pieces(script.text, script.chunk_chars)):
            if count and script.delay_between_chunks:
                time.sleep(script.delay_between_chunks)
            send({"content": piece})
        send({}, "stop")
        prompt, completion = script.usage
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        self.wfile.write(f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())

    def _stream(self, exchange: ModelExchange, script: ModelScript) -> None:
        self._start_sse()
        model = exchange.body.get("model", "scripted-model")
        response_id, item_id = f"resp_{id(exchange):x}", f"msg_{id(exchange):x}"
        base = {"id": response_id, "object": "response", "created_at": int(time.time()), "model": model,
                "status": "in_progress", "output": []}
        sequence = iter(range(1_000_000))

        def send(event_type: str, **fields: Any) -> None:
            payload = {"type": event_type, "sequence_number": next(sequence), **fields}
            self.wfile.write(f"event: {event_type}\ndata: {json.dumps(payload)}\n\n".encode())
            self.wfile.flush()

        send("response.created", response=base)
        send("response.in_progress", response=base)
        if script.hang_before_output:
            self._hold(exchange)
        text = script.text
        if script.echo:
            text += next((t for role, t in reversed(exchange.input_texts()) if role == "user"), "")
        output: list[dict[str, Any]] = []
        if script.reasoning:
            output.append(self._stream_reasoning(send, f"rs_{id(exchange):x}", script))
        if text or script.tool_call is None:  # a bare tool call has no message item
            index = len(output)
            item = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
            send("response.output_item.added", output_index=index, item=item)
            send("response.content_part.added", item_id=item_id, output_index=index, content_index=0,
                 part={"type": "output_text", "text": "", "annotations": []})
            pieces = _pieces(text, script.chunk_chars)
            for count, piece in enumerate(pieces):
                if script.hang_after_chunks is not None and count == script.hang_after_chunks:
                    self._hold(exchange)
                if script.close_after_chunks is not None and count == script.close_after_chunks:
                    return  # the handler closes the connection mid-answer
                if count and script.delay_between_chunks:
                    time.sleep(script.delay_between_chunks)
                send("response.output_text.delta", item_id=item_id, output_index=index, content_index=0, delta=piece,
                     logprobs=[])
            if script.hang_after_chunks is not None and script.hang_after_chunks >= len(pieces):
                self._hold(exchange)
            part = {"type": "output_text", "text": text, "annotations": []}
            send("response.output_text.done", item_id=item_id, output_index=index, content_index=0, text=text,
                 logprobs=[])
            send("response.content_part.done", item_id=item_id, output_index=index, content_index=0, part=part)
            done_item = {**item, "status": "completed", "content": [part]}
            send("response.output_item.done", output_index=index, item=done_item)
            output.append(done_item)
        if script.tool_call is not None:
            output.append(self._send_function_call(send, script.tool_call, index=len(output),
                                                   call_id=f"call_{id(exchange):x}"))
        prompt, completion = script.usage
        usage = {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": prompt + completion}
        send("response.completed", response={**base, "status": "completed", "output": output, "usage": usage})

    @staticmethod
    def _stream_reasoning(send: Any, item_id: str, script: ModelScript) -> dict[str, Any]:
        """A ``reasoning`` item at output index 0 whose ``reasoning_text`` streams in pieces; returns it done."""
        item = {"id": item_id, "type": "reasoning", "summary": [], "content": []}
        send("response.output_item.added", output_index=0, item=item)
        for piece in _pieces(script.reasoning, script.chunk_chars):
            send("response.reasoning_text.delta", item_id=item_id, output_index=0, content_index=0, delta=piece)
        send("response.reasoning_text.done", item_id=item_id, output_index=0, content_index=0, text=script.reasoning)
        done = {**item, "content": [{"type": "reasoning_text", "text": script.reasoning}]}
        send("response.output_item.done", output_index=0, item=done)
        return done

    @staticmethod
    def _send_function_call(send: Any, name: str, *, index: int, call_id: str) -> dict[str, Any]:
        """Stream a ``function_call`` output item calling ``name`` with ``{}``; return the done item."""
        item = {"id": f"fc_{call_id}", "type": "function_call", "status": "in_progress", "call_id": call_id,
                "name": name, "arguments": ""}
        send("response.output_item.added", output_index=index, item=item)
        send("response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta="{}")
        send("response.function_call_arguments.done", item_id=item["id"], output_index=index, arguments="{}")
        done = {**item, "status": "completed", "arguments": "{}"}
        send("response.output_item.done", output_index=index, item=done)
        return done

    def _hold(self, exchange: ModelExchange) -> None:
        """Send nothing more; return never: raise ``_PeerGone`` once the peer closes (or the server stops)."""
        sock: socket.socket = self.connection
        owner = self.server.owner
        while not owner._stopping.is_set():
            readable, _, _ = select.select([sock], [], [], 0.02)
            if readable:
                try:
                    data = sock.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    exchange.peer_closed_at = time.monotonic()
                    raise _PeerGone()
        raise _PeerGone()


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i:i + size] for i in range(0, len(text), size)]


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Serve the default ModelScript until killed.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--text", default=ModelScript.text)
    parser.add_argument("--chunk-chars", type=int, default=ModelScript.chunk_chars)
    args = parser.parse_args()
    standalone = ResponsesModelServer(port=args.port)
    standalone.default = ModelScript(text=args.text, chunk_chars=args.chunk_chars)
    standalone.keep_exchanges = False
    with standalone:
        threading.Event().wait()
