"""The response store contract, run against the SQLite store and a real Redis server alike."""

from __future__ import annotations

import time

import pytest

from app.responses.store import (
    OwnedStore,
    RedisResponseStore,
    ResponseStore,
    SQLiteResponseStore,
    StoredResponse,
    StoreUnavailable,
    open_store,
)
from support.server import free_port
from support.store_items import ALICE, BOB, USER, message, response

@pytest.fixture(params=["sqlite", "redis"])
def make_store(request, tmp_path):
    """``make_store(retention_seconds=3600, shared=False)``: an empty store of the parametrised kind."""
    if request.param == "redis":
        server = request.getfixturevalue("redis_server")
        url = server.url
    else:
        url = f"sqlite:///{tmp_path}/r.db"

    def make(retention_seconds=3600, shared=False):
        return open_store(url, retention_seconds, shared=shared, timeout=2.0)

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
        assert time.monotonic() - started < 1.5
