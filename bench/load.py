"""A gevent load generator for SSE chat-completion streams over keep-alive HTTP/1.1.

The caller must have run ``gevent.monkey.patch_all()`` (``bench/run.py`` does)
or pass gevent sockets; every socket here is a plain ``socket.socket``.

Each of ``concurrency`` greenlets owns one connection and sends requests one
after another until the shared request budget or the time limit runs out.
Responses are read with raw ``recv`` calls and no per-frame parsing, so the
generator stays cheap next to the servers it measures. Per request it records:

* ``ttfb``: request sent → first response byte;
* ``ttfc``: request sent → first frame with non-empty ``content`` or any
  ``tool_calls`` (found with one regex on the bytes received so far);
* ``total``: request sent → the chunked body's last chunk;
* ``ok``: status 200, ``data: [DONE]`` at the end and no ``"error":`` frame there (and, for a paced
  stream, every stamp the back end wrote);
* ``delays`` (paced streams, ``stamps`` given): each stamp's delay, microseconds from the back end's write
  (``bench/upstream.py``'s :func:`~upstream.stamp`) to the receive that brought it.

:class:`Progress` counts open streams while the run is going, so a caller can
take measurements while they are all open.
"""

from __future__ import annotations

import random
import re
import resource
import socket
import time
from dataclasses import dataclass, field

import gevent

RECV_BYTES = 262144
TAIL_BYTES = 1024
FIRST_CONTENT = re.compile(rb'"content":"[^"]|"tool_calls":\[')
LAST_CHUNK = b"\r\n0\r\n\r\n"
STAMP = re.compile(rb"@(\d{10})")
STAMP_BYTES = 11
STAMP_MODULUS = 10 ** 10


@dataclass
class Sample:
    """One request's outcome; times in seconds from the moment the request was sent.

    Fields:
        ok: status 200 and a clean ``[DONE]`` ending.
        ttfb: time to the first response byte (``None`` if none came).
        ttfc: time to the first content or tool-call frame (``None`` if none came).
        total: time to the end of the response (or to the failure).
        error: why it is not ok ("" when ok).
        delays: per stamp received, microseconds since the back end wrote it (paced streams only).
    """

    ok: bool
    ttfb: float | None
    ttfc: float | None
    total: float
    error: str = ""
    delays: list[int] = field(default_factory=list)


@dataclass
class Progress:
    """Live counters of one run, readable from other greenlets while it goes.

    Fields:
        sent: requests sent.
        open: requests that got their first response byte and have not ended yet.
        done: requests ended (ok or not).
    """

    sent: int = 0
    open: int = 0
    done: int = 0


@dataclass
class LoadResult:
    """A finished run.

    Fields:
        samples: one per request sent.
        wall: seconds from the first request to the last response.
        cpu: CPU seconds this (load generator) process used meanwhile.
        progress: the final counters.
    """

    samples: list[Sample]
    wall: float
    cpu: float
    progress: Progress = field(default_factory=Progress)

    @property
    def ok(self) -> list[Sample]:
        """The samples that completed cleanly."""
        return [s for s in self.samples if s.ok]

    @property
    def errors(self) -> list[Sample]:
        """The samples that did not."""
        return [s for s in self.samples if not s.ok]


def build_request(port: int, path: str, body: bytes) -> bytes:
    """A keep-alive ``POST`` of a JSON ``body``, as raw HTTP/1.1 bytes."""
    return (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
            % (path.encode(), port, len(body), body))


def run_load(port: int, request: bytes, *, concurrency: int, requests: int, time_limit: float,
             read_timeout: float = 60.0, progress: Progress | None = None, stamps: int | None = None,
             stagger: float = 0.0) -> LoadResult:
    """Send ``requests`` copies of ``request`` to 127.0.0.1:``port`` over ``concurrency`` connections.

    No request is started after ``time_limit`` seconds; requests still running
    ``read_timeout`` seconds after that are abandoned (recorded as errors).

    Args:
        port: the server's loopback port.
        request: the raw request (see :func:`build_request`).
        concurrency: connections, each sending its requests one after another.
        requests: total request budget.
        time_limit: seconds after which no new request starts.
        read_timeout: longest silence tolerated on a connection, seconds.
        progress: counters to update live (a fresh one if ``None``).
        stamps: a paced stream's stamps per response: each is timed, and a response with fewer fails.
        stagger: each connection starts after a random wait of up to this many seconds (paced streams,
            so that their chunks do not all arrive at once).
    """
    progress = progress or Progress()
    samples: list[Sample] = []
    budget = [requests]
    start = time.perf_counter()
    deadline = start + time_limit
    cpu_start = _cpu()
    sent_before = progress.sent

    def worker() -> None:
        sock = None
        if stagger:
            gevent.sleep(random.uniform(0, stagger))
        try:
            while budget[0] > 0 and time.perf_counter() < deadline:
                budget[0] -= 1
                sample, sock = _exchange(sock, port, request, read_timeout, progress, stamps)
                samples.append(sample)
        finally:
            if sock is not None:
                sock.close()

    greenlets = [gevent.spawn(worker) for _ in range(concurrency)]
    gevent.joinall(greenlets, timeout=time_limit + read_timeout + 5)
    gevent.killall(greenlets, block=True, timeout=5)
    wall = time.perf_counter() - start
    lost = progress.sent - sent_before - len(samples)
    samples += [Sample(False, None, None, wall, "abandoned at the time limit")] * lost
    return LoadResult(samples, wall, _cpu() - cpu_start, progress)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _connect(port: int, timeout: float) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _exchange(sock: socket.socket | None, port: int, request: bytes, read_timeout: float,
              progress: Progress, stamps: int | None = None) -> tuple[Sample, socket.socket | None]:
    """Send one request (connecting first if ``sock`` is ``None``) and read its response (timing each of
    ``stamps`` stamps, if given).

    Returns:
        The sample, and the connection if it can carry the next request (else
        it is closed and ``None`` is returned).
    """
    t0 = time.perf_counter()
    progress.sent += 1
    ttfb = ttfc = None
    try:
        if sock is None:
            sock = _connect(port, read_timeout)
        sock.sendall(request)
        buf = b""
        while True:
            data = sock.recv(RECV_BYTES)
            if not data:
                raise ConnectionError("connection closed before the response headers")
            if ttfb is None:
                ttfb = time.perf_counter() - t0
                progress.open += 1
            buf += data
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                break
        head = buf[:end].lower()
        status = int(head[9:12])
        keep = b"connection: close" not in head
        if b"transfer-encoding: chunked" not in head:
            return _fixed_length(sock, head, buf[end + 4:], status, t0, ttfb), _kept(sock, keep)
        data = buf[end + 4:]
        scan = data
        tail = b"\r\n"
        delays: list[int] = []
        timing = _Stamps(delays) if stamps is not None else None
        while True:
            if timing is not None:
                timing.read(data)
            if ttfc is None and FIRST_CONTENT.search(scan):
                ttfc = time.perf_counter() - t0
                scan = b""
            tail = data[-TAIL_BYTES:] if len(data) >= TAIL_BYTES else (tail + data)[-TAIL_BYTES:]
            if tail.endswith(LAST_CHUNK):
                break
            data = sock.recv(RECV_BYTES)
            if not data:
                raise ConnectionError("connection closed mid-response")
            if ttfc is None:
                scan = scan[-64:] + data
        total = time.perf_counter() - t0
        if status != 200:
            error = f"HTTP {status}"
        elif b'"error":' in tail:
            error = "error frame"
        elif b"data: [DONE]" not in tail:
            error = "no [DONE]"
        elif stamps is not None and len(delays) != stamps:
            error = f"{len(delays)} of {stamps} stamps"
        else:
            error = ""
        return Sample(not error, ttfb, ttfc, total, error, delays), _kept(sock, keep)
    except (OSError, ValueError) as exc:
        if sock is not None:
            sock.close()
        return Sample(False, ttfb, ttfc, time.perf_counter() - t0, f"{type(exc).__name__}: {exc}"), None
    finally:
        if ttfb is not None:
            progress.open -= 1
        progress.done += 1


class _Stamps:
    """The delay of each stamp in a response's bytes as they are received (a stamp cut by a receive is
    timed at the receive that completes it)."""

    __slots__ = ("delays", "_rest")

    def __init__(self, delays: list[int]) -> None:
        self.delays = delays
        self._rest = b""

    def read(self, data: bytes) -> None:
        """Time the stamps ``data`` completes, now."""
        now = time.monotonic_ns() // 1000 % STAMP_MODULUS
        data = self._rest + data
        cut = data.rfind(b"@", len(data) - STAMP_BYTES + 1)  # a stamp that may still be arriving
        self._rest, data = (data[cut:], data[:cut]) if cut >= 0 else (b"", data)
        self.delays += [(now - int(match)) % STAMP_MODULUS for match in STAMP.findall(data)]


def _kept(sock: socket.socket, keep: bool) -> socket.socket | None:
    """``sock`` if the server keeps the connection alive, else close it and return ``None``."""
    if keep:
        return sock
    sock.close()
    return None


def _fixed_length(sock: socket.socket, head: bytes, body: bytes, status: int, t0: float,
                  ttfb: float) -> Sample:
    """Finish reading a ``Content-Length`` response (error answers); never ok for a stream."""
    match = re.search(rb"content-length: *(\d+)", head)
    length = int(match.group(1)) if match else 0
    while len(body) < length:
        data = sock.recv(RECV_BYTES)
        if not data:
            break
        body += data
    detail = body[:120].decode("utf-8", "replace")
    return Sample(False, ttfb, None, time.perf_counter() - t0, f"HTTP {status} (not a stream): {detail}")
