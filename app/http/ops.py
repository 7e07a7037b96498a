"""Operational endpoints: ``/healthz`` (liveness, no I/O), ``/readyz`` (upstream and response store usable),
``/metrics``."""

from __future__ import annotations

import time
import weakref
from typing import Any, Callable

import gevent
from flask import Blueprint, Response, jsonify

from ..observability.metrics import exposition
from ..store import StoreError
from .auth import metrics_guard as key_if_required
from ..upstream_settings import DEFAULT_UPSTREAM
from .errors import register_error_handlers
from .state import bind_to_mount, current_state

#: Per app (keyed by its upstream): when its last ``/readyz`` checks started, and the checks.
_ready_cache: "weakref.WeakKeyDictionary[Any, tuple[float, dict[str, Any]]]" = weakref.WeakKeyDictionary()


def create_ops_blueprint(name: str = "toolwire_ops",
                         metrics_guard: Callable[[], None] | None = key_if_required,
                         mount: str | None = None) -> Blueprint:
    """The operational Blueprint; register it without a prefix (``/healthz``, ``/readyz``, ``/metrics``).

    Args:
        name: the Blueprint name.
        metrics_guard: called before ``/metrics`` is served; raise an ``ApiError`` to refuse. Default: a
            client key when ``metrics_require_key`` is on; ``None``: open. Health routes stay open.
        mount: the name of the ``Toolwire`` mount whose back ends, store and keys these routes use; default
            the first mount registered on the app. Several mounts: one ops Blueprint each, under its own prefix.
    """
    bp = Blueprint(name, __name__)
    bind_to_mount(bp, mount)
    register_error_handlers(bp)  # a refusal is an envelope in a host app too, not a 500
    bp.add_url_rule("/healthz", view_func=healthz, methods=["GET"])
    bp.add_url_rule("/readyz", view_func=readyz, methods=["GET"])
    bp.add_url_rule("/metrics", view_func=_guarded(metrics, metrics_guard), endpoint="metrics", methods=["GET"])
    return bp


def healthz() -> Response:
    """Liveness: the worker answers. Never touches the upstream."""
    return jsonify({"status": "ok"})


def readyz() -> Response:
    """Readiness: 200 when the default back end answers and the response store (if any) can be used, else 503.

    The body names each check: ``{"status", "upstream": "ok"|"unavailable", "store": "ok"|"unavailable"|"off",
    "upstreams": {name: "ok"|"unavailable"}}``: ``upstream`` is the default back end's state; the others'
    are reported and do not make the instance unready (their models fail on their own). With pools, ``pools``
    gives each pool's members by model as this worker's choice sees them (``ok``, ``cooling`` after a failure,
    ``down`` failing its health check). The back ends are
    checked at once, each within its own bound. Each worker reuses its checks for ``ready_cache_seconds``: a
    flood of probes costs each back end one call a second.
    """
    state = current_state()
    checks = _checks(state)
    ready = checks["upstream"] != "unavailable" and checks["store"] != "unavailable"
    pools = {model: pool.status() for model, pool in state.pools.items()}  # this worker's view, never cached
    response = jsonify({"status": "ready" if ready else "unavailable", **checks, **({"pools": pools} if pools else {})})
    response.status_code = 200 if ready else 503
    return response


def _checks(state: Any) -> dict[str, Any]:
    started = time.monotonic()
    cached = _ready_cache.get(state.upstream)
    if cached is not None and started < cached[0] + state.settings.ready_cache_seconds:
        return cached[1]
    probes = {name: gevent.spawn(backend.upstream.ready) for name, backend in state.upstreams.items()}
    store = _store_status(state.store)
    gevent.joinall(list(probes.values()))
    upstreams = {name: "ok" if probe.value else "unavailable" for name, probe in probes.items()}
    checks: dict[str, Any] = {"upstream": upstreams[DEFAULT_UPSTREAM], "store": store, "upstreams": upstreams}
    # Checks run concurrently (one per probe greenlet while none is cached); a slow one that started earlier
    # (a store timing out while it was down) must not replace a newer answer, nor be reused longer than the
    # cache time counted from when it looked.
    latest = _ready_cache.get(state.upstream)
    if latest is None or latest[0] <= started:
        _ready_cache[state.upstream] = (started, checks)
    return checks


def _store_status(store: Any) -> str:
    if store is None:
        return "off"
    try:
        store.check()
    except StoreError:
        return "unavailable"
    return "ok"


def metrics() -> Response:
    """Prometheus metrics, aggregated over every gunicorn worker (see :mod:`app.observability.metrics`)."""
    body, content_type = exposition()
    return Response(body, content_type=content_type)


def _guarded(view: Callable[[], Response], guard: Callable[[], None] | None) -> Callable[[], Response]:
    if guard is None:
        return view

    def guarded() -> Response:
        guard()
        return view()

    return guarded
