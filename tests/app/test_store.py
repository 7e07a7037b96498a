"""SQLiteResponseStore beyond the shared contract (test_store_contract.py): purging, WAL, several processes
on one file, lock waits, a killed writer, an unwritable file, files from before owners and quotas, space given
back to the filesystem, a full disk."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sqlite3
import threading
import time

import orjson
import pytest

from app.store import SQLiteResponseStore, StoreUnavailable
from support.store_items import ALICE, USER, fill, message, response, tiny_filesystem, unwritable


@pytest.fixture
def store(tmp_path):
    return SQLiteResponseStore(tmp_path / "r.db", retention_seconds=3600)


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


def _write_and_read(path, prefix, count, others, failures):
    store = SQLiteResponseStore(path, retention_seconds=3600, timeout=10.0)
    try:
        for i in range(count):
            store.put(response(f"resp_{prefix}{i}", message(f"msg_{prefix}{i}", str(i))), [USER])
            for other in others:
                store.get_item(f"msg_{other}{i // 2}")
    except Exception as exc:  # reported to the parent, which fails the test
        failures.put(f"{prefix}: {type(exc).__name__}: {exc}")


def test_four_processes_write_and_read_one_file_without_lock_errors(tmp_path):
    path = str(tmp_path / "shared.db")
    ctx = multiprocessing.get_context("spawn")
    failures = ctx.Queue()
    prefixes = "abcd"
    workers = [ctx.Process(target=_write_and_read, args=(path, p, 60, prefixes.replace(p, ""), failures))
               for p in prefixes]
    for p in workers:
        p.start()
    for p in workers:
        p.join(120)
        assert p.exitcode == 0
    assert failures.empty(), failures.get()
    store = SQLiteResponseStore(path, retention_seconds=3600)
    for prefix in prefixes:
        for i in range(60):
            assert store.get_item(f"msg_{prefix}{i}")["content"][0]["text"] == str(i)


def test_a_held_write_lock_is_waited_for_then_reported_as_unavailable(tmp_path):
    path = tmp_path / "r.db"
    SQLiteResponseStore(path).check()  # creates the file
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    impatient = SQLiteResponseStore(path, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="locked"):
        impatient.put(response("resp_1"), [USER])
    assert 0.25 < time.monotonic() - started < 3.0
    threading.Timer(0.3, holder.execute, ["COMMIT"]).start()
    patient = SQLiteResponseStore(path, timeout=5.0)
    patient.put(response("resp_2"), [USER])  # waits for the lock instead of failing
    assert impatient.get("resp_2") is not None and impatient.get("resp_1") is None
    holder.close()


def _write_until_killed(path, acks):
    store = SQLiteResponseStore(path, retention_seconds=3600)
    for i in range(100_000):
        store.put(response(f"resp_{i}", message(f"msg_{i}", "x" * 2000)), [USER] * 20)
        acks.put(i)  # after the commit


def test_a_writer_killed_mid_write_loses_no_committed_record(tmp_path):
    path = str(tmp_path / "r.db")
    ctx = multiprocessing.get_context("spawn")
    acks = ctx.Queue()
    writer = ctx.Process(target=_write_until_killed, args=(path, acks))
    writer.start()
    committed = [acks.get(timeout=60) for _ in range(50)]
    os.kill(writer.pid, signal.SIGKILL)
    writer.join(10)
    while True:
        try:
            committed.append(acks.get(timeout=0.2))
        except Exception:
            break
    store = SQLiteResponseStore(path, retention_seconds=3600)
    assert store._connection().execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    for i in committed:
        assert store.get_item(f"msg_{i}") is not None, f"committed resp_{i} lost"
    stored = store._connection().execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    assert stored >= len(committed)
    store.put(response("resp_after"), [USER])  # the file is still writable


def test_an_unwritable_file_fails_writes_keeps_reads_and_recovers(tmp_path):
    path = str(tmp_path / "r.db")
    store = SQLiteResponseStore(path, retention_seconds=3600, timeout=1.0)
    store.put(response("resp_before", message("msg_before", "kept")), [USER], owner=ALICE)
    with unwritable(path, path + "-wal"):
        with pytest.raises(StoreUnavailable):
            store.put(response("resp_during"), [USER], owner=ALICE)
        with pytest.raises(StoreUnavailable):
            store.check()
        assert store.get_item("msg_before", owner=ALICE) == message("msg_before", "kept")
    store.put(response("resp_after"), [USER], owner=ALICE)  # the same store object works again
    assert store.get("resp_after", owner=ALICE) is not None and store.get("resp_during", owner=ALICE) is None
    store.check()


def test_a_file_from_before_owners_gains_the_column(tmp_path):
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.executescript("""
        CREATE TABLE responses (id TEXT PRIMARY KEY, body BLOB NOT NULL, input_items BLOB NOT NULL, expires_at REAL);
        CREATE TABLE items (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, response_id TEXT NOT NULL,
                            body BLOB NOT NULL);
        INSERT INTO responses VALUES ('resp_old', '{"id": "resp_old", "output": []}', '[]', NULL);
    """)
    old.commit()
    old.close()
    store = SQLiteResponseStore(path)
    assert store.get("resp_old") == {"id": "resp_old", "output": []}  # unowned: visible without a key
    assert store.get("resp_old", owner=ALICE) is None
    store.put(response("resp_new"), [USER], owner=ALICE)
    assert store.get("resp_new", owner=ALICE) is not None


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


def test_an_unusable_store_is_reported_at_start(tmp_path, caplog):
    """Round 1 started silently over an unwritable store and lost every response; now the start logs it."""
    from app import create_app
    from app.settings import Settings

    path = str(tmp_path / "responses.sqlite3")
    SQLiteResponseStore(path, 60).check()  # create the file
    with unwritable(path, path + "-wal"), caplog.at_level(logging.ERROR):
        create_app(Settings(response_store_path=path))
    assert any("cannot be used" in record.getMessage() and path in record.getMessage() for record in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        create_app(Settings(response_store_path=path))
    assert not [record for record in caplog.records if "cannot be used" in record.getMessage()]


def on_disk(store):
    """The database file and its WAL after a checkpoint that cuts the WAL back: what the store takes."""
    store._connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return sum(os.path.getsize(store.path + suffix) for suffix in ("", "-wal") if os.path.exists(store.path + suffix))


def test_deleting_gives_the_space_back_to_the_filesystem(store):
    """Issue 17 item 6: the file never shrank; deleted (and expired) responses now free their pages."""
    empty = on_disk(store)
    for i in range(150):
        store.put(response(f"resp_{i}", message(f"msg_{i}", "x" * 20_000)), [USER])
    full = on_disk(store)
    assert full > empty + 3_000_000
    for i in range(150):
        assert store.delete(f"resp_{i}")
    assert on_disk(store) < empty + 200_000


def test_expired_responses_give_their_space_back_a_bounded_amount_per_write(tmp_path, monkeypatch):
    store = SQLiteResponseStore(tmp_path / "r.db", retention_seconds=10)
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now)
    empty = on_disk(store)
    for i in range(150):
        store.put(response(f"resp_{i}", message(f"msg_{i}", "x" * 20_000)), [USER])
    full = on_disk(store)
    monkeypatch.setattr(time, "time", lambda: now + 11)
    store.put(response("resp_new"), [USER])  # purges all 150, gives back at most 512 pages (2 MiB) at once
    assert full - on_disk(store) <= 512 * 4096 + 8192
    for i in range(3):
        store.put(response(f"resp_more{i}"), [USER])
    assert on_disk(store) < empty + 200_000
    assert store.total_usage() == store.usage(None) and store.get("resp_0") is None


def test_a_file_from_before_quotas_is_counted_and_switched_to_incremental_vacuum(tmp_path):
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.executescript("""
        CREATE TABLE responses (id TEXT PRIMARY KEY, body BLOB NOT NULL, input_items BLOB NOT NULL, expires_at REAL,
                                owner TEXT);
        CREATE TABLE items (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, response_id TEXT NOT NULL,
                            body BLOB NOT NULL);
        INSERT INTO responses VALUES ('resp_a', '{"id": "resp_a", "output": []}', '[1]', NULL, 'alice');
        INSERT INTO responses VALUES ('resp_b', '{"id": "resp_b", "output": []}', '[]', NULL, NULL);
        INSERT INTO items (id, response_id, body) VALUES ('msg_1', 'resp_a', '{"id": "msg_1"}');
    """)
    old.commit()
    assert old.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    old.close()
    store = SQLiteResponseStore(path)
    body_a, body_b = '{"id": "resp_a", "output": []}', '{"id": "resp_b", "output": []}'
    assert store.usage("alice") == len(body_a) + len("[1]") + len('{"id": "msg_1"}')
    assert store.usage(None) == len(body_b) + len("[]")
    assert store._connection().execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
    assert store.delete("resp_a", owner="alice") and store.total_usage() == len(body_b) + len("[]")
    assert store.get_item("msg_1", owner="alice") is None


def test_delete_and_expiry_work_on_a_full_disk(tmp_path):
    """Issue 17 item 6: on a full disk even DELETE failed (SQLite writes the WAL first); a reserve file
    beside the database is released for deletions, and allocated again once there is room."""
    disk = tmp_path / "disk"
    with tiny_filesystem(disk, "10m"):
        store = SQLiteResponseStore(disk / "r.db", retention_seconds=3600, timeout=1.0, reserve_bytes=1 << 20)
        store.check()  # as at start: the file and its reserve are made
        assert os.path.getsize(store.reserve.path) == 1 << 20
        for i in range(30):
            store.put(response(f"resp_{i}", message(f"msg_{i}", "x" * 20_000)), [USER])
        on_disk(store)  # the WAL checkpointed into the file, as SQLite does every 1000 pages
        filler = fill(str(disk))
        with pytest.raises(StoreUnavailable, match="full"):
            store.put(response("resp_more", message("msg_more", "x" * 20_000)), [USER])
        for i in range(20):
            assert store.delete(f"resp_{i}") is True, i
        assert store.get("resp_0") is None and store.get("resp_20") is not None
        os.unlink(filler)
        store.check()  # room again: the reserve is back
        assert os.path.getsize(store.reserve.path) == 1 << 20
        store.put(response("resp_after"), [USER])


def test_expired_responses_are_purged_on_a_full_disk(tmp_path, monkeypatch):
    """The purge of expired responses ran inside the failing write, so on a full disk nothing expired was ever
    freed and storing stayed impossible; a write that finds the disk full now purges them on its own (drawing
    on the reserve), and the next write has their room."""
    disk = tmp_path / "disk"
    clock = [1000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    with tiny_filesystem(disk, "10m"):
        store = SQLiteResponseStore(disk / "r.db", retention_seconds=60, timeout=1.0, reserve_bytes=1 << 20)
        store.check()
        for i in range(30):
            store.put(response(f"resp_{i}", message(f"msg_{i}", "x" * 20_000)), [USER])
        on_disk(store)
        fill(str(disk))
        clock[0] += 61
        with pytest.raises(StoreUnavailable, match="full"):
            store.put(response("resp_full", message("msg_full", "x" * 20_000)), [USER])
        assert store.total_usage() == 0
        store.put(response("resp_after", message("msg_after", "x" * 20_000)), [USER])
        assert store.get("resp_after") is not None


def test_a_response_larger_than_the_reserve_is_deleted_on_a_full_disk(tmp_path):
    """SQLite built with SECURE_DELETE (Debian's is) zeroes every freed page through the WAL, so deleting a
    response needed its own size of free disk: more than the reserve for a large one. Freed pages are now
    zeroed only when that costs no extra write (they are given back to the filesystem anyway)."""
    disk = tmp_path / "disk"
    with tiny_filesystem(disk, "10m"):
        store = SQLiteResponseStore(disk / "r.db", retention_seconds=3600, timeout=1.0, reserve_bytes=1 << 20)
        store.check()
        store.put(response("resp_big", message("msg_big", "x" * 1_500_000)), [USER])  # 3 MB with its copy
        on_disk(store)
        fill(str(disk))
        assert store.delete("resp_big") is True
        assert store.get("resp_big") is None and store.total_usage() == 0


def test_a_file_from_before_conversations_counted_counts_them(tmp_path):
    """A version-2 file (conversations without sizes, their old trigger): its conversations are counted once, and
    deleting one takes its bytes off and its items away."""
    path = tmp_path / "v2.db"
    SQLiteResponseStore(path).put(response("resp_a"), [], owner="alice")
    old = sqlite3.connect(path)
    old.executescript("""
        DROP TRIGGER conversations_added; DROP TRIGGER conversations_resized; DROP TRIGGER conversations_counted_removed;
        CREATE TABLE conversations_v2 (id TEXT PRIMARY KEY, body BLOB NOT NULL, owner TEXT, expires_at REAL);
        DROP TABLE conversations; ALTER TABLE conversations_v2 RENAME TO conversations;
        CREATE TRIGGER conversations_removed AFTER DELETE ON conversations BEGIN
            DELETE FROM conversation_items WHERE conversation_id = old.id;
        END;
        INSERT INTO conversations VALUES ('conv_1', '{"id": "conv_1"}', 'alice', NULL);
        INSERT INTO conversation_items (conversation_id, id, body) VALUES ('conv_1', 'msg_1', '{"id": "msg_1"}');
        PRAGMA user_version = 2;
    """)
    old.commit()
    old.close()
    before = SQLiteResponseStore(path)
    responses = len(orjson.dumps(response("resp_a"))) + len(b"[]")
    assert before.usage("alice") == responses + len('{"id": "conv_1"}') + len('{"id": "msg_1"}')
    assert before.delete_conversation("conv_1", owner="alice") and before.usage("alice") == responses
    assert sqlite3.connect(path).execute("SELECT count(*) FROM conversation_items").fetchone()[0] == 0
