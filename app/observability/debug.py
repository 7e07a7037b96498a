"""The debug records: recent requests' state-machine paths, in a directory every gunicorn worker reads.

With ``TOOLWIRE_DEBUG=true`` every API request leaves one small JSON file in a
directory the workers share (``TOOLWIRE_DEBUG_DIR``); only the newest
``TOOLWIRE_DEBUG_KEEP`` of each client key are kept. The files hold model output (the text that
triggered each transition), which is why this is off by default. The debug page
and its routes are :mod:`app.http.debug`.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from statemachine import INITIAL, TRANSITIONS, ChoiceState

from ..settings import Settings


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
