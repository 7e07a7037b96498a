"""Stop waiting for the back end once the client has closed its connection.

Before the first byte of an answer (and all through a non-streamed one) the worker only waits: for the
back end's status line, for a Codex turn's first output, for the rest of an answer it accumulates.
Nothing is written to the client, so nothing notices that it left, and the back end keeps working (a
Codex turn keeps its slot) for nobody. :func:`abandon_if_client_leaves` watches the client's socket
meanwhile: at its end of file it raises :class:`ClientLeft` in the waiting greenlet, from the hub, as
a ``gevent.Timeout`` does, so whatever it waited in unwinds and releases what it holds. The watch is
one event-loop watcher, no greenlet. A client that shuts down its sending side
after the request and still waits for the answer would be taken for gone; HTTP clients do not do that.
"""

from __future__ import annotations

import socket
from typing import Any

import gevent

from ..errors import ApiError

_READ = 1  # libev's and libuv's "readable" event mask


class ClientLeft(ApiError):
    """The client closed its connection before the answer (logged with nginx's 499; nobody reads it)."""

    def __init__(self) -> None:
        super().__init__(499, "The client closed the connection before the answer.", code="client_closed")


class _Watch:
    """The readable-socket callback of one wait: throws into ``waiting`` at the client's end of file."""

    __slots__ = ("waiting", "client", "io")

    def __init__(self, waiting: Any, client: socket.socket, io: Any) -> None:
        self.waiting = waiting
        self.client = client
        self.io = io

    def readable(self) -> None:
        """Runs in the hub: peek without blocking (a duplicate of the descriptor is a plain socket)."""
        try:
            with socket.fromfd(self.client.fileno(), socket.AF_INET, socket.SOCK_STREAM) as peer:
                if peer.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                    self.io.stop()  # a pipelined next request: the client is still there
                    return
        except BlockingIOError:
            return  # a spurious wake-up: keep watching
        except OSError:
            pass  # reset by the peer: gone too
        self.io.stop()
        self.waiting.throw(ClientLeft())


class abandon_if_client_leaves:
    """Context manager: raise :class:`ClientLeft` in the body of the ``with`` when ``client`` (gunicorn's socket;
    ``None`` outside gunicorn: nothing is watched) reaches its end of file meanwhile.

    A slotted class, not a generator-based context manager: every request holds one through its wait for the
    back end, and a generator's frame and its wrapper are several times its size.
    """

    __slots__ = ("_client", "_io")

    def __init__(self, client: socket.socket | None) -> None:
        self._client = client
        self._io: Any = None

    def __enter__(self) -> None:
        client = self._client
        if client is not None:
            io = self._io = gevent.get_hub().loop.io(client.fileno(), _READ)
            io.start(_Watch(gevent.getcurrent(), client, io).readable)

    def __exit__(self, *exc_info: Any) -> None:
        io = self._io
        if io is not None:
            self._io = None
            io.stop()
            io.close()
