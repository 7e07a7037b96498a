"""Response store micro-benchmark: SQLite and Redis, each against its own floor, measured in the same run.

One stored turn is a Response with two output items (a message and a function call) and ``--items`` input
items of ~400 bytes each, as an agent conversation resends them. Per store, the wall time of ``put``,
``load`` (a ``previous_response_id`` link), ``get_item`` (an ``item_reference``) and ``delete`` is the median
over ``--ops`` operations, the lowest of three rounds; the floor is one bare round trip on the same
connection (Redis ``PING``; SQLite a primary-key ``SELECT``), so ``x floor`` says what the store adds.
Then ``--writers`` processes put into one SQLite file at once: writes per second, the slowest write,
and how many failed (the lock waits must turn every ``database is locked`` into a wait).

Redis is a real ``redis-server`` started on a free loopback port in a temporary directory and stopped at
the end (``tests/support/redis_server.py``; installed with apt-get when missing and root). gevent-patched
like a gunicorn worker. Run: ``.venv/bin/python bench/store_bench.py [--ops N] [--items N] [--writers N]``.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()  # as in a gunicorn gevent worker: sockets, sleeps and locks are gevent's

import argparse  # noqa: E402
import multiprocessing  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from app.store import RedisResponseStore, ResponseStore, SQLiteResponseStore  # noqa: E402
from support.redis_server import RedisServer, redis_server_binary  # noqa: E402

OWNER = "0" * 64


def turn(n: int, items: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Response ``n`` and its input items."""
    inputs = [{"id": f"msg_in{n}_{i}", "type": "message", "role": "user" if i % 2 else "assistant",
               "content": [{"type": "input_text", "text": "x" * 400}]} for i in range(items)]
    output = [{"id": f"msg_{n}", "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": "y" * 300, "annotations": []}]},
              {"id": f"fc_{n}", "type": "function_call", "call_id": f"call_{n}", "name": "get_weather",
               "arguments": '{"city": "Paris"}', "status": "completed"}]
    return {"id": f"resp_{n}", "object": "response", "status": "completed", "output": output}, inputs


def median_us(operation: Callable[[int], Any], ops: int) -> float:
    """The lowest of three rounds' median wall time of ``operation(i)``, microseconds."""
    rounds = []
    for _ in range(3):
        times = []
        for i in range(ops):
            started = time.perf_counter()
            operation(i)
            times.append(time.perf_counter() - started)
        rounds.append(statistics.median(times))
    return min(rounds) * 1e6


def measure(store: ResponseStore, floor: Callable[[int], Any], ops: int, items: int) -> dict[str, float]:
    turns = [turn(n, items) for n in range(ops)]
    counter = iter(range(10**9))

    def put(i: int) -> None:
        response, inputs = turns[i]
        store.put({**response, "id": f"resp_{next(counter)}"}, inputs, owner=OWNER)

    for i in range(ops):  # the records the lookups read
        store.put(*turns[i], owner=OWNER)
    results = {"floor (one round trip)": median_us(floor, ops), "put": median_us(put, ops),
               "load": median_us(lambda i: store.load(f"resp_{i}", owner=OWNER), ops),
               "get_item": median_us(lambda i: store.get_item(f"msg_{i}", owner=OWNER), ops)}
    deletions = iter(range(10**9))
    results["delete"] = median_us(lambda i: store.delete(f"resp_{next(deletions)}", owner=OWNER), ops)
    return results


def _write(path: str, writer: int, count: int, items: int, go: Any, report: Any) -> None:
    store = SQLiteResponseStore(path, timeout=30.0)
    store.check()
    turns = [turn(n, items) for n in range(count)]
    go.wait()
    slowest, failures, started = 0.0, 0, time.perf_counter()
    for n, (response, inputs) in enumerate(turns):
        began = time.perf_counter()
        try:
            store.put({**response, "id": f"resp_w{writer}_{n}"}, inputs, owner=OWNER)
        except Exception:
            failures += 1
        slowest = max(slowest, time.perf_counter() - began)
    report.put((started, time.perf_counter(), slowest, failures))


def contended(path: str, writers: int, count: int, items: int) -> tuple[float, float, int]:
    """``writers`` processes putting ``count`` turns each into one file, started together:
    (writes/s, slowest write ms, failures)."""
    ctx = multiprocessing.get_context("spawn")
    go, report = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_write, args=(path, w, count, items, go, report)) for w in range(writers)]
    for proc in procs:
        proc.start()
    time.sleep(0.5)
    go.set()
    outcomes = [report.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(30)
    elapsed = max(end for _, end, _, _ in outcomes) - min(start for start, _, _, _ in outcomes)
    return writers * count / elapsed, max(o[2] for o in outcomes) * 1e3, sum(o[3] for o in outcomes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=300, help="operations per measurement")
    parser.add_argument("--items", type=int, default=20, help="input items per stored turn")
    parser.add_argument("--writers", type=int, default=4, help="processes writing one SQLite file at once")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="toolwire-store-bench-") as tmp:
        sqlite = SQLiteResponseStore(f"{tmp}/bench.db")
        sqlite.check()
        connection = sqlite._connection()
        columns = {"SQLite": measure(sqlite, lambda i: connection.execute(
            "SELECT id FROM responses WHERE id = ?", (f"resp_{i}",)).fetchone(), args.ops, args.items)}
        binary, reason = redis_server_binary()
        if binary is None:
            print(f"Redis not measured: {reason}")
        else:
            with RedisServer(binary) as server:
                redis_store = RedisResponseStore(server.url)
                redis_store.check()
                columns["Redis"] = measure(redis_store, lambda i: redis_store._redis.ping(), args.ops, args.items)
        alone = contended(f"{tmp}/alone.db", 1, args.ops, args.items)
        together = contended(f"{tmp}/contended.db", args.writers, args.ops, args.items)

    print(f"\nResponse store, one turn = 2 output + {args.items} input items; median wall µs per operation\n")
    header = "| operation | " + " | ".join(f"{name} µs | x floor" for name in columns) + " |"
    print(header)
    print("|" + "---|" * (1 + 2 * len(columns)))
    for operation in next(iter(columns.values())):
        cells = []
        for results in columns.values():
            floor = results["floor (one round trip)"]
            cells += [f"{results[operation]:.0f}", f"{results[operation] / floor:.1f}"]
        print(f"| {operation} | " + " | ".join(cells) + " |")
    print(f"\nSQLite writers on one file | writes/s | x one writer | slowest write ms | failed")
    print("|---|---|---|---|---|")
    for name, (rate, slowest, failures) in (("1 process", alone), (f"{args.writers} processes at once", together)):
        print(f"| {name} | {rate:.0f} | {rate / alone[0]:.2f} | {slowest:.0f} | {failures} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
