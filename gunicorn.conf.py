"""gunicorn settings for toolwire: gevent workers for long-lived SSE streams.

Every value can be overridden on the command line; the environment variables
below are read here.
"""

import os

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
accesslog = "-"
