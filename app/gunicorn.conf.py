"""gunicorn settings for toolwire: gevent workers for long-lived SSE streams.

``toolwire serve`` runs ``gunicorn -c <this file> app.wsgi:app`` from any
directory, so an installed toolwire (no checkout) serves the same way; the
checkout's ``gunicorn.conf.py`` loads this file. The dot in the name keeps it
from ever being imported as part of ``app`` (gunicorn's master must not import
the app: workers import it after gevent's patch). Every value can be overridden
on the command line; the environment variables below are read here.
"""

import gc
import html
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gunicorn.workers.ggevent import GeventWorker


def _whole_number(name, default, minimum):
    """The environment variable ``name`` (``default`` when unset) as an int of at least ``minimum``; else stop
    with one line naming it (not a traceback from the config file)."""
    raw = os.environ.get(name, default)
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or value < minimum:
        sys.exit(f"toolwire cannot start: {name} must be a whole number of at least {minimum}, not {raw!r}")
    return value


# gevent: one greenlet per request, so thousands of idle streams cost little. The worker class is defined
# below, here: the master must not import toolwire itself (the workers do, after gevent's patch).
workers = _whole_number("WEB_CONCURRENCY", "2", 1)
# An open connection costs a greenlet and a few KiB, so the ceiling is high: 2,000 idle or slow connections
# used to fill 1,000 per worker and lock every client out. Past it, a reverse proxy's per-client limits
# (docs/deploying.md, "Behind a reverse proxy").
worker_connections = _whole_number("TOOLWIRE_WORKER_CONNECTIONS", "10000", 1)
bind = os.environ.get("TOOLWIRE_BIND", "127.0.0.1:8000")
# A liveness heartbeat between master and worker, not a request-length limit.
timeout = 30
# Streams still running on shutdown or deploy get this long to finish.
graceful_timeout = _whole_number("TOOLWIRE_GRACEFUL_TIMEOUT", "300", 0)
# Above common load-balancer idle timeouts (60 s).
keepalive = 75
max_requests = 0
# Request heads: gunicorn's defaults take 100 fields of 8 KiB (~800 KiB a request, read and parsed before
# any check of toolwire's). Real clients send about 15 (Codex, the heaviest, 12, with ~2 KiB of metadata).
limit_request_line = 8190
limit_request_fields = 32
limit_request_field_size = 8190
# Workers import the app after gunicorn's gevent patch; preloading would import it unpatched.
preload_app = False
# toolwire writes its own access line per request when the body really ends (streams included),
# in TOOLWIRE_LOG_FORMAT and with the request id; gunicorn's would repeat it without either.
accesslog = None
# gunicorn's control socket defaults to one path per user (~/.gunicorn/gunicorn.ctl), so a second
# instance takes it over from the first and `gunicornc` then steers the wrong server. toolwire needs none:
# off unless TOOLWIRE_CONTROL_SOCKET names this instance's own path.
if os.environ.get("TOOLWIRE_CONTROL_SOCKET"):
    control_socket = os.environ["TOOLWIRE_CONTROL_SOCKET"]
else:
    control_socket_disable = True

# Every connection is a file descriptor: make sure the process may open that many (up to the hard limit).
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
_wanted = worker_connections + 1024  # upstream connections, log and metric files
if _soft != resource.RLIM_INFINITY and _soft < _wanted:
    resource.setrlimit(resource.RLIMIT_NOFILE,
                       (_wanted if _hard == resource.RLIM_INFINITY else min(_wanted, _hard), _hard))



class _EnvelopeWriter:
    """Stands in for the client socket while gunicorn writes one of its own error pages (a malformed request
    line, a head over the limits above, a bad chunked body: answered before toolwire runs), and sends the
    same status and message in the error envelope of the client API the path is for (``envelope``: OpenAI's,
    Anthropic's on a Messages path…). gunicorn writes the page with one ``sendall``: status line, headers, and
    an HTML body whose message follows the ``<h1>`` heading."""

    def __init__(self, sock, envelope):
        self._sock = sock
        self._envelope = envelope

    def sendall(self, data):
        from app.errors import ApiError  # the worker's app (never in the master)

        head, _, page = data.partition(b"\r\n\r\n")
        _, status, reason = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        message = html.unescape(page.decode("latin-1").partition("</h1>")[2].partition("</body>")[0].strip())
        error = ApiError(int(status), message or reason,
                         type="invalid_request_error" if int(status) < 500 else "server_error")
        body = json.dumps(self._envelope(error)).encode()
        self._sock.sendall(f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
                           f"Content-Length: {len(body)}\r\n\r\n".encode("latin-1") + body)

    def __getattr__(self, name):  # timeouts and blocking mode: the real socket's
        return getattr(self._sock, name)


#: How long before the graceful timeout a stopping worker ends the streams still open (gunicorn would cut
#: them mid-body at the timeout): time for their last frames to go out.
STREAM_END_MARGIN = 2.0


class ToolwireWorker(GeventWorker):
    """gevent's worker, with gunicorn's own error answers in the envelope of the path's client API, that ends its open streams
    with an error frame and their terminator before the graceful timeout."""

    _ending_streams = None

    def handle_error(self, req, client, addr, exc):
        from flask import Flask

        from app.http.errors import envelope_for
        from app.surface import openai_envelope

        parsed = req or getattr(exc, "req", None)  # a request refused for its headers may still name its path
        path = getattr(parsed, "path", None)
        app = self.wsgi
        envelope = envelope_for(app, path) if path and isinstance(app, Flask) else openai_envelope
        super().handle_error(req, _EnvelopeWriter(client, envelope), addr, exc)

    def handle_exit(self, sig, frame):
        """SIGTERM (a shutdown, or the old workers of a reload): gunicorn lets streams run until the graceful
        timeout, then cuts them; the ones still open are ended ``STREAM_END_MARGIN`` seconds before it."""
        super().handle_exit(sig, frame)
        if self._ending_streams is None:
            import gevent

            self._ending_streams = gevent.spawn_later(max(0.0, self.cfg.graceful_timeout - STREAM_END_MARGIN),
                                                      _end_open_streams, self.log)


def _end_open_streams(log):
    from app.pipeline.streaming import end_open_streams  # the app's, in the worker (never in the master)

    ended = end_open_streams()
    if ended:
        log.warning("the graceful timeout is near: %d open streams ended with an error frame", ended)


worker_class = ToolwireWorker

# Prometheus multiprocess mode: every worker writes its metrics under this directory and /metrics
# aggregates them. It must be in the environment before the workers start (they inherit it).
_METRICS_ENV = "PROMETHEUS_MULTIPROC_DIR"
_OWN_METRICS_DIR = not os.environ.get(_METRICS_ENV)
if _OWN_METRICS_DIR:
    os.environ[_METRICS_ENV] = tempfile.mkdtemp(prefix="toolwire-metrics-")


def on_starting(server):
    """Before the master binds: refuse a command line that would serve nothing (no worker, or workers that
    take no connection, hang every client) and settings toolwire cannot start with; start from empty metrics:
    drop the files of a previous run."""
    for option in ("workers", "worker_connections"):
        if getattr(server.cfg, option) < 1:
            sys.exit(f"toolwire cannot start: --{option.replace('_', '-')} must be at least 1, "
                     f"not {getattr(server.cfg, option)}")
    _check_settings()
    directory = Path(os.environ[_METRICS_ENV])
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink()


def _check_settings():
    """``toolwire check`` in a child Python (the master must not import the app): its one line stops the start.
    Left to the workers, each would fail on its own, and gunicorn's master, halting on the first, prints a
    traceback of its own when a second one exits meanwhile."""
    paths = os.pathsep.join(path for path in sys.path if path)  # the master's --chdir and --pythonpath too
    done = subprocess.run([sys.executable, "-m", "app.cli", "check"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": paths}, stdin=subprocess.DEVNULL)
    if done.returncode:
        sys.exit(done.stderr.strip() or f"toolwire cannot start: its settings check exited {done.returncode}")


def child_exit(server, worker):
    """A dead worker's live gauges (streams in flight) stop counting."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    """Remove the metrics directory if it was made here."""
    if _OWN_METRICS_DIR:
        shutil.rmtree(os.environ[_METRICS_ENV], ignore_errors=True)


def post_worker_init(worker):
    """A streaming client that stopped reading is cut by TOOLWIRE_STREAM_WRITE_TIMEOUT_SECONDS: gunicorn would
    log that write's timeout as an error with a traceback; one warning line says it. The worker's app is loaded:
    its objects (modules, settings, tables; ~90,000) are frozen out of the garbage collector, whose full
    collections would walk them all again (half of a paced worker's time in collections, measured 2026-11)."""
    worker.log.error_log.addFilter(_client_stopped_reading)
    gc.freeze()


def _client_stopped_reading(record):
    exc = record.exc_info[1] if record.exc_info else None
    if isinstance(exc, TimeoutError) and record.msg == "Socket error processing request.":
        record.msg, record.args, record.exc_info, record.exc_text = (
            "a client stopped reading: its stream was cut (TOOLWIRE_STREAM_WRITE_TIMEOUT_SECONDS)", (), None, None)
        record.levelno, record.levelname = logging.WARNING, "WARNING"
    return True
