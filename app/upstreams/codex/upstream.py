"""CodexUpstream: the Codex app-server as a text back end (implements ``app.upstreams.base.Upstream``).

One app-server per worker process, started on first use (so after gunicorn forks), replaced when it
dies, and recycled after ``recycle_after`` requests (the old one finishes its threads first). Every
request gets its own ephemeral thread: the flattened transcript's system message becomes the thread's
base instructions, the earlier turns are injected verbatim, the last user turn starts the turn, and
the turn's notifications become :class:`UpstreamChunk` objects. The thread is released at the end;
a turn still running then (client gone, ``stop``/``max_tokens`` reached) is interrupted first.

Codex has no sampling parameters. ``stop`` and ``max_tokens``/``max_completion_tokens`` are emulated
here (the turn is interrupted when one is reached; finish ``stop``/``length``), ``n`` > 1 is refused
(400, ``param: n``), so are native ``tools`` (400; tool mode ``auto`` then falls back to prompt mode), and
every other Chat parameter (``temperature``, ``top_p``, ``seed``, …) is
ignored. ``reasoning_effort`` becomes the turn's effort, a ``json_schema`` ``response_format`` its output
schema.
"""

from __future__ import annotations

import logging
import math
import os
import time
from typing import Any, Iterator, overload

import gevent
import orjson
from gevent.lock import Semaphore
from gevent.queue import Empty, Queue

from ...observability.metrics import UPSTREAM_ERRORS
from ..base import IDLE, PAUSE, ChoiceDelta, Pause, UpstreamChunk, UpstreamError, redact
from .appserver import GONE, LINE_TOO_LONG, AppServer, AppServerError, AppServerGone
from .backoff import StartBackoff
from .emulation import StopRules
from .errors import codex_error, codex_refusal
from .home import CodexHome, app_server_env, toml_string
from .transcript import output_schema, split_transcript

log = logging.getLogger("toolwire.upstreams.codex")

#: Longest wait for the app-server to start and answer ``initialize``.
START_TIMEOUT = 30.0
#: How much of a failed turn's message (the provider's error page, say) the log keeps.
_LOGGED_ERROR_CHARS = 2000
#: Items a plain text turn may start; anything else (``contextCompaction``, tool calls) is a protocol error.
_EXPECTED_ITEMS = frozenset({"userMessage", "agentMessage", "reasoning"})
_REASONING_DELTAS = frozenset({"item/reasoning/summaryTextDelta", "item/reasoning/textDelta"})
#: Notifications that show the model answered (or that the turn ended): ``open`` returns at the first.
_FIRST_OUTPUT = frozenset({"item/agentMessage/delta", "turn/completed", "error", *_REASONING_DELTAS})


class CodexUpstream:
    """The Codex app-server back end.

    Args:
        executable: the native ``codex`` binary (see :func:`~.home.resolve_command`).
        home: the generated private Codex home.
        provider_key: the custom provider's API key, if any (only the app-server's environment sees it).
        read_timeout: longest silence from a running turn, seconds (→ 504).
        rpc_timeout: longest wait for a control request (``thread/start``, ``turn/start``, …), seconds;
            an app-server that takes longer is hung: it is killed and every request on it gets a 502.
        recycle_after: requests per app-server before it is replaced (0 = never).
        max_turns: threads open at once per worker (0 = no limit); more are refused with 429.
        max_line_bytes: the longest line read from an app-server (a longer delta or error fails its request).
    """

    def __init__(self, executable: str, home: CodexHome, *, provider_key: str | None = None,
                 read_timeout: float = 300.0, rpc_timeout: float = 10.0, recycle_after: int = 1000,
                 max_turns: int = 0, max_line_bytes: int = 8 * 1024 * 1024):
        self.executable = executable
        self.home = home
        self._provider_key = provider_key
        self.read_timeout = read_timeout
        self.rpc_timeout = rpc_timeout
        self.recycle_after = recycle_after
        self.max_turns = max_turns
        self.max_line_bytes = max_line_bytes
        self._server: AppServer | None = None
        self._pid: int | None = None
        self._generation = 0
        self._start_lock = Semaphore()
        self._backoff = StartBackoff()
        self._open_turns = 0

    # --- the Upstream protocol ------------------------------------------------------

    def open(self, body: dict[str, Any], *, request_id: str | None = None) -> "CodexStream":
        """Start a thread and a turn for the Chat ``body``; return once the model answered or failed.

        Raises:
            UpstreamError: a parameter Codex cannot serve (400), too many turns (429), the app-server
                could not be started or refused the turn (502), or the model failed before its first
                token (mapped like an HTTP upstream's answer).
        """
        try:
            n = body.get("n")
            if isinstance(n, int) and n > 1:
                raise UpstreamError("client_error", "The Codex back end produces one choice; n must be 1.",
                                    status=400, param="n")
            if body.get("tools") or body.get("functions"):  # native tool mode: Codex takes no tool manifest
                raise UpstreamError("client_error", "The Codex back end does not support tools natively; use "
                                    "tool mode prompt (or auto) for its models.", status=400, param="tools")
            model = str(body.get("model") or self.home.models[0])
            if model not in self.home.models:  # Codex would run it on fallback metadata, which compacts history
                raise UpstreamError("client_error", f"The model {model!r} is not one Codex serves here "
                                    f"({', '.join(self.home.models)}); map it with TOOLWIRE_MODEL_MAP or set "
                                    "TOOLWIRE_DEFAULT_UPSTREAM_MODEL.", status=404, param="model",
                                    code="model_not_found")
            if self.max_turns and self._open_turns >= self.max_turns:
                raise UpstreamError("rate_limited", "All Codex turns of this worker are busy; retry shortly.",
                                    status=429, retry_after="1")
            stream = CodexStream(self, self._acquire(), StopRules.from_body(body), request_id)
            try:
                stream.start(model, body)
            except BaseException:
                stream.close()
                raise
        except UpstreamError as exc:
            self._counted(exc)
            raise
        return stream

    def models(self) -> list[dict[str, Any]]:
        """The models Codex offers (``model/list``, which returns toolwire's catalog)."""
        try:
            result = self._acquire().call("model/list", {}, timeout=self.rpc_timeout)
        except (AppServerError, AppServerGone) as exc:
            failed = UpstreamError("server_error", f"The Codex app-server failed model/list: {exc}")
            raise self._counted(failed) from None
        except UpstreamError as exc:
            raise self._counted(exc) from None
        return [{"id": m["id"], "object": "model", "created": 0, "owned_by": "codex"}
                for m in (result or {}).get("data") or () if isinstance(m, dict) and m.get("id")]

    def ready(self) -> bool:
        """Whether the app-server runs (starting it if needed) and answers ``model/list`` within 3 s."""
        try:
            self._acquire().call("model/list", {}, timeout=3.0)
        except (UpstreamError, AppServerError, AppServerGone):
            return False
        return True

    def close(self) -> None:
        """Stop this worker's app-server."""
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    # --- app-server lifecycle -------------------------------------------------------

    def _acquire(self) -> AppServer:
        """This worker's live app-server, started (or replaced, or recycled) as needed."""
        server = self._server
        if server is not None and server.alive and self._pid == os.getpid() and not self._worn_out(server):
            return server
        with self._start_lock:
            server = self._server
            if server is None or not server.alive or self._pid != os.getpid() or self._worn_out(server):
                if server is not None and self._pid == os.getpid():
                    self._retire(server)
                self._server = None  # retired already, whether or not the next start works
                self._server = server = self._start_or_back_off()
                self._pid = os.getpid()
        return server

    def _start_or_back_off(self) -> AppServer:
        """A new app-server; after failed starts, 503 at once until the backoff's wait is over.

        Raises:
            UpstreamError: ``connect`` (503, ``Retry-After``): the start failed, or a wait is on.
        """
        left = self._backoff.left(time.monotonic())
        if left:
            raise UpstreamError("connect", "The Codex app-server failed to start; toolwire tries again shortly.",
                                status=503, retry_after=str(math.ceil(left)))
        try:
            server = self._start()
        except UpstreamError as exc:
            wait = self._backoff.failed(time.monotonic())
            log.warning("codex app-server start failed %d time(s) in a row: the next try in %g s",
                        self._backoff.failures, wait)
            exc.retry_after = str(math.ceil(wait))
            raise
        self._backoff.succeeded()
        return server

    def _counted(self, exc: UpstreamError) -> UpstreamError:
        """``exc`` counted, the provider key masked out of it in place: Codex and its provider may quote the
        key (an echoed request, a stderr line), as an HTTP upstream may."""
        UPSTREAM_ERRORS.labels(exc.kind).inc()
        return exc.redacted(self._provider_key)

    def _worn_out(self, server: AppServer) -> bool:
        return bool(self.recycle_after) and server.served >= self.recycle_after

    def _start(self) -> AppServer:
        self._generation += 1
        name = f"{os.getpid()}-{self._generation}"
        sqlite_home = self.home.state_dir(name)
        argv = [self.executable, "app-server", "--strict-config", "-c", f"sqlite_home={toml_string(str(sqlite_home))}"]
        try:
            server = AppServer(argv, env=app_server_env(self.home.path, self._provider_key), cwd=str(self.home.path),
                               name=name, state_dir=sqlite_home, secret=self._provider_key,
                               max_line_bytes=self.max_line_bytes)
        except OSError as exc:
            log.error("could not start the codex app-server %s: %s", name, exc)
            raise UpstreamError("connect", "The Codex app-server did not start; the reason is in toolwire's log.",
                                status=503) from None
        try:
            server.initialize(timeout=START_TIMEOUT)
        except (AppServerGone, AppServerError) as exc:
            server.stop(timeout=1)  # its state directory goes too: a crash loop leaves none behind
            log.error("codex app-server %s did not start: %s; stderr: %s", name, exc, server.stderr_tail()[-1000:])
            raise UpstreamError("connect", "The Codex app-server did not start; the reason is in toolwire's log.",
                                status=503) from None
        log.info("codex app-server %s started (pid %s)", name, server.pid)
        return server

    def _retire(self, server: AppServer) -> None:
        """Let ``server`` finish its open threads, then stop it and delete its state directory."""
        server.retired = True
        gevent.spawn(self._drain, server)

    @staticmethod
    def _drain(server: AppServer) -> None:
        while server.active and server.alive:
            gevent.sleep(0.1)
        server.stop()
        log.info("codex app-server %s retired after %d requests", server.name, server.served)

    def _turn_opened(self, server: AppServer) -> None:
        server.served += 1
        server.active += 1
        self._open_turns += 1

    def _turn_closed(self, server: AppServer) -> None:
        server.active -= 1
        self._open_turns -= 1


class CodexStream:
    """One request's thread and turn: iterate :class:`UpstreamChunk` objects, then (or on abandon) close."""

    def __init__(self, upstream: CodexUpstream, server: AppServer, rules: StopRules, request_id: str | None):
        self._upstream = upstream
        self._request_id = request_id
        self._server = server
        self._rules = rules
        self._queue: Queue | None = None
        self._thread_id: str | None = None
        self._turn_id: str | None = None
        self._turn_open = False  # Codex's turn started and has not completed
        self._interrupted = False
        self._finished = False  # the answer ended (naturally, by a stop rule, or by an error)
        self._first: dict[str, Any] | None = None  # the notification read ahead by start()
        self._usage: dict[str, Any] | None = None
        self._model_answers = 0  # model answers that finished (Codex reports usage once for each)
        self._text_sent = False
        self._closed = False
        self._pauses = False
        self._tick: float | None = None
        self._silent_since: float | None = None
        upstream._turn_opened(server)

    def plain_texts(self, *, join: bool = False) -> None:
        """Nothing to do: every chunk is built from an app-server notification anyway (see
        :meth:`~app.upstreams.base.UpstreamStream.plain_texts`)."""

    def pause_every(self, tick: float | None) -> None:
        """See :meth:`~app.upstreams.base.UpstreamStream.pause_every`."""
        self._pauses = True
        self._tick = tick

    def confirm(self) -> None:
        """Nothing to do: a Codex turn is never opened in native tool mode, the only one that confirms."""

    def start(self, model: str, body: dict[str, Any]) -> None:
        """Start the thread and turn, then wait for the model's first output (or failure).

        Like an HTTP upstream's status line, a model that fails before it answers is refused before the
        client gets a byte.
        """
        system, history, last = split_transcript(body.get("messages") or [])
        thread = self._call("thread/start", {"ephemeral": True, "model": model, "baseInstructions": system})
        self._thread_id = thread["thread"]["id"]
        self._queue = self._server.subscribe(self._thread_id)
        if history:
            self._call("thread/inject_items", {"threadId": self._thread_id, "items": history})
        turn_params: dict[str, Any] = {"threadId": self._thread_id, "input": last}
        effort = body.get("reasoning_effort")
        if isinstance(effort, str):
            turn_params["effort"] = effort
        schema = output_schema(body.get("response_format"))
        if schema is not None:  # Codex asks the model for JSON matching it (strict structured output)
            turn_params["outputSchema"] = schema
        turn = self._call("turn/start", turn_params)
        self._turn_id, self._turn_open = turn["turn"]["id"], True
        deadline = time.monotonic() + self._upstream.read_timeout  # what arrives meanwhile does not extend it
        while True:
            try:
                message = self._received(self._queue.get(timeout=max(0.0, deadline - time.monotonic())))
            except Empty:
                raise UpstreamError("timeout", "Codex's model sent no output within the read timeout.",
                                    status=504) from None
            method, params = message.get("method"), message.get("params") or {}
            if method == "error" and params.get("willRetry"):
                continue  # Codex retries before any text went out: nothing to undo
            self._check_plain_turn(method, params)
            if method in _FIRST_OUTPUT or (method == "item/started"
                                           and (params.get("item") or {}).get("type") != "userMessage"):
                self._first = message
                if method in ("turn/completed", "error"):
                    self._check_failure(message)
                return

    def __iter__(self) -> Iterator[UpstreamChunk | Pause]:
        try:
            while not self._finished:
                message, self._first = self._first, None
                if message is None:
                    if self._pauses and self._queue is not None and self._queue.empty():
                        yield PAUSE
                        while (message := self._next(self._tick)) is None:
                            yield IDLE
                    else:
                        message = self._next()
                chunk = self._handle(message)
                if chunk is not None:
                    yield chunk
        except UpstreamError as exc:
            self._upstream._counted(exc)
            raise

    def close(self) -> None:
        """Release the thread (interrupting a running turn first) without blocking the caller."""
        if not self._closed:
            self._closed = True
            gevent.spawn(self._release)

    # --- reading the turn -----------------------------------------------------------

    def _handle(self, message: dict[str, Any]) -> UpstreamChunk | None:
        method, params = message.get("method"), message.get("params") or {}
        self._check_plain_turn(method, params)
        if method == "item/agentMessage/delta":
            text, reason = self._rules.feed(params.get("delta") or "")
            if reason is not None:  # stop or max_tokens reached: the rest of the turn is not wanted
                self._finished = True
                self._interrupt()
                return UpstreamChunk([ChoiceDelta(content=text or None, finish_reason=reason,
                                                  stop_sequence=self._rules.matched)])
            if text:
                self._text_sent = True
                return UpstreamChunk([ChoiceDelta(content=text)])
        elif method in _REASONING_DELTAS:
            return UpstreamChunk([ChoiceDelta(reasoning=params.get("delta") or "")])
        elif method == "thread/tokenUsage/updated":
            last = (params.get("tokenUsage") or {}).get("last") or {}
            prompt, completion = last.get("inputTokens"), last.get("outputTokens")
            if isinstance(prompt, int) and isinstance(completion, int):
                self._usage = {"prompt_tokens": prompt, "completion_tokens": completion,
                               "total_tokens": prompt + completion}
        elif method == "error":
            if params.get("willRetry") and self._text_sent:
                raise UpstreamError("server_error", "The model stream was cut and Codex would replay it; "
                                                    "toolwire ends the response instead.")
        elif method == "turn/completed":
            self._check_failure(message)
            self._finished = True
            tail = self._rules.flush()
            return UpstreamChunk([ChoiceDelta(content=tail or None, finish_reason="stop")], usage=self._usage)
        return None

    def _check_plain_turn(self, method: Any, params: dict[str, Any]) -> None:
        """Refuse a turn that is not one model answer of text: an item of another kind (a compaction, a tool
        call), or a second model request. A model that calls tools though it was offered none makes Codex
        answer "unsupported call" and ask it again, in a loop with no end; it is stopped at the second request
        (the raise ends the answer, and closing the stream interrupts the turn)."""
        if method == "item/started":
            kind = (params.get("item") or {}).get("type")
            if kind not in _EXPECTED_ITEMS:
                raise UpstreamError("protocol", f"Codex started a {kind} item, which a plain text turn never has "
                                                "(toolwire refuses compacted or tool-using turns).")
        elif method != "thread/tokenUsage/updated":
            return
        if self._model_answers:  # usage comes once per model answer: anything after it is another request
            raise UpstreamError("protocol", "The model behind Codex called a tool of its own (it is offered none), "
                                            "so Codex asked it again; toolwire ended the turn.",
                                code="upstream_tool_loop")
        if method == "thread/tokenUsage/updated":
            self._model_answers += 1

    def _check_failure(self, message: dict[str, Any]) -> None:
        """Raise the mapped error of a failed turn (or of an ``error`` notification that ends one)."""
        params = message.get("params") or {}
        if message.get("method") == "error":
            raise self._failed(params.get("error"))
        self._turn_open = False
        turn = params.get("turn") or {}
        if turn.get("status") == "failed":
            raise self._failed(turn.get("error"))
        if turn.get("status") == "interrupted":
            raise UpstreamError("server_error", "The Codex turn was interrupted.")

    def _failed(self, error: Any) -> UpstreamError:
        """The client's error for a failed turn; Codex's own words, which quote the provider, are logged."""
        detail = error.get("message") if isinstance(error, dict) else error
        info = error.get("codexErrorInfo") if isinstance(error, dict) else None
        log.warning("codex turn failed (%s): %s", orjson.dumps(info).decode(),
                    redact(str(detail)[:_LOGGED_ERROR_CHARS], self._upstream._provider_key),
                    extra={"request_id": self._request_id})
        return codex_error(error, self._request_id)

    @overload
    def _next(self) -> dict[str, Any]: ...

    @overload
    def _next(self, tick: float | None) -> dict[str, Any] | None: ...

    def _next(self, tick: float | None = None) -> dict[str, Any] | None:
        """The turn's next notification; ``None`` when ``tick`` seconds passed without one (within the
        read timeout, which counts the whole silence). Without a tick it waits the whole read timeout."""
        assert self._queue is not None
        limit = self._upstream.read_timeout
        wait = min(tick, limit) if tick else limit
        try:
            message = self._queue.get(timeout=wait)
        except Empty:
            now = time.monotonic()
            if self._silent_since is None:
                self._silent_since = now - wait
            if now - self._silent_since < limit:
                return None
            raise UpstreamError("timeout", "The Codex turn sent nothing within the read timeout.", status=504) from None
        self._silent_since = None
        return self._received(message)

    def _received(self, message: dict[str, Any]) -> dict[str, Any]:
        """``message`` from the turn's queue, its end noted (:data:`GONE` raises)."""
        if message is GONE:
            self._turn_open = False
            raise UpstreamError("server_error", "The Codex app-server exited during the turn.")
        if message.get("method") == LINE_TOO_LONG:
            size, limit = message["params"]["bytes"], message["params"]["limit"]
            raise UpstreamError("protocol", f"Codex sent a message of {size} bytes, over the {limit} allowed "
                                            "(TOOLWIRE_UPSTREAM_MAX_EVENT_BYTES); toolwire stopped reading it.",
                                code="upstream_too_large")
        if message.get("method") == "turn/completed":
            self._turn_open = False
        return message

    # --- control --------------------------------------------------------------------

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        try:
            return self._server.call(method, params, timeout=self._upstream.rpc_timeout)
        except AppServerGone as exc:
            raise UpstreamError("server_error", str(exc)) from None
        except AppServerError as exc:
            raise codex_refusal(method, exc.message, exc.data) from None

    def _interrupt(self) -> None:
        """Ask Codex to stop the turn now (which closes the model request); do not wait for the answer."""
        if self._turn_open and not self._interrupted:
            self._interrupted = True
            try:
                self._server.send("turn/interrupt", {"threadId": self._thread_id, "turnId": self._turn_id})
            except AppServerGone:
                pass

    def _release(self) -> None:
        """Interrupt a running turn, wait for its end, unsubscribe the thread (which unloads it)."""
        server = self._server
        try:
            if self._thread_id is None:
                return
            if self._turn_open:
                self._interrupt()
                self._await_completion()
            server.call("thread/unsubscribe", {"threadId": self._thread_id}, timeout=self._upstream.rpc_timeout)
        except (AppServerGone, AppServerError) as exc:
            log.debug("codex thread %s released with an error: %s", self._thread_id, exc)
        finally:
            if self._thread_id is not None:
                server.unsubscribe(self._thread_id)
            self._upstream._turn_closed(server)

    def _await_completion(self) -> None:
        """Read the queue until the interrupted turn completes (or the process is gone), within the RPC timeout."""
        assert self._queue is not None
        with gevent.Timeout(self._upstream.rpc_timeout, False):
            while self._turn_open:
                message = self._queue.get()
                if message is GONE or message.get("method") == "turn/completed":
                    self._turn_open = False
