"""The httpx transport for the upstream: httpx's own, with an idle-connection check that never yields.

Before every request and after every response, httpcore's pool asks each idle
connection whether the server closed it (``get_extra_info("is_readable")``, a
``select.poll`` with timeout 0). Under gevent's patch that poll switches to the
hub and waits for a full loop turn, once per idle connection: at 64 concurrent
streams that cost a third of the requests per second and most of the time to
first byte. Here the same check uses the unpatched ``poll``, a plain
non-blocking system call. httpx has no public hook for the network backend, so
it is set on the transport's httpcore pool.
"""

from __future__ import annotations

import select
from typing import Any

import httpcore
import httpx
from gevent import monkey

_poll = monkey.get_original("select", "poll")


def make_transport(limits: httpx.Limits) -> httpx.HTTPTransport:
    """An ``httpx.HTTPTransport`` with ``limits`` whose pool checks idle connections without yielding."""
    transport = httpx.HTTPTransport(limits=limits)
    transport._pool._network_backend = _Backend()  # no public parameter for it (httpx 0.27/0.28)
    return transport


def socket_readable(sock: Any) -> bool:
    """Whether ``sock`` has data or EOF waiting (a closed or missing socket counts as readable)."""
    fd = sock.fileno() if sock is not None else -1
    if fd < 0:
        return True
    poller = _poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


class _Backend(httpcore.SyncBackend):
    def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        return _Stream(super().connect_tcp(*args, **kwargs))

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        return _Stream(super().connect_unix_socket(*args, **kwargs))


class _Stream(httpcore.NetworkStream):
    """httpcore's stream, answering ``is_readable`` itself."""

    __slots__ = ("_inner",)

    def __init__(self, inner: httpcore.NetworkStream):
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        return _Stream(self._inner.start_tls(*args, **kwargs))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return socket_readable(self._inner.get_extra_info("socket"))
        return self._inner.get_extra_info(info)
