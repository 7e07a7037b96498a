"""Non-streamed versus streamed: the CPU cost of one 1 MB tool-call argument on each endpoint, in process.

A non-streaming answer is assembled from the same core events a stream sends, so
it must cost no more than the stream (target: at most 1.2x; before the
accumulators kept fragments in lists, Chat's ``+=`` on a dict value made it
quadratic). Each request calls the WSGI app directly (gevent-patched as in a
worker, no sockets) on an in-memory upstream that sends one ``write_file`` call
whose argument is ~1 MB (``bench/upstream.py``'s ``bench-arg-1m`` text) in
``--chunk``-character pieces. Figures are this thread's CPU seconds
(``time.thread_time``) from the WSGI call to the end of the body, the lowest of
``--rounds`` (the four variants take turns). Prints one table. Run:
``.venv/bin/python bench/assembly_bench.py [--chunk N] [--rounds N]`` (section 6 of ``bench/run.py``).
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Iterator  # noqa: E402

import orjson  # noqa: E402

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

from app import create_app  # noqa: E402
from app.http import extension  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.upstreams.base import ChoiceDelta, UpstreamChunk  # noqa: E402
import upstream as scripted  # noqa: E402
from request_bench import environ  # noqa: E402
from run import request_body  # noqa: E402

MODEL = "bench-arg-1m"
TARGET_RATIO = 1.2
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


class _Upstream:
    """Answers every request with the 1 MB call in ``chunk``-character pieces."""

    def __init__(self, chunk: int):
        text = scripted.script(MODEL)["text"]
        self.chunks = [UpstreamChunk([ChoiceDelta(content=text[i:i + chunk])]) for i in range(0, len(text), chunk)]
        self.chunks += [UpstreamChunk([ChoiceDelta(finish_reason="stop")]),
                        UpstreamChunk(usage={"prompt_tokens": 50, "completion_tokens": len(text) // 4,
                                             "total_tokens": 50 + len(text) // 4})]

    def open(self, body: dict[str, Any], *, request_id: str | None = None) -> "_Upstream":
        return self

    def __iter__(self) -> Iterator[UpstreamChunk]:
        return iter(self.chunks)

    def plain_texts(self, *, join: bool = False) -> None:
        pass  # its chunks are built already

    def pause_every(self, tick: float | None) -> None:
        pass  # every chunk is there at once: it never waits

    def close(self) -> None:
        pass

    def models(self) -> list[dict[str, Any]]:
        return [{"id": MODEL}]


def body(endpoint: str, stream: bool) -> bytes:
    """The bench's write_file request on ``endpoint``, streamed or not."""
    chat = orjson.loads(request_body(MODEL))
    chat["stream"] = stream
    if endpoint == "chat":
        return orjson.dumps(chat)
    if endpoint == "messages":
        tools = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
                  "input_schema": t["function"]["parameters"]} for t in chat["tools"]]
        return orjson.dumps({"model": MODEL, "messages": chat["messages"], "tools": tools, "max_tokens": 1 << 20,
                             "stream": stream})
    tools = [{"type": "function", **t["function"]} for t in chat["tools"]]
    return orjson.dumps({"model": MODEL, "input": chat["messages"][0]["content"], "tools": tools,
                         "stream": stream, "store": False})


def one(app: Any, endpoint: str, payload: bytes) -> tuple[float, int]:
    """CPU seconds of one request to the end of its body, and the body's size."""
    start = time.thread_time()
    result = app(environ(payload, PATHS[endpoint]), lambda status, headers, exc_info=None: None)
    size = sum(len(part) for part in result)
    elapsed = time.thread_time() - start
    result.close()
    return elapsed, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunk", type=int, default=16, help="characters per upstream chunk (default 16)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    upstream = _Upstream(args.chunk)
    extension.make_upstream = lambda settings, name: upstream
    app = create_app(Settings(response_store_path="", default_upstream_model=MODEL, log_level="WARNING"))
    variants = [(endpoint, stream) for endpoint in PATHS for stream in (True, False)]
    best: dict[tuple[str, bool], float] = {}
    for _ in range(args.rounds):
        for variant in variants:
            seconds, size = one(app, variant[0], body(*variant))
            assert size > 1_000_000, f"{variant}: a {size}-byte body cannot hold the 1 MB argument"
            best[variant] = min(best.get(variant, seconds), seconds)
    print(f"1 MB tool-call argument in {len(upstream.chunks) - 2:,} upstream chunks of {args.chunk} characters; "
          f"CPU s, best of {args.rounds}")
    print(f"{'endpoint':<12}{'streamed':>10}{'non-streamed':>14}{'ratio':>8}{'target':>9}  result")
    for endpoint in PATHS:
        streamed, whole = best[(endpoint, True)], best[(endpoint, False)]
        ratio = whole / streamed
        print(f"{endpoint:<12}{streamed:>10.3f}{whole:>14.3f}{ratio:>8.2f}{'<= ' + str(TARGET_RATIO):>9}  "
              f"{'ok' if ratio <= TARGET_RATIO else 'MISS'}")


if __name__ == "__main__":
    main()
