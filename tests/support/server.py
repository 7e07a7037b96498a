"""Run toolwire under real gunicorn (gevent workers) for end-to-end tests.

``run_toolwire(env)`` is a context manager: it starts
``<venv>/bin/gunicorn -c gunicorn.conf.py wsgi:app --bind 127.0.0.1:<free port> --workers 1`` from
the project root with the given ``TOOLWIRE_*`` environment (``WEB_CONCURRENCY`` in it sets
``--workers``), waits until ``GET /healthz`` answers 200,
yields a ``ToolwireServer`` and finally stops the whole process group (SIGTERM, then SIGKILL).
``ServerPool`` keeps one server per distinct environment for a test session.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import httpx

PROJECT_ROOT = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).with_name("gunicorn")
#: How long a start may take before ``/healthz`` answers: three workers on a 2-core machine at load 16 took
#: over 20 s (gunicorn alone 7 s before it listened).
START_TIMEOUT = 60.0
STOP_TIMEOUT = 5.0
PR_SET_PDEATHSIG = 1


class ServerStartError(RuntimeError):
    """gunicorn did not come up; the message carries its stderr."""


@dataclass
class ToolwireServer:
    """A running toolwire.

    Fields:
        url: ``http://127.0.0.1:<port>``.
        process: the gunicorn master process.
        env: the ``TOOLWIRE_*`` settings it was started with.
        log_path: file receiving gunicorn's stdout and stderr.
    """

    url: str
    process: subprocess.Popen[bytes]
    env: dict[str, str]
    log_path: Path

    @property
    def v1_url(self) -> str:
        """The OpenAI base URL (``…/v1``)."""
        return self.url + "/v1"

    def log(self) -> str:
        """gunicorn's output so far."""
        return self.log_path.read_text(errors="replace")

    def worker_pids(self) -> list[int]:
        """The pids of the master's live child processes (its workers), from ``/proc``."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            return [int(pid) for pid in children.read_text().split()]
        except FileNotFoundError:
            return []

    @staticmethod
    def socket_inodes(pid: int) -> set[int]:
        """The inodes of the sockets process ``pid`` holds open (empty if it is gone)."""
        inodes = set()
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(FileNotFoundError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes.add(int(target[8:-1]))
        return inodes

    def worker_boots(self) -> int:
        """How many times gunicorn has booted a worker so far (a crashed worker is replaced)."""
        return self.log().count("Booting worker")


def free_port() -> int:
    """A loopback port that was free a moment ago (also usable as a dead port for refusal tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


#: /proc/net/tcp states in which the socket's owner has not closed it: ESTABLISHED, SYN_SENT, CLOSE_WAIT.
_OPEN_TCP_STATES = {"01", "02", "08"}


def open_client_sockets(port: int) -> set[int]:
    """The inodes of the client ends of TCP connections to ``127.0.0.1:port`` that their owner has not
    closed (a socket whose peer closed but its owner did not shows as ``CLOSE_WAIT``: a leak), from
    ``/proc/net/tcp``; match them against ``/proc/<pid>/fd`` to learn which process holds each."""
    remote = f"0100007F:{port:04X}"  # 127.0.0.1 in /proc's little-endian hex
    with open("/proc/net/tcp") as table:
        next(table)
        rows = [line.split() for line in table]
    return {int(row[9]) for row in rows if row[2] == remote and row[3] in _OPEN_TCP_STATES}


def _environment(settings: Mapping[str, str | None]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWIRE_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: str(v) for k, v in settings.items() if v is not None})
    return env


_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGTERM gunicorn when the thread that started it
    (the test process's main thread) dies, so a killed test run leaves no orphaned server behind.
    ``prctl`` is looked up at import time so the child only makes the call."""
    _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group gunicorn leads, then SIGKILL it if it is still there."""
    if process.poll() is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # a worker could outlive its master
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=STOP_TIMEOUT)


def run_to_end(command: Sequence[str], *, cwd: Path, env: Mapping[str, str],
               timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in its own process group to its end; past ``timeout`` seconds kill the whole group and
    fail the test with its output."""
    process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        import pytest

        pytest.fail(f"{command[0]} did not finish in {timeout:.0f} s\n{stdout[-3000:]}\n{stderr[-3000:]}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log_path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last_error = "no attempt"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerStartError(
                f"gunicorn exited with code {process.returncode} before /healthz answered.\n"
                f"--- gunicorn output ---\n{log_path.read_text(errors='replace')[-6000:]}"
            )
        try:
            response = httpx.get(url + "/healthz", timeout=1.0)
            if response.status_code == 200:
                return
            last_error = f"/healthz answered {response.status_code}"
        except httpx.HTTPError as exc:
            last_error = f"{type(exc).__name__}: {exc}"
        time.sleep(0.1)
    raise ServerStartError(
        f"toolwire /healthz not ready within {timeout:.0f} s ({last_error}).\n"
        f"--- gunicorn output ---\n{log_path.read_text(errors='replace')[-6000:]}"
    )


@contextlib.contextmanager
def run_toolwire(settings: Mapping[str, str | None], *, timeout: float = START_TIMEOUT,
                 launcher: Sequence[str] = (str(GUNICORN), "-c", "gunicorn.conf.py", "wsgi:app"),
                 cwd: Path = PROJECT_ROOT) -> Iterator[ToolwireServer]:
    """Start toolwire under gunicorn with ``settings`` added to the environment (``None`` values
    and every inherited ``TOOLWIRE_*`` variable are left out); yield it once ``/healthz`` is 200.

    ``launcher`` is the command before ``--bind``/``--workers`` (default the checkout's gunicorn
    command; ``toolwire serve`` takes the same options), run in ``cwd``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_file = tempfile.NamedTemporaryFile(prefix="toolwire-gunicorn-", suffix=".log", delete=False)
    log_path = Path(log_file.name)
    workers = settings.get("WEB_CONCURRENCY") or "1"
    command = [*launcher, "--bind", f"127.0.0.1:{port}", "--workers", workers]
    env = _environment(settings)
    try:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if _PRCTL is not None else None,
        )
    finally:
        log_file.close()
    try:
        _wait_healthy(url, process, log_path, timeout)
        yield ToolwireServer(url=url, process=process, env={k: v for k, v in env.items() if k.startswith("TOOLWIRE_")}, log_path=log_path)
    finally:
        _stop(process)
        log_path.unlink(missing_ok=True)


class ServerPool:
    """One toolwire per distinct settings mapping, kept until ``close()``.

    A failed start is remembered, so later tests asking for the same settings fail fast with the
    same message instead of waiting for gunicorn again.
    """

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._servers: dict[frozenset[tuple[str, str | None]], ToolwireServer | ServerStartError] = {}

    def get(self, settings: Mapping[str, str | None]) -> ToolwireServer:
        """The server for ``settings``, started on first use."""
        key = frozenset(settings.items())
        if key not in self._servers:
            try:
                self._servers[key] = self._stack.enter_context(run_toolwire(settings))
            except ServerStartError as exc:
                self._servers[key] = exc
        found = self._servers[key]
        if isinstance(found, ServerStartError):
            raise ServerStartError(str(found))
        return found

    def close(self) -> None:
        """Stop every server."""
        self._stack.close()
