"""HttpUpstream against Python's real ``http.server`` sending close-delimited bodies (RFC 9112 6.3 rule 8):
HTTP/1.0, and HTTP/1.1 with neither ``Content-Length`` nor chunked coding. The body is what arrives
before the close; a body cut short inside a ``Content-Length`` message still fails."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator

import pytest

from app.upstreams.base import UpstreamError
from app.upstreams.http import HttpUpstream
from support.backend_model import CITY, SENTENCE, load_plans, write_plans
from support.server import free_port
from support.stacks.python_http_server import make_server


@pytest.fixture
def http_server(tmp_path) -> Iterator[Callable[..., HttpUpstream]]:
    """``http_server(protocol, **extra_plans)``: an HttpUpstream on a real ``http.server`` in ``protocol``."""
    plans = load_plans(write_plans(tmp_path / "plans.json"))
    started: list[tuple[Any, HttpUpstream]] = []

    def start(protocol: str, **extra: dict[str, Any]) -> HttpUpstream:
        server = make_server({**plans, **extra}, free_port(), protocol)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        upstream = HttpUpstream(f"http://127.0.0.1:{server.server_address[1]}/v1")
        started.append((server, upstream))
        return upstream

    yield start
    for server, upstream in started:
        upstream.close()
        server.shutdown()
        server.server_close()


def _text(chunks) -> tuple[str, list[str | None]]:
    deltas = [d for c in chunks for d in c.choices]
    return "".join(d.content or "" for d in deltas), [d.finish_reason for d in deltas if d.finish_reason]


@pytest.mark.parametrize("protocol", ["HTTP/1.0", "HTTP/1.1"])
@pytest.mark.parametrize("dialect", ["lf", "nodone", "json"])
def test_a_close_delimited_body_is_read_to_the_close(http_server, protocol, dialect):
    upstream = http_server(protocol)
    for _ in range(3):  # each answer closes its connection: the next request opens a new one
        stream = upstream.open({"model": dialect, "stream": True})
        text, finishes = _text(stream)
        stream.close()
        assert text.startswith(SENTENCE) and CITY in text and finishes == ["stop"]


def test_a_body_cut_short_of_its_content_length_still_fails(http_server):
    upstream = http_server("HTTP/1.1", cut={"status": 200, "pause": 0, "writes": [b'data: {"choices": []}\n\n'],
                                            "headers": {"Content-Type": "text/event-stream",
                                                        "Content-Length": "5000"}})
    with pytest.raises(UpstreamError) as info:
        list(upstream.open({"model": "cut"}))
    assert (info.value.kind, info.value.message) == ("protocol", "The upstream broke the HTTP protocol.")


def test_a_stream_ends_at_done_without_waiting_for_the_close(http_server, tmp_path):
    """After ``[DONE]`` a connection that is not kept is dropped at once, however long the server lingers."""
    plans = load_plans(write_plans(tmp_path / "lingering.json"))
    lingering = {**plans["lf"], "writes": [b"".join(plans["lf"]["writes"]), b"\n"], "pause": 15.0}
    upstream = http_server("HTTP/1.0", lingering=lingering)
    started = time.monotonic()
    text, finishes = _text(upstream.open({"model": "lingering"}))
    assert CITY in text and finishes == ["stop"]
    assert time.monotonic() - started < 5
