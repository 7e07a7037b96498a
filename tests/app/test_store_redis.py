"""RedisResponseStore beyond the shared contract (test_store_contract.py), on a real redis-server: round trips,
TTLs, torn records, a restarted and a frozen server, a server out of memory."""

from __future__ import annotations

import contextlib
import time

import orjson
import pytest

from app.store import RedisResponseStore, StoreUnavailable, open_store
from support.store_items import ALICE, BOB, USER, message, response


@pytest.fixture
def store(redis_server):
    return RedisResponseStore(redis_server.url, retention_seconds=3600, timeout=1.0)


@pytest.fixture
def admin(redis_server):
    with contextlib.closing(redis_server.client()) as client:
        yield client


def commands_run(admin, operation):
    """How many commands the server ran for ``operation`` (the INFO that measures is taken off)."""
    before = admin.info("stats")["total_commands_processed"]
    operation()
    return admin.info("stats")["total_commands_processed"] - before - 1


def script_calls(admin):
    stats = admin.info("commandstats")
    return [stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("eval", "evalsha", "exec")]


def test_a_lookup_is_one_command_and_a_write_one_script(store, admin):
    store.check()  # the connection's handshake is not counted below
    store.put(response("resp_0"), [USER])  # loads the script
    stored = response("resp_1", message("msg_1", "a"), message("msg_2", "b"))
    evals, evalshas, execs = script_calls(admin)
    store.put(stored, [USER])
    assert script_calls(admin) == [evals, evalshas + 1, execs]
    assert commands_run(admin, lambda: store.load("resp_1")) == 1
    assert commands_run(admin, lambda: store.get_item("msg_2")) == 1
    assert commands_run(admin, lambda: store.get("resp_missing")) == 1


def test_retention_is_the_keys_ttl(store, admin, redis_server):
    store.put(response("resp_1", message("msg_1", "a")), [USER])
    assert 3590 < admin.ttl("toolwire:resp:resp_1") <= 3600
    assert 3590 < admin.ttl("toolwire:item:msg_1") <= 3600
    forever = RedisResponseStore(redis_server.url, retention_seconds=None)
    forever.put(response("resp_2", message("msg_2", "a")), [USER])
    assert admin.ttl("toolwire:resp:resp_2") == -1 and admin.ttl("toolwire:item:msg_2") == -1


def test_a_torn_or_garbled_record_reads_as_absent(store, admin):
    store.put(response("resp_1", message("msg_1", "a")), [USER], owner=ALICE)
    admin.hdel("toolwire:resp:resp_1", "input")
    assert store.load("resp_1", owner=ALICE) is None
    store.put(response("resp_2", message("msg_2", "a")), [USER], owner=ALICE)
    admin.hset("toolwire:resp:resp_2", "response", b'{"id": "resp_2", "outp')
    assert store.load("resp_2", owner=ALICE) is None
    admin.hset("toolwire:item:msg_2", ALICE, b"not json")
    assert store.get_item("msg_2", owner=ALICE) is None


def test_the_owner_is_recorded_with_the_response(store, admin):
    store.put(response("resp_1"), [USER], owner=ALICE)
    assert admin.hget("toolwire:resp:resp_1", "owner") == ALICE.encode()
    assert orjson.loads(admin.hget("toolwire:resp:resp_1", "response"))["id"] == "resp_1"


def test_a_restarted_server_is_used_again_by_the_same_store(store, redis_server):
    store.put(response("resp_1", message("msg_1", "a")), [USER])
    redis_server.stop()
    with pytest.raises(StoreUnavailable):
        store.load("resp_1")
    with pytest.raises(StoreUnavailable):
        store.put(response("resp_2"), [USER])
    redis_server.start()
    assert store.get_item("msg_1") == message("msg_1", "a")  # kept in the append-only file
    store.put(response("resp_3"), [USER])
    assert store.get("resp_3") is not None


def test_a_frozen_server_costs_one_timeout_then_is_used_again(store, redis_server):
    store.put(response("resp_1"), [USER])
    redis_server.pause()
    try:
        for operation in (lambda: store.load("resp_1"), lambda: store.put(response("resp_2"), [USER]), store.check):
            started = time.monotonic()
            with pytest.raises(StoreUnavailable):
                operation()
            assert 0.9 < time.monotonic() - started < 4  # timeout=1.0, not retried (another would be 2+)
    finally:
        redis_server.resume()
    assert store.get("resp_1") is not None


def test_the_location_masks_the_password():
    store = open_store("redis://:s3cret@127.0.0.1:6390/2", 60)
    assert store.location() == "redis://:**********@127.0.0.1:6390/2"
    assert "s3cret" not in store.location()


def test_delete_works_when_redis_is_out_of_memory(store, admin):
    """Issue 17 item 6: with maxmemory reached (noeviction) writes fail as a whole, DELETE still frees."""
    for i in range(20):
        store.put(response(f"resp_{i:02}", message(f"msg_{i:02}", "x" * 50_000)), [USER], owner=ALICE)
    used = admin.info("memory")["used_memory"]
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", used - 400_000)  # well under (memory moves a little), above half the data
    try:
        with pytest.raises(StoreUnavailable):
            store.put(response("resp_more", message("msg_more", "x" * 50_000)), [USER], owner=ALICE)
        assert store.get("resp_more", owner=ALICE) is None and store.get_item("msg_more", owner=ALICE) is None
        before = store.usage(ALICE)
        for i in range(10):
            assert store.delete(f"resp_{i:02}", owner=ALICE) is True
        assert store.get("resp_00", owner=ALICE) is None and store.get_item("msg_00", owner=ALICE) is None
        assert store.usage(ALICE) == before // 2  # all the same size
        store.put(response("resp_after", message("msg_after", "x" * 50_000)), [USER], owner=ALICE)  # room again
    finally:
        admin.config_set("maxmemory", 0)


def test_totals_follow_records_redis_expired_by_itself(store, admin, redis_server):
    short = RedisResponseStore(redis_server.url, retention_seconds=1, timeout=1.0)
    short.put(response("resp_1", message("msg_1", "x" * 1000)), [USER], owner=ALICE)
    counted = short.usage(ALICE)
    time.sleep(2.2)  # Redis drops the record and its items; nothing of toolwire's runs then
    assert admin.exists("toolwire:resp:resp_1") == 0 and short.usage(ALICE) == counted
    short.put(response("resp_2"), [USER], owner=BOB)  # the next write takes the expired bytes off
    assert short.usage(ALICE) == 0 and short.total_usage() == short.usage(BOB)
    assert admin.hget("toolwire:meta", "resp_1") is None and admin.zcard("toolwire:index:" + ALICE) == 0


def _output(response_id, i):
    return {"id": f"fco_{response_id}_{i}", "type": "function_call_output", "call_id": f"call_{i}", "output": "1"}


@pytest.mark.parametrize("items", [
    pytest.param(lambda rid: [_output(rid, i) for i in range(50)], id="many-small-items"),
    pytest.param(lambda rid: [message(f"msg_{rid}_{i}", "x" * 500) for i in range(10)], id="messages"),
    pytest.param(lambda rid: [message(f"msg_{rid}", "x" * 20000)], id="one-large-item"),
])
def test_the_quota_counts_what_redis_holds(store, admin, items):
    """The bytes counted against the quotas follow the server's own ``used_memory`` (JSON alone missed 2-5x
    for responses of many small items: their keys, hashes and expiries cost more than their JSON)."""
    store.put(response("resp_warm", message("msg_warm", "a")), [USER])  # the script and connection are loaded
    before, counted_before = admin.info("memory")["used_memory"], store.total_usage()
    for n in range(50):
        store.put(response(f"resp_{n}", *items(n)), [USER], owner=ALICE)
    held = admin.info("memory")["used_memory"] - before
    counted = store.total_usage() - counted_before
    assert 0.75 < held / counted < 1.3, f"Redis holds {held} bytes, {counted} counted"
