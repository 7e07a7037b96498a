"""A fast scripted OpenAI-compatible upstream for the toolwire benchmarks.

Run: ``python bench/upstream.py --port PORT``. It is a raw gevent
``StreamServer`` on 127.0.0.1 speaking just enough HTTP/1.1 (keep-alive,
``Content-Length`` request bodies, chunked responses) to be cheap next to the
servers under test. Every ``POST .../chat/completions`` (and ``.../completions``, the pass-through's: the same
bytes, which a pass-through relays unread) is answered with a pre-encoded ``chat.completion.chunk`` SSE stream
chosen by the request's ``model``:

* ``bench-fast``: :data:`STREAM_CHUNKS` frames (role, prose, a ``write_file``
  ``<tool_call>`` split across many frames, more prose, finish, usage), sent
  all at once;
* ``bench-short``: :data:`SHORT_CHUNKS` frames, a sentence of prose, then a
  ``write_file`` ``<tool_call>`` with an escaped JSON argument that ends the
  stream, sent all at once (a typical short tool-call answer);
* ``bench-text``: :data:`SHORT_CHUNKS` frames of prose and no tool call, sent all at
  once (a short answer to a request that offered tools);
* ``bench-slow``: a short prose + tool-call stream whose frames are sent
  ``--slow-interval`` seconds apart (the open-streams test);
* ``bench-arg-100k`` / ``bench-arg-1m``: one tool call whose argument text is
  about 100 KB / 1 MB, one character per frame (the linearity test);
* ``paced:KIND:SHAPE`` (KIND ``text`` or ``tool-call``, SHAPE a real server's chunk shape from
  ``bench/shapes/SHAPE.json``): :data:`PACED_CHUNKS` frames written one at a time,
  ``--paced-interval`` seconds apart, as a model generates them (see :func:`paced_pieces`). Each
  frame whose text may carry it ends its content with a stamp, ``@`` and the write time in
  microseconds of ``CLOCK_MONOTONIC`` (modulo 10**10, ten digits), taken just before the write, so a
  client can tell each chunk's delay from the back end's write to its own receive.

Anything else gets 404. ``GET /healthz`` answers 200. The scripts are described by
:func:`script`, which the load generator also imports to know what the
gateway must produce.

All I/O is gevent-native (``StreamServer`` sockets), so no monkey patching is needed.
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import time
from pathlib import Path

import gevent
import orjson
from gevent.server import StreamServer

STREAM_CHUNKS = 500
SHORT_CHUNKS = 100
SLOW_PIECES = 24
#: The paced streams: data frames before ``[DONE]`` (the role frame, the content frames, the finish frame, and
#: the usage frame where the shape has one), and their content's words and argument lines.
PACED_CHUNKS = 100
PACED_PROSE_PIECES = 12
PACED_ARGUMENT_LINE = r'\"q\" a\tb\n '
#: The real servers' chunk shapes (one JSON file each: the role, content, finish and usage chunks, and where
#: the shape was read or recorded).
SHAPES_DIR = Path(__file__).resolve().parent / "shapes"
STAMP_MODULUS = 10 ** 10
HTTP_CHUNK_BYTES = 256 * 1024
MODEL = "bench"
PROSE = "Sure. I will write the file now, then summarise what changed and why it matters. "
TAIL = " Done: the file is written; tell me if you want another change. "
FILE_LINE = 'line {i}: "quoted" text, a < b && c > d\tend\n'


def tool_call_text(argument_chars: int) -> tuple[str, dict]:
    """A ``<tool_call>`` block for ``write_file`` whose arguments JSON is about ``argument_chars`` long.

    Returns:
        ``(text, arguments)``: the sentinel text and the arguments object it encodes.
    """
    lines, size, i = [], 0, 0
    while size < argument_chars - 40:
        line = FILE_LINE.format(i=i)
        lines.append(line)
        size += len(json.dumps(line)) - 2
        i += 1
    arguments = {"path": "a.txt", "content": "".join(lines)}
    text = '<tool_call>{"name": "write_file", "arguments": ' + json.dumps(arguments) + "}</tool_call>"
    return text, arguments


def split_even(text: str, pieces: int) -> list[str]:
    """``text`` cut into ``pieces`` consecutive, non-empty, near-equal parts."""
    bounds = [round(k * len(text) / pieces) for k in range(pieces + 1)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def content_frame(piece: str) -> bytes:
    """One SSE frame carrying ``piece`` as ``delta.content``."""
    return data_frame({"index": 0, "delta": {"content": piece}, "finish_reason": None})


def data_frame(choice: dict | None, usage: dict | None = None) -> bytes:
    """One ``data: {chat.completion.chunk}`` frame with one choice (or none, for usage)."""
    chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000,
             "model": MODEL, "choices": [choice] if choice else []}
    if usage is not None:
        chunk["usage"] = usage
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def stream_frames(pieces: list[str]) -> list[bytes]:
    """Role frame, one content frame per piece, finish frame, usage frame, ``[DONE]``."""
    frames = [data_frame({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None})]
    frames += [content_frame(p) for p in pieces]
    frames.append(data_frame({"index": 0, "delta": {}, "finish_reason": "stop"}))
    frames.append(data_frame(None, {"prompt_tokens": 50, "completion_tokens": len(pieces),
                                    "total_tokens": 50 + len(pieces)}))
    frames.append(b"data: [DONE]\n\n")
    return frames


SCRIPT_NAMES = ("bench-fast", "bench-short", "bench-text", "bench-slow", "bench-arg-100k", "bench-arg-1m")


def script(name: str) -> dict:
    """The script for model ``name``: ``text`` (the model output), ``arguments`` (of its tool
    call), ``pieces`` (the content of each content frame) and ``chunks`` (data frames before
    ``[DONE]``: role + pieces + finish + usage).
    """
    if name == "bench-fast":
        call, arguments = tool_call_text(1500)
        text = PROSE * 8 + call + TAIL * 3
        pieces = split_even(text, STREAM_CHUNKS - 3)
    elif name == "bench-short":
        call, arguments = tool_call_text(600)
        text = PROSE + call
        pieces = split_even(text, SHORT_CHUNKS - 3)
    elif name == "bench-text":
        text, arguments = (PROSE + TAIL) * 5, {}
        pieces = split_even(text, SHORT_CHUNKS - 3)
    elif name == "bench-slow":
        call, arguments = tool_call_text(300)
        text = PROSE + call + TAIL
        pieces = split_even(text, SLOW_PIECES)
    else:
        size = {"bench-arg-100k": 100_000, "bench-arg-1m": 1_000_000}[name]
        text, arguments = tool_call_text(size)
        pieces = list(text)
    return {"text": text, "arguments": arguments, "pieces": pieces, "chunks": len(pieces) + 3}


def shapes() -> dict[str, dict]:
    """The real servers' chunk shapes, by name (``bench/shapes/NAME.json``)."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(SHAPES_DIR.glob("*.json"))}


def paced_pieces(kind: str) -> list[tuple[str, bool]]:
    """The content of a paced stream's frames, each with whether it carries a stamp.

    ``text``: words of prose, all stamped. ``tool-call``: a sentence's words (stamped), then a ``write_file``
    ``<tool_call>`` whose opening (up to the ``content`` string's quote) and closing go out unstamped, a few
    characters a frame, and whose ``content`` argument is lines of JSON escapes (``\\"``, ``\\t``, ``\\n``),
    one a frame, each stamped inside the string (so the arguments stay valid JSON).
    """
    content = PACED_CHUNKS - 3
    if kind == "text":
        words = ((PROSE + TAIL) * 10).split(" ")[1:content + 1]
        return [(" " + word, True) for word in words]
    opening = '<tool_call>{"name": "write_file", "arguments": {"path": "a.txt", "content": "'
    closing = '"}}</tool_call>'
    head = [(" " + word, True) for word in PROSE.split(" ")[1:PACED_PROSE_PIECES + 1]]
    head += [(piece, False) for piece in split_even(opening, 6)]
    lines = content - len(head) - 2
    return head + [(PACED_ARGUMENT_LINE, True)] * lines + [(piece, False) for piece in split_even(closing, 2)]


def paced_frames(kind: str, shape: dict) -> list[tuple[bytes, bytes | None]]:
    """A paced stream's frames in ``shape``: ``(head, tail)`` pairs, the stamp written between them (``tail``
    ``None``: the frame is ``head`` alone)."""
    mark = "\x01"

    def frame(chunk: dict) -> bytes:
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def with_content(text: str) -> dict:
        chunk = json.loads(json.dumps(shape["content"]))
        chunk["choices"][0]["delta"]["content"] = text
        return chunk

    frames: list[tuple[bytes, bytes | None]] = [(frame(shape["role"]), None)]
    for piece, stamped in paced_pieces(kind):
        if stamped:
            head, tail = frame(with_content(piece + mark)).split(b"\\u0001")
            frames.append((head, tail))
        else:
            frames.append((frame(with_content(piece)), None))
    frames.append((frame(shape["finish"]), None))
    if shape["usage"] is not None:
        frames.append((frame(shape["usage"]), None))
    return frames


def stamp() -> bytes:
    """``@`` and now in microseconds of ``CLOCK_MONOTONIC``, modulo :data:`STAMP_MODULUS` (ten digits)."""
    return b"@%010d" % (time.monotonic_ns() // 1000 % STAMP_MODULUS)


def http_chunks(frames: list[bytes]) -> list[bytes]:
    """``frames`` joined into HTTP/1.1 chunks of about :data:`HTTP_CHUNK_BYTES`, frame-aligned."""
    out, batch, size = [], [], 0
    for frame in frames:
        batch.append(frame)
        size += len(frame)
        if size >= HTTP_CHUNK_BYTES:
            out.append(chunk_bytes(b"".join(batch)))
            batch, size = [], 0
    if batch:
        out.append(chunk_bytes(b"".join(batch)))
    return out


def chunk_bytes(data: bytes) -> bytes:
    """``data`` framed as one HTTP/1.1 chunk."""
    return b"%x\r\n%s\r\n" % (len(data), data)


HEAD_SSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
LAST_CHUNK = b"0\r\n\r\n"


def plain_response(status: str, body: bytes) -> bytes:
    """A complete keep-alive response with a fixed body."""
    return (b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (status.encode(), len(body), body))


class Upstream:
    """The scripted server: pre-encoded bodies, one greenlet per connection."""

    def __init__(self, slow_interval: float, paced_interval: float = 0.04):
        self.slow_interval = slow_interval
        self.paced_interval = paced_interval
        self.paced = {f"paced:{kind}:{name}": paced_frames(kind, shape)
                      for name, shape in shapes().items() for kind in ("text", "tool-call")}
        self.fast_bodies = {name: http_chunks(stream_frames(script(name)["pieces"]))
                            for name in SCRIPT_NAMES if name != "bench-slow"}
        self.slow_chunks = [chunk_bytes(f) for f in stream_frames(script("bench-slow")["pieces"])]

    def handle(self, sock, _address) -> None:
        """Serve keep-alive requests on one connection until the peer closes it."""
        buf = b""
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buf) < length:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buf += data
                body, buf = buf[:length], buf[length:]
                self.respond(sock, head.split(b" ", 2), body)
        except OSError:
            return
        finally:
            sock.close()

    def respond(self, sock, request_line: list[bytes], body: bytes) -> None:
        """Answer one request."""
        method, path = request_line[0], request_line[1]
        if method == b"GET" and path == b"/healthz":
            sock.sendall(plain_response("200 OK", b'{"status":"ok"}'))
            return
        if method == b"GET" and path.endswith(b"/models"):
            sock.sendall(plain_response("200 OK", b'{"object":"list","data":[{"id":"bench-fast","object":"model"}]}'))
            return
        model = orjson.loads(body).get("model") if method == b"POST" and path.endswith(b"/completions") else None
        if model == "bench-slow":
            sock.sendall(HEAD_SSE + self.slow_chunks[0])
            for chunk in self.slow_chunks[1:]:
                gevent.sleep(self.slow_interval)
                sock.sendall(chunk)
            sock.sendall(LAST_CHUNK)
        elif model in self.paced:
            self.write_paced(sock, self.paced[model])
        elif model in self.fast_bodies:
            sock.sendall(HEAD_SSE)
            for chunk in self.fast_bodies[model]:
                sock.sendall(chunk)
            sock.sendall(LAST_CHUNK)
        else:
            sock.sendall(plain_response("404 Not Found", b'{"error":{"message":"unknown model","type":"invalid_request_error"}}'))


    def write_paced(self, sock, frames: list[tuple[bytes, bytes | None]]) -> None:
        """Write ``frames`` one at a time on a fixed schedule (one ``paced_interval`` apart from the first; a late
        write is not made up for), each stamped just before its write; ``[DONE]`` right after the last."""
        sock.sendall(HEAD_SSE)
        start = time.monotonic()
        for k, (head, tail) in enumerate(frames):
            wait = start + k * self.paced_interval - time.monotonic()
            if wait > 0:
                gevent.sleep(wait)
            sock.sendall(chunk_bytes(head if tail is None else head + stamp() + tail))
        sock.sendall(chunk_bytes(b"data: [DONE]\n\n") + LAST_CHUNK)


def raise_fd_limit() -> None:
    """Raise this process's open-file soft limit to its hard limit."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--slow-interval", type=float, default=0.5, help="seconds between bench-slow frames")
    parser.add_argument("--paced-interval", type=float, default=0.04, help="seconds between paced frames")
    args = parser.parse_args()
    raise_fd_limit()
    upstream = Upstream(args.slow_interval, args.paced_interval)
    server = StreamServer(("127.0.0.1", args.port), upstream.handle, backlog=4096)
    server.serve_forever()


if __name__ == "__main__":
    main()
