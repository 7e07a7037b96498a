"""Operational endpoints: ``/healthz`` (liveness, no I/O) and ``/readyz`` (upstream reachable)."""

from __future__ import annotations

from flask import Blueprint, Response, current_app

from .extension import current_state


def create_ops_blueprint(name: str = "toolwire_ops") -> Blueprint:
    """The health Blueprint; register it without a prefix (``/healthz``, ``/readyz``)."""
    bp = Blueprint(name, __name__)
    bp.add_url_rule("/healthz", view_func=healthz, methods=["GET"])
    bp.add_url_rule("/readyz", view_func=readyz, methods=["GET"])
    return bp


def healthz() -> Response:
    """Liveness: the worker answers. Never touches the upstream."""
    return current_app.json.response({"status": "ok"})


def readyz() -> Response:
    """Readiness: 200 when the upstream answers, else 503."""
    ready = current_state().upstream.ready()
    response = current_app.json.response({"status": "ready" if ready else "unavailable"})
    response.status_code = 200 if ready else 503
    return response
