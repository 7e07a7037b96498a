"""The response store contract, run against the SQLite store and a real Redis server alike."""

from __future__ import annotations

import time

import orjson
import pytest

from app.store import (
    OwnedStore,
    RedisResponseStore,
    ResponseStore,
    SQLiteResponseStore,
    StoredResponse,
    StoreQuotaExceeded,
    StoreUnavailable,
    open_store,
)
from app.store.redis import ITEM_OVERHEAD, RESPONSE_OVERHEAD
from support.server import free_port
from support.store_items import ALICE, BOB, USER, message, response

@pytest.fixture(params=["sqlite", "redis"])
def make_store(request, tmp_path):
    """``make_store(retention_seconds=3600, shared=False, max_bytes=0, max_bytes_per_owner=0)``: an empty store
    of the parametrised kind."""
    if request.param == "redis":
        server = request.getfixturevalue("redis_server")
        url = server.url
    else:
        url = f"sqlite:///{tmp_path}/r.db"

    def make(retention_seconds=3600, shared=False, max_bytes=0, max_bytes_per_owner=0):
        return open_store(url, retention_seconds, shared=shared, timeout=2.0, max_bytes=max_bytes,
                          max_bytes_per_owner=max_bytes_per_owner)

    make.kind = request.param
    return make


@pytest.fixture
def store(make_store):
    return make_store()


def test_open_store_picks_the_kind(store):
    assert isinstance(store, ResponseStore)
    assert isinstance(store, (SQLiteResponseStore, RedisResponseStore))
    store.check()


def test_put_load_get_delete(store):
    stored = response("resp_1", message("msg_1", "hello"))
    store.put(stored, [USER])
    assert store.load("resp_1") == StoredResponse(stored, [USER])
    assert store.get("resp_1") == stored
    assert store.get_input_items("resp_1") == [USER]
    assert store.delete("resp_1") is True
    assert store.load("resp_1") is None
    assert store.get_item("msg_1") is None
    assert store.delete("resp_1") is False


def test_unknown_ids(store):
    assert store.load("resp_nope") is None
    assert store.get("resp_nope") is None
    assert store.get_item("msg_nope") is None
    assert store.delete("resp_nope") is False


def test_item_lookup_covers_output_and_input_items_with_ids(store):
    fc = {"id": "fc_1", "type": "function_call", "status": "completed", "arguments": "{}",
          "call_id": "call_1", "name": "ping"}
    typed_input = {"type": "message", "id": "msg_in", "role": "user", "content": "x"}
    store.put(response("resp_1", message("msg_1", "a"), fc), [USER, typed_input])
    assert store.get_item("msg_1") == message("msg_1", "a")
    assert store.get_item("fc_1") == fc
    assert store.get_item("msg_in") == typed_input


def test_items_of_any_type_round_trip_unchanged(store):
    custom = {"id": "ctc_1", "type": "custom_tool_call", "call_id": "call_9", "name": "apply_patch",
              "input": "*** Begin Patch\n+ünïcødé ✓\n*** End Patch", "extra": {"nested": [1, 2.5, None, True]}}
    store.put(response("resp_1", custom), [])
    assert store.get_item("ctc_1") == custom
    assert store.get("resp_1")["output"] == [custom]


def test_an_item_echoed_by_a_later_response_survives_deleting_the_earlier(store):
    store.put(response("resp_1", message("msg_1", "a")), [USER])
    store.put(response("resp_2", message("msg_2", "b"), previous="resp_1"), [message("msg_1", "a")])
    assert store.delete("resp_1") is True
    assert store.get_item("msg_1") == message("msg_1", "a")
    assert store.delete("resp_2") is True
    assert store.get_item("msg_1") is None


def test_the_most_recently_stored_copy_of_an_item_wins(store):
    store.put(response("resp_1", message("msg_1", "old")), [])
    store.put(response("resp_2"), [message("msg_1", "new")])
    assert store.get_item("msg_1") == message("msg_1", "new")


def test_another_owner_sees_nothing_and_deletes_nothing(store):
    store.put(response("resp_1", message("msg_1", "secret")), [USER], owner=ALICE)
    for stranger in (BOB, None):
        assert store.load("resp_1", owner=stranger) is None
        assert store.get_item("msg_1", owner=stranger) is None
        assert store.delete("resp_1", owner=stranger) is False
    assert store.get("resp_1", owner=ALICE)["output"][0]["id"] == "msg_1"
    assert store.get_item("msg_1", owner=ALICE) == message("msg_1", "secret")
    assert store.delete("resp_1", owner=ALICE) is True


def test_an_unowned_response_is_not_visible_to_a_key(store):
    store.put(response("resp_open", message("msg_open", "x")), [USER])
    assert store.load("resp_open", owner=ALICE) is None
    assert store.get_item("msg_open", owner=ALICE) is None
    assert store.load("resp_open") is not None


def test_an_item_id_reused_by_another_owner_does_not_replace_the_first_owners_copy(store):
    store.put(response("resp_a", message("msg_1", "alice's")), [], owner=ALICE)
    store.put(response("resp_b", message("msg_1", "bob's")), [], owner=BOB)
    assert store.get_item("msg_1", owner=ALICE) == message("msg_1", "alice's")
    assert store.get_item("msg_1", owner=BOB) == message("msg_1", "bob's")
    assert store.delete("resp_b", owner=BOB) is True
    assert store.get_item("msg_1", owner=ALICE) == message("msg_1", "alice's")


def test_a_shared_store_lets_every_owner_read_and_delete(make_store):
    store = make_store(shared=True)
    store.put(response("resp_1", message("msg_1", "team")), [USER], owner=ALICE)
    assert store.get("resp_1", owner=BOB)["output"][0]["id"] == "msg_1"
    assert store.get_item("msg_1", owner=None) == message("msg_1", "team")
    assert store.delete("resp_1", owner=BOB) is True
    assert store.get_item("msg_1", owner=ALICE) is None


def test_owned_store_binds_the_owner(store):
    alice, bob = store.for_owner(ALICE), store.for_owner(BOB)
    assert isinstance(alice, OwnedStore)
    alice.put(response("resp_1", message("msg_1", "a")), [USER])
    assert alice.get("resp_1") is not None and alice.get_input_items("resp_1") == [USER]
    assert alice.load("resp_1").input_items == [USER] and alice.get_item("msg_1") is not None
    assert bob.get("resp_1") is None and bob.get_item("msg_1") is None and bob.delete("resp_1") is False
    assert alice.delete("resp_1") is True


def test_retention_expires_responses_and_items(make_store):
    store = make_store(retention_seconds=1)
    store.put(response("resp_old", message("msg_old", "x")), [USER])
    assert store.get("resp_old") is not None
    time.sleep(1.3)
    assert store.load("resp_old") is None
    assert store.get_item("msg_old") is None
    assert store.delete("resp_old") is False


def size_of(kind, stored, input_items):
    """What a quota counts for one response: the JSON bytes of it, its input items and its item copies; in
    Redis also what the server holds beside them (tests/app/test_store_redis.py checks that against Redis)."""
    items = [item for item in (*input_items, *stored["output"]) if item.get("id")]
    size = sum(len(orjson.dumps(part)) for part in (stored, input_items, *items))
    if kind == "redis":
        size += ITEM_OVERHEAD * len({item["id"] for item in items}) + RESPONSE_OVERHEAD
    return size


def test_usage_totals_follow_put_replace_delete_and_expiry(make_store):
    store = make_store(retention_seconds=1)
    first, second = response("resp_1", message("msg_1", "a" * 500)), response("resp_2", message("msg_2", "b"))
    store.put(first, [USER], owner=ALICE)
    store.put(second, [USER, message("msg_in", "c" * 300)], owner=BOB)
    store.put(response("resp_3"), [])
    sizes = size_of(make_store.kind, first, [USER]), \
        size_of(make_store.kind, second, [USER, message("msg_in", "c" * 300)]), size_of(make_store.kind, response("resp_3"), [])
    assert (store.usage(ALICE), store.usage(BOB), store.usage(None)) == sizes
    assert store.total_usage() == sum(sizes)
    replacement = response("resp_1", message("msg_9", "short"))
    store.put(replacement, [], owner=ALICE)  # the same id again: counted once, at its new size
    assert store.usage(ALICE) == size_of(make_store.kind, replacement, [])
    assert store.delete("resp_2", owner=ALICE) is False and store.usage(BOB) == sizes[1]  # not hers
    assert store.delete("resp_2", owner=BOB) is True and store.usage(BOB) == 0
    time.sleep(1.3)  # everything expires; the next write corrects the totals
    store.put(response("resp_4"), [], owner=BOB)
    assert (store.usage(ALICE), store.usage(None)) == (0, 0)
    assert store.total_usage() == store.usage(BOB) == size_of(make_store.kind, response("resp_4"), [])


def test_a_key_over_its_quota_loses_its_own_oldest_responses(make_store):
    one = size_of(make_store.kind, response("resp_a0", message("msg_a0", "x" * 1000)), [USER])
    store = make_store(max_bytes_per_owner=3 * one)
    store.put(response("resp_b0", message("msg_b0", "x" * 1000)), [USER], owner=BOB)
    for i in range(5):
        store.put(response(f"resp_a{i}", message(f"msg_a{i}", "x" * 1000)), [USER], owner=ALICE)
    assert [store.get(f"resp_a{i}", owner=ALICE) is not None for i in range(5)] == [False, False, True, True, True]
    assert store.get_item("msg_a1", owner=ALICE) is None and store.get_item("msg_a2", owner=ALICE) is not None
    assert store.usage(ALICE) == 3 * one
    assert store.get("resp_b0", owner=BOB) is not None  # another key's responses are not touched
    for i in range(4):  # without keys the per-key quota does not apply
        store.put(response(f"resp_n{i}", message(f"msg_n{i}", "x" * 1000)), [USER])
    assert store.usage(None) == 4 * one


def test_the_store_quota_evicts_the_oldest_of_anyone(make_store):
    one = size_of(make_store.kind, response("resp_0", message("msg_0", "x" * 1000)), [USER])
    store = make_store(max_bytes=3 * one)
    for i, owner in enumerate([ALICE, BOB, None, ALICE, BOB]):
        store.put(response(f"resp_{i}", message(f"msg_{i}", "x" * 1000)), [USER], owner=owner)
    kept = [i for i, owner in enumerate([ALICE, BOB, None, ALICE, BOB]) if store.get(f"resp_{i}", owner=owner)]
    assert kept == [2, 3, 4] and store.total_usage() == 3 * one


@pytest.mark.parametrize("quota", ["max_bytes", "max_bytes_per_owner"])
def test_a_response_larger_than_a_quota_is_refused_and_evicts_nothing(make_store, quota):
    store = make_store(**{quota: 5000})
    store.put(response("resp_small", message("msg_small", "x")), [USER], owner=ALICE)
    before = store.total_usage()
    with pytest.raises(StoreQuotaExceeded):
        store.put(response("resp_huge", message("msg_huge", "x" * 6000)), [USER], owner=ALICE)
    assert store.get("resp_huge", owner=ALICE) is None and store.get_item("msg_huge", owner=ALICE) is None
    assert store.get("resp_small", owner=ALICE) is not None and store.total_usage() == before


def _unreachable(kind, tmp_path) -> ResponseStore:
    if kind == "redis":
        return open_store(f"redis://127.0.0.1:{free_port()}/0", 3600, timeout=1.0)
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the store's directory should be")
    return open_store(f"sqlite:///{blocker}/r.db", 3600, timeout=1.0)


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_an_unusable_store_raises_store_unavailable_quickly(kind, tmp_path):
    store = _unreachable(kind, tmp_path)
    operations = [store.check, lambda: store.put(response("resp_1"), [USER]), lambda: store.load("resp_1"),
                  lambda: store.get_item("msg_1"), lambda: store.delete("resp_1")]
    for operation in operations:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            operation()
        assert time.monotonic() - started < 5


def _conversation(conversation_id, **metadata):
    return {"id": conversation_id, "object": "conversation", "created_at": 1, "metadata": metadata}


def test_a_conversation_keeps_its_items_in_order_and_its_metadata(store):
    store.put_conversation(_conversation("conv_1"), owner=ALICE)
    assert store.add_conversation_items("conv_1", [message("msg_1", "a"), message("msg_2", "b")], owner=ALICE)
    assert store.add_conversation_items("conv_1", [message("msg_3", "c")], owner=ALICE)
    store.put_conversation(_conversation("conv_1", topic="x"), owner=ALICE)  # an update keeps the items
    assert store.get_conversation("conv_1", owner=ALICE) == _conversation("conv_1", topic="x")
    assert [i["id"] for i in store.conversation_items("conv_1", owner=ALICE)] == ["msg_1", "msg_2", "msg_3"]
    assert store.delete_conversation_item("conv_1", "msg_2", owner=ALICE) is True
    assert store.delete_conversation_item("conv_1", "msg_2", owner=ALICE) is False
    assert [i["id"] for i in store.conversation_items("conv_1", owner=ALICE)] == ["msg_1", "msg_3"]
    assert store.delete_conversation("conv_1", owner=ALICE) is True
    assert store.get_conversation("conv_1", owner=ALICE) is None
    assert store.conversation_items("conv_1", owner=ALICE) is None
    assert store.add_conversation_items("conv_1", [message("msg_4", "d")], owner=ALICE) is False


def test_another_owners_conversation_is_absent_and_untouched(store):
    store.put_conversation(_conversation("conv_a"), owner=ALICE)
    store.add_conversation_items("conv_a", [message("msg_1", "a")], owner=ALICE)
    assert store.get_conversation("conv_a", owner=BOB) is None
    assert store.conversation_items("conv_a", owner=BOB) is None
    assert store.add_conversation_items("conv_a", [message("msg_2", "b")], owner=BOB) is False
    assert store.delete_conversation_item("conv_a", "msg_1", owner=BOB) is False
    assert store.delete_conversation("conv_a", owner=BOB) is False
    assert [i["id"] for i in store.conversation_items("conv_a", owner=ALICE)] == ["msg_1"]


def test_conversations_expire_with_the_retention(make_store):
    store = make_store(retention_seconds=1)
    store.put_conversation(_conversation("conv_t"))
    store.add_conversation_items("conv_t", [message("msg_1", "a")])
    time.sleep(2.1)
    assert store.get_conversation("conv_t") is None
    assert store.add_conversation_items("conv_t", [message("msg_2", "b")]) is False


def conversation_bytes(conversation, items):
    """What a quota counts for a conversation: the JSON bytes of its object and of each item."""
    return len(orjson.dumps(conversation)) + sum(len(orjson.dumps(item)) for item in items)


def test_conversations_count_in_the_usage_totals(make_store):
    store = make_store(retention_seconds=1)
    conversation, items = _conversation("conv_1", topic="colours"), [message("msg_1", "a" * 300), message("msg_2", "b")]
    store.put_conversation(conversation, owner=ALICE)
    assert store.usage(ALICE) == store.total_usage() == conversation_bytes(conversation, [])
    assert store.add_conversation_items("conv_1", items, owner=ALICE)
    assert store.usage(ALICE) == conversation_bytes(conversation, items)
    renamed = _conversation("conv_1", topic="shapes and colours")
    store.put_conversation(renamed, owner=ALICE)  # replaced: counted at its new size, items kept
    assert store.usage(ALICE) == conversation_bytes(renamed, items)
    assert store.delete_conversation_item("conv_1", "msg_1", owner=ALICE)
    assert store.usage(ALICE) == conversation_bytes(renamed, items[1:])
    assert store.delete_conversation("conv_1", owner=ALICE) and store.usage(ALICE) == store.total_usage() == 0
    store.put_conversation(_conversation("conv_2"), owner=BOB)
    assert store.add_conversation_items("conv_2", items, owner=BOB)
    time.sleep(1.3)  # it expires; the next write takes its bytes off
    store.put(response("resp_1"), [], owner=ALICE)
    assert store.usage(BOB) == 0 and store.total_usage() == store.usage(ALICE)


def test_a_conversation_makes_room_by_evicting_the_oldest_responses(make_store):
    one = size_of(make_store.kind, response("resp_0", message("msg_0", "x" * 1000)), [USER])
    store = make_store(max_bytes_per_owner=3 * one)
    for i in range(3):
        store.put(response(f"resp_{i}", message(f"msg_{i}", "x" * 1000)), [USER], owner=ALICE)
    store.put_conversation(_conversation("conv_1"), owner=ALICE)
    assert store.add_conversation_items("conv_1", [message("msg_c", "y" * 1000)], owner=ALICE)
    assert [store.get(f"resp_{i}", owner=ALICE) is not None for i in range(3)] == [False, True, True]
    assert store.usage(ALICE) <= 3 * one


@pytest.mark.parametrize("quota", ["max_bytes", "max_bytes_per_owner"])
def test_what_conversations_leave_no_room_for_is_refused_and_evicts_nothing(make_store, quota):
    store = make_store(**{quota: 5000})
    store.put(response("resp_small", message("msg_small", "x")), [USER], owner=ALICE)
    store.put_conversation(_conversation("conv_1"), owner=ALICE)
    assert store.add_conversation_items("conv_1", [message("msg_1", "y" * 3000)], owner=ALICE)
    before = store.total_usage()
    with pytest.raises(StoreQuotaExceeded):  # the conversation would pass the quota on its own
        store.add_conversation_items("conv_1", [message("msg_2", "z" * 2500)], owner=ALICE)
    with pytest.raises(StoreQuotaExceeded):  # a response no eviction of responses makes room for
        store.put(response("resp_big", message("msg_big", "x" * 2500)), [USER], owner=ALICE)
    assert store.get("resp_small", owner=ALICE) is not None and store.total_usage() == before
    assert [item["id"] for item in store.conversation_items("conv_1", owner=ALICE)] == ["msg_1"]
