"""The embedded response store: one SQLite file shared by the gunicorn workers of one host."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

import orjson

from .base import ResponseStore, StoredResponse, StoreQuotaExceeded, StoreUnavailable
from .reserve import Reserve
from .sqlite_schema import prepare

__all__ = ["SQLiteResponseStore"]

log = logging.getLogger("toolwire.responses.store")

T = TypeVar("T")

_LIVE = "(expires_at IS NULL OR expires_at > :now)"
_OWNED = "(:shared OR owner IS :owner)"

#: SQLite's own busy wait sleeps in C and would stall every greenlet of the worker, so it is kept
#: short; longer waits for another process's write lock happen in :meth:`_retrying`, cooperatively.
_BUSY_TIMEOUT_MS = 50
_FIRST_BACKOFF = 0.005
_MAX_BACKOFF = 0.1
#: Pages given back to the filesystem after a write that freed some, at most (2 MiB of 4 KiB pages): a
#: large deletion shrinks the file over the next writes, never in one slow request. Free pages are reused
#: by later writes in the meantime, so the file does not grow while they wait.
_VACUUM_PAGES = 512
#: The WAL is cut back to this size after a checkpoint (else it keeps its largest size for good).
_WAL_LIMIT_BYTES = 4 * 1024 * 1024
#: The reserve file's size (see :mod:`.reserve`): room for a deletion and its vacuum on a full disk.
RESERVE_BYTES = 8 * 1024 * 1024


class SQLiteResponseStore(ResponseStore):
    """An embedded store in one SQLite file, shared by all gunicorn workers on a host.

    Each process opens its own connection on first use (a connection inherited
    across ``fork`` is never used). WAL mode lets readers run beside the single
    writer; a write that finds another process's write lock is retried with a
    growing pause until ``timeout``, so clients never see ``database is
    locked``. A committed write survives the writing process being killed
    (WAL with ``synchronous=NORMAL`` loses commits only on power loss).
    Any other failure (file unwritable, disk full, I/O error) raises
    :class:`StoreUnavailable` and the connection is reopened on next use.

    Space: byte totals per owner are kept in the file (see :mod:`.sqlite_schema`);
    the file uses incremental auto-vacuum, so what deletions, expiry and evictions
    free is given back to the filesystem (a bounded amount per write); on a full
    disk a deletion draws on a reserve file (see :mod:`.reserve`).

    Args:
        path: the database file (created with its tables when missing).
        retention_seconds: see :class:`ResponseStore`; expired rows are invisible
            at once and purged on the next write.
        shared: see :class:`ResponseStore`.
        timeout: the longest an operation waits for the write lock, seconds.
        max_bytes, max_bytes_per_owner: see :class:`ResponseStore`.
        reserve_bytes: the size of the reserve file ``<path>-reserve``; 0 = none.
    """

    kind = "sqlite"

    def __init__(self, path: str | os.PathLike[str], retention_seconds: float | None = 30 * 24 * 3600, *,
                 shared: bool = False, timeout: float = 5.0, max_bytes: int = 0, max_bytes_per_owner: int = 0,
                 reserve_bytes: int = RESERVE_BYTES):
        super().__init__(retention_seconds=retention_seconds, shared=shared, max_bytes=max_bytes,
                         max_bytes_per_owner=max_bytes_per_owner)
        self.path = os.fspath(path)
        self.timeout = timeout
        self.reserve = Reserve(self.path + "-reserve", reserve_bytes)
        self._pid: int | None = None
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._lock_pid = os.getpid()
        # Connections inherited over fork are kept referenced, never closed: closing
        # one in the child could disturb the parent's locks and WAL.
        self._inherited: list[sqlite3.Connection] = []

    def location(self) -> str:
        return f"sqlite:///{self.path}"

    def put(self, response: dict[str, Any], input_items: list[dict[str, Any]], *, owner: str | None = None) -> None:
        response_id = response["id"]
        body, inputs = orjson.dumps(response), orjson.dumps(input_items)
        items = [(item["id"], response_id, orjson.dumps(item))
                 for item in (*input_items, *(response.get("output") or [])) if item.get("id")]
        size = len(body) + len(inputs) + sum(len(item[2]) for item in items)
        self.quota_check(size, owner)

        def write(conn: sqlite3.Connection) -> None:
            now = time.time()
            expires_at = None if self.retention_seconds is None else now + self.retention_seconds
            _purge(conn, now)
            conn.execute("DELETE FROM responses WHERE id = ?", (response_id,))
            self._make_room(conn, owner, size)
            conn.execute("INSERT INTO responses (id, body, input_items, expires_at, owner, size) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (response_id, body, inputs, expires_at, owner, size))
            conn.executemany("INSERT INTO items (id, response_id, body) VALUES (?, ?, ?)", items)

        try:
            self._retrying(write, transaction=True)
        except StoreUnavailable as exc:
            if _is_full(exc.__cause__):
                self._purge_on_full_disk()
            raise
        self._vacuum()

    def load(self, response_id: str, *, owner: str | None = None) -> StoredResponse | None:
        row = self._query_one(f"SELECT body, input_items FROM responses WHERE id = :id AND {_LIVE} AND {_OWNED}",
                              {"id": response_id, **self._scope(owner)})
        return None if row is None else StoredResponse(orjson.loads(row[0]), orjson.loads(row[1]))

    def get_item(self, item_id: str, *, owner: str | None = None) -> dict[str, Any] | None:
        row = self._query_one(
            "SELECT items.body FROM items JOIN responses ON responses.id = items.response_id "
            f"WHERE items.id = :id AND {_LIVE} AND {_OWNED} ORDER BY items.seq DESC LIMIT 1",
            {"id": item_id, **self._scope(owner)})
        return None if row is None else orjson.loads(row[0])

    def delete(self, response_id: str, *, owner: str | None = None) -> bool:
        def forget(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(f"DELETE FROM responses WHERE id = :id AND {_LIVE} AND {_OWNED}",
                                  {"id": response_id, **self._scope(owner)})
            return cursor.rowcount > 0  # its items and the totals follow by trigger

        deleted = self._retrying(forget, transaction=True, reserve=True)
        self._vacuum()
        return deleted

    def put_conversation(self, conversation: dict[str, Any], *, owner: str | None = None) -> None:
        body = orjson.dumps(conversation)
        self.quota_check(len(body), owner)

        def write(conn: sqlite3.Connection) -> None:
            now = time.time()
            _purge(conn, now)
            row = conn.execute("SELECT length(body) FROM conversations WHERE id = ?", (conversation["id"],)).fetchone()
            self._make_room(conn, owner, len(body) - (row[0] if row else 0))
            conn.execute("INSERT INTO conversations (id, body, owner, expires_at, size) VALUES (?, ?, ?, ?, ?) "
                         "ON CONFLICT (id) DO UPDATE SET body = excluded.body, expires_at = excluded.expires_at, "
                         "size = conversations.size - length(conversations.body) + length(excluded.body)",
                         (conversation["id"], body, owner, self._expiry(now), len(body)))

        self._retrying(write, transaction=True)

    def get_conversation(self, conversation_id: str, *, owner: str | None = None) -> dict[str, Any] | None:
        row = self._query_one(f"SELECT body FROM conversations WHERE id = :id AND {_LIVE} AND {_OWNED}",
                              {"id": conversation_id, **self._scope(owner)})
        return None if row is None else orjson.loads(row[0])

    def delete_conversation(self, conversation_id: str, *, owner: str | None = None) -> bool:
        def forget(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(f"DELETE FROM conversations WHERE id = :id AND {_LIVE} AND {_OWNED}",
                                  {"id": conversation_id, **self._scope(owner)})
            return cursor.rowcount > 0  # its items follow by trigger

        deleted = self._retrying(forget, transaction=True, reserve=True)
        self._vacuum()
        return deleted

    def add_conversation_items(self, conversation_id: str, items: list[dict[str, Any]], *,
                               owner: str | None = None) -> bool:
        rows = [(conversation_id, item["id"], orjson.dumps(item)) for item in items]
        added = sum(len(row[2]) for row in rows)

        def append(conn: sqlite3.Connection) -> bool:
            now = time.time()
            found = conn.execute(f"SELECT size FROM conversations WHERE id = :id AND {_LIVE} AND {_OWNED}",
                                 {"id": conversation_id, **self._scope(owner)}).fetchone()
            if found is None:
                return False
            self.quota_check(found[0] + added, owner)
            self._make_room(conn, owner, added)
            conn.execute("UPDATE conversations SET expires_at = ?, size = size + ? WHERE id = ?",
                         (self._expiry(now), added, conversation_id))
            conn.executemany("INSERT INTO conversation_items (conversation_id, id, body) VALUES (?, ?, ?)", rows)
            return True

        return self._retrying(append, transaction=True)

    def conversation_items(self, conversation_id: str, *, owner: str | None = None) -> list[dict[str, Any]] | None:
        if self.get_conversation(conversation_id, owner=owner) is None:
            return None
        rows = self._retrying(lambda conn: conn.execute(
            "SELECT body FROM conversation_items WHERE conversation_id = ? ORDER BY seq", (conversation_id,)
        ).fetchall())
        return [orjson.loads(row[0]) for row in rows]

    def delete_conversation_item(self, conversation_id: str, item_id: str, *, owner: str | None = None) -> bool:
        def forget(conn: sqlite3.Connection) -> bool:
            mine = (f"conversation_id = :conversation AND id = :id AND EXISTS (SELECT 1 FROM conversations WHERE "
                    f"id = :conversation AND {_LIVE} AND {_OWNED})")
            args = {"conversation": conversation_id, "id": item_id, **self._scope(owner)}
            removed = conn.execute(f"SELECT sum(length(body)) FROM conversation_items WHERE {mine}", args).fetchone()
            if not removed[0]:
                return False
            conn.execute(f"DELETE FROM conversation_items WHERE {mine}", args)
            conn.execute("UPDATE conversations SET size = size - ? WHERE id = ?", (removed[0], conversation_id))
            return True

        return self._retrying(forget, transaction=True, reserve=True)

    def _make_room(self, conn: sqlite3.Connection, owner: str | None, size: int) -> None:
        """Evict the oldest responses until ``size`` more bytes fit ``owner``'s quota and the store's (inside the
        writing transaction).

        Raises:
            StoreQuotaExceeded: they do not fit even so (conversations hold the rest): the transaction is undone.
        """
        if size <= 0:
            return
        for quota, whose in ((self.max_bytes_per_owner if owner is not None else 0, owner), (self.max_bytes, _ANY)):
            if quota and _evict(conn, whose, quota - size) > quota - size:
                raise StoreQuotaExceeded(f"{size} more bytes do not fit the {'store' if whose is _ANY else 'per-key'}"
                                         f" quota of {quota}: conversations take the rest")

    def usage(self, owner: str | None = None) -> int:
        row = self._query_one("SELECT bytes FROM usage WHERE owner = :owner", {"owner": owner or ""})
        return 0 if row is None else row[0]

    def total_usage(self) -> int:
        row = self._query_one("SELECT coalesce(sum(bytes), 0) FROM usage", {})
        return 0 if row is None else row[0]

    def check(self) -> None:
        """Write one row of the ``probe`` table: an unwritable file or a full disk fails here. A released
        reserve is allocated again here once there is room."""
        self._retrying(lambda conn: conn.execute("INSERT OR REPLACE INTO probe VALUES (1, ?)", (time.time(),)),
                       transaction=True)
        self.reserve.ensure()

    def _purge_on_full_disk(self) -> None:
        """Delete the expired responses on their own, drawing on the reserve, then give their pages back: on a
        full disk the write that purges them fails as a whole, so without this they would keep the disk full."""
        try:
            self._retrying(lambda conn: _purge(conn, time.time()), transaction=True, reserve=True)
        except StoreUnavailable:
            return  # logged; the write's own failure is what the caller hears about
        self._vacuum()

    def _vacuum(self) -> None:
        """Give up to :data:`_VACUUM_PAGES` free pages back to the filesystem (after the write committed: a
        failure here loses nothing and is tried again after the next write).

        While the reserve is released (the disk was full), the WAL is also checkpointed and cut back at
        once, so the space returns now and the reserve can be allocated again.
        """
        try:
            with self._process_lock():
                conn = self._connection()
                if conn.execute("PRAGMA freelist_count").fetchone()[0]:
                    # executescript steps the pragma to its end; execute() would free a single page
                    conn.executescript(f"PRAGMA incremental_vacuum({_VACUUM_PAGES})")
                if not self.reserve.ensure():
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                    self.reserve.ensure()
        except (sqlite3.Error, OSError) as exc:
            log.debug("response store %s: incremental vacuum failed: %s", self.location(), exc)

    def _expiry(self, now: float) -> float | None:
        return None if self.retention_seconds is None else now + self.retention_seconds

    def _scope(self, owner: str | None) -> dict[str, Any]:
        return {"now": time.time(), "shared": self.shared, "owner": owner}

    def _query_one(self, sql: str, args: dict[str, Any]) -> tuple[Any, ...] | None:
        return self._retrying(lambda conn: conn.execute(sql, args).fetchone())

    def _retrying(self, operation: Callable[[sqlite3.Connection], T], *, transaction: bool = False,
                  reserve: bool = False) -> T:
        """Run ``operation`` (in ``BEGIN IMMEDIATE`` … ``COMMIT`` when ``transaction``), waiting out other
        processes' locks until ``timeout``; with ``reserve``, a full disk releases the reserve file and the
        operation is tried again.

        Raises:
            StoreUnavailable: the lock stayed taken, or SQLite failed otherwise.
        """
        deadline = time.monotonic() + self.timeout
        pause = _FIRST_BACKOFF
        fresh = self._conn is None or self._pid != os.getpid()
        while True:
            try:
                with self._process_lock():
                    if not transaction:
                        return operation(self._connection())
                    with self._transaction() as conn:
                        return operation(conn)
            except (sqlite3.Error, OSError) as exc:
                busy = isinstance(exc, sqlite3.OperationalError) and _is_busy(exc)
                if reserve and _is_full(exc) and self.reserve.release():
                    continue
                if busy and time.monotonic() + pause <= deadline:
                    time.sleep(pause)  # outside the lock; under gevent the worker's other greenlets run meanwhile
                    pause = min(pause * 2, _MAX_BACKOFF)
                    continue
                if busy or fresh:
                    raise self._unavailable(exc) from exc
                # An older connection may be what failed (opened read-only while the file was, or left
                # broken by an I/O error): try once more on a new one.
                self._reset()
                fresh = True

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        self._reset()
        log.warning("response store %s failed: %s", self.location(), exc)
        return StoreUnavailable(f"the SQLite response store failed: {exc}")

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``, ``ROLLBACK`` on error (call with the lock held)."""
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    self._reset()  # the connection is in an unknown state: use a new one
            raise

    def _process_lock(self) -> threading.Lock:
        # A lock inherited over fork may have been held by a thread that doesn't exist here.
        if self._lock_pid != os.getpid():
            self._lock, self._lock_pid = threading.Lock(), os.getpid()
        return self._lock

    def _reset(self) -> None:
        """Drop this process's connection (after an error); the next operation opens a new one."""
        if self._conn is not None and self._pid == os.getpid():
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
        self._conn = None

    def _connection(self) -> sqlite3.Connection:
        """This process's connection (call with the lock held)."""
        pid = os.getpid()
        if self._conn is None or self._pid != pid:
            if self._conn is not None:
                self._inherited.append(self._conn)
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            new = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            try:
                conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
                if new:  # only a file without tables takes it; an older file is switched over by prepare()
                    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                # Debian's SQLite zeroes every freed page through the WAL (SECURE_DELETE), so a deletion needed
                # its size in free disk, more than the reserve for a large response. Freed pages go back to
                # the filesystem by the vacuum; only what is written anyway is zeroed.
                conn.execute("PRAGMA secure_delete = FAST")
                conn.execute(f"PRAGMA journal_size_limit = {_WAL_LIMIT_BYTES}")
                prepare(conn)
            except BaseException:
                conn.close()
                raise
            self._conn, self._pid = conn, pid
            self.reserve.ensure()
        return self._conn


def _purge(conn: sqlite3.Connection, now: float) -> None:
    """Delete the responses and conversations expired by ``now`` (their items and the totals follow by trigger)."""
    conn.execute("DELETE FROM responses WHERE expires_at <= ?", (now,))
    conn.execute("DELETE FROM conversations WHERE expires_at <= ?", (now,))


#: ``_evict``'s owner for "every owner" (the store-wide quota).
_ANY = object()


def _evict(conn: sqlite3.Connection, owner: Any, allowed: int) -> int:
    """Delete the oldest responses of ``owner`` (or of anyone, :data:`_ANY`) until their stored bytes (responses'
    and conversations') are at most ``allowed``, or no response is left (inside the writing transaction); the
    bytes they take then."""
    if owner is _ANY:
        used = conn.execute("SELECT coalesce(sum(bytes), 0) FROM usage").fetchone()[0]
        oldest = conn.execute("SELECT id, size FROM responses ORDER BY rowid")
    else:
        row = conn.execute("SELECT bytes FROM usage WHERE owner = ?", (owner,)).fetchone()
        used = 0 if row is None else row[0]
        oldest = conn.execute("SELECT id, size FROM responses WHERE owner = ? ORDER BY rowid", (owner,))
    if used <= allowed:
        return used
    doomed = []
    for response_id, size in oldest:
        doomed.append((response_id,))
        used -= size
        if used <= allowed:
            break
    oldest.close()
    conn.executemany("DELETE FROM responses WHERE id = ?", doomed)
    log.info("response store: %d oldest responses evicted for the %s quota", len(doomed),
             "store's" if owner is _ANY else "key's")
    return used


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    """Another connection holds the lock (``SQLITE_BUSY``/``SQLITE_LOCKED``): worth waiting for."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    message = str(exc)
    return "locked" in message or "busy" in message


def _is_full(exc: BaseException | None) -> bool:
    """The disk (or the file's size limit) is full: ``SQLITE_FULL``."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_FULL
