"""toolwire end-to-end benchmark suite: ``make bench`` (or ``.venv/bin/python bench/run.py``).

Starts, on free 127.0.0.1 ports, the scripted upstream (``bench/upstream.py``),
the minimal relays (``bench/relay.py``: one on httpx, the fixed reference
called "relay", one on geventhttpclient, toolwire's own upstream client, one on
urllib3) and toolwire, each under ``gunicorn -c gunicorn.conf.py --workers 1
-k gevent --worker-connections 4000``; drives them with the gevent load
generator (``bench/load.py``) and prints one table on stdout (progress goes to
stderr). Every figure is set against a baseline measured in the same run, as a
ratio, because the machine is small, shared and noisy; servers compared take
turns in rounds, and requests/s ratios are the median of the rounds' ratios:

P. the headline (run first): paced streams, as a model sends them. The back
   end writes each chunk on its own, :data:`PACED_INTERVAL` seconds apart, in
   the chunk shapes of real servers (``bench/shapes``: llama.cpp's
   llama-server, vLLM, Ollama, LM Studio; one shape a round), stamping each
   with its write time; ~100-chunk text streams and tool-call streams (an
   escaped string argument), 100 and 1,000 at once, toolwire and the
   baseline (below) one worker each, alternating rounds. Figures: the
   worker's CPU per chunk (``/proc/PID/stat`` of the worker), each chunk's
   added delay (the back end's write to the client's receive) p50/p99,
   streams failed, and a short ramp: the most concurrent streams a worker
   carries before its added p99 passes :data:`PACED_P99_LIMIT_MS`;
0. bursts: short streams at concurrency 64, toolwire and every relay, one
   worker each, each stream's ~100 chunks written at once; streams ending in
   a tool call with an escaped JSON argument, and prose streams answering a
   request that offered tools. The baseline is the relay on geventhttpclient
   (:data:`BASELINE`): the same stack as toolwire, with no parsing;
9. the same bursts on toolwire and the baseline with two workers each;
10. the pass-through: the short prose streams through ``POST /v1/completions``, which toolwire and each
   relay's own pass-through relay unparsed; target: toolwire within 5 % of the fastest per request;
1. relay overhead: 500-chunk tool-call streams at concurrency 1, 64 and 512,
   toolwire and every relay, with the worker's CPU time read from
   ``/proc/PID/stat``;
2. added latency at concurrency 1: first byte and first content, toolwire
   versus the upstream itself, the httpx relay and the baseline;
3. open streams: 2,000 concurrent slow streams on a fresh toolwire worker,
   RSS per open stream from ``/proc/PID/status``, set against the same run
   on fresh relay workers (httpx and the baseline: the floor of the stack);
4. linearity: a 1 MB tool-call argument in 1-character chunks versus 100 KB;
5. the core's per-chunk figures and the cost of ``accept_formats=all`` (``bench/core_bench.py``, run as is);
6. non-streamed versus streamed: a 1 MB argument on each endpoint (``bench/assembly_bench.py``, run as is);
7. native versus prompt tool mode per relayed chunk (``bench/native_bench.py``, run as is);
11. replica pools: the routing decision's cost per request (``bench/pool_bench.py``, run as is), and one
   toolwire worker's requests/s for a model served by a pool of three back ends against a model served by
   one (the same scripted upstream behind each name), the short prose streams at c=64 in interleaved
   rounds; target: the pool within 3 %;
8. the Codex back end: toolwire → the real ``codex app-server`` → a scripted
   Responses-API model, versus toolwire → the same model server over plain
   HTTP (Chat Completions): first content at c=1, CPU per request (toolwire
   worker plus app-server), and the app-server's RSS. Needs ``npm`` (Codex is
   installed into the test cache as the e2e tests do); skipped without it.

Targets are printed next to the figures as ok/MISS; they never fail the run.
Every process started here is stopped on the way out, also on errors and on
SIGINT/SIGTERM. Request counts and time limits are fixed below.

The requests/s and worker CPU per request of sections 0, 9 and 1 (c=64) are
written to ``docs/bench/results.json`` and drawn in ``docs/bench/bench.png``
(``bench/chart.py``; ``--out DIR`` writes them elsewhere).

``--sections P,0,3`` runs only some sections (section 2 needs section 1's c=1
runs, so it comes with it); the default is all eleven.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402
import httpx  # noqa: E402
import orjson  # noqa: E402

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import load  # noqa: E402
import upstream as scripted  # noqa: E402

PY = sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")
PATH = "/v1/chat/completions"
#: Section 10's route: a pass-through, relayed unparsed by toolwire and by the baseline alike.
PASSTHROUGH_PATH = "/v1/completions"
#: Section 10's target: the pass-through within 5 % of the baseline's own, per request.
TARGET_PASSTHROUGH = 0.95
GUNICORN_FLAGS = ["-k", "gevent", "--worker-connections", "4000"]

#: The minimal relays by upstream client (``bench/relay.py``): httpx is the fixed reference ("relay"),
#: geventhttpclient the client toolwire uses, urllib3 the third one compared (docs/upstream-client.md).
RELAY_CLIENTS = ("httpx", "geventhttpclient", "urllib3")
CHOSEN_CLIENT = "geventhttpclient"
#: Section 1: (concurrency, requests per round); each round runs every server in turn.
RELAY_PLAN = ((1, 100), (64, 320), (512, 1024))
ROUNDS = 2
#: Section 0 (and 9, on two workers): the short streams by kind, each an upstream script of ~100 chunks;
#: (concurrency, requests per round) and rounds.
SHORT_KINDS = {"tool-call": "bench-short", "text": "bench-text"}
SHORT_PLAN = (64, 400)
SHORT_ROUNDS = 5
#: The headline's baseline: the relay on toolwire's own client (same stack, no parsing).
BASELINE = f"relay-{CHOSEN_CLIENT}"
#: Section P: seconds between a paced stream's chunks (25 tokens/s); (streams at once, rounds) per plan (each
#: round one stream per connection, the shapes taking turns by round); the ramp's stream counts (tool-call
#: streams in llama-server's shape), and the added p99 it stops at.
PACED_INTERVAL = 0.04
PACED_PLAN = ((100, 5), (1000, 2))
PACED_KINDS = ("text", "tool-call")
PACED_RAMP = (25, 50, 100, 200, 300, 400, 600)
PACED_RAMP_SHAPE = "llama-server"
PACED_P99_LIMIT_MS = 5.0
TARGET_PACED_CPU = {100: 1.05, 1000: 1.10}
TARGET_PACED_DELAY_MS = 1.0
#: Where the results (JSON) and their chart (PNG) are written, relative to the repository.
RESULTS_DIR = "docs/bench"
RUN_TIME_LIMIT = 60.0
WARMUP_REQUESTS = 32
OPEN_STREAMS = 2000
OPEN_RAMP_LIMIT = 10.0
OPEN_READ_TIMEOUT = 30.0
SLOW_INTERVAL = 0.5
LINEARITY_RUNS_100K = 2
#: Section 8: requests per back end per round, at c=1; the model's answer and its delta size.
CODEX_REQUESTS = 30
CODEX_ANSWER = "The quick brown fox jumps over the lazy dog. " * 4
CODEX_DELTA_CHARS = 4

TARGET_VS_BASELINE = 1.0
TARGET_TTFB_512 = 1.2
TARGET_CPU_RATIO = 1.3
TARGET_TTFC_DELTA_MS = 1.0
TARGET_RSS_KB = 40.0
TARGET_RSS_VS_BASELINE = 1.10
TARGET_LINEARITY = 12.0
TARGET_POOL_RPS = 0.97


def request_body(model: str) -> bytes:
    """The client request: one streamed chat turn offering the ``write_file`` tool."""
    return orjson.dumps({
        "model": model,
        "messages": [{"role": "user", "content": "Write a.txt, then tell me what you did."}],
        "stream": True,
        "tools": [{"type": "function", "function": {
            "name": "write_file", "description": "Write a text file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"},
                                                            "content": {"type": "string"}},
                           "required": ["path", "content"]}}}],
    })


# --------------------------------------------------------------------------- processes


class Processes:
    """The processes this run started (each in its own session), and their logs."""

    def __init__(self) -> None:
        self.logdir = Path(tempfile.mkdtemp(prefix="toolwire-bench-"))
        self.started: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        """Start ``argv`` from the repository root with ``env`` added, output to ``<logdir>/<name>.log``."""
        log = open(self.logdir / f"{name}.log", "wb")
        proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.started.append((name, proc))
        return proc

    def log_tail(self, name: str, lines: int = 15) -> str:
        """The last ``lines`` lines of a process's log."""
        text = (self.logdir / f"{name}.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, proc: subprocess.Popen) -> None:
        """Stop one started process and everything in its session (gunicorn's worker)."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # gunicorn: quick shutdown, no graceful wait
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    def stop_all(self) -> None:
        """Stop every process started, newest first."""
        while self.started:
            _name, proc = self.started.pop()
            self.stop(proc)


def free_port() -> int:
    """A currently unused loopback TCP port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(procs: Processes, name: str, proc: subprocess.Popen, port: int, timeout: float = 60.0) -> None:
    """Wait until ``GET /healthz`` on ``port`` answers 200.

    Raises:
        RuntimeError: the process exited or did not become ready in ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{procs.log_tail(name)}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        gevent.sleep(0.2)
    raise RuntimeError(f"{name} not ready on port {port} after {timeout:.0f} s:\n{procs.log_tail(name)}")


@dataclass
class Server:
    """A started server: its name, port, master process and (for gunicorn) its workers' pids."""

    name: str
    port: int
    proc: subprocess.Popen
    workers: tuple[int, ...] = ()

    @property
    def worker(self) -> int | None:
        """The first (with ``--workers 1`` the only) worker's pid; ``None`` for the upstream."""
        return self.workers[0] if self.workers else None

    def cpu(self) -> float:
        """CPU seconds all its workers have used so far."""
        return sum(cpu_seconds(pid) for pid in self.workers)

    def restarted(self) -> bool:
        """Whether a worker was replaced since the server started (its CPU figures are then suspect)."""
        return bool(self.workers) and worker_pids(self.proc.pid, len(self.workers)) != self.workers


def start_gunicorn(procs: Processes, name: str, target: list[str], env: dict[str, str],
                   workers: int = 1) -> Server:
    """``gunicorn -c gunicorn.conf.py`` + :data:`GUNICORN_FLAGS` on a free port; waits for the workers."""
    port = free_port()
    argv = [PY, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"), *GUNICORN_FLAGS, "--workers", str(workers),
            "--bind", f"127.0.0.1:{port}", *target]
    proc = procs.start(name, argv, env)
    wait_ready(procs, name, proc, port)
    return Server(name, port, proc, worker_pids(proc.pid, workers))


def worker_pids(master: int, count: int = 1, timeout: float = 10.0) -> tuple[int, ...]:
    """The pids of the master's ``count`` gunicorn workers (its children), sorted.

    Raises:
        RuntimeError: not exactly ``count`` children appeared in ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = sorted(pid for pid in _pids() if _ppid(pid) == master)
        if len(children) == count:
            return tuple(children)
        gevent.sleep(0.1)
    raise RuntimeError(f"gunicorn master {master} has not {count} workers")


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _stat_fields(pid: int) -> list[str]:
    """``/proc/PID/stat`` fields after the command name (field 3 onwards)."""
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()


def _ppid(pid: int) -> int | None:
    try:
        return int(_stat_fields(pid)[1])
    except (OSError, IndexError, ValueError):
        return None


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` (``/proc/PID/stat`` utime + stime)."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kb(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (``VmRSS`` in ``/proc/PID/status``)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def raise_fd_limit() -> None:
    """Raise the open-file soft limit to the hard limit (inherited by every process started here)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def progress(message: str) -> None:
    """A progress line on stderr."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- measuring


@dataclass
class Measured:
    """One load run against one server, with the worker's CPU time over it.

    Fields:
        result: the load generator's result.
        worker_cpu: CPU seconds the worker used (``None`` for the upstream, which has no worker).
        chunks: upstream chunks per request.
    """

    result: load.LoadResult
    worker_cpu: float | None
    chunks: int


def measure(server: Server, body: bytes, *, concurrency: int, requests: int, chunks: int,
            time_limit: float = RUN_TIME_LIMIT, stamps: int | None = None, stagger: float = 0.0,
            path: str = PATH) -> Measured:
    """Run the load generator against ``server`` (``POST path``), reading the worker's CPU time before and after
    (``stamps`` and ``stagger``: a paced stream's, see :func:`load.run_load`)."""
    before = server.cpu()
    result = load.run_load(server.port, load.build_request(server.port, path, body), concurrency=concurrency,
                           requests=requests, time_limit=time_limit, stamps=stamps, stagger=stagger)
    cpu = server.cpu() - before if server.workers else None
    return Measured(result, cpu, chunks)


def merged(runs: list[Measured]) -> Measured:
    """Rounds of one server and scenario as one measurement (walls and CPU summed)."""
    samples = [s for m in runs for s in m.result.samples]
    result = load.LoadResult(samples, sum(m.result.wall for m in runs), sum(m.result.cpu for m in runs))
    cpu = None if runs[0].worker_cpu is None else sum(m.worker_cpu for m in runs)
    return Measured(result, cpu, runs[0].chunks)


def pct(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) by nearest rank; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


@dataclass
class Figures:
    """The summary figures of one :class:`Measured`."""

    requests: int
    ok: int
    errors: int
    rps: float
    chunks_per_s: float
    ttfb: tuple[float, float]
    ttfc: tuple[float, float]
    total: tuple[float, float]
    cpu_us_per_chunk: float | None
    worker_util: float | None
    loadgen_util: float

    @classmethod
    def of(cls, m: Measured) -> "Figures":
        ok = m.result.ok
        wall = m.result.wall
        chunks = len(ok) * m.chunks

        def p(attr: str) -> tuple[float, float]:
            values = [getattr(s, attr) * 1e3 for s in ok if getattr(s, attr) is not None]
            return pct(values, 0.50), pct(values, 0.99)

        return cls(len(m.result.samples), len(ok), len(m.result.errors), len(ok) / wall, chunks / wall,
                   p("ttfb"), p("ttfc"), p("total"),
                   m.worker_cpu / chunks * 1e6 if m.worker_cpu is not None and chunks else None,
                   m.worker_cpu / wall if m.worker_cpu is not None else None, m.result.cpu / wall)


# --------------------------------------------------------------------------- the table


class Table:
    """The one printed table: section, figure, toolwire, baseline, ratio, target, result."""

    HEAD = ("#", "figure", "toolwire", "baseline", "ratio", "target", "result")
    WIDTHS = (3, 46, 17, 24, 13, 18, 0)

    def __init__(self) -> None:
        self.rows: list[tuple[str, ...]] = []

    def section(self, title: str) -> None:
        """A section heading row."""
        self.rows.append(("--", title))

    def add(self, section: str, figure: str, toolwire: str = "", baseline: str = "", ratio: str = "",
            target: str = "", result: str = "") -> None:
        """One figure."""
        self.rows.append((section, figure, toolwire, baseline, ratio, target, result))

    def render(self) -> str:
        """The table as text."""
        lines = [self._line(self.HEAD), "-" * 150]
        for row in self.rows:
            if row[0] == "--":
                lines.append(f"== {row[1]}")
            else:
                lines.append(self._line(row))
        return "\n".join(lines)

    def _line(self, cells: tuple[str, ...]) -> str:
        return " ".join(f"{c:<{w}}" if w else c for c, w in zip(cells, self.WIDTHS)).rstrip()


def verdict(ok: bool) -> str:
    """``ok`` or ``MISS``."""
    return "ok" if ok else "MISS"


def ms_pair(pair: tuple[float, float]) -> str:
    """``p50 / p99`` in ms."""
    return f"{pair[0]:.2f} / {pair[1]:.2f}"


def ratio_pair(a: tuple[float, float], b: tuple[float, float]) -> str:
    """Per-quantile ratios ``a / b``."""
    return f"{a[0] / b[0]:.2f} / {a[1] / b[1]:.2f}"


# --------------------------------------------------------------------------- scenarios


def check_output(server: Server, body: bytes, expected: dict) -> str:
    """One toolwire stream decoded with httpx: is the tool call (and the prose) what the upstream scripted?"""
    names, arguments, content, finish = [], {}, [], None
    with httpx.stream("POST", f"http://127.0.0.1:{server.port}{PATH}", content=body,
                      headers={"Content-Type": "application/json"}, timeout=30) as response:
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for choice in json.loads(line[6:]).get("choices") or ():
                delta = choice.get("delta") or {}
                content.append(delta.get("content") or "")
                for call in delta.get("tool_calls") or ():
                    fn = call.get("function") or {}
                    if fn.get("name"):
                        names.append(fn["name"])
                    arguments[call.get("index", 0)] = arguments.get(call.get("index", 0), "") + (
                        fn.get("arguments") or "")
                finish = choice.get("finish_reason") or finish
    try:
        args_ok = [json.loads(a) for a in arguments.values()] == ([expected["arguments"]] if expected["arguments"]
                                                                  else [])
    except ValueError:
        args_ok = False
    prose = "".join(content)
    before, _, rest = expected["text"].partition("<tool_call>")
    expected_prose = before + rest.partition("</tool_call>")[2]
    prose_ok = prose.strip() == expected_prose.strip()
    return (f"tool calls {names} args {'match' if args_ok else 'DIFFER'}; prose {len(prose)} chars "
            f"{'matches' if prose_ok else 'DIFFERS'}; finish_reason {finish}")


def relay_name(client: str) -> str:
    """The table name of the relay on ``client`` (the httpx reference is plain "relay")."""
    return "relay" if client == "httpx" else f"relay-{client}"


def interleaved(servers: dict[str, Server], body: bytes, *, concurrency: int, requests: int, chunks: int,
                rounds: int, label: str, path: str = PATH) -> dict[str, list[Measured]]:
    """``rounds`` rounds in which every server gets the same load in turn (the order rotates each
    round, so none always runs first); every run, per server."""
    runs: dict[str, list[Measured]] = {name: [] for name in servers}
    order = list(servers)
    for round_no in range(rounds):
        for name in order[round_no % len(order):] + order[:round_no % len(order)]:
            progress(f"{label}: c={concurrency} round {round_no + 1}/{rounds}: {name}, {requests} requests")
            runs[name].append(measure(servers[name], body, concurrency=concurrency, requests=requests, chunks=chunks,
                                      path=path))
    return runs


def round_ratio(runs: dict[str, list[Measured]], mine: str, theirs: str, attr: str = "rps") -> float:
    """The median over the rounds of ``mine``'s figure / ``theirs``' (both measured in the same round)."""
    ratios = [getattr(Figures.of(a), attr) / getattr(Figures.of(b), attr) for a, b in zip(runs[mine], runs[theirs])]
    return statistics.median(ratios)


def relay_overhead(table: Table, upstream: Server, servers: dict[str, Server], body: bytes,
                   chunks: int, results: dict) -> dict[int, dict[str, Figures]]:
    """Section 1; returns the figures per concurrency and server (section 2 reuses c=1); c=64's go into
    ``results``."""
    figures: dict[int, dict[str, Figures]] = {}
    for concurrency, per_round in RELAY_PLAN:
        runs = interleaved(servers, body, concurrency=concurrency, requests=per_round, chunks=chunks, rounds=ROUNDS,
                           label="1")
        direct = measure(upstream, body, concurrency=concurrency, requests=per_round, chunks=chunks)
        figures[concurrency] = {name: Figures.of(merged(m)) for name, m in runs.items()}
        figures[concurrency]["upstream"] = Figures.of(direct)
        tw, rl, up = (figures[concurrency][name] for name in ("toolwire", BASELINE, "upstream"))
        if concurrency == 64:
            results[f"{chunks}-chunk"] = {name: {"rps": f.rps, "cpu_us_per_request": f.cpu_us_per_chunk * chunks,
                                                 "errors": f.errors} for name, f in figures[64].items()
                                          if f.cpu_us_per_chunk is not None}
        s = "1"
        table.add(s, f"c={concurrency}: requests ok / errors (each server)", f"{tw.ok} / {tw.errors}",
                  f"{rl.ok} / {rl.errors} {BASELINE}")
        table.add(s, f"c={concurrency}: chunks/s", f"{tw.chunks_per_s:,.0f}", f"{rl.chunks_per_s:,.0f} {BASELINE}",
                  f"{tw.chunks_per_s / rl.chunks_per_s:.2f}")
        rps_ratio = round_ratio(runs, "toolwire", BASELINE)
        table.add(s, f"c={concurrency}: requests/s (ratio: median of rounds)", f"{tw.rps:,.1f}",
                  f"{rl.rps:,.1f} {BASELINE}", f"{rps_ratio:.2f}",
                  f">= {TARGET_VS_BASELINE}, none failed" if concurrency == 64 else "",
                  verdict(rps_ratio >= TARGET_VS_BASELINE and tw.errors == 0) if concurrency == 64 else "")
        for client in RELAY_CLIENTS:
            other = figures[concurrency][relay_name(client)]
            if relay_name(client) != BASELINE:
                table.add(s, f"c={concurrency}:   relay on {client}: ok/errors, req/s, CPU µs/chunk", f"{tw.rps:,.1f}",
                          f"{other.ok}/{other.errors}, {other.rps:,.1f}, {other.cpu_us_per_chunk:.1f}",
                          f"{round_ratio(runs, 'toolwire', relay_name(client)):.2f}")
        ttfb_target = concurrency == 512
        table.add(s, f"c={concurrency}: TTFB p50 / p99 ms", ms_pair(tw.ttfb), f"{ms_pair(rl.ttfb)} {BASELINE}",
                  ratio_pair(tw.ttfb, rl.ttfb), f"p50 <= {TARGET_TTFB_512}" if ttfb_target else "",
                  verdict(tw.ttfb[0] / rl.ttfb[0] <= TARGET_TTFB_512) if ttfb_target else "")
        table.add(s, f"c={concurrency}: total time p50 / p99 ms", ms_pair(tw.total), f"{ms_pair(rl.total)} {BASELINE}",
                  ratio_pair(tw.total, rl.total))
        cpu_ratio = tw.cpu_us_per_chunk / rl.cpu_us_per_chunk
        table.add(s, f"c={concurrency}: worker CPU µs / relayed chunk", f"{tw.cpu_us_per_chunk:.1f}",
                  f"{rl.cpu_us_per_chunk:.1f} {BASELINE}", f"{cpu_ratio:.2f}", f"<= {TARGET_CPU_RATIO}",
                  verdict(cpu_ratio <= TARGET_CPU_RATIO))
        table.add(s, f"c={concurrency}: worker CPU busy / load gen CPU busy",
                  f"{tw.worker_util:.0%} / {tw.loadgen_util:.0%}",
                  f"{rl.worker_util:.0%} / {rl.loadgen_util:.0%} {BASELINE}")
        table.add(s, f"c={concurrency}: harness ceiling (upstream direct)", "",
                  f"{up.chunks_per_s:,.0f} chunks/s", f"{tw.chunks_per_s / up.chunks_per_s:.2f}")
    return figures


def paced_model(kind: str, shape: str) -> tuple[str, int, int]:
    """The upstream model of a paced stream, its data frames and its stamps."""
    frames = scripted.paced_frames(kind, scripted.shapes()[shape])
    return f"paced:{kind}:{shape}", len(frames), sum(tail is not None for _head, tail in frames)


def measure_paced(server: Server, kind: str, shape: str, streams: int) -> Measured:
    """``streams`` paced streams at once on ``server``, one per connection, started within one interval."""
    model, chunks, stamps = paced_model(kind, shape)
    return measure(server, request_body(model), concurrency=streams, requests=streams, chunks=chunks,
                   stamps=stamps, stagger=PACED_INTERVAL)


@dataclass
class Paced:
    """The rounds of one server at one paced load: CPU per chunk, the added delays (ms), failures."""

    runs: list[Measured]

    @property
    def cpu_us_per_chunk(self) -> float:
        chunks = sum(len(m.result.ok) * m.chunks for m in self.runs)
        return sum(m.worker_cpu or 0.0 for m in self.runs) / chunks * 1e6 if chunks else float("nan")

    @property
    def delays(self) -> tuple[float, float]:
        values = [d / 1e3 for m in self.runs for s in m.result.ok for d in s.delays]
        return pct(values, 0.50), pct(values, 0.99)

    @property
    def failed(self) -> int:
        return sum(len(m.result.errors) for m in self.runs)

    @property
    def streams(self) -> int:
        return sum(len(m.result.samples) for m in self.runs)

    def first_error(self) -> str:
        return next((s.error for m in self.runs for s in m.result.errors), "")


def paced_streams(table: Table, servers: dict[str, Server], upstream: Server, results: dict) -> None:
    """Section P: paced streams on toolwire and :data:`BASELINE`, rounds alternating, shapes by round; then the
    ramp. Writes its figures into ``results``."""
    pair = {"toolwire": servers["toolwire"], BASELINE: servers[BASELINE]}
    shapes = sorted(scripted.shapes())
    for streams, rounds in PACED_PLAN:
        for kind in PACED_KINDS:
            runs: dict[str, list[Measured]] = {name: [] for name in pair}
            for round_no in range(rounds):
                shape = shapes[round_no % len(shapes)]
                order = list(pair) if round_no % 2 == 0 else list(pair)[::-1]
                for name in order:
                    progress(f"P {kind}: {streams} streams round {round_no + 1}/{rounds} ({shape}): {name}")
                    runs[name].append(measure_paced(pair[name], kind, shape, streams))
            _paced_rows(table, kind, streams, {name: Paced(r) for name, r in runs.items()},
                        [a.worker_cpu / b.worker_cpu for a, b in zip(runs["toolwire"], runs[BASELINE])
                         if b.worker_cpu], results)
            if streams == PACED_PLAN[0][0]:
                direct = Paced([measure_paced(upstream, kind, shapes[0], streams)])
                table.add("P", f"{kind}, {streams}: delay straight from the back end p50 / p99 ms (harness floor)",
                          "", ms_pair(direct.delays), "", "", f"{direct.failed} failed")
    _paced_ramp(table, pair, results)


def _paced_rows(table: Table, kind: str, streams: int, paced: dict[str, Paced], round_ratios: list[float],
                results: dict) -> None:
    tw, rl = paced["toolwire"], paced[BASELINE]
    label = f"{kind}, {streams} streams"
    table.add("P", f"{label}: streams failed (of)", f"{tw.failed} ({tw.streams})", f"{rl.failed} ({rl.streams})",
              "", "none", verdict(tw.failed == 0) + (f" {tw.first_error()[:40]}" if tw.failed else ""))
    ratio = tw.cpu_us_per_chunk / rl.cpu_us_per_chunk
    target = TARGET_PACED_CPU.get(streams)
    table.add("P", f"{label}: worker CPU µs / chunk", f"{tw.cpu_us_per_chunk:.1f}", f"{rl.cpu_us_per_chunk:.1f}",
              f"{ratio:.2f} ({'/'.join(f'{r:.2f}' for r in round_ratios)})",
              f"<= {target:.2f}" if target else "", verdict(ratio <= target) if target else "")
    (t50, t99), (r50, r99) = tw.delays, rl.delays
    delay_target = streams == PACED_PLAN[0][0]
    table.add("P", f"{label}: added delay / chunk p50 / p99 ms", ms_pair(tw.delays), ms_pair(rl.delays),
              f"Δ {t50 - r50:+.2f} / {t99 - r99:+.2f}", f"Δ <= {TARGET_PACED_DELAY_MS:.0f} ms" if delay_target else "",
              verdict(t50 - r50 <= TARGET_PACED_DELAY_MS and t99 - r99 <= TARGET_PACED_DELAY_MS)
              if delay_target else "")
    results.setdefault("paced", {})[label] = {
        name: {"cpu_us_per_chunk": p.cpu_us_per_chunk, "delay_ms_p50": p.delays[0], "delay_ms_p99": p.delays[1],
               "failed": p.failed, "streams": p.streams} for name, p in paced.items()}


def _paced_ramp(table: Table, pair: dict[str, Server], results: dict) -> None:
    """The most tool-call streams at once (of :data:`PACED_RAMP`) each server carries with its added p99 within
    :data:`PACED_P99_LIMIT_MS`; a server leaves the ramp at its first step past it (or with a failed stream)."""
    carried: dict[str, int] = {name: 0 for name in pair}
    going = list(pair)
    for streams in PACED_RAMP:
        for name in list(going):
            progress(f"P ramp: {streams} tool-call streams: {name}")
            p = Paced([measure_paced(pair[name], "tool-call", PACED_RAMP_SHAPE, streams)])
            table.add("P", f"ramp {streams} tool-call streams: {name} p99 ms / failed", f"{p.delays[1]:.2f}",
                      f"{p.failed} failed")
            if p.delays[1] > PACED_P99_LIMIT_MS or p.failed:
                going.remove(name)
            else:
                carried[name] = streams
        if not going:
            break
    table.add("P", f"most streams with added p99 <= {PACED_P99_LIMIT_MS:.0f} ms (ramp {'/'.join(map(str, PACED_RAMP))})",
              str(carried["toolwire"]), f"{carried[BASELINE]} {BASELINE}",
              f"{carried['toolwire'] / carried[BASELINE]:.2f}" if carried[BASELINE] else "")
    results.setdefault("paced", {})["ramp"] = carried


def short_streams(table: Table, section: str, servers: dict[str, Server], results: dict) -> None:
    """Sections 0 and 9: each kind of short stream at c=64, every server interleaved in rounds; the
    headline ratio is toolwire's requests/s over :data:`BASELINE`'s, the median of the rounds' ratios.

    Writes each kind's figures per server into ``results`` (the chart's input).
    """
    concurrency, per_round = SHORT_PLAN
    suffix = "" if section == "0" else f" x{len(servers['toolwire'].workers)} workers"
    for kind, model in SHORT_KINDS.items():
        expected, body = scripted.script(model), request_body(model)
        chunks = expected["chunks"]
        table.add(section, f"{kind}: toolwire output check (httpx, 1 stream)",
                  check_output(servers["toolwire"], body, expected))
        runs = interleaved(servers, body, concurrency=concurrency, requests=per_round, chunks=chunks,
                           rounds=SHORT_ROUNDS, label=f"{section} {kind}")
        figures = {name: Figures.of(merged(m)) for name, m in runs.items()}
        results[f"{kind}{suffix}"] = {name: {"rps": f.rps, "cpu_us_per_request": f.cpu_us_per_chunk * chunks,
                                            "errors": f.errors} for name, f in figures.items()}
        for name, f in figures.items():
            table.add(section, f"{kind}: {name}: ok / errors; req/s, TTFB / total p50 ms, CPU µs/request",
                      f"{f.ok} / {f.errors}",
                      f"{f.rps:,.1f}, {f.ttfb[0]:.1f} / {f.total[0]:.1f}, {f.cpu_us_per_chunk * chunks:,.0f}")
        tw = figures["toolwire"]
        for theirs in figures:
            if theirs == "toolwire":
                continue
            ratio = round_ratio(runs, "toolwire", theirs)
            headline = theirs == BASELINE
            table.add(section, f"{kind}: requests/s toolwire / {theirs} (median of rounds)", f"{tw.rps:,.1f}",
                      f"{figures[theirs].rps:,.1f} {theirs}", f"{ratio:.2f}",
                      f">= {TARGET_VS_BASELINE}, none failed" if headline else "",
                      verdict(ratio >= TARGET_VS_BASELINE and tw.errors == 0) if headline else "")
            if headline:
                table.add(section, f"{kind}: worker CPU per request toolwire / {theirs}", "", "",
                          f"{tw.cpu_us_per_chunk / figures[theirs].cpu_us_per_chunk:.2f}")


def passthrough(table: Table, servers: dict[str, Server], results: dict) -> None:
    """Section 10: short streams through the pass-through ``POST /v1/completions``, toolwire against every
    relay's own pass-through (the body relayed unparsed), interleaved in rounds at c=64; the floor is the relay
    with the most requests/s."""
    concurrency, per_round = SHORT_PLAN
    model = SHORT_KINDS["text"]
    chunks, body = scripted.script(model)["chunks"], request_body(model)
    runs = interleaved(servers, body, concurrency=concurrency, requests=per_round, chunks=chunks, rounds=SHORT_ROUNDS,
                       label="10", path=PASSTHROUGH_PATH)
    figures = {name: Figures.of(merged(m)) for name, m in runs.items()}
    results["pass-through"] = {name: {"rps": f.rps, "cpu_us_per_request": f.cpu_us_per_chunk * chunks,
                                      "errors": f.errors} for name, f in figures.items()}
    for name, f in figures.items():
        table.add("10", f"{name}: ok / errors; req/s, TTFB / total p50 ms, CPU µs/request", f"{f.ok} / {f.errors}",
                  f"{f.rps:,.1f}, {f.ttfb[0]:.1f} / {f.total[0]:.1f}, {f.cpu_us_per_chunk * chunks:,.0f}")
    tw = figures["toolwire"]
    floor = max((name for name in figures if name != "toolwire"), key=lambda name: figures[name].rps)
    for theirs in figures:
        if theirs == "toolwire":
            continue
        ratio = round_ratio(runs, "toolwire", theirs)
        target = theirs == floor
        table.add("10", f"requests/s toolwire / {theirs} (median of rounds); CPU per request ratio", f"{tw.rps:,.1f}",
                  f"{figures[theirs].rps:,.1f} {theirs}",
                  f"{ratio:.2f}; {tw.cpu_us_per_chunk / figures[theirs].cpu_us_per_chunk:.2f}",
                  f">= {TARGET_PASSTHROUGH} (the floor), none failed" if target else "",
                  verdict(ratio >= TARGET_PASSTHROUGH and tw.errors == 0) if target else "")


def added_latency(table: Table, c1: dict[str, Figures]) -> None:
    """Section 2, from the concurrency-1 runs of section 1 plus the upstream measured directly."""
    s = "2"
    for label, attr in (("TTFB", "ttfb"), ("first content", "ttfc")):
        mine = getattr(c1["toolwire"], attr)
        for base_name in ("upstream", "relay", BASELINE):
            theirs = getattr(c1[base_name], attr)
            delta = mine[0] - theirs[0]
            target = result = ""
            if attr == "ttfc" and base_name == BASELINE:
                target = f"Δp50 <= {TARGET_TTFC_DELTA_MS:.0f} ms"
                result = f"{verdict(delta <= TARGET_TTFC_DELTA_MS)} (Δp50 {delta:+.2f} ms)"
            else:
                result = f"Δp50 {delta:+.2f} ms"
            table.add(s, f"c=1 {label} p50 / p99 ms vs {base_name}", ms_pair(mine),
                      f"{ms_pair(theirs)} {base_name}", ratio_pair(mine, theirs), target, result)


def open_streams(table: Table, procs: Processes, upstream_url: str, fast_body: bytes, fast_chunks: int) -> None:
    """Section 3: ``OPEN_STREAMS`` slow streams at once on a fresh toolwire worker, then on a fresh relay.

    If that does not get them all open and completed on toolwire, the run is
    repeated with half as many streams on another fresh worker, so that a
    per-stream memory figure exists even when the target count fails.
    """
    count = OPEN_STREAMS
    figures = open_streams_run(procs, upstream_url, fast_body, fast_chunks, count)
    relays = {client: open_streams_run(procs, upstream_url, fast_body, fast_chunks, count, relay=client)
              for client in ("httpx", CHOSEN_CLIENT)}
    _open_stream_rows(table, figures, count, target=True, relays=relays)
    if figures["ok"] < count or figures["peak_open"] < count:
        count //= 2
        _open_stream_rows(table, open_streams_run(procs, upstream_url, fast_body, fast_chunks, count), count,
                          target=False)


def open_streams_run(procs: Processes, upstream_url: str, fast_body: bytes, fast_chunks: int,
                     count: int, *, relay: str | None = None) -> dict:
    """``count`` slow streams on a fresh, warmed-up toolwire worker (or the relay on client ``relay``),
    its RSS sampled every 50 ms.

    The RSS kept is the one at the moment the most streams were open (had
    their first byte and not ended); requests sent but not yet answered (the
    worker holds them too) are reported as well.
    """
    if relay:
        server = start_gunicorn(procs, f"{relay_name(relay)}-open-{count}", ["--pythonpath", str(BENCH), "relay:app"],
                                {"RELAY_UPSTREAM_URL": upstream_url, "RELAY_CLIENT": relay})
    else:
        server = start_gunicorn(procs, f"toolwire-open-{count}", ["wsgi:app"], toolwire_env(upstream_url))
    try:
        measure(server, fast_body, concurrency=8, requests=WARMUP_REQUESTS, chunks=fast_chunks)
        gevent.sleep(1.0)
        idle = rss_kb(server.worker)
        request = load.build_request(server.port, PATH, request_body("bench-slow"))
        counters = load.Progress()
        progress(f"3: {count} slow streams ({SLOW_INTERVAL} s between chunks) on one fresh "
                 f"{relay_name(relay) if relay else 'toolwire'} worker")
        job = gevent.spawn(load.run_load, server.port, request, concurrency=count, requests=count,
                           time_limit=OPEN_RAMP_LIMIT, read_timeout=OPEN_READ_TIMEOUT, progress=counters)
        start = time.monotonic()
        peak = (0, 0, idle, 0.0)
        while time.monotonic() - start < OPEN_RAMP_LIMIT and not job.ready():
            gevent.sleep(0.05)
            sample = (counters.open, counters.sent - counters.done)
            if sample >= peak[:2]:
                peak = (*sample, rss_kb(server.worker), time.monotonic() - start)
            if counters.open >= count:
                break
        result = job.get()
        kinds: dict[str, int] = {}
        for failed in result.errors:
            kinds[failed.error[:60]] = kinds.get(failed.error[:60], 0) + 1
        return {"ok": len(result.ok), "errors": len(result.errors), "kinds": kinds, "idle": idle,
                "peak_open": peak[0], "peak_inflight": peak[1], "peak_rss": peak[2], "peak_at": peak[3],
                "totals": [x.total for x in result.ok],
                "restarted": server.restarted()}
    finally:
        procs.stop(server.proc)


def _per_open(f: dict) -> float:
    """Worker RSS growth per open stream at the peak, KiB."""
    return (f["peak_rss"] - f["idle"]) / f["peak_open"] if f["peak_open"] else float("nan")


def _open_stream_rows(table: Table, f: dict, count: int, *, target: bool, relays: dict[str, dict] | None = None) -> None:
    s = "3"
    label = f"{count} streams" + ("" if target else " (reference: half the target count)")
    all_ok = f["ok"] == count and not f["restarted"]
    table.add(s, f"{label}: completed ok / errors", f"{f['ok']} / {f['errors']}", "", "",
              "all ok, 0 errors" if target else "",
              (verdict(all_ok) if target else "") + (" (worker restarted)" if f["restarted"] else ""))
    for kind, n in sorted(f["kinds"].items(), key=lambda kv: -kv[1])[:3]:
        table.add(s, f"  error: {kind}", str(n))
    table.add(s, "  open at once (peak) / in flight then / at s",
              f"{f['peak_open']} / {f['peak_inflight']} / {f['peak_at']:.1f}", f"{count} wanted",
              f"{f['peak_open'] / count:.2f}")
    table.add(s, "  worker RSS idle -> at peak, MiB", f"{f['idle'] / 1024:.1f} -> {f['peak_rss'] / 1024:.1f}")
    grown = f["peak_rss"] - f["idle"]
    per_open = _per_open(f)
    table.add(s, "  worker RSS per open stream, KiB", f"{per_open:.1f}",
              f"{grown / f['peak_inflight']:.1f} per in-flight" if f["peak_inflight"] else "", "",
              f"<= {TARGET_RSS_KB:.0f} KB" if target else "",
              verdict(per_open <= TARGET_RSS_KB) if target else "")
    for client, relay in (relays or {}).items():
        # A minimal relay's own figure is the floor of this stack (gunicorn worker, Flask, the client).
        name = relay_name(client)
        reference = name == BASELINE
        ratio = per_open / _per_open(relay)
        table.add(s, f"  {name} (on {client}), same run: RSS per open stream KiB",
                  f"{per_open:.1f}", f"{relay['ok']} / {relay['peak_open']}, {_per_open(relay):.1f} {name}",
                  f"{ratio:.2f}", f"<= {TARGET_RSS_VS_BASELINE:.2f}" if reference else "",
                  verdict(ratio <= TARGET_RSS_VS_BASELINE) if reference else "")
    table.add(s, "  stream total time p50 / p99 s",
              f"{pct(f['totals'], 0.5):.2f} / {pct(f['totals'], 0.99):.2f}",
              f"{scripted.script('bench-slow')['chunks'] * SLOW_INTERVAL:.1f} scripted")


def linearity(table: Table, toolwire: Server) -> None:
    """Section 4: 1 MB versus 100 KB tool-call argument, 1-character chunks, end to end."""
    times = {}
    for model, runs in (("bench-arg-100k", LINEARITY_RUNS_100K), ("bench-arg-1m", 1)):
        chunks = scripted.script(model)["chunks"]
        best = None
        for _ in range(runs):
            progress(f"4: {model} ({chunks:,} chunks)")
            m = measure(toolwire, request_body(model), concurrency=1, requests=1, chunks=chunks,
                        time_limit=90.0)
            sample = m.result.samples[0]
            if not sample.ok:
                table.add("4", f"{model}: FAILED", sample.error[:60])
                return
            best = sample.total if best is None else min(best, sample.total)
        times[model] = (best, chunks)
    (t_small, n_small), (t_large, n_large) = times["bench-arg-100k"], times["bench-arg-1m"]
    s = "4"
    table.add(s, f"100 KB argument ({n_small:,} chunks, best of {LINEARITY_RUNS_100K}) s",
              f"{t_small:.2f}", "", "", "", f"{t_small / n_small * 1e6:.1f} µs/chunk")
    table.add(s, f"1 MB argument ({n_large:,} chunks) s", f"{t_large:.2f}", "", "", "",
              f"{t_large / n_large * 1e6:.1f} µs/chunk")
    ratio = t_large / t_small
    table.add(s, "time ratio 1 MB / 100 KB (linear ≈ 10)", f"{ratio:.1f}", f"{t_small:.2f} s (100 KB)",
              f"{ratio:.1f}", f"<= {TARGET_LINEARITY:.0f}", verdict(ratio <= TARGET_LINEARITY))


def script_figures(table: Table, section: str, script: str) -> None:
    """Sections 5 and 6: ``bench/<script>`` run as is; its lines go into the table verbatim."""
    progress(f"{section}: bench/{script}")
    done = subprocess.run([PY, str(BENCH / script)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    for line in done.stdout.splitlines():
        table.add(section, line)
    if done.returncode:
        table.add(section, f"{script} exited with {done.returncode}: {done.stderr.strip()[-200:]}")


def codex_backend(table: Table, procs: Processes) -> None:
    """Section 8: the same scripted model behind the real Codex app-server and straight over HTTP."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the project first: tests/statemachine is no package
    from support.codex_binary import ensure_codex

    launcher, why = ensure_codex()
    if launcher is None:
        table.add("8", f"skipped: {why}")
        return
    port = free_port()
    procs.start("model", [PY, str(ROOT / "tests" / "support" / "responses_model.py"), "--port", str(port),
                          "--text", CODEX_ANSWER, "--chunk-chars", str(CODEX_DELTA_CHARS)], {})
    _wait_port(port)
    model_url = f"http://127.0.0.1:{port}/v1"
    base = {"TOOLWIRE_HEARTBEAT_SECONDS": "30", "TOOLWIRE_DEFAULT_UPSTREAM_MODEL": "bench-model",
            "TOOLWIRE_RESPONSE_STORE_PATH": ""}
    codex = start_gunicorn(procs, "toolwire-codex", ["wsgi:app"], {
        **base, "TOOLWIRE_UPSTREAM_KIND": "codex", "TOOLWIRE_CODEX_COMMAND": str(launcher),
        "TOOLWIRE_CODEX_PROVIDER_URL": model_url, "TOOLWIRE_CODEX_WORK_DIR": str(procs.logdir / "codex")})
    http = start_gunicorn(procs, "toolwire-http", ["wsgi:app"], {**base, "TOOLWIRE_UPSTREAM_URL": model_url})
    body = request_body("bench-model")
    chunks = -(-len(CODEX_ANSWER) // CODEX_DELTA_CHARS)
    for server in (codex, http):
        measure(server, body, concurrency=1, requests=5, chunks=chunks)  # warm-up; starts the app-server
    [app_server] = [pid for pid in _pids() if _ppid(pid) == codex.worker]
    runs: dict[str, list[Measured]] = {"codex": [], "http": []}
    codex_cpu = 0.0
    for _ in range(ROUNDS):
        before = cpu_seconds(app_server)
        runs["codex"].append(measure(codex, body, concurrency=1, requests=CODEX_REQUESTS, chunks=chunks))
        codex_cpu += cpu_seconds(app_server) - before
        runs["http"].append(measure(http, body, concurrency=1, requests=CODEX_REQUESTS, chunks=chunks))
    via_codex, via_http = (Figures.of(merged(runs[name])) for name in ("codex", "http"))
    table.add("8", "requests ok (codex / http)", f"{via_codex.ok}/{via_codex.requests}",
              f"{via_http.ok}/{via_http.requests} http")
    table.add("8", "c=1 first content p50 / p99 ms", ms_pair(via_codex.ttfc), f"{ms_pair(via_http.ttfc)} http",
              ratio_pair(via_codex.ttfc, via_http.ttfc), "", f"Δp50 {via_codex.ttfc[0] - via_http.ttfc[0]:+.1f} ms")
    worker_ms = {name: sum(m.worker_cpu for m in runs[name]) / max(1, sum(len(m.result.ok) for m in runs[name])) * 1e3
                 for name in runs}
    app_server_ms = codex_cpu / max(1, via_codex.ok) * 1e3
    table.add("8", "CPU ms/request: toolwire worker", f"{worker_ms['codex']:.2f}", f"{worker_ms['http']:.2f} http",
              f"{worker_ms['codex'] / worker_ms['http']:.2f}")
    total = worker_ms["codex"] + app_server_ms
    table.add("8", "CPU ms/request: worker + app-server", f"{total:.2f}", f"{worker_ms['http']:.2f} http",
              f"{total / worker_ms['http']:.2f}")
    table.add("8", "app-server RSS per worker (MiB)", f"{rss_kb(app_server) / 1024:.0f}",
              f"{rss_kb(http.worker) / 1024:.0f} http worker")


def _wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            gevent.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {timeout:.0f} s")


def toolwire_env(upstream_url: str) -> dict[str, str]:
    """Environment for a toolwire gunicorn (no stream cap: section 3 holds 2,000 streams on one worker)."""
    return {"TOOLWIRE_UPSTREAM_URL": upstream_url, "TOOLWIRE_HEARTBEAT_SECONDS": "30",
            "TOOLWIRE_MAX_CONCURRENT_STREAMS": "0"}


def two_workers(table: Table, procs: Processes, upstream_url: str, results: dict) -> None:
    """Section 9: section 0's short streams on toolwire and :data:`BASELINE`, each with two workers."""
    servers = {"toolwire": start_gunicorn(procs, "toolwire-2w", ["wsgi:app"], toolwire_env(upstream_url), workers=2),
               BASELINE: start_gunicorn(procs, f"{BASELINE}-2w", ["--pythonpath", str(BENCH), "relay:app"],
                                        {"RELAY_UPSTREAM_URL": upstream_url, "RELAY_CLIENT": CHOSEN_CLIENT},
                                        workers=2)}
    try:
        fast = scripted.script("bench-fast")
        for server in servers.values():
            measure(server, request_body("bench-fast"), concurrency=16, requests=4 * WARMUP_REQUESTS,
                    chunks=fast["chunks"])
        short_streams(table, "9", servers, results)
        for server in servers.values():
            if server.restarted():
                table.add("!", f"{server.name} (two workers): a worker was restarted; CPU figures suspect")
    finally:
        for server in servers.values():
            procs.stop(server.proc)


def pool_vs_single(table: Table, procs: Processes, upstream_url: str) -> None:
    """Section 11: one toolwire worker serving ``pooled`` from a pool of three back ends and ``single`` from one
    of them (all three the scripted upstream), each model's short prose streams in turn per round; the ratio is
    the median of the rounds' requests/s ratios."""
    members = {f"m{n}": {"kind": "openai", "url": upstream_url} for n in (1, 2, 3)}
    model = SHORT_KINDS["text"]
    env = {**toolwire_env(upstream_url), "TOOLWIRE_UPSTREAMS": json.dumps(members), "TOOLWIRE_POOL_HEALTH_SECONDS": "0",
           "TOOLWIRE_MODEL_MAP": json.dumps({"pooled": {"model": model, "upstream": list(members)},
                                             "single": {"model": model, "upstream": "m1"}})}
    server = start_gunicorn(procs, "toolwire-pool", ["wsgi:app"], env)
    try:
        chunks = scripted.script(model)["chunks"]
        bodies = {"pool of three": request_body("pooled"), "single back end": request_body("single")}
        concurrency, per_round = SHORT_PLAN
        for body in bodies.values():
            measure(server, body, concurrency=16, requests=4 * WARMUP_REQUESTS, chunks=chunks)
        runs: dict[str, list[Measured]] = {name: [] for name in bodies}
        for round_no in range(SHORT_ROUNDS):
            for name in (list(bodies) if round_no % 2 == 0 else list(reversed(bodies))):
                progress(f"11: round {round_no + 1}/{SHORT_ROUNDS}: {name}, {per_round} requests")
                runs[name].append(measure(server, bodies[name], concurrency=concurrency, requests=per_round,
                                          chunks=chunks))
        figures = {name: Figures.of(merged(m)) for name, m in runs.items()}
        for name, f in figures.items():
            table.add("11", f"{name}: ok / errors; req/s, CPU µs/request", f"{f.ok} / {f.errors}",
                      f"{f.rps:,.1f}, {f.cpu_us_per_chunk * chunks:,.0f}")
        ratio = round_ratio(runs, "pool of three", "single back end")
        pool, single = figures["pool of three"], figures["single back end"]
        table.add("11", "requests/s, one worker: pool of three / single back end (median of rounds)",
                  f"{pool.rps:,.1f}", f"{single.rps:,.1f}", f"{ratio:.3f}", f">= {TARGET_POOL_RPS}, none failed",
                  verdict(ratio >= TARGET_POOL_RPS and pool.errors == 0))
    finally:
        procs.stop(server.proc)


def save_results(results: dict, paced: dict, out: Path) -> None:
    """``results`` (the bursts: their requests/s and CPU per request) and ``paced`` (section P) into
    ``out/results.json``, each with when and at what load it was measured (the figures of sections not run
    stay as they were), and the bursts' chart as ``out/bench.png``."""
    from chart import write_chart

    out.mkdir(parents=True, exist_ok=True)
    stamp = (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
             f"load {os.getloadavg()[0]:.1f}")
    saved = out / "results.json"
    data = orjson.loads(saved.read_bytes()) if saved.exists() else {}
    if results:
        data["measured"] = f"{stamp}, c={SHORT_PLAN[0]}"
        data["scenarios"] = {**data.get("scenarios", {}), **results}
    if paced:
        data["paced_measured"] = stamp
        data["paced"] = paced["paced"]
    saved.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    if results:
        path = write_chart(data["scenarios"], out / "bench.png",
                           f"make bench: toolwire vs minimal relays, bursts ({data['measured']})")
        progress(f"chart written to {path}")
    progress(f"results written to {saved}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default="P,0,9,10,1,2,3,4,5,6,7,11,8",
                        help="comma-separated sections to run (default all)")
    parser.add_argument("--out", type=Path, default=ROOT / RESULTS_DIR,
                        help=f"folder for results.json and the chart bench.png (default {RESULTS_DIR})")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    results: dict = {}
    paced_results: dict = {}
    raise_fd_limit()
    procs = Processes()
    gevent.signal_handler(signal.SIGTERM, _terminate, procs)
    table = Table()
    started = time.monotonic()
    try:
        up_port = free_port()
        up_proc = procs.start("upstream", [PY, str(BENCH / "upstream.py"), "--port", str(up_port),
                                           "--slow-interval", str(SLOW_INTERVAL),
                                           "--paced-interval", str(PACED_INTERVAL)], {})
        wait_ready(procs, "upstream", up_proc, up_port)
        upstream = Server("upstream", up_port, up_proc)
        upstream_url = f"http://127.0.0.1:{up_port}/v1"
        relays = {relay_name(client): start_gunicorn(procs, relay_name(client),
                                                     ["--pythonpath", str(BENCH), "relay:app"],
                                                     {"RELAY_UPSTREAM_URL": upstream_url, "RELAY_CLIENT": client})
                  for client in RELAY_CLIENTS}
        relay = relays["relay"]
        toolwire = start_gunicorn(procs, "toolwire", ["wsgi:app"], toolwire_env(upstream_url))
        servers = {"toolwire": toolwire, **relays}
        fast = scripted.script("bench-fast")
        body = request_body("bench-fast")
        progress(f"started upstream :{up_port}, relay :{relay.port}, toolwire :{toolwire.port}; logs in {procs.logdir}")
        check = check_output(toolwire, body, fast)
        for server in servers.values():
            measure(server, body, concurrency=8, requests=WARMUP_REQUESTS, chunks=fast["chunks"])

        short = (f"{scripted.script('bench-short')['chunks']}-chunk streams ending in a write_file call "
                 f"(tool-call) and of prose only, tools offered (text); c={SHORT_PLAN[0]}, {SHORT_ROUNDS} "
                 f"interleaved rounds of {SHORT_PLAN[1]} requests; baseline {BASELINE} (same stack, no parsing)")
        if "P" in sections:
            table.section(f"P HEADLINE, paced streams, one worker each: {scripted.PACED_CHUNKS}-chunk text and "
                          f"tool-call streams, each chunk written on its own {PACED_INTERVAL * 1e3:.0f} ms apart "
                          f"({1 / PACED_INTERVAL:.0f} tokens/s) in real servers' chunk shapes ("
                          f"{', '.join(sorted(scripted.shapes()))}: one a round); toolwire vs {BASELINE}, "
                          f"alternating rounds; load {os.getloadavg()[0]:.1f}")
            paced_streams(table, servers, upstream, paced_results)
        if "0" in sections:
            table.section(f"0 BURSTS, one worker each (each stream's chunks written at once): {short}")
            short_streams(table, "0", servers, results)
        if "9" in sections:
            table.section(f"9 BURSTS, two workers each (--workers 2, {os.cpu_count()} CPUs shared with the load generator "
                          f"and the upstream): {short}")
            two_workers(table, procs, upstream_url, results)

        if "10" in sections:
            table.section(f"10 pass-through: {scripted.script(SHORT_KINDS['text'])['chunks']}-chunk streams through "
                          f"POST {PASSTHROUGH_PATH}, relayed unparsed; toolwire vs each relay's own pass-through; "
                          f"c={SHORT_PLAN[0]}, {SHORT_ROUNDS} interleaved rounds of {SHORT_PLAN[1]} requests")
            passthrough(table, servers, results)
        if sections & {"1", "2"}:
            table.section(f"1 relay overhead: {fast['chunks']}-chunk streams with a write_file tool call; toolwire "
                          f"vs the minimal relays (baseline {BASELINE}; relay = httpx; on urllib3), {ROUNDS} interleaved "
                          f"rounds; requests per server: "
                          + ", ".join(f"c={c}: {n * ROUNDS}" for c, n in RELAY_PLAN))
            table.add("1", "toolwire output check (httpx, 1 stream)", check)
            figures = relay_overhead(table, upstream, servers, body, fast["chunks"], results)
            table.section(f"2 added latency at c=1 ({RELAY_PLAN[0][1] * ROUNDS} requests per server, "
                          f"{RELAY_PLAN[0][1]} direct to the upstream)")
            added_latency(table, figures[1])
        if "3" in sections:
            table.section(f"3 open streams: {OPEN_STREAMS} concurrent slow streams, one fresh toolwire worker, "
                          f"then one fresh relay worker on httpx and one on {CHOSEN_CLIENT}")
            open_streams(table, procs, upstream_url, body, fast["chunks"])
        if "4" in sections:
            table.section("4 linearity: one tool call, argument text in 1-character upstream chunks, c=1, "
                          "end to end")
            linearity(table, toolwire)
        for server in servers.values():
            if server.restarted():
                table.add("!", f"{server.name}: the gunicorn worker was restarted during the run; CPU figures suspect")
        if "5" in sections:
            table.section("5 core per-chunk figures (bench/core_bench.py, its own baseline)")
            script_figures(table, "5", "core_bench.py")
        if "6" in sections:
            table.section("6 non-streamed vs streamed 1 MB argument, both endpoints, in process "
                          "(bench/assembly_bench.py)")
            script_figures(table, "6", "assembly_bench.py")
        if "7" in sections:
            table.section("7 native vs prompt tool mode per relayed chunk (bench/native_bench.py, same-run ratio)")
            script_figures(table, "7", "native_bench.py")
        if "11" in sections:
            table.section(f"11 replica pools: the routing decision (bench/pool_bench.py), and one worker's "
                          f"requests/s for a model on a pool of three vs one on a single back end (the same "
                          f"upstream); {SHORT_KINDS['text']} streams, c={SHORT_PLAN[0]}, {SHORT_ROUNDS} "
                          f"interleaved rounds of {SHORT_PLAN[1]} requests")
            script_figures(table, "11", "pool_bench.py")
            pool_vs_single(table, procs, upstream_url)
        if "8" in sections:
            table.section(f"8 Codex back end: toolwire → codex app-server → scripted Responses model vs toolwire → "
                          f"the same model over HTTP; c=1, {CODEX_REQUESTS * ROUNDS} requests each, "
                          f"{len(CODEX_ANSWER)}-char answer in {CODEX_DELTA_CHARS}-char deltas")
            codex_backend(table, procs)
    except Exception as exc:
        table.add("!", f"run aborted: {type(exc).__name__}: {exc}")
        print(table.render())
        return 1
    finally:
        procs.stop_all()
    if results or paced_results:
        save_results(results, paced_results, args.out)
    print(f"toolwire bench: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, "
          f"{time.monotonic() - started:.0f} s; logs in {procs.logdir}")
    print(table.render())
    return 0


def _terminate(procs: Processes) -> None:
    """SIGTERM: stop everything started, then exit."""
    procs.stop_all()
    os._exit(143)


if __name__ == "__main__":
    sys.exit(main())
