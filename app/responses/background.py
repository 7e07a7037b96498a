"""Background responses (``background: true``): answered at once as ``queued``, generated in a greenlet of the
worker, polled with ``GET``, cancelled with ``POST …/cancel``.

The stored response goes ``queued`` → ``in_progress`` → ``completed`` / ``incomplete`` / ``failed`` /
``cancelled``. While it runs, the stored copy carries the runner's marks (:data:`RUN_KEY`: the host's boot id,
the worker's pid, a heartbeat renewed every :data:`HEARTBEAT_SECONDS`), never shown to clients. A response read
while its runner is gone (its worker's process is dead, or its heartbeat is older than :data:`STALE_SECONDS`,
as when the host itself went down) ends ``failed`` then and there: never stuck ``in_progress``.

A cancel writes ``cancelled``; the runner, in whichever worker of whichever host, sees it at its next
heartbeat (at once in the same worker) and stops the generation; a generation that finishes meanwhile does
not overwrite the cancel.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any, Callable, Protocol

import gevent

from ..store import OwnedStore, StoredResponse, StoreError

log = logging.getLogger("toolwire.responses.background")

#: The runner's marks in a stored response (never shown to clients).
RUN_KEY = "_toolwire_run"
#: How often a running response's heartbeat is renewed (and a cancel from another worker looked for), seconds.
HEARTBEAT_SECONDS = 5.0
#: A heartbeat older than this means its runner is gone, seconds.
STALE_SECONDS = 30.0
#: The statuses of a response that has not ended.
UNFINISHED = ("queued", "in_progress")

_DIED = "The worker running this background response stopped before the response finished."

#: This worker's background responses, by id: the generation in flight, or ``None`` from the moment the response
#: is stored until its runner first runs (the client may ask about it before: on a kept-alive connection the
#: next request can be read without the hub running anything else).
_RUNNING: dict[str, gevent.Greenlet | None] = {}


class Generation(Protocol):
    """A background response's generation."""

    def generate(self) -> dict[str, Any]:
        """Generate, and answer with the ended Response object."""

    def failed(self, error: BaseException) -> dict[str, Any]:
        """The Response object failed by ``error``."""


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return socket.gethostname()


#: This host's boot: a pid is only meaningful on the host, and boot, that wrote it.
BOOT_ID = _boot_id()


def start(response: dict[str, Any], input_items: list[dict[str, Any]], store: OwnedStore, run: Generation,
          keep: Callable[[dict[str, Any]], object], done: Callable[[], None]) -> dict[str, Any]:
    """Store ``response`` as ``queued`` and run ``run`` (the generation) in a greenlet; its ended response (or
    the failed one) goes to ``keep`` unless the response was cancelled meanwhile; ``done()`` when it is over.

    Returns:
        The ``queued`` response to answer with.
    Raises:
        StoreError: the response could not be stored (nothing runs).
    """
    queued = {**response, "status": "queued"}
    store.put(_marked(queued), input_items)
    _RUNNING[queued["id"]] = None
    gevent.spawn(_runner, queued, input_items, store, run, keep, done)
    return queued


def _runner(response: dict[str, Any], input_items: list[dict[str, Any]], store: OwnedStore, run: Generation,
            keep: Callable[[dict[str, Any]], object], done: Callable[[], None]) -> None:
    """Run the generation with a heartbeat, then keep what it ended as (every store write of the response is made
    here, one after another, so a heartbeat never overwrites the end)."""
    response_id = response["id"]
    running = {**response, "status": "in_progress"}
    work = _RUNNING[response_id] = gevent.spawn(run.generate)
    try:
        while not work.ready():
            _heartbeat(store, running, input_items, work)
            work.join(HEARTBEAT_SECONDS)
        if isinstance(work.value, gevent.GreenletExit) or _cancelled(store, response_id):
            return
        keep(run.failed(work.exception) if work.exception is not None else work.value)
    except StoreError as exc:
        log.warning("background response %s: its end not stored: %s", response_id, exc)
    finally:
        _RUNNING.pop(response_id, None)
        done()


def _heartbeat(store: OwnedStore, running: dict[str, Any], input_items: list[dict[str, Any]],
               work: gevent.Greenlet) -> None:
    """Renew the running response's marks, or stop ``work`` when it was cancelled meanwhile."""
    try:
        if _cancelled(store, running["id"]):
            work.kill(block=False)
            return
        store.put(_marked(running), input_items)
    except StoreError as exc:
        log.warning("background response %s: heartbeat not stored: %s", running["id"], exc)


def _cancelled(store: OwnedStore, response_id: str) -> bool:
    current = store.get(response_id)
    return current is not None and current.get("status") == "cancelled"


def settled(store: OwnedStore, stored: StoredResponse) -> dict[str, Any]:
    """The stored response as a client sees it: without the runner's marks, and ``failed`` (stored so) when it
    has not ended and its runner is gone."""
    response = stored.response
    if response.get("status") in UNFINISHED and not _alive(response.get(RUN_KEY) or {}, response["id"]):
        response = {**response, "status": "failed", "error": {"code": "server_error", "message": _DIED}}
        response.pop(RUN_KEY, None)
        try:
            store.put(response, stored.input_items)
        except StoreError as exc:
            log.warning("background response %s: its failure not stored: %s", response["id"], exc)
    return shown(response)


def cancel(store: OwnedStore, stored: StoredResponse) -> dict[str, Any]:
    """Mark a running response ``cancelled`` and stop its generation if this worker runs it.

    Raises:
        StoreError: the cancel could not be stored.
    """
    response = {**stored.response, "status": "cancelled"}
    response.pop(RUN_KEY, None)
    store.put(response, stored.input_items)
    work = _RUNNING.get(response["id"])
    if work is not None:
        work.kill(block=False)
    return response


def shown(response: dict[str, Any]) -> dict[str, Any]:
    """``response`` without the runner's marks."""
    return {key: value for key, value in response.items() if key != RUN_KEY}


def _marked(response: dict[str, Any]) -> dict[str, Any]:
    return {**response, RUN_KEY: {"boot": BOOT_ID, "pid": os.getpid(), "heartbeat": time.time()}}


def _alive(run: dict[str, Any], response_id: str) -> bool:
    """Whether the runner that left ``run`` still runs the response."""
    heartbeat, pid = run.get("heartbeat"), run.get("pid")
    if not isinstance(heartbeat, (int, float)) or time.time() - heartbeat > STALE_SECONDS:
        return False
    if run.get("boot") != BOOT_ID or not isinstance(pid, int):
        return True  # another host's: its heartbeat tells
    if pid == os.getpid():
        return response_id in _RUNNING
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
