"""e2e-only fixtures: a per-test time limit so a stream that never ends fails instead of hanging, a work
directory for agent runs, and the session's llama-servers with Qwen2.5-Coder (one per template mode)."""

from __future__ import annotations

import signal
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from support.agents import CACHE_ROOT
from support.llama_cpp_server import LlamaCppServer

#: A hang guard, not a speed claim: it must hold on a loaded 2-core machine (load 8 and more, where starting a
#: server with two workers alone took over 10 s and a 20 s limit failed tests that were only slow).
TEST_TIME_LIMIT = 60.0


class E2ETimeout(Exception):
    """An e2e test ran past ``TEST_TIME_LIMIT`` (typically: a stream that never ended)."""


@pytest.fixture(autouse=True)
def e2e_time_limit(request: pytest.FixtureRequest) -> Iterator[None]:
    """Raise ``E2ETimeout`` in the test if it runs longer than ``TEST_TIME_LIMIT`` seconds, its
    ``time_limit(seconds)`` mark's (a long but bounded batch of requests, an agent run) or its module's own
    ``TEST_TIME_LIMIT`` (the real-model tests)."""
    mark = request.node.get_closest_marker("time_limit")
    limit = float(mark.args[0]) if mark else getattr(request.module, "TEST_TIME_LIMIT", TEST_TIME_LIMIT)

    def expire(signum: int, frame: object) -> None:
        raise E2ETimeout(f"e2e test exceeded {limit:.0f} s (a stream that never ended?)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A fresh directory for an agent run. Not under /tmp: Codex refuses to create its helper binaries
    (apply_patch) under a temporary directory."""
    root = CACHE_ROOT.parent / "runs"
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as path:
        yield Path(path)


@pytest.fixture
def project(workdir: Path) -> Path:
    """An agent's project directory, beside an empty ``home`` for its settings, in a fresh :func:`workdir`."""
    (workdir / "home").mkdir()
    (workdir / "project").mkdir()
    return workdir / "project"


@pytest.fixture(scope="session")
def qwen_text_server() -> Iterator[LlamaCppServer]:
    """llama-server with Qwen2.5-Coder-0.5B and no Jinja templates (it refuses ``tools``: prompt mode's back end),
    started once for the session's tests that use it."""
    with LlamaCppServer("qwen-coder", n_ctx=8192) as server:
        yield server


@pytest.fixture(scope="session")
def qwen_jinja_server() -> Iterator[LlamaCppServer]:
    """llama-server with Qwen2.5-Coder-0.5B rendering its own Jinja template (native mode's back end), started
    once for the session's tests that use it."""
    with LlamaCppServer("qwen-coder", jinja=True, n_ctx=8192) as server:
        yield server
