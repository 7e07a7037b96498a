"""Stop waiting for the back end once the client has closed its connection.

Before the first byte of an answer (and all through a non-streamed one) the worker only waits: for the
back end's status line, for a Codex turn's first output, for the rest of an answer it accumulates.
Nothing is written to the client, so nothing notices that it left, and the back end keeps working (a
Codex turn keeps its slot) for nobody. :func:`abandon_if_client_leaves` watches the client's socket
meanwhile: at its end of file it raises :class:`ClientLeft` in the waiting greenlet, exactly as a
``gevent.Timeout`` would, so whatever it waited in unwinds and releases what it holds.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Iterator

import gevent
from gevent.socket import wait_read

from ..errors import ApiError


class ClientLeft(ApiError):
    """The client closed its connection before the answer (logged with nginx's 499; nobody reads it)."""

    def __init__(self) -> None:
        super().__init__(499, "The client closed the connection before the answer.", code="client_closed")


class _Watch:
    """One wait's watcher: fires into ``waiting`` only while :attr:`active`."""

    __slots__ = ("waiting", "active")

    def __init__(self, waiting: gevent.Greenlet) -> None:
        self.waiting = waiting
        self.active = True

    def run(self, client: socket.socket) -> None:
        try:
            wait_read(client.fileno())
            if client.recv(1, socket.MSG_PEEK):
                return  # a pipelined next request: the client is still there
        except ValueError:  # a TLS socket takes no flags: it cannot be peeked at
            return
        except OSError:  # reset by the peer: gone too
            pass
        if self.active:
            gevent.get_hub().loop.run_callback(self._fire)

    def _fire(self) -> None:
        if self.active:  # still inside the wait (checked again: the callback runs on the next loop turn)
            self.active = False
            self.waiting.throw(ClientLeft())


@contextlib.contextmanager
def abandon_if_client_leaves(client: socket.socket | None) -> Iterator[None]:
    """Raise :class:`ClientLeft` in the body of the ``with`` when ``client`` (gunicorn's socket; ``None``
    outside gunicorn: nothing is watched) reaches its end of file meanwhile."""
    if client is None:
        yield
        return
    watch = _Watch(gevent.getcurrent())
    watcher = gevent.spawn(watch.run, client)
    try:
        yield
    finally:
        watch.active = False
        watcher.kill()  # waits for it: its wait on the socket ends before the socket may be closed
