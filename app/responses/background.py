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

The generation is streamed into an :class:`EventLog` (each Responses event with its ``sequence_number``), stored
with the response (:data:`EVENTS_KEY`, never shown) every :data:`FLUSH_SECONDS` while new events come and at the
end. A client follows it (``background`` with ``stream``, or ``GET …?stream=true&starting_after=N``,
:func:`follow`): the events after ``N`` replayed, then the live ones, from this worker's log when it runs the
response, else from the store as it is written.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from typing import Any, Callable, Iterator, Protocol

import gevent
from gevent.event import Event

from ..store import OwnedStore, StoredResponse, StoreError
from ..pipeline.streaming import KEEPALIVE
from .encoder import encode_sse

log = logging.getLogger("toolwire.responses.background")

#: The runner's marks in a stored response (never shown to clients).
RUN_KEY = "_toolwire_run"
#: How often a running response's heartbeat is renewed (and a cancel from another worker looked for), seconds.
HEARTBEAT_SECONDS = 5.0
#: A heartbeat older than this means its runner is gone, seconds.
STALE_SECONDS = 30.0
#: How often a running response's new events are stored, for clients following it from another worker, seconds.
FLUSH_SECONDS = 0.5
#: The stored response's events, as SSE frames (never shown to clients).
EVENTS_KEY = "_toolwire_events"
#: The statuses of a response that has not ended.
UNFINISHED = ("queued", "in_progress")

_DIED = "The worker running this background response stopped before the response finished."

#: This worker's background responses, by id: the generation in flight, or ``None`` from the moment the response
#: is stored until its runner first runs (the client may ask about it before: on a kept-alive connection the
#: next request can be read without the hub running anything else).
_RUNNING: dict[str, gevent.Greenlet | None] = {}
#: The event logs of this worker's background responses, by id, while they run.
_LOGS: dict[str, EventLog] = {}

_SEQUENCE = re.compile(rb'"sequence_number":(\d+)')
_TERMINAL = (b"event: response.completed\n", b"event: response.failed\n", b"event: response.incomplete\n")


class EventLog:
    """A running response's stream: its SSE frames in order, and whether it has ended (``changed`` is set, and
    replaced, at each change)."""

    __slots__ = ("frames", "ended", "changed")

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.ended = False
        self.changed = Event()

    def add(self, data: bytes) -> None:
        """The frames in ``data`` (one or more whole SSE events) go on the log."""
        self.frames += [frame + b"\n\n" for frame in data.split(b"\n\n") if _SEQUENCE.search(frame)]
        self._changed()

    def end(self) -> None:
        """The stream is over."""
        self.ended = True
        self._changed()

    def next_sequence(self) -> int:
        """The sequence number the next event gets."""
        return sequence_of(self.frames[-1]) + 1 if self.frames else 0

    def _changed(self) -> None:
        changed, self.changed = self.changed, Event()
        changed.set()


def sequence_of(frame: bytes) -> int:
    """The ``sequence_number`` of an SSE ``frame`` (its first: the event's own, ahead of its fields)."""
    found = _SEQUENCE.search(frame)
    return int(found[1]) if found else -1


class Generation(Protocol):
    """A background response's generation."""

    def generate(self, log: EventLog) -> dict[str, Any]:
        """Generate with its events streamed to ``log``, and answer with the ended Response object."""

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
          keep: Callable[[dict[str, Any]], object], done: Callable[[str], None]) -> dict[str, Any]:
    """Store ``response`` as ``queued`` and run ``run`` (the generation) in a greenlet; its ended response (or
    the failed one) goes to ``keep`` unless the response was cancelled meanwhile; ``done(status)`` when it is over
    (``cancelled``, else the ended response's status).

    Returns:
        The ``queued`` response to answer with (its events then :func:`follow` it).
    Raises:
        StoreError: the response could not be stored (nothing runs).
    """
    queued = {**response, "status": "queued"}
    store.put(_marked(queued), input_items)
    _RUNNING[queued["id"]] = None
    _LOGS[queued["id"]] = EventLog()
    gevent.spawn(_runner, queued, input_items, store, run, keep, done)
    return queued


def _runner(response: dict[str, Any], input_items: list[dict[str, Any]], store: OwnedStore, run: Generation,
            keep: Callable[[dict[str, Any]], object], done: Callable[[str], None]) -> None:
    """Run the generation with a heartbeat, storing its new events as they come, then keep what it ended as (every
    store write of the response is made here, one after another, so a heartbeat never overwrites the end)."""
    response_id = response["id"]
    events = _LOGS[response_id]
    running = {**response, "status": "in_progress"}
    work = _RUNNING[response_id] = gevent.spawn(run.generate, events)
    status = "cancelled"
    try:
        stored, beat = 0, 0.0
        while not work.ready():
            if time.monotonic() >= beat or len(events.frames) > stored:
                stored, beat = len(events.frames), _heartbeat(store, running, input_items, work, events, beat)
            work.join(FLUSH_SECONDS)
        if isinstance(work.value, gevent.GreenletExit) or _cancelled(store, response_id):
            return
        if work.exception is not None:
            ended = run.failed(work.exception)
            events.add(encode_sse({"type": "response.failed", "sequence_number": events.next_sequence(),
                                "response": ended}))
        else:
            ended = work.value
        status = ended.get("status", "failed")
        keep(_with_events(ended, events))
    except StoreError as exc:
        log.warning("background response %s: its end not stored: %s", response_id, exc)
    finally:
        events.end()
        _RUNNING.pop(response_id, None)
        _LOGS.pop(response_id, None)
        done(status)


def _heartbeat(store: OwnedStore, running: dict[str, Any], input_items: list[dict[str, Any]],
               work: gevent.Greenlet, events: EventLog, beat: float) -> float:
    """Store the running response with its events so far (its marks renewed), or stop ``work`` when it was
    cancelled meanwhile; the next heartbeat's time (from now, if it was due at ``beat``)."""
    now = time.monotonic()
    try:
        if _cancelled(store, running["id"]):  # (looked for before each write: a write never undoes a cancel)
            work.kill(block=False)
        else:
            store.put(_marked(_with_events(running, events)), input_items)
    except StoreError as exc:
        log.warning("background response %s: heartbeat not stored: %s", running["id"], exc)
    return now + HEARTBEAT_SECONDS if now >= beat else beat


def _with_events(response: dict[str, Any], events: EventLog) -> dict[str, Any]:
    return {**response, EVENTS_KEY: [frame.decode() for frame in events.frames]}


def follow(store: OwnedStore, response_id: str, after: int) -> Iterator[bytes]:
    """The events of the background response ``response_id`` after sequence number ``after``: those stored, then
    the live ones until it ends, from this worker's log when it runs it (else from the store every
    :data:`FLUSH_SECONDS`); a keep-alive after :data:`HEARTBEAT_SECONDS` without one."""
    last = after
    while (running := _LOGS.get(response_id)) is None:
        stored = store.load(response_id)
        if stored is None:
            return
        response = settled(store, stored)
        frames = [frame.encode() for frame in stored.response.get(EVENTS_KEY) or ()]
        for frame in frames:
            if sequence_of(frame) > last:
                last = sequence_of(frame)
                yield frame
        if response["status"] not in UNFINISHED:
            if response["status"] == "failed" and not (frames and frames[-1].startswith(_TERMINAL)):
                yield encode_sse({"type": "response.failed", "sequence_number": last + 1, "response": response})
            return
        gevent.sleep(FLUSH_SECONDS)
    yield from _follow_log(running, last)


def _follow_log(events: EventLog, after: int) -> Iterator[bytes]:
    sent = 0
    while True:
        changed, frames = events.changed, events.frames
        for frame in frames[sent:]:
            if sequence_of(frame) > after:
                yield frame
        sent = len(frames)
        if events.ended:
            return
        if not changed.wait(HEARTBEAT_SECONDS):
            yield KEEPALIVE


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
    """``response`` without the runner's marks and its events."""
    return {key: value for key, value in response.items() if key not in (RUN_KEY, EVENTS_KEY)}


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
