"""Per-request CPU micro-benchmark: one streamed chat request offering one tool, in process.

Calls the WSGI app directly (no sockets, no gunicorn; gevent-patched like a worker) with a scripted
in-memory upstream, the bench's client request (``bench/run.py``), metrics in
Prometheus multiprocess mode and JSON access lines written to ``/dev/null``,
as under gunicorn. Each request is timed in three phases:

- ``first frame``: from the WSGI call to the first body bytes (hooks, body
  parsing, prompt building, the upstream ``open``, the pump's first frame);
- ``rest``: the remaining frames;
- ``close``: closing the body (the request's metrics and access line).

The baseline is a bare Flask view streaming three frames, measured the same
way in the same run. ``--long`` streams a real 500-chunk tool-call script
instead (the bare view is unchanged): the close then runs after a stream's worth
of work, as at concurrency 1 under gunicorn, and measures two to three times the
short figure (likely colder CPU caches); ``--short`` streams the ~100-chunk
tool-call script of ``make bench``'s short-stream section, ``--text`` its ~100-chunk prose script. Figures are this thread's CPU
microseconds (``time.thread_time``: other processes do not count): per phase,
the lowest of five rounds' medians (the apps take turns). Run:
``.venv/bin/python bench/request_bench.py [--requests N] [--long | --short | --text] [--wire] [--profile]``
(``--wire``: the stream decodes the script's SSE body, as from a real upstream, so ``rest`` includes decoding)
(``--profile`` prints the top cProfile entries of the toolwire requests).
``--paced text|tool-call [--shape NAME]``: the paced section's stream (``make bench`` section P) in a real
server's chunk shape (``bench/shapes``), each frame its own receive, as a model sends them: every chunk
takes the whole path (receive, decode, driver, core, encoder, the pause and the write), and the baseline is
``bench/relay.py``'s relay loop given the same frames one a receive; ``per chunk`` divides ``rest``.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()  # as in a gunicorn gevent worker: locks (logging, metrics) are gevent's

import os  # noqa: E402
import tempfile  # noqa: E402

# Multiprocess metrics, as gunicorn.conf.py sets them up: must precede importing prometheus_client.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="toolwire-request-bench-"))

import argparse  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import logging  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Iterator  # noqa: E402

from flask import Flask, Response  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from app import create_app  # noqa: E402
from app.http import extension  # noqa: E402
from app.observability.logs import make_handler  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.upstreams.base import ChoiceDelta, UpstreamChunk  # noqa: E402
from app.upstreams.http import HttpStream  # noqa: E402
from frame_bench import ArrivingResponse  # noqa: E402
import upstream as scripted  # noqa: E402
from run import request_body  # noqa: E402

WARMUP = 200
ROUNDS = 5
MODEL = "bench-fast"
CHUNKS = (UpstreamChunk([ChoiceDelta(content="Hello")]), UpstreamChunk([ChoiceDelta(content=" world.")]),
          UpstreamChunk([ChoiceDelta(finish_reason="stop")]),
          UpstreamChunk(usage={"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}))


class _Stream:
    def __iter__(self) -> Iterator[UpstreamChunk]:
        return iter(CHUNKS)

    def plain_texts(self, *, join: bool = False) -> None:
        pass  # its chunks are built already

    def pause_every(self, tick: float | None) -> None:
        pass  # every chunk is there at once: it never waits

    def close(self) -> None:
        pass


#: ``--wire``: the SSE body of the script, which each request's stream decodes (see :class:`_Upstream`).
WIRE: bytes | None = None
#: ``--paced``: the paced stream's frames, one a receive.
PACED: list[bytes] | None = None


class _Upstream:
    """An upstream that answers every request with :data:`CHUNKS` at once (with ``--wire``, with their SSE
    body, decoded by a real :class:`~app.upstreams.http.HttpStream` as it would be from a fast server)."""

    def open(self, body: dict[str, Any], *, request_id: str | None = None) -> Any:
        if PACED is not None:
            return HttpStream(ArrivingResponse(PACED))  # type: ignore[arg-type]
        if WIRE is not None:
            return HttpStream(ArrivingResponse([WIRE]))  # type: ignore[arg-type]
        return _Stream()

    def models(self) -> list[dict[str, Any]]:
        return [{"id": MODEL}]

    def ready(self) -> bool:
        return True


def toolwire_app() -> Flask:
    """The standalone app on the in-memory upstream, access lines (JSON) to ``/dev/null``."""
    root = logging.getLogger()
    root.addHandler(make_handler("json", open(os.devnull, "w")))
    root.setLevel("INFO")
    extension.make_upstream = lambda settings, name: _Upstream()
    return create_app(Settings(response_store_path="", log_level="INFO", default_upstream_model=MODEL))


def bare_app() -> Flask:
    """The baseline: a Flask view streaming the same number of frames, no other work."""
    app = Flask("bare")

    @app.post("/v1/chat/completions")
    def chat() -> Response:
        frames = (b'data: {"choices":[{"delta":{"content":"Hello"}}]}\n\n',
                  b'data: {"choices":[{"delta":{"content":" world."}}]}\n\n', b"data: [DONE]\n\n")
        return Response(iter(frames), mimetype="text/event-stream")

    return app


def relay_app(frames: list[bytes]) -> Flask:
    """The paced baseline: ``bench/relay.py``'s relay loop over ``frames``, one a receive."""
    os.environ.setdefault("RELAY_UPSTREAM_URL", "http://127.0.0.1:1/v1")
    import relay

    app = Flask("relay")

    @app.post("/v1/chat/completions")
    def chat() -> Response:
        return Response(relay.relay(iter(frames), lambda: None), mimetype="text/event-stream")

    return app


def environ(body: bytes, path: str = "/v1/chat/completions") -> dict[str, Any]:
    """A fresh WSGI environ for ``POST path`` with ``body``."""
    return {
        "REQUEST_METHOD": "POST", "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "bench",
        "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1", "CONTENT_TYPE":
        "application/json", "CONTENT_LENGTH": str(len(body)), "HTTP_HOST": "bench", "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr, "wsgi.multithread": False,
        "wsgi.multiprocess": False, "wsgi.run_once": False, "wsgi.version": (1, 0),
    }


def _start_response(status: str, headers: list, exc_info: Any = None) -> Callable[[bytes], None]:
    assert status.startswith("200"), status
    return lambda data: None


def one(app: Flask, body: bytes) -> tuple[float, float, float]:
    """One request: seconds to the first frame, to the body's end, to its close."""
    clock = time.thread_time  # CPU time: other processes on the machine do not count
    start = clock()
    result = app(environ(body), _start_response)
    frames = iter(result)
    next(frames)
    first = clock()
    for _ in frames:
        pass
    end = clock()
    result.close()
    return first - start, end - first, clock() - end


def measure(apps: list[Flask], body: bytes, requests: int) -> list[list[float]]:
    """Per app, microseconds per phase: the lowest of the rounds' medians.

    The apps take turns, ``ROUNDS`` rounds of ``requests / ROUNDS`` requests each, so load from
    other processes on the machine falls on all of them alike; the lowest median drops the rounds it hit.
    """
    for app in apps:
        for _ in range(WARMUP):
            one(app, body)
    medians: list[list[list[float]]] = [[] for _ in apps]
    for _ in range(ROUNDS):
        for app, rounds in zip(apps, medians):
            runs = [one(app, body) for _ in range(max(1, requests // ROUNDS))]
            rounds.append([statistics.median(phase) * 1e6 for phase in zip(*runs)])
    return [[min(phase) for phase in zip(*rounds)] for rounds in medians]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top entries for toolwire")
    parser.add_argument("--long", action="store_true",
                        help="stream bench/upstream.py's bench-fast script (prose and a write_file call in ~500 "
                             "chunks) instead of two words: the close then follows a real stream's work")
    parser.add_argument("--short", action="store_true",
                        help="stream bench/upstream.py's bench-short script (a sentence and a write_file call in "
                             "~100 chunks)")
    parser.add_argument("--text", action="store_true",
                        help="stream bench/upstream.py's bench-text script (~100 chunks of prose, no call)")
    parser.add_argument("--paced", choices=("text", "tool-call"),
                        help="the paced section's stream of this kind, a frame a receive, against the relay loop")
    parser.add_argument("--shape", default="llama-server", help="with --paced: the server's chunk shape")
    parser.add_argument("--wire", action="store_true",
                        help="with a script: hand the stream its SSE body (role, pieces, finish, usage, [DONE]) to "
                             "decode, as bench/upstream.py sends it, instead of ready chunks")
    args = parser.parse_args()
    script = MODEL if args.long else "bench-short" if args.short else "bench-text" if args.text else None
    if script:
        global CHUNKS, WIRE
        pieces = scripted.script(script)["pieces"]
        CHUNKS = (*(UpstreamChunk([ChoiceDelta(content=piece)]) for piece in pieces), *CHUNKS[2:])
        if args.wire:
            WIRE = b"".join(scripted.stream_frames(pieces))
    body = request_body(MODEL)
    tw = toolwire_app()
    baseline = ("bare Flask view", bare_app())
    if args.paced:
        global PACED
        PACED = [head + scripted.stamp() + tail if tail is not None else head
                 for head, tail in scripted.paced_frames(args.paced, scripted.shapes()[args.shape])]
        PACED.append(b"data: [DONE]\n\n")
        baseline = ("relay loop", relay_app(PACED))
    rows = list(zip((baseline[0], "toolwire"), measure([baseline[1], tw], body, args.requests)))
    print(f"{'median µs':<18}{'first frame':>12}{'rest':>8}{'close':>8}{'total':>8}"
          + (f"{'per chunk':>10}" if PACED else ""))
    for name, (first, rest, close) in rows:
        print(f"{name:<18}{first:>12.1f}{rest:>8.1f}{close:>8.1f}{first + rest + close:>8.1f}"
              + (f"{(first + rest + close) / (len(PACED) - 1):>10.2f}" if PACED else ""))
    (b_first, _, b_close), (t_first, _, t_close) = rows[0][1], rows[1][1]
    print(f"{'toolwire - bare':<18}{t_first - b_first:>12.1f}{'':>8}{t_close - b_close:>8.1f}")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(lambda: [one(tw, body) for _ in range(args.requests)])
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
