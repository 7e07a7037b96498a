"""Stored responses end to end: two toolwire hosts (separate gunicorn masters) sharing one real Redis, owners
scoped by client key, and what clients see while Redis is down, frozen or back, or the SQLite file is unwritable.

Every stream and error body the openai SDK sees is checked against the wire contract by the recording transport.
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any, Callable

import httpx
import openai
import pytest

from support.invariants import check_error_envelope
from support.redis_server import RedisServer
from support.scripted_upstream import Script, ScriptedUpstream
from support.server import ToolwireServer
from support.store_items import unwritable

pytestmark = pytest.mark.e2e

MODEL = "scripted-model"
ALICE, BOB = "sk-alice-0123456789", "sk-bob-0123456789"


def client_for(make_openai_client: Callable[[ToolwireServer], openai.OpenAI], server: ToolwireServer,
               key: str) -> openai.OpenAI:
    return make_openai_client(server).with_options(api_key=key)


def ready_within(host: ToolwireServer, seconds: float) -> bool:
    """Whether ``/readyz`` answers 200 within ``seconds``."""
    deadline = time.monotonic() + seconds
    while raw(host, "GET", "/readyz").status_code != 200:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def streamed(client: openai.OpenAI, **kwargs: Any) -> Any:
    with client.responses.stream(model=MODEL, **kwargs) as stream:
        for _ in stream:
            pass
        return stream.get_final_response()


def upstream_texts(upstream: ScriptedUpstream) -> list[str]:
    """The message contents of the last chat request the upstream received."""
    return [m["content"] for m in upstream.chat_requests[-1].body["messages"] if isinstance(m.get("content"), str)]


def raw(server: ToolwireServer, method: str, path: str, key: str = ALICE, **kwargs: Any) -> httpx.Response:
    return httpx.request(method, server.url + path, headers={"Authorization": f"Bearer {key}"}, timeout=15,
                         **kwargs)


def store_write_failures(server: ToolwireServer) -> float:
    metrics = raw(server, "GET", "/metrics").text
    lines = [line for line in metrics.splitlines() if line.startswith("toolwire_store_write_failures_total ")]
    return float(lines[0].split()[1]) if lines else 0.0


@pytest.fixture
def redis_hosts(toolwire_factory: Callable[..., ToolwireServer],
                redis_server: RedisServer) -> tuple[ToolwireServer, ToolwireServer]:
    """Hosts A and B: two gunicorn masters (two workers each) on their own ports, one Redis, two client keys."""
    settings = {"TOOLWIRE_RESPONSE_STORE_URL": redis_server.url, "TOOLWIRE_API_KEYS": f"{ALICE},{BOB}",
                "TOOLWIRE_RESPONSE_STORE_TIMEOUT": "1", "WEB_CONCURRENCY": "2"}
    return toolwire_factory(**settings, TOOLWIRE_TEST_HOST="a"), toolwire_factory(**settings, TOOLWIRE_TEST_HOST="b")


def test_a_conversation_continues_on_another_host(upstream: ScriptedUpstream, redis_hosts, make_openai_client) -> None:
    host_a, host_b = redis_hosts
    on_a, on_b = (client_for(make_openai_client, host, ALICE) for host in redis_hosts)
    upstream.enqueue(Script(text="Noted: 42."), Script(text="It was 42.", chunks=3), Script(text="Yes, 42."),
                     Script(text="Quoted."))

    first = on_a.responses.create(model=MODEL, input="Remember the number 42.")
    second = streamed(on_b, input="Which number?", previous_response_id=first.id)
    assert second.status == "completed" and second.previous_response_id == first.id
    assert upstream_texts(upstream)[-3:] == ["Remember the number 42.", "Noted: 42.", "Which number?"]

    third = on_a.responses.create(model=MODEL, input="Sure?", previous_response_id=second.id)
    assert upstream_texts(upstream)[-5:] == ["Remember the number 42.", "Noted: 42.", "Which number?",
                                            "It was 42.", "Sure?"]
    quoted = streamed(on_b, input=[{"type": "item_reference", "id": third.output[0].id}])
    assert quoted.status == "completed" and upstream_texts(upstream)[-1] == "Yes, 42."

    assert on_b.responses.retrieve(first.id).model_dump() == on_a.responses.retrieve(first.id).model_dump()
    assert on_b.responses.retrieve(second.id).output_text == "It was 42."
    on_a.responses.delete(second.id)
    with pytest.raises(openai.NotFoundError):
        on_b.responses.retrieve(second.id)
    with pytest.raises(openai.NotFoundError) as gone:
        on_b.responses.create(model=MODEL, input="again", previous_response_id=third.id)  # its chain holds second
    assert gone.value.body["param"] == "previous_response_id"


def test_another_key_gets_404_everywhere(upstream: ScriptedUpstream, redis_hosts, make_openai_client) -> None:
    upstream.default_script = Script(text="Private.")
    alice = client_for(make_openai_client, redis_hosts[0], ALICE)
    mine = alice.responses.create(model=MODEL, input="my secret")
    asked = len(upstream.chat_requests)
    for host in redis_hosts:
        bob = client_for(make_openai_client, host, BOB)
        with pytest.raises(openai.NotFoundError):
            bob.responses.retrieve(mine.id)
        with pytest.raises(openai.NotFoundError):
            bob.responses.delete(mine.id)
        with pytest.raises(openai.NotFoundError) as previous:
            bob.responses.create(model=MODEL, input="hi", previous_response_id=mine.id)
        assert previous.value.body["param"] == "previous_response_id"
        with pytest.raises(openai.NotFoundError) as reference:
            streamed(bob, input=[{"type": "item_reference", "id": mine.output[0].id}])
        assert reference.value.body["param"] == "input[0].id"
        unknown = raw(host, "GET", "/v1/responses/resp_" + "0" * 32, key=BOB)
        stranger = raw(host, "GET", f"/v1/responses/{mine.id}", key=BOB)
        assert stranger.status_code == unknown.status_code == 404
        assert stranger.json()["error"]["message"].replace(mine.id, "X") == \
            unknown.json()["error"]["message"].replace("resp_" + "0" * 32, "X")  # existence is not revealed
    assert len(upstream.chat_requests) == asked  # refused before the upstream
    assert alice.responses.retrieve(mine.id).output_text == "Private."  # bob's DELETE changed nothing


def test_redis_down_then_back(upstream: ScriptedUpstream, redis_hosts, redis_server: RedisServer,
                              make_openai_client) -> None:
    host_a, host_b = redis_hosts
    on_a, on_b = (client_for(make_openai_client, host, ALICE) for host in redis_hosts)
    upstream.default_script = Script(text="Fine.")
    first = on_a.responses.create(model=MODEL, input="before the outage")
    failures_before = store_write_failures(host_a)

    redis_server.stop()
    ready = raw(host_a, "GET", "/readyz")
    assert ready.status_code == 503 and ready.json() == {"status": "unavailable", "upstream": "ok",
                                                         "store": "unavailable", "upstreams": {"default": "ok"}}
    for request in (lambda: on_b.responses.create(model=MODEL, input="next", previous_response_id=first.id),
                    lambda: streamed(on_b, input=[{"type": "item_reference", "id": first.output[0].id}]),
                    lambda: on_b.responses.retrieve(first.id),
                    lambda: on_a.responses.delete(first.id)):
        started = time.monotonic()
        with pytest.raises(openai.InternalServerError) as caught:
            request()
        assert time.monotonic() - started < 10
        assert caught.value.status_code == 503 and caught.value.body["code"] == "store_unavailable"
        check_error_envelope(503, {"error": caught.value.body})
    # requests that only write are answered; the failed writes are logged and counted
    assert on_a.responses.create(model=MODEL, input="during the outage").output_text == "Fine."
    assert streamed(on_a, input="streamed during the outage").status == "completed"
    assert store_write_failures(host_a) >= failures_before + 2  # /metrics sums both workers

    redis_server.start()  # same port and data; toolwire is not restarted
    assert ready_within(host_a, seconds=3)  # a worker may repeat its outage answer for 1 s (ready cache)
    again = on_b.responses.create(model=MODEL, input="after the outage", previous_response_id=first.id)
    assert again.status == "completed" and upstream_texts(upstream)[-3:-1] == ["before the outage", "Fine."]
    assert on_a.responses.retrieve(again.id).previous_response_id == first.id


def test_a_frozen_redis_costs_a_bounded_wait(upstream: ScriptedUpstream, redis_hosts, redis_server: RedisServer,
                                            make_openai_client) -> None:
    on_a = client_for(make_openai_client, redis_hosts[0], ALICE)
    upstream.default_script = Script(text="Fine.")
    first = on_a.responses.create(model=MODEL, input="hello")
    redis_server.pause()
    try:
        started = time.monotonic()
        with pytest.raises(openai.InternalServerError) as caught:
            on_a.responses.create(model=MODEL, input="next", previous_response_id=first.id)
        assert caught.value.body["code"] == "store_unavailable"
        assert time.monotonic() - started < 10  # TOOLWIRE_RESPONSE_STORE_TIMEOUT=1, not a hang
        started = time.monotonic()
        assert on_a.responses.create(model=MODEL, input="write only").output_text == "Fine."
        assert time.monotonic() - started < 10
    finally:
        redis_server.resume()
    assert on_a.responses.retrieve(first.id).output_text == "Fine."


@pytest.fixture(scope="module")
def sqlite_host(toolwire_factory: Callable[..., ToolwireServer], tmp_path_factory) -> tuple[ToolwireServer, str]:
    path = str(tmp_path_factory.mktemp("sqlite-host") / "responses.sqlite3")
    return toolwire_factory(TOOLWIRE_RESPONSE_STORE_URL=f"sqlite:///{path}", WEB_CONCURRENCY="3"), path


def test_sqlite_under_several_workers_never_reports_a_lock(upstream: ScriptedUpstream, sqlite_host) -> None:
    host, _ = sqlite_host
    upstream.default_script = Script(text="Stored.")

    def create_then_get(i: int) -> tuple[int, int]:
        created = raw(host, "POST", "/v1/responses", json={"model": MODEL, "input": f"request {i}"})
        if created.status_code != 200:
            return created.status_code, 0
        return 200, raw(host, "GET", f"/v1/responses/{created.json()['id']}").status_code

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(create_then_get, range(32)))
    assert outcomes == [(200, 200)] * 32
    assert "database is locked" not in host.log()


def test_an_unwritable_sqlite_file_still_answers(upstream: ScriptedUpstream, sqlite_host,
                                                 make_openai_client) -> None:
    host, path = sqlite_host
    client = make_openai_client(host)
    upstream.default_script = Script(text="Fine.")
    first = client.responses.create(model=MODEL, input="before")
    failures_before = store_write_failures(host)
    with unwritable(path, path + "-wal"):
        assert raw(host, "GET", "/readyz").json()["store"] == "unavailable"
        during = client.responses.create(model=MODEL, input="during")
        assert during.output_text == "Fine." and during.store is False  # never claims to be stored
        final = streamed(client, input="streamed during")
        assert final.status == "completed" and final.store is False
        assert store_write_failures(host) >= failures_before + 2
        follow_up = client.responses.create(model=MODEL, input="reads work", previous_response_id=first.id)
        assert follow_up.status == "completed"  # reading the file still works
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(during.id)  # never claimed: it was not stored
    assert ready_within(host, seconds=10)  # each worker may repeat its last answer for 1 s (ready cache)
    after = client.responses.create(model=MODEL, input="after")
    assert after.store is True and client.responses.retrieve(after.id).output_text == "Fine."
