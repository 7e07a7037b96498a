"""SQLiteResponseStore: round trips, retention, item lookup, several processes on one file."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from app.responses.store import ResponseStore, SQLiteResponseStore


def response(response_id, *items, previous=None):
    return {"id": response_id, "object": "response", "status": "completed", "previous_response_id": previous,
            "output": list(items)}


def message(item_id, text):
    return {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}


USER = {"type": "message", "role": "user", "content": "hi"}


@pytest.fixture
def store(tmp_path):
    return SQLiteResponseStore(tmp_path / "r.db", retention_seconds=3600)


def test_is_a_response_store(store):
    assert isinstance(store, ResponseStore)


def test_put_get_delete(store):
    stored = response("resp_1", message("msg_1", "hello"))
    store.put(stored, [USER])
    assert store.get("resp_1") == stored
    assert store.get_input_items("resp_1") == [USER]
    assert store.delete("resp_1") is True
    assert store.get("resp_1") is None and store.get_input_items("resp_1") is None
    assert store.get_item("msg_1") is None
    assert store.delete("resp_1") is False


def test_unknown_ids(store):
    assert store.get("resp_nope") is None
    assert store.get_input_items("resp_nope") is None
    assert store.get_item("msg_nope") is None


def test_item_lookup_covers_output_and_input_items_with_ids(store):
    fc = {"id": "fc_1", "type": "function_call", "status": "completed", "arguments": "{}",
          "call_id": "call_1", "name": "ping"}
    typed_input = {"type": "message", "id": "msg_in", "role": "user", "content": "x"}
    store.put(response("resp_1", message("msg_1", "a"), fc), [USER, typed_input])
    assert store.get_item("msg_1") == message("msg_1", "a")
    assert store.get_item("fc_1") == fc
    assert store.get_item("msg_in") == typed_input


def test_an_item_echoed_by_a_later_response_survives_deleting_either(store):
    store.put(response("resp_1", message("msg_1", "a")), [USER])
    store.put(response("resp_2", message("msg_2", "b"), previous="resp_1"), [message("msg_1", "a")])
    store.delete("resp_1")
    assert store.get_item("msg_1") == message("msg_1", "a")
    store.delete("resp_2")
    assert store.get_item("msg_1") is None


def test_put_again_replaces(store):
    store.put(response("resp_1", message("msg_1", "old")), [USER])
    store.put(response("resp_1", message("msg_2", "new")), [])
    assert store.get("resp_1")["output"][0]["id"] == "msg_2"
    assert store.get_input_items("resp_1") == []
    assert store.get_item("msg_1") is None


def test_retention_expiry_and_purge(tmp_path, monkeypatch):
    store = SQLiteResponseStore(tmp_path / "r.db", retention_seconds=10)
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now)
    store.put(response("resp_old", message("msg_old", "x")), [USER])
    monkeypatch.setattr(time, "time", lambda: now + 11)
    assert store.get("resp_old") is None
    assert store.get_input_items("resp_old") is None
    assert store.get_item("msg_old") is None
    assert store.delete("resp_old") is False
    store.put(response("resp_new", message("msg_new", "y")), [])  # a write purges expired rows
    conn = store._connection()
    assert [r[0] for r in conn.execute("SELECT id FROM responses")] == ["resp_new"]
    assert [r[0] for r in conn.execute("SELECT id FROM items")] == ["msg_new"]


def test_no_retention_keeps_forever(tmp_path, monkeypatch):
    store = SQLiteResponseStore(tmp_path / "r.db", retention_seconds=None)
    store.put(response("resp_1"), [])
    monkeypatch.setattr(time, "time", lambda: 10**12)
    assert store.get("resp_1") is not None


def test_wal_mode(store):
    store.get("resp_x")
    assert store._connection().execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _write_many(path, prefix, count):
    store = SQLiteResponseStore(path, retention_seconds=3600)
    for i in range(count):
        store.put(response(f"resp_{prefix}{i}", message(f"msg_{prefix}{i}", str(i))), [USER])


def _read_one(path, response_id, queue):
    queue.put(SQLiteResponseStore(path, retention_seconds=3600).get(response_id))


def test_two_processes_write_and_read_the_same_file(tmp_path):
    path = str(tmp_path / "shared.db")
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_write_many, args=(path, prefix, 40)) for prefix in "ab"]
    for p in writers:
        p.start()
    for p in writers:
        p.join(60)
        assert p.exitcode == 0
    store = SQLiteResponseStore(path, retention_seconds=3600)
    for prefix in "ab":
        for i in range(40):
            assert store.get_item(f"msg_{prefix}{i}")["content"][0]["text"] == str(i)
    store.put(response("resp_from_parent"), [USER])
    queue = ctx.Queue()
    reader = ctx.Process(target=_read_one, args=(path, "resp_from_parent", queue))
    reader.start()
    assert queue.get(timeout=60) == response("resp_from_parent")
    reader.join(60)


def _use_inherited(store, queue):
    store.put(response("resp_child"), [USER])
    queue.put((store.get("resp_parent") is not None, store._pid))


def test_a_forked_worker_opens_its_own_connection(tmp_path):
    store = SQLiteResponseStore(tmp_path / "r.db", retention_seconds=3600)
    store.put(response("resp_parent"), [USER])  # the parent's connection is open before the fork
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_use_inherited, args=(store, queue))
    child.start()
    saw_parent, child_pid = queue.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0 and saw_parent and child_pid == child.pid
    assert store.get("resp_child") is not None  # the parent's connection still works
