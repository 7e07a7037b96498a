"""A real ``redis-server`` for tests: found or installed (Debian's package), started on a free loopback port
in a temporary directory, stopped, paused or restarted by the test, never left running.

``python -m support.redis_server --install`` (run by ``make test``) installs the server when it is missing
and this machine can (root with ``apt-get``); :func:`redis_server_binary` does the same for a plain
``pytest`` run and answers ``None`` with the reason where it cannot.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from support.debian import debian_binary
from support.server import _die_with_parent, _PRCTL, free_port  # type: ignore[attr-defined]

START_TIMEOUT = 10.0


def redis_server_binary() -> tuple[str | None, str]:
    """``(path, "")`` of the ``redis-server`` on PATH, installed first with ``apt-get`` when missing;
    ``(None, why)`` where it cannot be had."""
    return debian_binary("redis-server", "redis-server")


class RedisServer:
    """One ``redis-server`` process on a loopback port with its data (append-only file) in a temp directory.

    Args:
        binary: the ``redis-server`` executable.
    """

    def __init__(self, binary: str):
        self.binary = binary
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._dir = tempfile.TemporaryDirectory(prefix="toolwire-redis-")
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server (again, on the same port and data) and wait until it answers ``PING``."""
        command = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self._dir.name,
                   "--save", "", "--appendonly", "yes", "--protected-mode", "yes", "--daemonize", "no",
                   "--logfile", os.path.join(self._dir.name, "redis.log")]
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True,
                                         preexec_fn=_die_with_parent if _PRCTL is not None else None)
        deadline = time.monotonic() + START_TIMEOUT
        client = redis.Redis.from_url(self.url, socket_timeout=1, socket_connect_timeout=1)
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.RedisError:
                    if self._process.poll() is not None or time.monotonic() > deadline:
                        self.stop()
                        raise RuntimeError(f"redis-server did not start:\n{self.log()[-2000:]}") from None
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL); its data stays for :meth:`start`."""
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGCONT)  # a paused server cannot handle SIGTERM
            process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    @property
    def running(self) -> bool:
        """Whether the server process is started (it may be paused)."""
        return self._process is not None

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): connections are accepted by the kernel, nothing is answered."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Undo :meth:`pause` (nothing when the server is stopped)."""
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def client(self) -> redis.Redis:
        """A client of this server (the test closes it)."""
        return redis.Redis.from_url(self.url, socket_timeout=5)

    def flush(self) -> None:
        """Forget every key."""
        with contextlib.closing(self.client()) as client:
            client.flushall()

    def log(self) -> str:
        """The server's log so far."""
        with contextlib.suppress(OSError):
            return Path(self._dir.name, "redis.log").read_text(errors="replace")
        return ""

    def close(self) -> None:
        """Stop the server and delete its directory."""
        self.stop()
        self._dir.cleanup()

    def __enter__(self) -> "RedisServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    if "--install" in sys.argv:
        binary, reason = redis_server_binary()
        print(f"redis-server: {binary}" if binary else f"redis-server unavailable, its tests will skip: {reason}")
