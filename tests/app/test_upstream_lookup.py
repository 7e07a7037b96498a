"""The back end's address lookup (``app.upstreams.transport``): an IP address is never looked up, and a host
name's lookup is shared by the new connections that need it while it runs, against a real loopback server.

geventhttpclient looks the host up for every new connection, on a resolver thread; a burst of new streams made
as many lookups at once, each deep in its request's stack (docs/upstream-client.md, fourth pass).
"""

from __future__ import annotations

import socket
from typing import Any, Callable

import gevent
import gevent.socket
import pytest

from app.upstreams.base import UpstreamError
from app.upstreams.http import HttpUpstream
from support.loopback import LoopbackServer, json_answer

LISTING = json_answer(200, b'{"object": "list", "data": [{"id": "qwen", "object": "model"}]}')


@pytest.fixture
def server():
    server = LoopbackServer(lambda seen: LISTING)
    yield server
    server.close()


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[str]]:
    """``lookups(delay, fail=None)``: every lookup geventhttpclient makes is recorded (by host) and takes
    ``delay`` seconds; with ``fail``, it raises that instead of answering."""

    def install(delay: float, fail: BaseException | None = None) -> list[str]:
        made: list[str] = []
        real = gevent.socket.getaddrinfo

        def slow(host: str, *args: Any) -> Any:
            made.append(host)
            gevent.sleep(delay)
            if fail is not None:
                raise fail
            return real(host, *args)

        monkeypatch.setattr(gevent.socket, "getaddrinfo", slow)
        return made

    return install


def by_name(server: LoopbackServer) -> HttpUpstream:
    """The server's back end named ``localhost`` (which resolves to it), not by its IP address."""
    return HttpUpstream(server.url.replace("127.0.0.1", "localhost"))


def test_a_burst_of_new_connections_to_a_host_name_shares_one_lookup(server, lookups) -> None:
    made = lookups(0.1)
    upstream = by_name(server)
    burst = [gevent.spawn(upstream.models) for _ in range(20)]
    gevent.joinall(burst, timeout=10, raise_error=True)
    assert [g.value for g in burst] == [[{"id": "qwen", "object": "model"}]] * 20
    assert made == ["localhost"]
    assert len(server.seen) == 20
    upstream.close()


def test_the_next_connection_looks_up_again(server, lookups) -> None:
    made = lookups(0.0)
    upstream = by_name(server)
    first = gevent.spawn(upstream.models)
    second = gevent.spawn(upstream.models)
    gevent.joinall([first, second], timeout=10, raise_error=True)
    upstream.close()  # no idle connection left: the next request connects, and looks the name up again
    assert upstream.models() == [{"id": "qwen", "object": "model"}]
    assert made == ["localhost", "localhost"]


def test_a_failed_lookup_fails_every_connection_waiting_on_it(server, lookups) -> None:
    made = lookups(0.1, fail=socket.gaierror(socket.EAI_NONAME, "Name or service not known"))
    upstream = by_name(server)
    burst = [gevent.spawn(upstream.models) for _ in range(5)]
    gevent.joinall(burst, timeout=10)
    assert all(isinstance(g.exception, UpstreamError) and g.exception.kind == "connect" for g in burst)
    assert made == ["localhost"]
    assert server.seen == []


def test_a_request_that_leaves_while_its_lookup_runs_ends_no_lookup(server, lookups) -> None:
    made = lookups(0.2)
    upstream = by_name(server)
    first = gevent.spawn(upstream.models)
    gevent.sleep(0.02)  # its lookup runs
    waiting = [gevent.spawn(upstream.models) for _ in range(2)]
    gevent.sleep(0.02)  # they wait on it
    first.kill()  # the client left
    gevent.joinall(waiting, timeout=10, raise_error=True)
    assert [g.value for g in waiting] == [[{"id": "qwen", "object": "model"}]] * 2
    assert isinstance(first.value, gevent.GreenletExit)
    assert made == ["localhost"]  # the one lookup went on and answered the others
    assert len(server.seen) == 2
    upstream.close()


def test_a_request_waits_for_its_lookup_in_a_shallow_frame(server, lookups) -> None:
    # the lookup's own frames (the resolver's hand-off) are in its greenlet, not under the request's
    lookups(0.2)
    upstream = by_name(server)
    request = gevent.spawn(upstream.models)
    gevent.sleep(0.05)
    names = []
    frame = request.gr_frame
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    assert "__call__" in names and "getaddrinfo" not in names and "slow" not in names
    request.join(timeout=10)
    assert request.successful()
    upstream.close()


def test_an_ip_address_is_never_looked_up(server, lookups) -> None:
    made = lookups(0.0)
    upstream = HttpUpstream(server.url)
    burst = [gevent.spawn(upstream.models) for _ in range(5)]
    gevent.joinall(burst, timeout=10, raise_error=True)
    assert made == []
    assert len(server.seen) == 5
    upstream.close()
