"""Stored responses, for ``previous_response_id``, ``item_reference`` and GET/DELETE by id.

:class:`ResponseStore` is the interface the endpoints use, so a shared store
(Redis, a database server) can replace the embedded :class:`SQLiteResponseStore`.
The caller decides what to keep: responses created with ``store: false`` are
simply never ``put``.
"""

from __future__ import annotations

import abc
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

import orjson

__all__ = ["ResponseStore", "SQLiteResponseStore"]


class ResponseStore(abc.ABC):
    """Where finished Response objects and their items live."""

    @abc.abstractmethod
    def put(self, response: dict[str, Any], input_items: list[dict[str, Any]]) -> None:
        """Keep ``response`` (a Response object with ``id`` and ``output``) and its input items.

        Output items and input items that carry an ``id`` become resolvable
        with :meth:`get_item`. Putting the same response id again replaces it.
        """

    @abc.abstractmethod
    def get(self, response_id: str) -> dict[str, Any] | None:
        """The stored Response object, or ``None`` when unknown or expired."""

    @abc.abstractmethod
    def get_input_items(self, response_id: str) -> list[dict[str, Any]] | None:
        """The response's input items in request order, or ``None`` when unknown or expired."""

    @abc.abstractmethod
    def get_item(self, item_id: str) -> dict[str, Any] | None:
        """An output or input item by its ``id`` (the most recently stored one), or ``None``."""

    @abc.abstractmethod
    def delete(self, response_id: str) -> bool:
        """Forget a response and its items; ``False`` when it was not stored."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    body BLOB NOT NULL,
    input_items BLOB NOT NULL,
    expires_at REAL
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
"""

_LIVE = "(expires_at IS NULL OR expires_at > ?)"


class SQLiteResponseStore(ResponseStore):
    """An embedded store in one SQLite file, shared by all gunicorn workers on a host.

    Each process opens its own connection on first use (a connection inherited
    across ``fork`` is never used); WAL mode lets readers run beside the single
    writer, and the busy timeout makes concurrent writers wait instead of
    failing. Access within a process is serialised by a lock. No gevent yield
    happens while the lock is held (sqlite3 calls block the worker briefly),
    so greenlets never wait on each other inside it.

    Args:
        path: the database file (created with its tables when missing).
        retention_seconds: how long a response stays resolvable; ``None`` keeps
            it until deleted. Expired rows are invisible at once and purged on
            the next write.
        busy_timeout_ms: how long a writer waits for another process's lock.
    """

    def __init__(self, path: str | os.PathLike[str], retention_seconds: float | None = 30 * 24 * 3600,
                 *, busy_timeout_ms: int = 5000):
        self.path = os.fspath(path)
        self.retention_seconds = retention_seconds
        self.busy_timeout_ms = busy_timeout_ms
        self._pid: int | None = None
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._lock_pid = os.getpid()
        # Connections inherited over fork are kept referenced, never closed: closing
        # one in the child could disturb the parent's locks and WAL.
        self._inherited: list[sqlite3.Connection] = []

    def put(self, response: dict[str, Any], input_items: list[dict[str, Any]]) -> None:
        response_id = response["id"]
        now = time.time()
        expires_at = None if self.retention_seconds is None else now + self.retention_seconds
        items = [*input_items, *(response.get("output") or [])]
        with self._transaction() as conn:
            conn.execute(
                "DELETE FROM items WHERE response_id IN (SELECT id FROM responses WHERE expires_at <= ?)", (now,)
            )
            conn.execute("DELETE FROM responses WHERE expires_at <= ?", (now,))
            conn.execute("DELETE FROM items WHERE response_id = ?", (response_id,))
            conn.execute(
                "INSERT OR REPLACE INTO responses (id, body, input_items, expires_at) VALUES (?, ?, ?, ?)",
                (response_id, orjson.dumps(response), orjson.dumps(input_items), expires_at),
            )
            conn.executemany(
                "INSERT INTO items (id, response_id, body) VALUES (?, ?, ?)",
                [(item["id"], response_id, orjson.dumps(item)) for item in items if item.get("id")],
            )

    def get(self, response_id: str) -> dict[str, Any] | None:
        row = self._query_one(f"SELECT body FROM responses WHERE id = ? AND {_LIVE}", (response_id, time.time()))
        return None if row is None else orjson.loads(row[0])

    def get_input_items(self, response_id: str) -> list[dict[str, Any]] | None:
        row = self._query_one(
            f"SELECT input_items FROM responses WHERE id = ? AND {_LIVE}", (response_id, time.time())
        )
        return None if row is None else orjson.loads(row[0])

    def get_item(self, item_id: str) -> dict[str, Any] | None:
        row = self._query_one(
            "SELECT items.body FROM items JOIN responses ON responses.id = items.response_id "
            f"WHERE items.id = ? AND {_LIVE} ORDER BY items.seq DESC LIMIT 1",
            (item_id, time.time()),
        )
        return None if row is None else orjson.loads(row[0])

    def delete(self, response_id: str) -> bool:
        with self._transaction() as conn:
            conn.execute("DELETE FROM items WHERE response_id = ?", (response_id,))
            cursor = conn.execute(
                f"DELETE FROM responses WHERE id = ? AND {_LIVE}", (response_id, time.time())
            )
            return cursor.rowcount > 0

    def _query_one(self, sql: str, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        with self._process_lock():
            return self._connection().execute(sql, args).fetchone()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """The process lock plus ``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error)."""
        with self._process_lock():
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _process_lock(self) -> threading.Lock:
        # A lock inherited over fork may have been held by a thread that doesn't exist here.
        if self._lock_pid != os.getpid():
            self._lock, self._lock_pid = threading.Lock(), os.getpid()
        return self._lock

    def _connection(self) -> sqlite3.Connection:
        """This process's connection (call with the lock held)."""
        pid = os.getpid()
        if self._conn is None or self._pid != pid:
            if self._conn is not None:
                self._inherited.append(self._conn)
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(_SCHEMA)
            self._conn, self._pid = conn, pid
        return self._conn
