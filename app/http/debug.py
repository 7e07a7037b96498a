"""The debug page and its routes, over the debug records (:mod:`app.observability.debug`).

Routes (404 while debug is off):

- ``GET /debug/``: the debug page (``app/observability/page/``: plain HTML, CSS and
  JS, no build step), drawn from the JSON routes below and polling them.
- ``GET /debug/requests``: the recent requests' summaries, newest first.
- ``GET /debug/machine``: the transition table, each edge with how often it fired
  across the recent requests.
- ``GET /debug/upstreams``: the back ends and the client models routed to each (a pool member's state too).
- ``GET /debug/requests/<request_id>``: one request's summary and per-choice paths,
  calls, notes and finish reasons.
- ``GET /debug/requests/<request_id>/diagram?format=mermaid|dot|svg&choice=0``: the
  state diagram with that choice's path highlighted.

The list and the machine carry an ``ETag`` that changes only when a record is
written or pruned, so a page polling them costs one directory scan per poll.
Nothing runs for the debug view unless someone asks: the API path only writes
its record.
"""

from __future__ import annotations

import functools
import hashlib
import os
from importlib import resources
from typing import Any, Callable

from flask import Blueprint, Response, jsonify, request

from statemachine.diagram import FORMATS, render_choice_fsm

from ..errors import ApiError
from ..observability.debug import DebugStore, Digest, debug_store, machine_view
from ..routing import routing_table
from .auth import authorize_debug
from .errors import register_error_handlers
from .state import bind_to_mount, client_owner, current_state

_MIMETYPES = {"mermaid": "text/plain", "dot": "text/vnd.graphviz", "svg": "image/svg+xml"}
#: The page's own files, by URL name: ``(file in page/, mimetype)``.
_PAGE_FILES = {"": ("index.html", "text/html"), "page.css": ("page.css", "text/css"),
               "page.js": ("page.js", "text/javascript"), "favicon.svg": ("favicon.svg", "image/svg+xml")}
# Only the page's own files run: model text that slipped into markup could not execute (inline
# scripts and styles are refused), and nothing is loaded from elsewhere.
_PAGE_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
                "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def create_debug_blueprint(name: str = "toolwire_debug",
                           guard: Callable[[], None] | None = authorize_debug,
                           mount: str | None = None) -> Blueprint:
    """The debug routes (register without a prefix).

    Args:
        name: the Blueprint name.
        guard: called before every debug route; raise an ``ApiError`` to refuse. Default: a client key
            (the views show model output), as a Bearer token or a Basic password; ``None``: open.
        mount: the name of the ``Toolwire`` mount whose records and keys these routes use; default the first
            mount registered on the app.
    """
    bp = Blueprint(name, __name__)
    bind_to_mount(bp, mount)
    register_error_handlers(bp)  # a refusal is an envelope in a host app too, not a 500
    if guard is not None:
        bp.before_request(guard)
    bp.add_url_rule("/debug/", view_func=page_file, defaults={"name": ""}, methods=["GET"])
    files = ", ".join(f'"{name}"' for name in _PAGE_FILES if name)
    bp.add_url_rule(f"/debug/<any({files}):name>", view_func=page_file, methods=["GET"])
    bp.add_url_rule("/debug/requests", view_func=recent_requests, methods=["GET"])
    bp.add_url_rule("/debug/machine", view_func=machine, methods=["GET"])
    bp.add_url_rule("/debug/upstreams", view_func=upstreams, methods=["GET"])
    bp.add_url_rule("/debug/requests/<request_id>", view_func=request_path, methods=["GET"])
    bp.add_url_rule("/debug/requests/<request_id>/diagram", view_func=request_diagram, methods=["GET"])
    return bp


def page_file(name: str) -> Response:
    """``GET /debug/`` and its stylesheet, script and icon: the debug page."""
    _store()
    filename, mimetype = _PAGE_FILES[name]
    response = Response(_page_file(filename), mimetype=mimetype)
    response.headers["Content-Security-Policy"] = _PAGE_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "no-cache"
    return response


@functools.cache
def _page_file(filename: str) -> bytes:
    return resources.files("app.observability").joinpath("page", filename).read_bytes()


def recent_requests() -> Response:
    """``GET /debug/requests``: the kept requests' summaries (no paths or text), newest first."""
    return _tagged(lambda digests: {"object": "list", "data": [digest.line for digest in digests]})


def machine() -> Response:
    """``GET /debug/machine``: the states and edges of the transition table, each edge with its recent count."""
    return _tagged(machine_view)


def upstreams() -> Response:
    """``GET /debug/upstreams``: the back ends (name, kind, URL with its password masked) and the client model
    names routed to each (:func:`~app.routing.routing_table`); a pool's member also has its ``pool`` state as
    this worker sees it (``ok``, ``cooling``, ``down``: :meth:`~app.pool.Pool.status`)."""
    _store()  # 404 while debug is off, like every debug route
    state = current_state()
    table = routing_table(state.settings)
    members = {name: status for pool in state.pools.values() for name, status in pool.status().items()}
    for row in table:
        if row["name"] in members:
            row["pool"] = members[row["name"]]
    return jsonify({"object": "list", "data": table})


def _tagged(body: Callable[[list[Digest]], Any]) -> Response:
    """``body(digests)`` as JSON, tagged with the kept records' names and times; 304 when the client has that tag."""
    store = _store()
    entries = store.entries_of(client_owner())
    tag = hashlib.blake2b(digest_size=12)
    for mtime, path in entries:
        tag.update(f"{mtime} {os.path.basename(path)}\n".encode())
    etag = tag.hexdigest()
    if request.if_none_match.contains(etag):
        response = Response(status=304)
    else:
        response = jsonify(body(store.digests(entries)))
    response.set_etag(etag)
    response.headers["Cache-Control"] = "no-cache"
    return response


def request_path(request_id: str) -> Response:
    """``GET /debug/requests/<id>``: the request's summary and per-choice paths, calls, notes and finish reasons."""
    return jsonify(_view(request_id))


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


def _store() -> DebugStore:
    """The debug store, or 404 while debug is off."""
    settings = current_state().settings
    if not settings.debug:
        raise ApiError(404, "The debug view is off (TOOLWIRE_DEBUG).", code="not_found")
    return debug_store(settings)


def _view(request_id: str) -> dict[str, Any]:
    view = _store().load(request_id, owner=client_owner())
    if view is None:
        raise ApiError(404, f"No debug record for request {request_id!r}.", code="not_found")
    return view
