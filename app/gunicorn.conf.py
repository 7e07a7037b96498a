"""gunicorn settings for toolwire: gevent workers for long-lived SSE streams.

``toolwire serve`` runs ``gunicorn -c <this file> app.wsgi:app`` from any
directory, so an installed toolwire (no checkout) serves the same way; the
checkout's ``gunicorn.conf.py`` loads this file. The dot in the name keeps it
from ever being imported as part of ``app`` (gunicorn's master must not import
the app: workers import it after gevent's patch). Every value can be overridden
on the command line; the environment variables below are read here.
"""

import os
import shutil
import tempfile
from pathlib import Path

# gevent: one greenlet per request, so thousands of idle streams cost little.
worker_class = "gevent"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_connections = 1000
bind = os.environ.get("TOOLWIRE_BIND", "127.0.0.1:8000")
# A liveness heartbeat between master and worker, not a request-length limit.
timeout = 30
# Streams still running on shutdown or deploy get this long to finish.
graceful_timeout = int(os.environ.get("TOOLWIRE_GRACEFUL_TIMEOUT", "300"))
# Above common load-balancer idle timeouts (60 s).
keepalive = 75
max_requests = 0
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

# Prometheus multiprocess mode: every worker writes its metrics under this directory and /metrics
# aggregates them. It must be in the environment before the workers start (they inherit it).
_METRICS_ENV = "PROMETHEUS_MULTIPROC_DIR"
_OWN_METRICS_DIR = not os.environ.get(_METRICS_ENV)
if _OWN_METRICS_DIR:
    os.environ[_METRICS_ENV] = tempfile.mkdtemp(prefix="toolwire-metrics-")


def on_starting(server):
    """Start from empty metrics: drop the files of a previous run."""
    directory = Path(os.environ[_METRICS_ENV])
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink()


def child_exit(server, worker):
    """A dead worker's live gauges (streams in flight) stop counting."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    """Remove the metrics directory if it was made here."""
    if _OWN_METRICS_DIR:
        shutil.rmtree(os.environ[_METRICS_ENV], ignore_errors=True)
