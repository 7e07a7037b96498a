"""Request ids, access logs, Prometheus metrics and the debug view, through Flask's test client.

Responses are read with ``buffered=True`` (or closed explicitly): the access line and the
metrics are written when the body is closed, as a WSGI server does.
"""

from __future__ import annotations

import io
import json
import logging
import time
import uuid

import gevent
import pytest
from prometheus_client import REGISTRY

from app.http.extension import configured_models
from app.observability.logs import make_handler
from app.settings import Settings
from app.upstreams.base import UpstreamError
from app.upstreams.http import upstream_request_id
from app.upstreams.transport import Timeouts
from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks
from support.loopback import json_answer, sse_answer

SECRET = "my-secret-prompt-4711"
USER = [{"role": "user", "content": f"Weather in Paris? {SECRET}"}]
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
STRICT_TOOL = {"type": "function", "function": {**WEATHER_TOOL["function"], "strict": True}}


def records(buffer: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def post(client, request_id: str | None = None, **body):
    body.setdefault("model", "m")
    body.setdefault("messages", USER)
    headers = {"X-Request-Id": request_id} if request_id else {}
    return client.post("/v1/chat/completions", json=body, headers=headers, buffered=True)


# -- request ids and logs ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_access_line_is_json_with_the_request_fields_and_no_prompt(make_app, json_log, stream):
    upstream = FakeUpstream(text_chunks("Let me check." + CALL, size=6))
    response = post(make_app(upstream).test_client(), "req-abc.1", stream=stream, tools=[WEATHER_TOOL])
    assert response.status_code == 200 and response.headers["X-Request-Id"] == "req-abc.1"
    lines = records(json_log)
    access = [line for line in lines if line["logger"] == "toolwire.access"]
    assert len(access) == 1
    line = access[0]
    assert line["request_id"] == "req-abc.1" and line["level"] == "INFO" and isinstance(line["pid"], int)
    assert (line["method"], line["route"], line["status"], line["model"]) == ("POST", "/v1/chat/completions",
                                                                               200, "m")
    assert line["stream"] is stream and line["tool_calls"] == 1 and line["disconnected"] is False
    assert 0 < line["ttfb_ms"] <= line["duration_ms"]
    assert SECRET not in json_log.getvalue() and "Paris" not in json_log.getvalue()


def test_streams_closed_outside_their_request_log_their_own_ids(make_app, json_log):
    """A host may close a streamed body after another request ran in the same context: each access line
    still carries the id of the request it is about."""
    client = make_app(FakeUpstream(text_chunks("Hello there."))).test_client()
    opened = [client.post("/v1/chat/completions", json={"model": "m", "messages": USER, "stream": True},
                          headers={"X-Request-Id": f"open-{i}"}, buffered=False) for i in range(3)]
    for response in opened:
        b"".join(response.response)
        response.close()
    ids = [line["request_id"] for line in records(json_log) if line["logger"] == "toolwire.access"]
    assert ids == ["open-0", "open-1", "open-2"]


@pytest.mark.parametrize("stream", [False, True])
def test_access_line_of_a_rejected_body_shows_the_stream_it_asked_for(make_app, json_log, stream):
    response = post(make_app(FakeUpstream(text_chunks("never"))).test_client(), "rejected-1", stream=stream,
                    temperature=9)
    assert response.status_code == 400
    (line,) = [line for line in records(json_log) if line["logger"] == "toolwire.access"]
    assert (line["status"], line["stream"]) == (400, stream)


def test_log_lines_from_a_stream_carry_the_request_id(make_app, json_log):
    unknown = '<tool_call>{"name": "launch_rocket", "arguments": {"target": "Paris"}}</tool_call>'
    upstream = FakeUpstream(text_chunks(unknown, size=4))
    post(make_app(upstream).test_client(), "rid-pump", stream=True, tools=[WEATHER_TOOL])
    notes = [line for line in records(json_log) if line["logger"] == "toolwire.pipeline.driver"]
    assert [(n["kind"], n["tool"], n["request_id"]) for n in notes] == [("unknown_tool", "launch_rocket", "rid-pump")]
    assert "target" not in json_log.getvalue()  # the note's message (which may quote arguments) is debug only


def test_generated_request_id_is_logged_and_returned(make_app, json_log):
    response = post(make_app(FakeUpstream(text_chunks("hi"))).test_client(), "not valid!")
    rid = response.headers["X-Request-Id"]
    assert len(rid) == 32 and rid != "not valid!"
    assert [line["request_id"] for line in records(json_log) if line["logger"] == "toolwire.access"] == [rid]


def test_plain_log_format(make_app):
    buffer = io.StringIO()
    handler = make_handler("plain", buffer)
    logger = logging.getLogger("toolwire.access")
    logger.addHandler(handler)
    try:
        post(make_app(FakeUpstream(text_chunks("hi"))).test_client(), "plain-1")
    finally:
        logger.removeHandler(handler)
    line = buffer.getvalue().strip()
    assert "[plain-1] POST /v1/chat/completions 200" in line and " status=200 " in line and "{" not in line


def test_plain_log_lines_cannot_be_forged_or_carry_terminal_escapes(make_app):
    """A client-chosen model name with a newline, a fake field and an ANSI escape stays one line, quoted."""
    buffer = io.StringIO()
    handler = make_handler("plain", buffer)
    logger = logging.getLogger("toolwire.access")
    logger.addHandler(handler)
    forged = "m\n2026-01-01 INFO toolwire.access [x] POST /v1/admin 200 status=200\x1b[2J\x9b31m"
    try:
        post(make_app(FakeUpstream(text_chunks("hi"))).test_client(), "plain-2", model=forged)
        logger.warning("tool %s\r\nforged", "\x1b]0;title\x07")
    finally:
        logger.removeHandler(handler)
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 2 and all(c.isprintable() for line in lines for c in line)
    assert "POST /v1/chat/completions 200" in lines[0] and lines[0].split(" model=")[0].endswith(" status=200")
    model, end = json.JSONDecoder().raw_decode(lines[0].split(" model=", 1)[1])  # one quoted value, read back whole
    assert model == forged and lines[0].split(" model=", 1)[1][end:].startswith(" stream=")
    assert lines[1].endswith("tool \\x1b]0;title\\x07\\r\\nforged")


def test_access_line_follows_the_access_loggers_level_and_filters(make_app, json_log):
    client = make_app(FakeUpstream(text_chunks("hi"))).test_client()
    logger = logging.getLogger("toolwire.access")
    before = sample("toolwire_requests_total", route="/v1/chat/completions", status="200")
    logger.setLevel(logging.WARNING)
    try:
        post(client, "quiet-1")
    finally:
        logger.setLevel(logging.NOTSET)
    dropped = logging.Filter("nothing-passes")
    logger.addFilter(dropped)
    try:
        post(client, "quiet-2")
    finally:
        logger.removeFilter(dropped)
    post(client, "heard-3")
    assert [line["request_id"] for line in records(json_log) if line["logger"] == "toolwire.access"] == ["heard-3"]
    assert sample("toolwire_requests_total", route="/v1/chat/completions", status="200") == before + 3


def test_request_id_is_forwarded_upstream_as_a_uuid(serve):
    """Issue 31, fault 7: llama-cpp-python answers 400 to an ``X-Request-Id`` that is not a UUID. A UUID
    (toolwire's own ids are uuid4 hex) goes as it is; any other id as the same UUID every time."""
    upstream = serve(lambda seen: sse_answer(b"data: [DONE]\n\n"))
    own = uuid.uuid4()
    for request_id in ("rid-up-1", own.hex, "rid-up-1"):
        list(upstream.open({"model": "m", "messages": []}, request_id=request_id))
    sent = [seen.headers.get("x-request-id") for seen in upstream.server.seen]
    assert sent[1] == str(own) and sent[0] == sent[2] == upstream_request_id("rid-up-1")
    assert uuid.UUID(sent[0]).version == 5


def test_the_chat_view_passes_its_request_id_to_the_upstream(make_app):
    class Recording(FakeUpstream):
        def open(self, body, *, request_id=None):
            self.request_ids = [*getattr(self, "request_ids", []), request_id]
            return super().open(body, request_id=request_id)

    upstream = Recording(text_chunks("hi"))
    response = post(make_app(upstream).test_client(), "rid-view")
    assert upstream.request_ids == ["rid-view"] == [response.headers["X-Request-Id"]]


# -- metrics ---------------------------------------------------------------------------------------


def test_metrics_move_for_a_chat_request_with_a_tool_call(make_app):
    route = "/v1/chat/completions"
    before = {
        "requests": sample("toolwire_requests_total", route=route, status="200"),
        "durations": sample("toolwire_request_duration_seconds_count", route=route),
        "ttft": sample("toolwire_time_to_first_token_seconds_count", model="gpt-4o"),
        "emitted": sample("toolwire_tool_calls_total", model="gpt-4o", outcome="emitted"),
        "open": sample("toolwire_fsm_transitions_total", source="text", dest="in_tool_call"),
        "name": sample("toolwire_fsm_transitions_total", source="in_tool_call", dest="args_streaming"),
        "close": sample("toolwire_fsm_transitions_total", source="args_streaming", dest="text"),
        "done": sample("toolwire_fsm_transitions_total", source="text", dest="done"),
        "streams": sample("toolwire_streams_in_flight"),
    }
    client = make_app(FakeUpstream(text_chunks("Sure." + CALL, size=3)), model_map={"gpt-4o": "fake"}).test_client()
    assert post(client, model="gpt-4o", stream=True, tools=[WEATHER_TOOL]).status_code == 200
    assert sample("toolwire_requests_total", route=route, status="200") == before["requests"] + 1
    assert sample("toolwire_request_duration_seconds_count", route=route) == before["durations"] + 1
    assert sample("toolwire_time_to_first_token_seconds_count", model="gpt-4o") == before["ttft"] + 1
    assert sample("toolwire_tool_calls_total", model="gpt-4o", outcome="emitted") == before["emitted"] + 1
    for key, (source, dest) in {"open": ("text", "in_tool_call"), "name": ("in_tool_call", "args_streaming"),
                                "close": ("args_streaming", "text"), "done": ("text", "done")}.items():
        assert sample("toolwire_fsm_transitions_total", source=source, dest=dest) == before[key] + 1, key
    assert sample("toolwire_streams_in_flight") == before["streams"]  # opened and closed again


def test_unconfigured_models_share_one_label(make_app):
    before = sample("toolwire_tool_calls_total", model="other", outcome="emitted")
    post(make_app(FakeUpstream(text_chunks(CALL))).test_client(), model="anything-9", tools=[WEATHER_TOOL])
    assert sample("toolwire_tool_calls_total", model="other", outcome="emitted") == before + 1
    assert sample("toolwire_tool_calls_total", model="anything-9", outcome="emitted") == 0


def test_configured_model_names_label_metrics_as_themselves(make_app):
    assert configured_models(Settings(upstream_url=None, model_map={"gpt-4o": "qwen"}, default_upstream_model="llama")) \
        == {"gpt-4o", "qwen", "llama", "toolwire-demo"}
    assert configured_models(Settings(upstream_url="http://up/v1")) == frozenset()
    before = sample("toolwire_tool_calls_total", model="llama", outcome="emitted")
    client = make_app(FakeUpstream(text_chunks(CALL)), default_upstream_model="llama").test_client()
    post(client, model="llama", tools=[WEATHER_TOOL])
    assert sample("toolwire_tool_calls_total", model="llama", outcome="emitted") == before + 1


@pytest.mark.parametrize("text, settings, outcome", [
    ('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool>', {}, "repaired"),
    # only strict tools offered: an unknown name follows strict_mismatch (seed 8.3 #8)
    ('<tool_call>{"name": "nope", "arguments": {}}</tool_call>', {"strict_mismatch": "text"}, "rejected"),
    ('<tool_call>{"name": "nope", "arguments": {}}</tool_call>', {}, "failed"),
    # a non-streamed answer holds each call until it ends: one never finished, or failing its schema under a
    # text policy, never went out (issue 38)
    ('<tool_call>{"name": "get_weather", "arguments": {"city": "Par', {}, "rejected"),
    ('<tool_call>{"name": "get_weather", "arguments": {"town": 5}}</tool_call>', {"strict_mismatch": "text"},
     "rejected"),
    ('<tool_call>{"name": "get_weather", "arguments": {"town": 5}}</tool_call>', {}, "failed"),  # fail policy
])
def test_tool_call_outcomes(make_app, text, settings, outcome):
    before = sample("toolwire_tool_calls_total", model="other", outcome=outcome)
    client = make_app(FakeUpstream(text_chunks(text, size=4)), reask_calls="off", **settings).test_client()
    post(client, tools=[STRICT_TOOL])
    assert sample("toolwire_tool_calls_total", model="other", outcome=outcome) == before + 1


def test_client_disconnect_is_counted_and_the_stream_leaves_the_gauge(make_app, json_log):
    before = sample("toolwire_client_disconnects_total"), sample("toolwire_streams_in_flight")
    upstream = FakeUpstream([*text_chunks("a" * 20, size=1, finish=None), 5, *text_chunks("never")])
    client = make_app(upstream, heartbeat_seconds=0).test_client()
    response = client.post("/v1/chat/completions", json={"model": "m", "messages": USER, "stream": True},
                           headers={"X-Request-Id": "rid-left"})
    next(iter(response.response))
    assert sample("toolwire_streams_in_flight") == before[1] + 1
    response.close()
    gevent.sleep(0.05)
    assert sample("toolwire_client_disconnects_total") == before[0] + 1
    assert sample("toolwire_streams_in_flight") == before[1]
    access = [line for line in records(json_log) if line["logger"] == "toolwire.access"]
    assert [(a["request_id"], a["disconnected"]) for a in access] == [("rid-left", True)]


@pytest.mark.parametrize("answer, kind", [
    (json_answer(500, b'{"error": {"message": "boom"}}'), "server_error"),
    (json_answer(429, b'{"error": {"message": "slow"}}'), "rate_limited"),
    (sse_answer(b"data: {x\n\n"), "protocol"),
])
def test_upstream_errors_are_counted_by_kind(serve, answer, kind):
    before = sample("toolwire_upstream_errors_total", kind=kind)
    upstream = serve(lambda seen: answer)
    with pytest.raises(UpstreamError):
        list(upstream.open({"model": "m", "messages": []}))
    assert sample("toolwire_upstream_errors_total", kind=kind) == before + 1


def test_upstream_timeouts_are_counted(serve):
    before = sample("toolwire_upstream_errors_total", kind="timeout")
    with pytest.raises(UpstreamError):
        serve(lambda seen: (time.sleep(1.0), sse_answer(b""))[1], timeouts=Timeouts(read=0.2)).open({})
    assert sample("toolwire_upstream_errors_total", kind="timeout") == before + 1


def test_metrics_endpoint_serves_prometheus_text(make_app):
    client = make_app(FakeUpstream(text_chunks("hi"))).test_client()
    post(client)
    response = client.get("/metrics")
    assert response.status_code == 200 and response.mimetype == "text/plain"
    text = response.get_data(as_text=True)
    for name in ("toolwire_requests_total", "toolwire_request_duration_seconds_bucket",
                 "toolwire_streams_in_flight", "toolwire_fsm_transitions_total"):
        assert f"\n{name}" in text, name


def test_ops_routes_are_not_logged_or_counted(make_app, json_log):
    client = make_app(FakeUpstream()).test_client()
    before = sample("toolwire_requests_total", route="/healthz", status="200")
    client.get("/healthz", buffered=True)
    client.get("/metrics", buffered=True)
    assert sample("toolwire_requests_total", route="/healthz", status="200") == before == 0
    assert not [line for line in records(json_log) if line["logger"] == "toolwire.access"]


def test_metrics_guard_can_refuse(make_app):
    from flask import Flask

    from app.errors import ApiError
    from app.http.errors import register_error_handlers
    from app.http.ops import create_ops_blueprint

    def guard() -> None:
        raise ApiError(401, "no key", code="invalid_api_key")

    host = Flask(__name__)
    register_error_handlers(host)
    host.register_blueprint(create_ops_blueprint(metrics_guard=guard))
    response = host.test_client().get("/metrics")
    assert response.status_code == 401 and response.get_json()["error"]["code"] == "invalid_api_key"


# -- debug view -----------------------------------------------------------------------------------


@pytest.fixture
def debug_client(make_app, tmp_path):
    def build(script, **settings):
        return make_app(FakeUpstream(script), debug=True, debug_dir=str(tmp_path / "debug"), **settings).test_client()

    return build


def test_debug_view_has_each_choices_path_with_its_text_span(debug_client):
    client = debug_client(text_chunks("Sure. " + CALL, size=5))
    post(client, "dbg-1", stream=True, tools=[WEATHER_TOOL])
    view = client.get("/debug/requests/dbg-1").get_json()
    assert view["request_id"] == "dbg-1" and view["status"] == 200
    [choice] = view["choices"]
    assert choice["index"] == 0 and choice["state"] == "done"
    steps = [(s["source"], s["trigger"], s["dest"]) for s in choice["path"]]
    assert steps == [("text", "tool_open_seen", "in_tool_call"), ("in_tool_call", "name_completed", "args_streaming"),
                     ("args_streaming", "tool_close_seen", "text"), ("text", "upstream_finished", "done")]
    for step in choice["path"]:
        assert step["text"] == ("Sure. " + CALL)[slice(*step["span"])]
    assert "<tool_call>" in choice["path"][0]["text"]  # the held partial opener is part of the span
    assert "</tool_call>" in choice["path"][2]["text"]  # the call ends at its closer
    assert choice["path"][3]["text"] == ""


def test_debug_diagram_highlights_the_path(debug_client):
    client = debug_client(text_chunks(CALL))
    post(client, "dbg-2", tools=[WEATHER_TOOL])
    dot = client.get("/debug/requests/dbg-2/diagram?format=dot").get_data(as_text=True)
    assert 'text -> in_tool_call [label="tool_open_seen", color=blue' in dot
    assert 'in_tool_call -> text [label="tool_open_disproved"];' in dot  # not taken: plain
    mermaid = client.get("/debug/requests/dbg-2/diagram").get_data(as_text=True)
    assert mermaid.startswith("stateDiagram-v2") and "class done s_active" in mermaid
    svg = client.get("/debug/requests/dbg-2/diagram?format=svg")
    assert svg.mimetype == "image/svg+xml" and b"<svg" in svg.get_data()


def test_debug_diagram_errors(debug_client):
    client = debug_client(text_chunks("hi"))
    post(client, "dbg-3")
    bad = client.get("/debug/requests/dbg-3/diagram?format=png")
    assert bad.status_code == 400 and bad.get_json()["error"]["param"] == "format"
    missing = client.get("/debug/requests/dbg-3/diagram?choice=4")
    assert missing.status_code == 404 and missing.get_json()["error"]["param"] == "choice"
    assert client.get("/debug/requests/unknown-id").status_code == 404


def test_debug_view_is_404_when_debug_is_off(make_app, tmp_path):
    debug_dir = tmp_path / "debug"  # the response store lives under tmp_path too
    client = make_app(FakeUpstream(text_chunks("hi")), debug_dir=str(debug_dir)).test_client()
    post(client, "dbg-off")
    assert not debug_dir.exists() or list(debug_dir.iterdir()) == []
    response = client.get("/debug/requests/dbg-off")
    assert response.status_code == 404 and response.get_json()["error"]["code"] == "not_found"


def test_debug_store_keeps_only_the_newest(debug_client, tmp_path):
    client = debug_client(text_chunks("hi"), debug_keep=2)
    for i in range(4):
        client.application.extensions["toolwire"]["toolwire"].state(client.application).upstream.script = text_chunks("hi")
        post(client, f"keep-{i}")
    assert sorted(p.name for p in (tmp_path / "debug").iterdir()) == ["open.keep-2.json", "open.keep-3.json"]
    assert client.get("/debug/requests/keep-0").status_code == 404
    assert client.get("/debug/requests/keep-3").status_code == 200


def test_an_unwritable_debug_dir_does_not_break_the_response(make_app, json_log, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    client = make_app(FakeUpstream(text_chunks("hi")), debug=True, debug_dir=str(blocker)).test_client()
    assert post(client, "dbg-fail").status_code == 200
    warnings = [line for line in records(json_log) if line["level"] == "WARNING" and line["logger"] != "toolwire.http.auth"]
    assert len(warnings) == 1 and warnings[0]["msg"].startswith("debug record not saved")
    assert warnings[0]["request_id"] == "dbg-fail"


def test_metric_children_are_cached_and_the_cache_is_bounded(monkeypatch):
    from app.observability import metrics

    monkeypatch.setattr(metrics, "_children", {})
    monkeypatch.setattr(metrics, "CHILD_CACHE_SIZE", 2)
    first = metrics.child(metrics.REQUESTS, "/cache-test", "200")
    assert first is metrics.REQUESTS.labels("/cache-test", "200") is metrics.child(metrics.REQUESTS, "/cache-test", "200")
    before = sample("toolwire_requests_total", route="/cache-test", status="200")
    first.inc()
    assert sample("toolwire_requests_total", route="/cache-test", status="200") == before + 1
    metrics.child(metrics.REQUEST_DURATION, "/cache-test")
    metrics.child(metrics.REQUESTS, "/cache-test", "404")  # past the bound: starts over
    assert list(metrics._children) == [(metrics.REQUESTS, ("/cache-test", "404"))]


def test_log_timestamps_match_datetime_isoformat_to_the_millisecond():
    import random
    from datetime import datetime, timezone

    from app.observability.logs import utc_timestamp

    edges = [0.0, 0.0005, 0.0009995, 1763792205.9999995, 1763792205.9999994, 1763792205.0019995,
             1e9 + 0.9999996, -0.5, -1.0000004, -1.9999996, 253402300799.999]
    rng = random.Random(7)
    values = edges + [rng.uniform(0, 4e9) for _ in range(20000)] + [1763792205 + i / 7919 for i in range(20000)]
    for value in values:
        assert utc_timestamp(value) == datetime.fromtimestamp(value, timezone.utc).isoformat(timespec="milliseconds")


def test_an_outcome_label_is_a_short_snake_case_code_or_other_error():
    from app.observability.metrics import outcome_label

    assert [outcome_label(o) for o in ("completed", "client_gone", "upstream_protocol", "http_404")] == [
        "completed", "client_gone", "upstream_protocol", "http_404"]
    assert [outcome_label(o) for o in ("Upstream-Code", "x" * 49, "", "bad code")] == ["other_error"] * 4
