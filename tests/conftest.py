"""Shared fixtures: the scripted upstream, real gunicorn servers and contract-checked openai clients.

- ``scripted_upstream`` (session): the ``ScriptedUpstream``; ``upstream`` (function) is the same
  server, reset (queue, default script, recorded exchanges) before and after each test.
- ``toolwire_server`` (session): toolwire under gunicorn pointed at the scripted upstream
  (heartbeat ``DEFAULT_SETTINGS``), shared by the whole session.
- ``toolwire_factory`` (session): ``toolwire_factory(**settings)`` returns a server whose settings
  are the defaults updated with ``settings`` (a ``None`` value removes a variable, e.g.
  ``TOOLWIRE_UPSTREAM_URL=None`` for the demo model); one server per distinct settings.
- ``stream_recorder`` / ``make_openai_client`` / ``openai_client`` / ``make_anthropic_client`` (function): openai
  and anthropic clients whose
  HTTP traffic goes through a ``RecordingTransport``; at teardown every recorded stream and error
  body is checked against the wire contract and any violation fails the test.
"""

from __future__ import annotations

from typing import Callable, Iterator

import anthropic
import httpx
import openai
import pytest

from support.invariants import StreamRecorder
from support.redis_server import RedisServer, redis_server_binary
from support.scripted_upstream import ScriptedUpstream
from support.server import ServerPool, ToolwireServer

HEARTBEAT_SECONDS = 0.2
DEFAULT_SETTINGS = {
    "TOOLWIRE_HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS),
    "TOOLWIRE_UPSTREAM_READ_TIMEOUT": "10",
    "TOOLWIRE_GRACEFUL_TIMEOUT": "2",  # read by gunicorn.conf.py: quick shutdown at session end
    # The session's servers share one store file: on a busy disk a write may wait its turn longer than the
    # 2 s default allows (a background create once answered 503 so); tests of the limit set their own.
    "TOOLWIRE_RESPONSE_STORE_TIMEOUT": "10",
}


@pytest.fixture(scope="session")
def scripted_upstream() -> Iterator[ScriptedUpstream]:
    """The session's scripted upstream server."""
    with ScriptedUpstream() as server:
        yield server


@pytest.fixture
def upstream(scripted_upstream: ScriptedUpstream) -> Iterator[ScriptedUpstream]:
    """The scripted upstream, reset before and after the test."""
    scripted_upstream.reset()
    yield scripted_upstream
    scripted_upstream.reset()


@pytest.fixture(scope="session")
def server_pool() -> Iterator[ServerPool]:
    """Every gunicorn started in this session; all stopped at the end."""
    pool = ServerPool()
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def toolwire_factory(server_pool: ServerPool, scripted_upstream: ScriptedUpstream,
                     tmp_path_factory: pytest.TempPathFactory) -> Callable[..., ToolwireServer]:
    """``toolwire_factory(**settings)``: a toolwire with the default settings updated by ``settings``.

    Every server of the session shares one response store file in a temporary directory.
    """
    store_path = str(tmp_path_factory.mktemp("store") / "responses.sqlite3")

    def make(**settings: str | None) -> ToolwireServer:
        merged: dict[str, str | None] = {"TOOLWIRE_UPSTREAM_URL": scripted_upstream.v1_url,
                                         "TOOLWIRE_RESPONSE_STORE_PATH": store_path, **DEFAULT_SETTINGS}
        merged.update(settings)
        return server_pool.get(merged)

    return make


@pytest.fixture(scope="session")
def toolwire_server(toolwire_factory: Callable[..., ToolwireServer]) -> ToolwireServer:
    """The shared toolwire pointed at the scripted upstream."""
    return toolwire_factory()


@pytest.fixture
def stream_recorder() -> Iterator[StreamRecorder]:
    """Records client traffic; fails the test at teardown if any recorded exchange breaks the contract."""
    recorder = StreamRecorder()
    yield recorder
    failures = recorder.check_all()
    if failures:
        pytest.fail("wire-contract check of recorded traffic failed:\n" + "\n\n".join(failures), pytrace=False)


@pytest.fixture
def recorded_http(stream_recorder: StreamRecorder) -> Iterator[Callable[[], httpx.Client]]:
    """``recorded_http()``: an ``httpx.Client`` whose traffic is recorded (and checked); closed at teardown."""
    clients: list[httpx.Client] = []

    def make() -> httpx.Client:
        client = httpx.Client(transport=stream_recorder.transport(), timeout=30.0)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def make_openai_client(recorded_http: Callable[[], httpx.Client]) -> Callable[[ToolwireServer], openai.OpenAI]:
    """``make_openai_client(server)``: an ``openai.OpenAI`` for ``server`` whose traffic is recorded."""

    def make(server: ToolwireServer) -> openai.OpenAI:
        return openai.OpenAI(base_url=server.v1_url, api_key="test", max_retries=0, http_client=recorded_http())

    return make


@pytest.fixture
def make_anthropic_client(recorded_http: Callable[[], httpx.Client]) -> Callable[..., anthropic.Anthropic]:
    """``make_anthropic_client(server, api_key=…)``: an ``anthropic.Anthropic`` for ``server`` (the key goes out
    as ``x-api-key``) whose traffic is recorded and checked against Anthropic's grammar."""

    def make(server: ToolwireServer, api_key: str = "test") -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=server.url, api_key=api_key, max_retries=0, http_client=recorded_http())

    return make


@pytest.fixture
def openai_client(make_openai_client: Callable[[ToolwireServer], openai.OpenAI], toolwire_server: ToolwireServer) -> openai.OpenAI:
    """A recorded openai client for the shared toolwire."""
    return make_openai_client(toolwire_server)


@pytest.fixture(scope="session")
def redis_server_session() -> Iterator[RedisServer]:
    """A real ``redis-server`` for the session (installed first when missing and possible); skips loudly
    where it cannot be had."""
    binary, reason = redis_server_binary()
    if binary is None:
        pytest.skip(f"REDIS TESTS SKIPPED: {reason}")
    with RedisServer(binary) as server:
        yield server


@pytest.fixture
def redis_server(redis_server_session: RedisServer) -> Iterator[RedisServer]:
    """The session's Redis, running and empty at the start of the test (restarted if a test stopped it)."""
    if not redis_server_session.running:
        redis_server_session.start()
    redis_server_session.resume()
    redis_server_session.flush()
    yield redis_server_session
    redis_server_session.resume()
