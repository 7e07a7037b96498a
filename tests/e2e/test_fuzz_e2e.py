"""Fuzz pass against real gunicorn + gevent: the hostile bodies of ``support.fuzz_bodies`` sent over
HTTP (four at a time) to a toolwire on the scripted upstream, whose answer to a body that happens
to be valid is a short text. Every answer must be below 500 and well formed; afterwards the worker
is alive and unreplaced and gunicorn logged no traceback. Counts are printed (``-s``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import httpx
import pytest

from support.fuzz_bodies import FuzzCase, fuzz_cases, judge
from support.scripted_upstream import Script, ScriptedUpstream
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

CASES_PER_ENDPOINT = 2000
PATHS = {"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}


@pytest.mark.time_limit(120)  # 2,000 requests: ~8 s on a quiet machine, ~20 s on a loaded 2-core one
@pytest.mark.parametrize("endpoint", ["chat", "responses", "messages"])
def test_hostile_bodies_over_http(endpoint: str, upstream: ScriptedUpstream,
                                  toolwire_factory: Callable[..., ToolwireServer]) -> None:
    server = toolwire_factory()
    upstream.default_script = Script(text="Fine.", chunks=2)
    offset, boots = len(server.log()), server.worker_boots()
    cases = fuzz_cases(endpoint, seed=2, count=CASES_PER_ENDPOINT)

    with httpx.Client(base_url=server.v1_url, timeout=10) as client:
        def run(case: FuzzCase) -> tuple[int, str | None]:
            headers = {"Content-Type": case.content_type} if case.content_type else {}
            response = client.post(PATHS[endpoint], content=case.body, headers=headers)
            problem = judge(endpoint, response.status_code, response.headers.get("content-type"), response.content)
            return response.status_code, problem and f"{case.id}: {problem}"

        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(run, cases))

    failures = [problem for _, problem in results if problem]
    statuses: dict[int, int] = {}
    for status, _ in results:
        statuses[status] = statuses.get(status, 0) + 1
    print(f"\nfuzz gunicorn {endpoint}: {len(cases)} cases, {len(failures)} failures, statuses {dict(sorted(statuses.items()))}")
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(failures[:30])
    assert httpx.get(server.url + "/healthz", timeout=5).status_code == 200
    assert server.worker_boots() == boots, "a worker died and was replaced"
    assert "Traceback" not in server.log()[offset:], server.log()[offset:][-3000:]
    assert upstream.wait_connections_closed() == 0, "an upstream connection was left open"
