"""The debug view: recent requests' state-machine paths, readable from any gunicorn worker.

With ``TOOLWIRE_DEBUG=true`` every API request leaves one small JSON file in a
directory the workers share (``TOOLWIRE_DEBUG_DIR``); only the newest
``TOOLWIRE_DEBUG_KEEP`` are kept. The files hold model output (the text that
triggered each transition), which is why this is off by default.

Routes (404 while debug is off):

- ``GET /debug/requests/<request_id>``: the paths as JSON.
- ``GET /debug/requests/<request_id>/diagram?format=mermaid|dot|svg&choice=0``: the
  state diagram with that choice's path highlighted.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import orjson
from flask import Blueprint, Response, current_app, request

from statemachine.diagram import FORMATS, render_choice_fsm

from ..errors import ApiError
from ..state import current_state
from ..settings import Settings

_MIMETYPES = {"mermaid": "text/plain", "dot": "text/vnd.graphviz", "svg": "image/svg+xml"}


class DebugStore:
    """Bounded files ``<directory>/<request_id>.json``; the newest ``keep`` survive.

    Writes are atomic (a temporary file renamed into place), so a reader in
    another worker never sees half a file.
    """

    def __init__(self, directory: str | os.PathLike[str], keep: int):
        self.directory = Path(directory)
        self.keep = keep

    def save(self, request_id: str, view: dict[str, Any]) -> None:
        """Store one request's view, then drop the oldest files beyond ``keep``."""
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(orjson.dumps(view))
        os.replace(tmp, self.directory / f"{request_id}.json")
        self._prune()

    def load(self, request_id: str) -> dict[str, Any] | None:
        """One request's view, or ``None`` when it is unknown (or already pruned)."""
        if "/" in request_id or os.sep in request_id:
            return None
        try:
            return orjson.loads((self.directory / f"{request_id}.json").read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return None

    def _prune(self) -> None:
        entries = []
        for entry in os.scandir(self.directory):
            if entry.name.endswith(".json"):
                try:
                    entries.append((entry.stat().st_mtime_ns, entry.path))
                except FileNotFoundError:  # another worker pruned it first
                    continue
        entries.sort()
        for _, path in entries[:max(0, len(entries) - self.keep)]:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def debug_store(settings: Settings) -> DebugStore:
    """The store the settings name (default directory ``<tmp>/toolwire-debug``)."""
    directory = settings.debug_dir or os.path.join(tempfile.gettempdir(), "toolwire-debug")
    return DebugStore(directory, settings.debug_keep)


def create_debug_blueprint(name: str = "toolwire_debug", guard: Callable[[], None] | None = None) -> Blueprint:
    """The debug routes (register without a prefix).

    Args:
        name: the Blueprint name.
        guard: called before every debug route; raise an ``ApiError`` to refuse
            (e.g. an API-key check: the views show model output).
    """
    bp = Blueprint(name, __name__)
    if guard is not None:
        bp.before_request(guard)
    bp.add_url_rule("/debug/requests/<request_id>", view_func=request_path, methods=["GET"])
    bp.add_url_rule("/debug/requests/<request_id>/diagram", view_func=request_diagram, methods=["GET"])
    return bp


def request_path(request_id: str) -> Response:
    """``GET /debug/requests/<id>``: the request's per-choice paths."""
    return current_app.json.response(_view(request_id))


def request_diagram(request_id: str) -> Response:
    """``GET /debug/requests/<id>/diagram``: one choice's path drawn on the state diagram."""
    view = _view(request_id)
    fmt = request.args.get("format", "mermaid")
    if fmt not in FORMATS:
        raise ApiError(400, f"Unknown diagram format {fmt!r}; use one of {', '.join(FORMATS)}.", param="format")
    index = request.args.get("choice", "0")
    choice = next((c for c in view["choices"] if str(c["index"]) == index), None)
    if choice is None:
        raise ApiError(404, f"Request {request_id!r} has no choice {index!r}.", param="choice", code="not_found")
    path = [(step["source"], step["trigger"], step["dest"]) for step in choice["path"]]
    try:
        diagram = render_choice_fsm(fmt, current=choice["state"], path=path)
    except RuntimeError as exc:  # svg without pygraphviz
        raise ApiError(501, str(exc), type="server_error", param="format", code="not_implemented") from None
    return Response(diagram, mimetype=_MIMETYPES[fmt])


def _view(request_id: str) -> dict[str, Any]:
    settings = current_state().settings
    view = debug_store(settings).load(request_id) if settings.debug else None
    if view is None:
        raise ApiError(404, f"No debug record for request {request_id!r}"
                       + ("." if settings.debug else " (debug is off)."), code="not_found")
    return view
