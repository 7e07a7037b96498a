"""Observability under real gunicorn with two gevent workers: request ids end to end, /metrics
aggregated across the workers (multiprocess mode), JSON access lines, the debug view."""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from app.upstreams.http import upstream_request_id
from support.scripted_upstream import Script

pytestmark = pytest.mark.e2e

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call>'
REQUESTS = 24


def metric(text: str, name: str, default: float | None = 0.0, **labels: str) -> float | None:
    """One sample's value from Prometheus text (``default`` when absent)."""
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    for line in text.splitlines():
        match = re.fullmatch(r"([a-z_]+)(?:\{(.*)\})? (\S+)", line)
        if match and match[1] == name and ",".join(sorted((match[2] or "").split(","))) == wanted:
            return float(match[3])
    return default


def access_lines(log: str) -> list[dict]:
    """The JSON access lines of this test's requests in the gunicorn output."""
    return [json.loads(line) for line in log.splitlines()
            if line.startswith("{") and '"toolwire.access"' in line and '"e2e-obs-' in line]


@pytest.fixture
def two_workers(toolwire_factory, tmp_path_factory):
    return toolwire_factory(WEB_CONCURRENCY="2", TOOLWIRE_DEBUG="true",
                            TOOLWIRE_DEBUG_DIR=str(tmp_path_factory.mktemp("debug")))


def test_request_ids_metrics_and_logs_across_two_workers(two_workers, upstream):
    upstream.default_script = Script(text="Checking. " + CALL, chunks=7)
    route = "/v1/chat/completions"
    before = httpx.get(two_workers.url + "/metrics").text

    def chat(i: int) -> httpx.Response:
        with httpx.Client(timeout=10) as client:  # a connection per request: both workers get some
            return client.post(two_workers.v1_url + "/chat/completions", headers={"X-Request-Id": f"e2e-obs-{i}"},
                               json={"model": "scripted-model", "stream": i % 2 == 0, "tools": [WEATHER],
                                     "messages": [{"role": "user", "content": "weather?"}]})

    with ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(pool.map(chat, range(REQUESTS)))
    assert [r.status_code for r in responses] == [200] * REQUESTS
    assert [r.headers["X-Request-Id"] for r in responses] == [f"e2e-obs-{i}" for i in range(REQUESTS)]
    forwarded = sorted(e.headers.get("x-request-id", "") for e in upstream.chat_requests)
    # The back end gets each id as a UUID (llama-cpp-python refuses any other), the same id always the same one.
    assert forwarded == sorted(upstream_request_id(f"e2e-obs-{i}") for i in range(REQUESTS))

    # A body is closed (and its access line written) just after its last byte reached the client.
    deadline = time.monotonic() + 10
    while len(access := access_lines(two_workers.log())) < REQUESTS and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(a["request_id"] for a in access) == sorted(f"e2e-obs-{i}" for i in range(REQUESTS))
    assert all(a["tool_calls"] == 1 and a["status"] == 200 and a["duration_ms"] > 0 for a in access)
    assert len({a["pid"] for a in access}) == 2, "both workers should have served requests"

    for _ in range(4):  # whichever worker answers, it reports every worker's counts
        after = httpx.get(two_workers.url + "/metrics").text
        assert metric(after, "toolwire_requests_total", route=route, status="200") == \
            metric(before, "toolwire_requests_total", route=route, status="200") + REQUESTS
        assert metric(after, "toolwire_tool_calls_total", model="other", outcome="emitted") == \
            metric(before, "toolwire_tool_calls_total", model="other", outcome="emitted") + REQUESTS
        assert metric(after, "toolwire_fsm_transitions_total", source="text", dest="in_tool_call") == \
            metric(before, "toolwire_fsm_transitions_total", source="text", dest="in_tool_call") + REQUESTS
        assert metric(after, "toolwire_streams_in_flight", default=None) == 0  # present, and zero

    view = httpx.get(two_workers.url + "/debug/requests/e2e-obs-3").json()  # stored by either worker
    assert view["request_id"] == "e2e-obs-3"
    assert [step["trigger"] for step in view["choices"][0]["path"]] == [
        "tool_open_seen", "name_completed", "tool_close_seen", "upstream_finished"]


def _access_lines_of(server, prefix: str, count: int) -> list[dict]:
    """The access lines whose request id starts with ``prefix``, once ``count`` are there."""
    deadline = time.monotonic() + 10
    while True:
        lines = [json.loads(line) for line in server.log().splitlines()
                 if line.startswith('{"ts"') and '"INFO","logger":"toolwire.access"' in line and f'"{prefix}' in line]
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_the_access_line_and_a_metric_say_how_each_response_ended(toolwire_server, upstream):
    """Completed, cut upstream (an error frame after a 200), client gone, refused before streaming: each
    response's end is in its access line and in toolwire_request_outcomes_total; a stream that failed
    after its headers also logs a warning naming the cause."""
    route = "/v1/chat/completions"
    before = httpx.get(toolwire_server.url + "/metrics").text
    upstream.enqueue(Script(text="Checking. " + CALL, chunks=7),
                     Script(text="Checking the weather now.", chunks=4, close_after_chunks=2),
                     Script(text="Checking the weather now.", chunks=4, hang_after_chunks=2),
                     Script(status=500))
    body = {"model": "scripted-model", "tools": [WEATHER], "messages": [{"role": "user", "content": "weather?"}]}
    with httpx.Client(base_url=toolwire_server.v1_url, timeout=10) as client:
        for name in ("completed", "cut"):
            response = client.post("/chat/completions", headers={"X-Request-Id": f"e2e-outcome-{name}"},
                                   json={**body, "stream": True})
            assert response.status_code == 200
        assert '"code":"upstream_protocol"' in response.text.replace(" ", "")  # the cut stream's error frame
        with client.stream("POST", "/chat/completions", headers={"X-Request-Id": "e2e-outcome-gone"},
                           json={**body, "stream": True}) as response:
            next(response.iter_raw())  # the first frames, then the client leaves
        refused = client.post("/chat/completions", headers={"X-Request-Id": "e2e-outcome-refused"}, json=body)
        assert refused.status_code == 502

    access = {a["request_id"]: a for a in _access_lines_of(toolwire_server, "e2e-outcome-", 4)}
    assert {name: (a["status"], a["outcome"]) for name, a in access.items()} == {
        "e2e-outcome-completed": (200, "completed"), "e2e-outcome-cut": (200, "upstream_protocol"),
        "e2e-outcome-gone": (200, "client_gone"), "e2e-outcome-refused": (502, "upstream_server_error")}
    [warning] = [line for line in toolwire_server.log().splitlines()
                 if '"WARNING"' in line and '"e2e-outcome-cut"' in line]
    warning = json.loads(warning)
    assert warning["msg"] == "stream failed after its headers: The upstream broke the HTTP protocol."
    assert warning["code"] == "upstream_protocol"

    after = httpx.get(toolwire_server.url + "/metrics").text
    for outcome in ("completed", "upstream_protocol", "client_gone", "upstream_server_error"):
        assert metric(after, "toolwire_request_outcomes_total", route=route, outcome=outcome) == \
            metric(before, "toolwire_request_outcomes_total", route=route, outcome=outcome) + 1, outcome
