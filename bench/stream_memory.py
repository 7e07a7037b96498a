"""Python memory an open stream holds, in process: toolwire against a bare Flask view, by allocation site.

Section 3 of ``make bench`` measures a gunicorn worker's RSS per open stream, which also counts what
no Python object shows (greenlet stacks saved through a wait, glibc heap holes). This is the tool for
the part toolwire's own code decides: the WSGI app is called directly (gevent-patched like a worker,
no sockets) with the bench's client request (``bench/run.py``), on an in-memory upstream that sends one
chunk, pauses, then never ends; each stream is pulled to its first frame and left open. ``tracemalloc``
compares the heap before and after ``--streams`` streams were opened, so the figures are what the
open streams hold, per stream. The baseline is a bare Flask view whose generator holds its frames
the same way. The top allocation sites (innermost frame) follow. Run:
``.venv/bin/python bench/stream_memory.py [--streams N] [--top N]``.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()  # as in a gunicorn gevent worker

import os  # noqa: E402
import tempfile  # noqa: E402

# Multiprocess metrics, as gunicorn.conf.py sets them up: must precede importing prometheus_client.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="toolwire-stream-memory-"))

import argparse  # noqa: E402
import gc  # noqa: E402
import sys  # noqa: E402
import tracemalloc  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Iterator  # noqa: E402

from flask import Flask, Response  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from app import create_app  # noqa: E402
from app.http import extension  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.upstreams.base import PAUSE, ChoiceDelta, Pause, UpstreamChunk  # noqa: E402
from request_bench import MODEL, _start_response, environ  # noqa: E402
from request_bench import _Upstream as InstantUpstream  # noqa: E402
from run import request_body  # noqa: E402

WARMUP = 20


class _OpenStream:
    """One chunk, a pause, then a wait that never ends (pulling stops at the first frame)."""

    def __iter__(self) -> Iterator[UpstreamChunk | Pause]:
        yield UpstreamChunk([ChoiceDelta(content="I will write the file now.")])
        yield PAUSE
        raise AssertionError("an open stream is never pulled past its first frame")

    def plain_texts(self, *, join: bool = False) -> None:
        pass  # its chunks are built already

    def pause_every(self, tick: float | None) -> None:
        pass

    def close(self) -> None:
        pass


class _OpenUpstream(InstantUpstream):
    """Every request's answer is an :class:`_OpenStream`."""

    def open(self, body: dict[str, Any], *, request_id: str | None = None) -> _OpenStream:
        return _OpenStream()


def toolwire_app() -> Flask:
    """The standalone app on the in-memory upstream (access lines off: nothing is logged per stream open)."""
    extension.make_upstream = lambda settings, name: _OpenUpstream()
    return create_app(Settings(response_store_path="", log_level="ERROR", default_upstream_model=MODEL))


def bare_app() -> Flask:
    """The baseline: a Flask view whose generator holds one frame written and waits for the next."""
    app = Flask("bare")

    def frames() -> Iterator[bytes]:
        yield b'data: {"choices":[{"delta":{"content":"I will write the file now."}}]}\n\n'
        raise AssertionError("an open stream is never pulled past its first frame")

    @app.post("/v1/chat/completions")
    def chat() -> Response:
        return Response(frames(), mimetype="text/event-stream")

    return app


def open_stream(app: Flask, body: bytes) -> tuple[Any, Iterator[bytes]]:
    """A request pulled to its first frame: its WSGI result and body iterator, kept to keep it open."""
    result = app(environ(body), _start_response)
    frames = iter(result)
    next(frames)
    return result, frames


def measure(app: Flask, body: bytes, streams: int) -> tuple[float, float, list[tracemalloc.StatisticDiff]]:
    """Bytes and objects per open stream, and the heap's growth by site."""
    for result, _ in [open_stream(app, body) for _ in range(WARMUP)]:
        result.close()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    held = [open_stream(app, body) for _ in range(streams)]
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    diffs = after.compare_to(before, "lineno")
    size = sum(d.size_diff for d in diffs) / streams
    count = sum(d.count_diff for d in diffs) / streams
    for result, _ in held:
        result.close()
    return size, count, diffs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--top", type=int, default=25, help="allocation sites of toolwire's streams shown")
    args = parser.parse_args()
    body = request_body(MODEL)
    bare_size, bare_count, _ = measure(bare_app(), body, args.streams)
    size, count, diffs = measure(toolwire_app(), body, args.streams)
    print(f"{'per open stream':<20}{'bytes':>8}{'objects':>9}")
    print(f"{'bare Flask view':<20}{bare_size:>8.0f}{bare_count:>9.1f}")
    print(f"{'toolwire':<20}{size:>8.0f}{count:>9.1f}")
    print(f"{'toolwire - bare':<20}{size - bare_size:>8.0f}{count - bare_count:>9.1f}")
    print(f"\ntoolwire's top sites (bytes and objects per open stream, innermost frame):")
    for diff in diffs[:args.top]:
        if diff.size_diff <= 0:
            break
        frame = diff.traceback[0]
        where = frame.filename.replace(str(ROOT) + "/", "").split("site-packages/")[-1]
        print(f"{diff.size_diff / args.streams:>8.0f}{diff.count_diff / args.streams:>9.1f}  {where}:{frame.lineno}")


if __name__ == "__main__":
    main()
