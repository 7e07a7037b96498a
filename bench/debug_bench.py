"""What a debug page costs the worker that serves it: its polls of ``/debug/requests`` and ``/debug/machine``.

A debug directory holds ``--keep`` records shaped like a streamed tool call's (four transitions, each
with a span of ``--span`` characters of model text). Through the WSGI app in process, each scenario's
request is timed in this thread's CPU (``time.thread_time``), the median of ``--requests`` repeats,
beside ``GET /healthz`` measured the same way in the same run:

- ``unchanged``: a poll answered 304 (what a page open on an idle server costs every 2 s);
- ``one new record``: the list after one request was recorded (one file read, the rest cached);
- ``cold``: the list with nothing cached (a worker's first poll: every file read);
- ``machine``: the edge counts after one new record.

The API path is not in the table: nothing runs for the page there (requests only write their record,
as they do with debug on and no page open). Run: ``.venv/bin/python bench/debug_bench.py``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import create_app  # noqa: E402
from app.observability import debug  # noqa: E402
from app.settings import Settings  # noqa: E402

PATH = [("text", "tool_open_seen", "in_tool_call"), ("in_tool_call", "name_completed", "args_streaming"),
        ("args_streaming", "tool_close_seen", "text"), ("text", "upstream_finished", "done")]


def record(request_id: str, span: int) -> dict:
    """A debug record like a streamed tool call's, each transition with ``span`` characters of text."""
    steps = [{"source": s, "trigger": t, "dest": d, "span": [0, span], "text": "x" * span, "at_ms": 1.0}
             for s, t, d in PATH]
    return {"request_id": request_id, "method": "POST", "route": "/v1/chat/completions", "status": 200,
            "model": "m", "stream": True, "started_at": time.time(), "duration_ms": 20.0, "ttfb_ms": 5.0,
            "tool_calls": {"emitted": 1}, "choices": [{
                "index": 0, "state": "done", "path": steps, "finish_reason": "tool_calls", "notes": [],
                "calls": [{"index": 0, "call_id": "call_1", "name": "get_weather", "kind": "function",
                           "arguments": '{"city": "Oslo"}', "valid": True}]}]}


def cpu_us(action: Callable[[], object], repeats: int, setup: Callable[[], object] = lambda: None) -> float:
    """Median thread CPU microseconds of ``action`` (``setup`` runs untimed before each repeat)."""
    times = []
    for _ in range(repeats):
        setup()
        start = time.thread_time()
        action()
        times.append(time.thread_time() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=int, default=200, help="records in the directory (TOOLWIRE_DEBUG_KEEP)")
    parser.add_argument("--span", type=int, default=1000, help="characters of model text per transition")
    parser.add_argument("--requests", type=int, default=100, help="repeats per scenario")
    args = parser.parse_args()

    directory = tempfile.mkdtemp(prefix="toolwire-debug-bench-")
    store = debug.DebugStore(directory, args.keep + 1)  # room for the ones written while timing
    for i in range(args.keep):
        store.save(f"r{i:05d}", record(f"r{i:05d}", args.span))
    client = create_app(Settings(debug=True, debug_dir=directory, upstream_url=None, log_level="ERROR")).test_client()
    tag = client.get("/debug/requests").headers["ETag"]
    size = len(Path(directory, "r00000.json").read_bytes())
    counter = iter(range(10**9))

    def new_record() -> None:
        request_id = f"n{next(counter):07d}"
        store.save(request_id, record(request_id, args.span))

    baseline = cpu_us(lambda: client.get("/healthz"), args.requests)
    rows = [
        ("GET /healthz (baseline)", baseline),
        ("list, unchanged (304)", cpu_us(lambda: client.get("/debug/requests", headers={"If-None-Match": tag}),
                                         args.requests)),
        ("list, one new record", cpu_us(lambda: client.get("/debug/requests"), args.requests, new_record)),
        ("machine, one new record", cpu_us(lambda: client.get("/debug/machine"), args.requests, new_record)),
        ("list, cold (every record read)", cpu_us(lambda: client.get("/debug/requests"), max(5, args.requests // 10),
                                                  debug._digests.clear)),
    ]
    print(f"{args.keep} records of {size / 1024:.1f} KB; thread CPU per request, median of {args.requests}")
    print(f"{'scenario':<34} {'µs':>9} {'× baseline':>11}")
    for name, us in rows:
        print(f"{name:<34} {us:>9.0f} {us / baseline:>11.1f}")
    shutil.rmtree(directory)


if __name__ == "__main__":
    main()
