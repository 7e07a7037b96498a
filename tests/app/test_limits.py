"""Body size (413), messages / tools / schema size (400 with the param), and the per-worker stream cap (429)."""

from __future__ import annotations

import io
import json
import tracemalloc

import gevent
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from app.http.limits import check_nesting, nests_deeper
from app.http.state import StreamSlots
from app.validation import check_responses_limits
from app.errors import ApiError
from app.settings import Settings
from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks

USER = [{"role": "user", "content": "hi"}]


def tool(name: str, parameters: dict | None = None) -> dict:
    fn = {"name": name}
    if parameters is not None:
        fn["parameters"] = parameters
    return {"type": "function", "function": fn}


def assert_error(response, status: int, param: str | None, code: str) -> dict:
    assert response.status_code == status, response.get_data(as_text=True)
    error = response.get_json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["param"], error["code"]) == (param, code)
    return error


def slots(app) -> StreamSlots:
    return app.extensions["toolwire"]["toolwire"].state(app).streams


# -- body size -----------------------------------------------------------------------------------


def test_content_length_over_the_limit_is_413_before_reading(make_app, upstream):
    app = make_app(upstream, max_body_bytes=100)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 500}]})
    error = assert_error(app.test_client().post("/v1/chat/completions", data=body,
                                                content_type="application/json"),
                         413, None, "request_entity_too_large")
    assert "100-byte limit" in error["message"]
    assert upstream.bodies == []


def test_chunked_body_over_the_limit_is_413(make_app, upstream):
    app = make_app(upstream, max_body_bytes=100)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 500}]}).encode()
    response = app.test_client().post("/v1/chat/completions", input_stream=io.BytesIO(body),
                                      headers={"Transfer-Encoding": "chunked", "Content-Type": "application/json"},
                                      environ_overrides={"wsgi.input_terminated": True})
    error = assert_error(response, 413, None, "request_entity_too_large")
    assert "100-byte limit" in error["message"]
    assert upstream.bodies == []


@pytest.mark.parametrize("pad", [0, 1])
def test_chunked_body_up_to_the_limit_is_read(make_app, upstream, pad):
    body = json.dumps({"model": "m", "messages": USER}).encode()
    app = make_app(upstream, max_body_bytes=len(body) + pad)
    response = app.test_client().post("/v1/chat/completions", input_stream=io.BytesIO(body),
                                      headers={"Transfer-Encoding": "chunked", "Content-Type": "application/json"},
                                      environ_overrides={"wsgi.input_terminated": True})
    assert response.status_code == 200, response.get_json()


# -- counts and schema size ----------------------------------------------------------------------


@pytest.mark.parametrize("settings, body, param, code", [
    ({"max_messages": 2}, {"messages": USER * 3}, "messages", "array_above_max_length"),
    ({"max_tools": 2}, {"tools": [tool("a"), tool("b"), tool("c")]}, "tools", "array_above_max_length"),
    ({"max_tools": 1}, {"functions": [{"name": "a"}, {"name": "b"}]}, "functions", "array_above_max_length"),
    ({"max_tool_schema_bytes": 100},
     {"tools": [tool("a"), tool("b", {}), tool("c"), tool("d", {"type": "object", "description": "x" * 200})]},
     "tools[3].function.parameters", "tool_schema_too_large"),
    ({"max_tool_schema_bytes": 100},
     {"functions": [{"name": "a", "parameters": {"type": "object", "description": "y" * 200}}]},
     "functions[0].parameters", "tool_schema_too_large"),
])
def test_each_limit_names_its_param(make_app, upstream, settings, body, param, code):
    client = make_app(upstream, **settings).test_client()
    response = client.post("/v1/chat/completions", json={"model": "m", "messages": USER, **body})
    error = assert_error(response, 400, param, code)
    assert error["type"] == "invalid_request_error"
    assert upstream.bodies == []


def test_at_the_limits_requests_pass(make_app, upstream):
    schema = WEATHER_TOOL["function"]["parameters"]
    size = len(json.dumps(schema, separators=(",", ":")))
    client = make_app(upstream, max_messages=3, max_tools=1, max_tool_schema_bytes=size).test_client()
    response = client.post("/v1/chat/completions", json={"model": "m", "messages": USER * 3, "tools": [WEATHER_TOOL]})
    assert response.status_code == 200, response.get_json()


def test_zero_means_no_limit(make_app, upstream):
    client = make_app(upstream, max_messages=0, max_tools=0, max_tool_schema_bytes=0).test_client()
    big = tool("big", {"type": "object", "description": "z" * 100_000})
    response = client.post("/v1/chat/completions",
                           json={"model": "m", "messages": USER * 3000, "tools": [big] + [tool(f"t{i}") for i in range(200)]})
    assert response.status_code == 200, response.get_json()


@pytest.mark.parametrize("body, param", [
    ({"input": [{"role": "user", "content": "hi"}] * 3}, "input"),
    ({"input": "hi", "tools": [{"type": "function", "name": f"t{i}"} for i in range(3)]}, "tools"),
    ({"input": "hi", "tools": [{"type": "function", "name": "a"},
                               {"type": "function", "name": "b", "parameters": {"description": "w" * 200}}]},
     "tools[1].parameters"),
])
def test_responses_limits(body, param):
    settings = Settings(max_messages=2, max_tools=2, max_tool_schema_bytes=100)
    with pytest.raises(ApiError) as info:
        check_responses_limits(body, settings)
    check_responses_limits({"input": "a long string is one item " * 10}, settings)
    assert (info.value.status, info.value.param) == (400, param)


@pytest.mark.parametrize("path, body, param", [
    ("/v1/responses", {"input": "hi", "tools": [{"type": "function", "name": "n" * 65}]}, "tools[0].name"),
    ("/v1/responses", {"input": "hi", "tools": [{"type": "custom", "name": "n" * (8 << 20)}]}, "tools[0].name"),
    ("/v1/responses", {"input": "hi", "tools": [{"type": "namespace", "name": "ns", "tools": [
        {"type": "function", "name": "n" * 65}]}]}, "tools[0].tools[0].name"),
    ("/v1/responses", {"input": "hi", "metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ("/v1/responses", {"input": "hi", "metadata": {"k" * 65: "v"}}, "metadata." + "k" * 65),
    ("/v1/responses", {"input": "hi", "metadata": {"k": "v" * 513}}, "metadata.k"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                              "tools": [{"type": "function", "function": {"name": "n" * 65}}]},
     "tools[0].function.name"),
])
def test_tool_names_and_metadata_are_held_to_openai_s_limits(make_app, upstream, path, body, param):
    """An 8 MiB tool name and 100,000 metadata keys were accepted; OpenAI takes 64-character names and
    16 metadata pairs (keys up to 64, values up to 512 characters)."""
    response = make_app(upstream).test_client().post(path, json={"model": "m", **body})
    assert response.status_code == 400, response.get_data(as_text=True)
    assert response.get_json()["error"]["param"] == param
    assert upstream.bodies == []


# -- the stream cap ------------------------------------------------------------------------------


def slow_upstream() -> FakeUpstream:
    return FakeUpstream([*text_chunks("abc", size=1, finish=None), 5, *text_chunks("never")])


def open_stream(client):
    response = client.post("/v1/chat/completions", json={"model": "m", "messages": USER, "stream": True},
                           buffered=False)
    assert response.status_code == 200
    next(iter(response.response))
    return response


def test_over_the_cap_is_429_with_retry_after_before_any_upstream_call(make_app):
    upstream = slow_upstream()
    app = make_app(upstream, max_concurrent_streams=1, heartbeat_seconds=0)
    client = app.test_client()
    first = open_stream(client)
    assert slots(app).in_use == 1
    for stream in (True, False):
        refused = client.post("/v1/chat/completions", json={"model": "m", "messages": USER, "stream": stream})
        error = assert_error(refused, 429, None, "concurrency_limit_exceeded")
        assert error["type"] == "rate_limit_error" and refused.headers["Retry-After"] == "1"
    assert len(upstream.bodies) == 1
    assert client.get("/v1/models").status_code == 200  # not a generation: no slot needed
    first.close()  # the client goes away
    gevent.sleep(0.05)
    assert slots(app).in_use == 0
    assert upstream.streams[0].closed
    open_stream(client).close()


def test_slot_is_released_when_a_stream_ends(make_app, upstream):
    app = make_app(upstream, max_concurrent_streams=1)
    client = app.test_client()
    for _ in range(3):
        response = client.post("/v1/chat/completions", json={"model": "m", "messages": USER, "stream": True})
        assert response.status_code == 200 and response.get_data().endswith(b"data: [DONE]\n\n")
        assert slots(app).in_use == 1  # until the server closes the body, as every WSGI server does
        response.close()
        assert slots(app).in_use == 0
        assert client.post("/v1/chat/completions", json={"model": "m", "messages": USER}).status_code == 200
        assert slots(app).in_use == 0


def test_slot_is_released_after_an_error(make_app, upstream):
    app = make_app(upstream, max_concurrent_streams=1)
    client = app.test_client()
    for _ in range(2):
        assert client.post("/v1/chat/completions", json={"model": "m"}).status_code == 400
        assert client.post("/v1/chat/completions", data="{", content_type="application/json").status_code == 400
        assert slots(app).in_use == 0


def test_refused_client_takes_no_slot(make_app, upstream):
    app = make_app(upstream, max_concurrent_streams=1, api_keys="sk-x")
    client = app.test_client()
    assert client.post("/v1/chat/completions", json={"model": "m", "messages": USER}).status_code == 401
    assert slots(app).in_use == 0


def test_stream_slots_count_and_cap():
    capped = StreamSlots(2)
    a, b = capped.try_acquire(), capped.try_acquire()
    assert a and b and capped.try_acquire() is None and capped.in_use == 2
    a.release()
    a.release()  # idempotent
    assert capped.in_use == 1
    c = capped.try_acquire()
    assert c is not None and capped.in_use == 2
    unlimited = StreamSlots(0)
    assert all(unlimited.try_acquire() for _ in range(1000)) and unlimited.in_use == 1000


# -- nesting depth -------------------------------------------------------------------------------


def _depth(value) -> int:
    """The reference: nesting depth by plain recursion over the parsed value (scalars are 0)."""
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


json_values = st.recursive(
    st.none() | st.integers() | st.text(alphabet='[]{}"\\ab', max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet='[]{}"a', max_size=3), inner,
                                                                 max_size=4),
    max_leaves=40)


@hypothesis_settings(max_examples=400, deadline=None)
@given(json_values)
def test_nesting_depth_is_measured_exactly_on_the_bytes(value):
    raw, depth = json.dumps(value).encode(), _depth(value)
    for limit in {max(depth - 1, 0), depth, depth + 1}:
        assert nests_deeper(raw, limit) is (depth > limit)


@pytest.mark.parametrize("unit", [b"[],", b"[1],", b"[" * 120 + b"1" + b"]" * 120 + b","])
def test_the_nesting_check_is_bounded_in_memory_on_cheap_hostile_bodies(unit):
    """Millions of tiny containers (16 MiB of ``[],`` once cost seconds and ~900 MB): a few copies of the body."""
    raw = b'{"model": "m", "extra": [' + unit * ((4 << 20) // len(unit)) + b'1]}'
    tracemalloc.start()
    try:
        check_nesting(raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * len(raw)
    with pytest.raises(ApiError) as refused:
        check_nesting(raw[:-2] + b"," + b"[" * 129 + b"]" * 129 + b"]}")
    assert refused.value.status == 400 and refused.value.code == "invalid_json"
