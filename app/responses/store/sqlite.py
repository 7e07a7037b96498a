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

from .base import ResponseStore, StoredResponse, StoreUnavailable

__all__ = ["SQLiteResponseStore"]

log = logging.getLogger("toolwire.responses.store")

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    body BLOB NOT NULL,
    input_items BLOB NOT NULL,
    expires_at REAL,
    owner TEXT
);
CREATE INDEX IF NOT EXISTS responses_expires_at ON responses (expires_at);
CREATE TABLE IF NOT EXISTS items (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL,
    response_id TEXT NOT NULL,
    body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS items_id ON items (id);
CREATE INDEX IF NOT EXISTS items_response_id ON items (response_id);
CREATE TABLE IF NOT EXISTS probe (id INTEGER PRIMARY KEY CHECK (id = 1), checked_at REAL NOT NULL);
"""

_LIVE = "(expires_at IS NULL OR expires_at > :now)"
_OWNED = "(:shared OR owner IS :owner)"

#: SQLite's own busy wait sleeps in C and would stall every greenlet of the worker, so it is kept
#: short; longer waits for another process's write lock happen in :meth:`_retrying`, cooperatively.
_BUSY_TIMEOUT_MS = 50
_FIRST_BACKOFF = 0.005
_MAX_BACKOFF = 0.1


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

    Args:
        path: the database file (created with its tables when missing).
        retention_seconds: see :class:`ResponseStore`; expired rows are invisible
            at once and purged on the next write.
        shared: see :class:`ResponseStore`.
        timeout: the longest an operation waits for the write lock, seconds.
    """

    kind = "sqlite"

    def __init__(self, path: str | os.PathLike[str], retention_seconds: float | None = 30 * 24 * 3600, *,
                 shared: bool = False, timeout: float = 5.0):
        super().__init__(retention_seconds=retention_seconds, shared=shared)
        self.path = os.fspath(path)
        self.timeout = timeout
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

        def write(conn: sqlite3.Connection) -> None:
            now = time.time()
            expires_at = None if self.retention_seconds is None else now + self.retention_seconds
            conn.execute("DELETE FROM items WHERE response_id IN "
                         "(SELECT id FROM responses WHERE expires_at <= ?)", (now,))
            conn.execute("DELETE FROM responses WHERE expires_at <= ?", (now,))
            conn.execute("DELETE FROM items WHERE response_id = ?", (response_id,))
            conn.execute("INSERT OR REPLACE INTO responses (id, body, input_items, expires_at, owner) "
                         "VALUES (?, ?, ?, ?, ?)", (response_id, body, inputs, expires_at, owner))
            conn.executemany("INSERT INTO items (id, response_id, body) VALUES (?, ?, ?)", items)

        self._retrying(write, transaction=True)

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
            if cursor.rowcount == 0:
                return False
            conn.execute("DELETE FROM items WHERE response_id = ?", (response_id,))
            return True

        return self._retrying(forget, transaction=True)

    def check(self) -> None:
        """Write one row of the ``probe`` table: an unwritable file or a full disk fails here."""
        self._retrying(lambda conn: conn.execute("INSERT OR REPLACE INTO probe VALUES (1, ?)", (time.time(),)),
                       transaction=True)

    def _scope(self, owner: str | None) -> dict[str, Any]:
        return {"now": time.time(), "shared": self.shared, "owner": owner}

    def _query_one(self, sql: str, args: dict[str, Any]) -> tuple[Any, ...] | None:
        return self._retrying(lambda conn: conn.execute(sql, args).fetchone())

    def _retrying(self, operation: Callable[[sqlite3.Connection], T], *, transaction: bool = False) -> T:
        """Run ``operation`` (in ``BEGIN IMMEDIATE`` … ``COMMIT`` when ``transaction``), waiting out other
        processes' locks until ``timeout``.

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
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            try:
                conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.executescript(_SCHEMA)
                _add_owner_column(conn)
            except BaseException:
                conn.close()
                raise
            self._conn, self._pid = conn, pid
        return self._conn


def _add_owner_column(conn: sqlite3.Connection) -> None:
    """Files written before responses had owners get the column; their rows have no owner."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(responses)")}
    if "owner" not in columns:
        try:
            conn.execute("ALTER TABLE responses ADD COLUMN owner TEXT")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):  # another worker added it first
                raise


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    """Another connection holds the lock (``SQLITE_BUSY``/``SQLITE_LOCKED``): worth waiting for."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    message = str(exc)
    return "locked" in message or "busy" in message
