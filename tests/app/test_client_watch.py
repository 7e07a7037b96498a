"""``abandon_if_client_leaves``: a wait ends when the client closes its connection, and only then."""

from __future__ import annotations

import time

import gevent
import pytest
from gevent import socket as gsocket

from app.pipeline.client_watch import ClientLeft, abandon_if_client_leaves


@pytest.fixture
def connection():
    server_side, client_side = gsocket.socketpair()
    yield server_side, client_side
    server_side.close()
    client_side.close()


def test_a_client_that_closes_ends_the_wait(connection):
    server_side, client_side = connection
    gevent.spawn_later(0.05, client_side.close)
    started = time.monotonic()
    with pytest.raises(ClientLeft) as caught, abandon_if_client_leaves(server_side):
        gevent.sleep(30)  # a back end that takes its time
    assert time.monotonic() - started < 5  # the close, not the back end, ended it (a margin for a loaded machine)
    assert caught.value.status == 499


def test_a_pipelined_next_request_is_not_a_departure(connection):
    server_side, client_side = connection
    gevent.spawn_later(0.05, client_side.sendall, b"GET /healthz HTTP/1.1\r\n\r\n")
    with abandon_if_client_leaves(server_side):
        gevent.sleep(0.3)
    assert server_side.recv(3) == b"GET"  # only peeked at, still there for the next request


def test_nothing_is_raised_after_the_wait(connection):
    server_side, client_side = connection
    with abandon_if_client_leaves(server_side):
        gevent.sleep(0.05)
    client_side.close()
    gevent.sleep(0.2)  # the watcher is gone: the departure is the response writer's business now


def test_without_a_socket_nothing_is_watched():
    with abandon_if_client_leaves(None):
        gevent.sleep(0.01)
