"""Fixtures for the Flask-side tests: an app on a scripted fake upstream, and its client."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import gevent
import pytest

from app import create_app
from app.settings import Settings
from app.upstreams.base import ChoiceDelta, UpstreamChunk, UpstreamError

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def text_chunks(text: str, *, size: int = 5, index: int = 0, finish: str | None = "stop",
                usage: dict | None = None) -> list[UpstreamChunk]:
    """``text`` as upstream chunks of ``size`` characters, then a finish (and usage) chunk."""
    chunks = [UpstreamChunk([ChoiceDelta(index=index, content=text[i:i + size])])
              for i in range(0, len(text), size)]
    if finish:
        chunks.append(UpstreamChunk([ChoiceDelta(index=index, finish_reason=finish)]))
    if usage:
        chunks.append(UpstreamChunk([], usage=usage))
    return chunks


class FakeStream:
    def __init__(self, upstream: "FakeUpstream"):
        self.upstream = upstream
        self.closed = False

    def __iter__(self) -> Iterator[UpstreamChunk]:
        for item in self.upstream.script:
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, (int, float)):
                gevent.sleep(item)  # a silent upstream (prefill)
                continue
            self.upstream.delivered += 1
            yield item

    def close(self) -> None:
        self.closed = True


class FakeUpstream:
    """An :class:`~app.upstreams.base.Upstream` that plays a script.

    ``script`` items: ``UpstreamChunk`` (delivered), a number (sleep that many
    seconds), an exception (raised mid-stream). ``open_error`` is raised by
    ``open``. Every body sent is kept in ``bodies``.
    """

    def __init__(self, script: list[Any] | None = None, *, open_error: UpstreamError | None = None):
        self.script = script or []
        self.open_error = open_error
        self.bodies: list[dict] = []
        self.streams: list[FakeStream] = []
        self.delivered = 0
        self.is_ready = True

    def open(self, body: dict, *, request_id: str | None = None) -> FakeStream:
        self.bodies.append(body)
        if self.open_error:
            raise self.open_error
        stream = FakeStream(self)
        self.streams.append(stream)
        return stream

    def models(self) -> list[dict]:
        return [{"id": "fake-model", "object": "model", "created": 1, "owned_by": "tests"}]

    def ready(self) -> bool:
        return self.is_ready


@pytest.fixture
def upstream() -> FakeUpstream:
    return FakeUpstream(text_chunks("Hello there, world."))


@pytest.fixture
def make_app(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Callable[..., Any]:
    """Build the standalone app on a given upstream with the given settings (responses stored under tmp)."""
    from app.http import extension

    def build(upstream: Any, **settings: Any):
        monkeypatch.setattr(extension, "make_upstream", lambda _settings: upstream)
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
