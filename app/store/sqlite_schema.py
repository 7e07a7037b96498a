"""The SQLite store's tables, and the upgrade of files written by earlier versions.

Running byte totals live in ``usage`` (one row per owner, ``''`` for none) and
are kept by triggers, so every path that adds or removes a response or a
conversation (a put, a DELETE, the purge of expired rows, an eviction) or changes
a conversation's ``size`` (its object's and its items' JSON bytes, kept by the
store's writes) updates them in its own transaction. Removing a response also
removes its item copies; removing a conversation, its items.
"""

from __future__ import annotations

import logging
import sqlite3

log = logging.getLogger("toolwire.responses.store")

#: ``PRAGMA user_version`` of a file with sizes, the ``usage`` table and its triggers (3: conversations counted).
SCHEMA_VERSION = 3

TABLES = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    body BLOB NOT NULL,
    input_items BLOB NOT NULL,
    expires_at REAL,
    owner TEXT,
    size INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS items (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL,
    response_id TEXT NOT NULL,
    body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS probe (id INTEGER PRIMARY KEY CHECK (id = 1), checked_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS usage (owner TEXT PRIMARY KEY, bytes INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    body BLOB NOT NULL,
    owner TEXT,
    expires_at REAL,
    size INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS conversation_items (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL,
    id TEXT NOT NULL,
    body BLOB NOT NULL
);
"""

_DERIVED = """
CREATE INDEX IF NOT EXISTS responses_expires_at ON responses (expires_at);
CREATE INDEX IF NOT EXISTS responses_owner ON responses (owner);
CREATE INDEX IF NOT EXISTS items_id ON items (id);
CREATE INDEX IF NOT EXISTS items_response_id ON items (response_id);
CREATE TRIGGER IF NOT EXISTS responses_added AFTER INSERT ON responses BEGIN
    INSERT INTO usage (owner, bytes) VALUES (coalesce(new.owner, ''), new.size)
        ON CONFLICT (owner) DO UPDATE SET bytes = bytes + new.size;
END;
CREATE INDEX IF NOT EXISTS conversation_items_order ON conversation_items (conversation_id, seq);
CREATE TRIGGER IF NOT EXISTS conversations_added AFTER INSERT ON conversations BEGIN
    INSERT INTO usage (owner, bytes) VALUES (coalesce(new.owner, ''), new.size)
        ON CONFLICT (owner) DO UPDATE SET bytes = bytes + new.size;
END;
CREATE TRIGGER IF NOT EXISTS conversations_resized AFTER UPDATE OF size ON conversations BEGIN
    UPDATE usage SET bytes = bytes + new.size - old.size WHERE owner = coalesce(old.owner, '');
END;
CREATE TRIGGER IF NOT EXISTS conversations_counted_removed AFTER DELETE ON conversations BEGIN
    UPDATE usage SET bytes = bytes - old.size WHERE owner = coalesce(old.owner, '');
    DELETE FROM conversation_items WHERE conversation_id = old.id;
END;
CREATE TRIGGER IF NOT EXISTS responses_removed AFTER DELETE ON responses BEGIN
    UPDATE usage SET bytes = bytes - old.size WHERE owner = coalesce(old.owner, '');
    DELETE FROM items WHERE response_id = old.id;
END;
"""

_BACKFILL = """
DROP TRIGGER IF EXISTS conversations_removed;
UPDATE responses SET size = length(body) + length(input_items)
    + (SELECT coalesce(sum(length(items.body)), 0) FROM items WHERE items.response_id = responses.id);
UPDATE conversations SET size = length(body) + (SELECT coalesce(sum(length(conversation_items.body)), 0)
    FROM conversation_items WHERE conversation_items.conversation_id = conversations.id);
DELETE FROM usage;
INSERT INTO usage (owner, bytes) SELECT owner, sum(size) FROM (
    SELECT coalesce(owner, '') AS owner, size FROM responses
    UNION ALL SELECT coalesce(owner, '') AS owner, size FROM conversations) GROUP BY owner;
"""


def prepare(conn: sqlite3.Connection) -> None:
    """Create the tables on a new file, or bring a file from an earlier version up to :data:`SCHEMA_VERSION`.

    A new file gets incremental auto-vacuum before its first table; an older file
    is vacuumed once to switch it on (which needs free disk space about the file's
    size and holds the write lock meanwhile: a one-time cost of the upgrade).
    """
    conn.executescript(TABLES)
    if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
        _upgrade(conn)
    conn.executescript(_DERIVED)
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
        _switch_on_auto_vacuum(conn)


def _upgrade(conn: sqlite3.Connection) -> None:
    """Add the columns earlier files lack and count their sizes, once, under the write lock."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:  # not done by another worker
            columns = {row[1] for row in conn.execute("PRAGMA table_info(responses)")}
            if "owner" not in columns:  # files from before owners: their rows have none
                conn.execute("ALTER TABLE responses ADD COLUMN owner TEXT")
            if "size" not in columns:
                conn.execute("ALTER TABLE responses ADD COLUMN size INTEGER NOT NULL DEFAULT 0")
            if "size" not in {row[1] for row in conn.execute("PRAGMA table_info(conversations)")}:
                conn.execute("ALTER TABLE conversations ADD COLUMN size INTEGER NOT NULL DEFAULT 0")
            for statement in filter(str.strip, _BACKFILL.split(";")):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _switch_on_auto_vacuum(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("VACUUM")
        log.info("response store: incremental auto-vacuum switched on (the file was vacuumed once)")
    except sqlite3.Error as exc:  # another worker is at it, or no room: the store works, its file won't shrink
        log.warning("response store: could not switch on incremental auto-vacuum yet: %s", exc)
