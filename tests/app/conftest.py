"""Fixtures for the Flask-side tests: an app on a scripted fake upstream, and its client."""

from __future__ import annotations

import io
import logging
from typing import Any, Callable, Iterator

import pytest

from app import create_app
from app.observability.logs import make_handler
from app.settings import Settings
from support.fakes import FakeUpstream, text_chunks


@pytest.fixture
def upstream() -> FakeUpstream:
    return FakeUpstream(text_chunks("Hello there, world."))


@pytest.fixture
def make_app(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Callable[..., Any]:
    """Build the standalone app on a given upstream with the given settings (responses stored under tmp)."""
    from app.http import extension

    def build(upstream: Any, **settings: Any):
        monkeypatch.setattr(extension, "make_upstream", lambda _settings, _name: upstream)
        settings.setdefault("response_store_path", str(tmp_path / "responses.sqlite3"))
        app = create_app(Settings(**settings))
        app.testing = True
        return app

    return build


@pytest.fixture
def client(make_app, upstream):
    return make_app(upstream).test_client()


@pytest.fixture
def serve() -> Iterator[Callable[..., Any]]:
    """``serve(handler, **HttpUpstream kwargs)``: an ``HttpUpstream`` on a fresh loopback server that
    answers with ``handler(Seen) -> Answer`` (``tests/support/loopback.py``); all closed afterwards."""
    from app.upstreams.http import HttpUpstream
    from support.loopback import LoopbackServer

    opened: list[tuple[LoopbackServer, HttpUpstream]] = []

    def start(handler: Callable[..., Any], *, tls: Any = None, **kwargs: Any) -> HttpUpstream:
        server = LoopbackServer(handler, tls=tls)
        upstream = HttpUpstream(server.url, **kwargs)
        upstream.server = server
        opened.append((server, upstream))
        return upstream

    yield start
    for server, upstream in opened:
        upstream.close()
        server.close()


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """The root logger's lines as JSON, collected at INFO (the access line among them)."""
    buffer = io.StringIO()
    handler = make_handler("json", buffer)
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield buffer
    root.removeHandler(handler)
    root.setLevel(previous)
