"""The debug view: recent requests' state-machine paths, readable from any gunicorn worker.

With ``TOOLWIRE_DEBUG=true`` every API request leaves one small JSON file in a
directory the workers share (``TOOLWIRE_DEBUG_DIR``); only the newest
``TOOLWIRE_DEBUG_KEEP`` of each client key are kept. The files hold model output (the text that
triggered each transition), which is why this is off by default.

Routes (404 while debug is off):

- ``GET /debug/``: the debug page (``page/`` beside this module: plain HTML, CSS and
  JS, no build step), drawn from the JSON routes below and polling them.
- ``GET /debug/requests``: the recent requests' summaries, newest first.
- ``GET /debug/machine``: the transition table, each edge with how often it fired
  across the recent requests.
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
import tempfile
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any, Callable, NamedTuple

import orjson
from flask import Blueprint, Response, current_app, request

from statemachine import INITIAL, TRANSITIONS, ChoiceState
from statemachine.diagram import FORMATS, render_choice_fsm

from ..errors import ApiError
from ..state import client_owner, current_state
from ..settings import Settings

_MIMETYPES = {"mermaid": "text/plain", "dot": "text/vnd.graphviz", "svg": "image/svg+xml"}
#: The page's own files, by URL name: ``(file in page/, mimetype)``.
_PAGE_FILES = {"": ("index.html", "text/html"), "page.css": ("page.css", "text/css"),
               "page.js": ("page.js", "text/javascript"), "favicon.svg": ("favicon.svg", "image/svg+xml")}
# Only the page's own files run: model text that slipped into markup could not execute (inline
# scripts and styles are refused), and nothing is loaded from elsewhere.
_PAGE_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
                "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class Digest(NamedTuple):
    """What the request list and the machine need of one record.

    Fields:
        line: the record without its per-choice details (see :func:`summary`).
        fired: how often each ``(source, trigger, dest)`` edge fired in its choices.
    """

    line: dict[str, Any]
    fired: Counter[tuple[str, str, str]]

    @classmethod
    def of(cls, view: dict[str, Any]) -> Digest:
        """The digest of one request's view."""
        return cls(summary(view), Counter((step["source"], step["trigger"], step["dest"])
                                          for choice in view.get("choices", ()) for step in choice["path"]))


#: Per worker: the digest of every record file read so far, by path, with the mtime it was read at.
_digests: dict[str, tuple[int, Digest]] = {}


class DebugStore:
    """Bounded files ``<directory>/<owner tag>.<request_id>.json``; the newest ``keep`` of each key survive.

    Records are scoped like stored responses: each belongs to the client key that made the request (its
    owner digest, shortened to a tag; ``open`` on an API without keys). A key reads only its own records,
    and a request id chosen by one client (``X-Request-Id``) can never overwrite another key's record, nor
    can its requests prune another key's records (each key keeps its own newest ``keep``; the keys are the
    configured ones, so the directory stays bounded).
    Writes are atomic (a temporary file renamed into place), so a reader in another worker never sees half
    a file.
    """

    def __init__(self, directory: str | os.PathLike[str], keep: int):
        self.directory = Path(directory)
        self.keep = keep

    def save(self, request_id: str, view: dict[str, Any], *, owner: str | None = None) -> None:
        """Store one request's view for ``owner``, then drop ``owner``'s oldest files beyond ``keep``."""
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(orjson.dumps(view))
        os.replace(tmp, self.directory / f"{_owner_tag(owner)}.{request_id}.json")
        self._prune(owner)

    def load(self, request_id: str, *, owner: str | None = None) -> dict[str, Any] | None:
        """One of ``owner``'s request views, or ``None`` when it is unknown, pruned or another key's."""
        if "/" in request_id or os.sep in request_id:
            return None
        try:
            return orjson.loads((self.directory / f"{_owner_tag(owner)}.{request_id}.json").read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return None

    def entries_of(self, owner: str | None) -> list[tuple[int, str]]:
        """``(mtime_ns, path)`` of ``owner``'s kept records, oldest first."""
        return self.entries(f"{_owner_tag(owner)}.")

    def entries(self, prefix: str = "") -> list[tuple[int, str]]:
        """``(mtime_ns, path)`` of every kept record (whose name starts with ``prefix``), oldest first."""
        entries = []
        try:
            scan = list(os.scandir(self.directory))
        except FileNotFoundError:  # nothing recorded yet
            return []
        for entry in scan:
            if entry.name.endswith(".json") and entry.name.startswith(prefix):
                try:
                    entries.append((entry.stat().st_mtime_ns, entry.path))
                except FileNotFoundError:  # another worker pruned it first
                    continue
        entries.sort()
        return entries

    def digests(self, entries: list[tuple[int, str]]) -> list[Digest]:
        """The digest of each of ``entries``, newest first; a file is read once per worker, not per poll."""
        kept: dict[str, tuple[int, Digest]] = {}
        for mtime, path in reversed(entries):
            known = _digests.get(path)
            if known is None or known[0] != mtime:
                try:
                    known = (mtime, Digest.of(orjson.loads(Path(path).read_bytes())))
                except (FileNotFoundError, orjson.JSONDecodeError):  # pruned meanwhile
                    continue
            kept[path] = known
        _digests.clear()  # forget the pruned ones
        _digests.update(kept)
        return [digest for _, digest in kept.values()]

    def _prune(self, owner: str | None) -> None:
        entries = self.entries_of(owner)
        for _, path in entries[:max(0, len(entries) - self.keep)]:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def _owner_tag(owner: str | None) -> str:
    """The file-name tag of an owner digest (its first 32 hex digits), ``open`` for no owner."""
    return owner[:32] if owner else "open"


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
    bp.add_url_rule("/debug/", view_func=page_file, defaults={"name": ""}, methods=["GET"])
    files = ", ".join(f'"{name}"' for name in _PAGE_FILES if name)
    bp.add_url_rule(f"/debug/<any({files}):name>", view_func=page_file, methods=["GET"])
    bp.add_url_rule("/debug/requests", view_func=recent_requests, methods=["GET"])
    bp.add_url_rule("/debug/machine", view_func=machine, methods=["GET"])
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
    return resources.files(__package__).joinpath("page", filename).read_bytes()


def recent_requests() -> Response:
    """``GET /debug/requests``: the kept requests' summaries (no paths or text), newest first."""
    return _tagged(lambda digests: {"object": "list", "data": [digest.line for digest in digests]})


def machine() -> Response:
    """``GET /debug/machine``: the states and edges of the transition table, each edge with its recent count."""
    return _tagged(machine_view)


def summary(view: dict[str, Any]) -> dict[str, Any]:
    """One request's line in the list: the record without its per-choice details."""
    line = {key: value for key, value in view.items() if key != "choices"}
    line["choices"] = len(view.get("choices", ()))
    return line


def machine_view(digests: list[Digest]) -> dict[str, Any]:
    """The state machine as data for a drawing: states, the initial one, and every edge with its count.

    Args:
        digests: the records whose paths are counted.
    """
    fired: Counter[tuple[str, str, str]] = Counter()
    for digest in digests:
        fired.update(digest.fired)
    sources = {t.source for t in TRANSITIONS}
    return {
        "initial": INITIAL.value,
        "states": [{"name": state.value, "terminal": state not in sources} for state in ChoiceState],
        "edges": [{"source": t.source.value, "trigger": t.trigger, "dest": t.dest.value, "observed": t.observed,
                   "count": fired[t.source.value, t.trigger, t.dest.value]} for t in TRANSITIONS],
        "requests": len(digests),
    }


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
        response = current_app.json.response(body(store.digests(entries)))
    response.set_etag(etag)
    response.headers["Cache-Control"] = "no-cache"
    return response


def request_path(request_id: str) -> Response:
    """``GET /debug/requests/<id>``: the request's summary and per-choice paths, calls, notes and finish reasons."""
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
