"""One ``codex app-server`` process and the JSON-RPC connection to it over stdio, gevent-friendly.

The wire is JSON-RPC 2.0 without the ``"jsonrpc"`` field, one object per line. The pipes are gevent's
cooperative pipes, so a request waiting on Codex never blocks the worker's other greenlets. One reader
greenlet parses stdout: a response wakes the caller waiting on its id; a notification goes to the queue
of the thread it names (``params.threadId``); a request from the server (an approval, a tool call) is
refused at once, since toolwire's threads have no tools. When the process ends, every waiting call and
every subscribed thread learns it (:class:`AppServerGone`).
"""

from __future__ import annotations

import collections
import itertools
import logging
import re
import shutil
from pathlib import Path
from typing import Any

import gevent
import orjson
from gevent import subprocess as gsubprocess
from gevent.event import AsyncResult
from gevent.lock import Semaphore
from gevent.queue import Queue

from ..base import redact

log = logging.getLogger("toolwire.upstreams.codex")

#: What a thread's queue receives once the process is gone (after any notifications already routed).
GONE = {"method": "toolwire/appServerGone", "params": {}}
#: Notifications toolwire never reads: Codex leaves them out of this connection.
_QUIET = ["account/rateLimits/updated", "thread/status/changed", "item/completed", "configWarning",
          "remoteControl/status/changed", "thread/started", "thread/closed", "warning",
          "mcpServer/startupStatus/updated"]
_STDERR_LINES = 20
#: The reader yields to the other greenlets every this many lines: a pipe that always has data never blocks.
_COOPERATE_EVERY = 64
#: What a thread's queue receives instead of a notification longer than the bound (``params``: bytes, limit).
LINE_TOO_LONG = "toolwire/lineTooLong"
#: Of an over-long line: the start kept (its method, the id of a response, an item's type), the rest read
#: this many bytes at a time, and the window its thread id is looked for in across two reads.
_HEAD_BYTES = 4096
_SKIP_BYTES = 256 * 1024
_WINDOW_BYTES = 128
_THREAD_ID = re.compile(rb'"threadId":"([^"\\]{1,100})"')
_METHOD = re.compile(rb'\{"method":"([^"\\]+)"')
_RESPONSE_ID = re.compile(rb'\{"id":(\d{1,18})[,}]')
_ITEM_TYPE = re.compile(rb'"item":\{"type":"([A-Za-z]{1,64})"')


class AppServerError(Exception):
    """Codex answered a request with a JSON-RPC error."""

    def __init__(self, error: Any):
        self.message = str(error.get("message") if isinstance(error, dict) else error)
        data = error.get("data") if isinstance(error, dict) else None
        self.data: dict[str, Any] = data if isinstance(data, dict) else {}  # e.g. input_error_code, max_chars
        super().__init__(self.message)


class AppServerGone(Exception):
    """The app-server process is gone (exited, killed, or stopped answering)."""


class AppServer:
    """A running app-server.

    Args:
        argv: the command (``[binary, "app-server", …]``).
        env: its environment (``CODEX_HOME`` and the provider key).
        cwd: its working directory.
        name: how it is named in logs.
        state_dir: a directory of its own that :meth:`stop` deletes (Codex's state and TRACE log).
        secret: the provider key, masked out of the stderr lines kept (which are logged and quoted in errors).
        max_line_bytes: the longest line of stdout held (a longer one is read past, see :meth:`_route_overlong`).

    Attributes:
        served: requests (threads) started on it so far.
        active: threads open on it right now.
        retired: it is being (or was) stopped on purpose: its end is not logged as a failure.
    """

    def __init__(self, argv: list[str], *, env: dict[str, str], cwd: str, name: str,
                 state_dir: Path | None = None, secret: str | None = None, max_line_bytes: int = 8 * 1024 * 1024):
        self.name = name
        self.max_line_bytes = max_line_bytes
        self._secret = secret
        self.state_dir = state_dir
        self.served = 0
        self.active = 0
        self.retired = False
        self._ids = itertools.count(1)
        self._pending: dict[int, AsyncResult] = {}
        self._threads: dict[str, Queue] = {}
        self._write_lock = Semaphore()
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self._gone = False
        self._process = gsubprocess.Popen(argv, stdin=gsubprocess.PIPE, stdout=gsubprocess.PIPE,
                                          stderr=gsubprocess.PIPE, env=env, cwd=cwd)
        self.pid = self._process.pid
        self._reader = gevent.spawn(self._read_stdout)
        self._stderr_reader = gevent.spawn(self._read_stderr)

    @property
    def alive(self) -> bool:
        """Whether the process still runs and its stdout is open."""
        return not self._gone and self._process.poll() is None

    def initialize(self, timeout: float) -> None:
        """The ``initialize`` handshake (then the ``initialized`` notification).

        Raises:
            AppServerGone: the process exited or did not answer within ``timeout`` (it is then killed).
        """
        self.call("initialize", {
            "clientInfo": {"name": "toolwire", "title": "toolwire", "version": "1"},
            "capabilities": {"experimentalApi": False, "optOutNotificationMethods": _QUIET},
        }, timeout=timeout)
        self.notify("initialized")

    def call(self, method: str, params: dict[str, Any], *, timeout: float) -> Any:
        """Send a request and wait for its result.

        Raises:
            AppServerError: Codex refused the request.
            AppServerGone: the process is gone, or hung: no answer within ``timeout`` kills it, so every
                other caller learns at once too.
        """
        request_id = next(self._ids)
        waiter = self._pending[request_id] = AsyncResult()
        try:
            self._write({"method": method, "id": request_id, "params": params})
            try:
                return waiter.get(timeout=timeout)
            except gevent.Timeout:
                self.kill(f"no answer to {method} within {timeout:g} s")
                raise AppServerGone(f"The Codex app-server did not answer {method} within {timeout:g} s.") from None
        finally:
            self._pending.pop(request_id, None)

    def send(self, method: str, params: dict[str, Any]) -> None:
        """Send a request without waiting: its answer is dropped when it comes."""
        self._write({"method": method, "id": next(self._ids), "params": params})

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification (no answer)."""
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = params
        self._write(message)

    def subscribe(self, thread_id: str) -> Queue:
        """The queue that receives ``thread_id``'s notifications from now on (:data:`GONE` last if the process ends)."""
        queue = self._threads[thread_id] = Queue()
        if self._gone:
            queue.put(GONE)
        return queue

    def unsubscribe(self, thread_id: str) -> None:
        """Stop routing ``thread_id``'s notifications."""
        self._threads.pop(thread_id, None)

    def stop(self, timeout: float = 5.0) -> None:
        """End the process: close its stdin (Codex exits), SIGKILL after ``timeout``; delete ``state_dir``."""
        self.retired = True
        if self._process.poll() is None:
            try:
                self._process.stdin.close()
                self._process.wait(timeout=timeout)
            except (OSError, gsubprocess.TimeoutExpired):
                self.kill("did not exit after stdin closed")
        self._process.wait()
        if self.state_dir is not None:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def kill(self, why: str) -> None:
        """SIGKILL the process (its stdout then ends and everyone waiting is told)."""
        log.warning("codex app-server %s (pid %s) killed: %s", self.name, self.pid, why)
        try:
            self._process.kill()
        except OSError:
            pass

    def stderr_tail(self) -> str:
        """The last lines the process wrote to stderr."""
        return "\n".join(self._stderr)

    # --- plumbing ---------------------------------------------------------------

    def _write(self, message: dict[str, Any]) -> None:
        if self._gone:
            raise AppServerGone("The Codex app-server is gone.")
        line = orjson.dumps(message) + b"\n"
        try:
            with self._write_lock:
                self._process.stdin.write(line)
                self._process.stdin.flush()
        except (OSError, ValueError):  # a closed pipe
            raise AppServerGone("The Codex app-server is gone.") from None

    def _read_stdout(self) -> None:
        stdout = self._process.stdout
        try:
            for count in itertools.count(1):
                line = stdout.readline(self.max_line_bytes + 1)  # never more held, however long the line
                if not line:
                    break
                if count % _COOPERATE_EVERY == 0:
                    gevent.sleep(0)
                if len(line) > self.max_line_bytes and not line.endswith(b"\n"):
                    self._route_overlong(line, stdout)
                    continue
                try:
                    message = orjson.loads(line)
                except orjson.JSONDecodeError:
                    log.warning("codex app-server %s wrote a non-JSON line: %.200r", self.name, line)
                    continue
                if isinstance(message, dict):
                    self._route(message)
        except OSError:
            pass
        finally:
            self._gone = True
            for waiter in list(self._pending.values()):
                waiter.set_exception(AppServerGone("The Codex app-server exited."))
            for queue in list(self._threads.values()):
                queue.put(GONE)
            try:
                code = self._process.wait(timeout=1)  # stdout ends just before the exit status is there
            except gsubprocess.TimeoutExpired:
                code = None
            if not self.retired:  # a crash, a kill, or the worker shutting down (exit 0)
                log.log(logging.INFO if code == 0 else logging.WARNING, "codex app-server %s (pid %s) ended (exit %s). "
                        "stderr: %s", self.name, self.pid, code, self.stderr_tail()[-1000:])

    def _route(self, message: dict[str, Any]) -> None:
        method, request_id = message.get("method"), message.get("id")
        if method is None:
            waiter = self._pending.get(request_id) if isinstance(request_id, int) else None
            if waiter is None:
                return
            if "error" in message:
                waiter.set_exception(AppServerError(message["error"]))
            else:
                waiter.set(message.get("result"))
            return
        if request_id is not None:  # a request from the server: toolwire's threads have no tools to approve
            gevent.spawn(self._refuse, request_id, method)
            return
        params = message.get("params") or {}
        thread_id = params.get("threadId") if isinstance(params, dict) else None
        queue = self._threads.get(thread_id) if isinstance(thread_id, str) else None
        if queue is not None:
            queue.put(message)

    def _route_overlong(self, line: bytes, stdout: Any) -> None:
        """Read past a line longer than :attr:`max_line_bytes` (``line`` is its start), a chunk at a time, and
        tell whom it was for.

        A line is one JSON object, so a raw ``"threadId":"`` (inside a string its quotes are escaped) names
        its thread wherever it comes. ``item/started`` echoes a user message whole, but toolwire reads only
        the item's type, which the line's start holds: that line goes on as just that. Any other notification
        (a delta, an error) fails its thread's turn; a response fails its call.
        """
        start, size = line[:_HEAD_BYTES], len(line)
        found, window = _THREAD_ID.search(line), line[-_WINDOW_BYTES:]
        while not line.endswith(b"\n"):
            line = stdout.readline(_SKIP_BYTES)
            if not line:
                break
            size += len(line)
            if found is None:
                window = window[-_WINDOW_BYTES:] + line
                found = _THREAD_ID.search(window)
            gevent.sleep(0)
        log.warning("codex app-server %s wrote a line of %d bytes, over the %d allowed (%.120r)",
                    self.name, size, self.max_line_bytes, start)
        method, kind = _METHOD.match(start), _ITEM_TYPE.search(start)
        if method is None:  # a response: {"id":N,…}
            answered = _RESPONSE_ID.match(start)
            waiter = self._pending.get(int(answered.group(1))) if answered else None
            if waiter is not None:
                waiter.set_exception(AppServerError({"message": f"Codex answered with {size} bytes, over the "
                                                                f"{self.max_line_bytes} allowed"}))
            return
        queue = self._threads.get(found.group(1).decode()) if found else None
        if queue is None:
            return
        if method.group(1) == b"item/started" and kind is not None:
            queue.put({"method": "item/started", "params": {"item": {"type": kind.group(1).decode()}}})
        else:
            queue.put({"method": LINE_TOO_LONG, "params": {"bytes": size, "limit": self.max_line_bytes}})

    def _refuse(self, request_id: Any, method: str) -> None:
        try:
            self._write({"id": request_id, "error": {"code": -32601, "message": f"toolwire does not serve {method}"}})
        except AppServerGone:
            pass

    def _read_stderr(self) -> None:
        try:
            for line in self._process.stderr:
                self._stderr.append(redact(line.decode("utf-8", "replace").rstrip(), self._secret))
        except OSError:
            pass
