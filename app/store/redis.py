"""The shared response store: Redis or Valkey, for several toolwire hosts behind one load balancer.

Layout (``toolwire:`` is the key prefix):

- ``toolwire:resp:<response id>``: a hash ``owner``, ``response``, ``input``,
  ``items`` (the ids of the items it stored, JSON); its TTL is the retention.
- ``toolwire:conv:<conversation id>`` and ``…:items``: a conversation (see
  :mod:`.redis_scripts`).
- ``toolwire:item:<item id>``: a hash with one field per owner (``""`` for none)
  holding the copy that owner stored last, as JSON
  ``{"response": id, "expires_at": t, "stored_at": t, "item": {...}}``; its TTL
  is renewed to the retention on every write, so it outlives each copy in it.

A lookup is one round trip (``HMGET`` or ``HGET``/``HGETALL``); a write and a
DELETE are one Lua script each (:mod:`.redis_scripts`, which also keeps the byte
totals and evicts for the quotas), so a record and its items appear together or
not at all. A field that does not decode reads as absent. When Redis is out of
memory (``maxmemory`` with ``noeviction``) writes fail as a whole and DELETE
still works. Records written before the quotas existed are not counted.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import orjson
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..settings import mask_url
from . import redis_scripts
from .base import ResponseStore, StoredResponse, StoreQuotaExceeded, StoreUnavailable

__all__ = ["RedisResponseStore"]

log = logging.getLogger("toolwire.responses.store")

PREFIX = "toolwire:"
#: What Redis holds for an item copy beside the item's JSON: the copy's wrapper, its key, a hash, the key's
#: expiry, the keyspace's slots (measured: ``used_memory`` grows 380-400 bytes more than the item per copy,
#: Redis 7.0, jemalloc). Counting the JSON alone missed 2-5x for responses of many small items.
ITEM_OVERHEAD = 400
#: What Redis holds for a response beside its JSON: its hash and key, the ids of its items, its ``meta``
#: entry and two index entries (measured the same way: 700-800 bytes).
RESPONSE_OVERHEAD = 800


class RedisResponseStore(ResponseStore):
    """A store in Redis (or Valkey), shared by every toolwire host that names the same server.

    Each operation waits at most ``timeout`` for the server (a refused
    connection fails at once); a connection found broken (the server restarted)
    is replaced and the command tried once more, so a restarted server is used
    again without restarting toolwire.

    Args:
        url: ``redis://[[user]:password@]host[:port][/db]`` or ``rediss://…`` (TLS).
        retention_seconds: see :class:`ResponseStore`; kept as key TTLs (whole seconds, rounded up).
        shared: see :class:`ResponseStore`.
        timeout: connect and read timeout per command, seconds.
        max_bytes, max_bytes_per_owner: see :class:`ResponseStore`.
    """

    kind = "redis"

    def __init__(self, url: str, retention_seconds: float | None = 30 * 24 * 3600, *,
                 shared: bool = False, timeout: float = 2.0, max_bytes: int = 0, max_bytes_per_owner: int = 0):
        super().__init__(retention_seconds=retention_seconds, shared=shared, max_bytes=max_bytes,
                         max_bytes_per_owner=max_bytes_per_owner)
        self.url = url
        self.timeout = timeout
        # A broken pooled connection (server restarted) is retried once on a new one; a timeout is not
        # retried, so a stalled server costs one timeout.
        self._redis = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)))
        self._ttl = None if retention_seconds is None else max(1, math.ceil(retention_seconds))
        self._put = self._redis.register_script(redis_scripts.PUT)
        self._delete = self._redis.register_script(redis_scripts.DELETE)
        self._put_conversation = self._redis.register_script(redis_scripts.PUT_CONVERSATION)
        self._append_items = self._redis.register_script(redis_scripts.APPEND_ITEMS)
        self._delete_conversation = self._redis.register_script(redis_scripts.DELETE_CONVERSATION)
        self._delete_item = self._redis.register_script(redis_scripts.DELETE_ITEM)

    def location(self) -> str:
        return mask_url(self.url)

    def put(self, response: dict[str, Any], input_items: list[dict[str, Any]], *, owner: str | None = None) -> None:
        response_id = response["id"]
        now = time.time()
        expires_at = None if self._ttl is None else now + self._ttl
        with_ids = [item for item in (*input_items, *(response.get("output") or [])) if item.get("id")]
        items = {item["id"]: item for item in with_ids}
        body, inputs = orjson.dumps(response), orjson.dumps(input_items)
        copies = [(item_id, orjson.dumps({"response": response_id, "expires_at": expires_at, "stored_at": now,
                                          "item": item})) for item_id, item in items.items()]
        # counted like the SQLite store (the JSON of the response, its input items and its items), plus what
        # Redis holds beside that JSON
        size = len(body) + len(inputs) + sum(len(orjson.dumps(item)) for item in with_ids) + \
            ITEM_OVERHEAD * len(copies) + RESPONSE_OVERHEAD
        self.quota_check(size, owner)
        args: list[Any] = [response_id, owner or "", size, now, self._ttl or 0, self.max_bytes,
                           self.max_bytes_per_owner, body, inputs, orjson.dumps(list(items))]
        for item_id, copy in copies:
            args += [item_id, copy]
        if self._run(self._put, [PREFIX], args) == -1:
            raise StoreQuotaExceeded(f"{size} bytes do not fit the quota: conversations take the rest")

    def load(self, response_id: str, *, owner: str | None = None) -> StoredResponse | None:
        record_owner, response, input_items = self._run(
            self._redis.hmget, _response_key(response_id), ["owner", "response", "input"])
        if record_owner is None or response is None or input_items is None:
            return None
        if not self.visible(record_owner.decode() or None, owner):
            return None
        try:
            return StoredResponse(orjson.loads(response), orjson.loads(input_items))
        except orjson.JSONDecodeError:
            log.warning("stored response %s does not decode; treated as absent", response_id)
            return None

    def get_item(self, item_id: str, *, owner: str | None = None) -> dict[str, Any] | None:
        if self.shared:
            copies = list(self._run(self._redis.hgetall, _item_key(item_id)).values())
        else:
            copies = [self._run(self._redis.hget, _item_key(item_id), owner or "")]
        now = time.time()
        live = [copy for copy in map(_decode_copy, copies)
                if copy is not None and (copy["expires_at"] is None or copy["expires_at"] > now)]
        return max(live, key=lambda copy: copy["stored_at"])["item"] if live else None

    def delete(self, response_id: str, *, owner: str | None = None) -> bool:
        return bool(self._run(self._delete, [PREFIX], [response_id, owner or "", "1" if self.shared else "0"]))

    def put_conversation(self, conversation: dict[str, Any], *, owner: str | None = None) -> None:
        self._conversation_script(self._put_conversation, conversation["id"], owner, orjson.dumps(conversation))

    def get_conversation(self, conversation_id: str, *, owner: str | None = None) -> dict[str, Any] | None:
        record_owner, conversation = self._run(self._redis.hmget, _conversation_key(conversation_id),
                                               ["owner", "conversation"])
        if record_owner is None or conversation is None or not self.visible(record_owner.decode() or None, owner):
            return None
        return _decode(conversation)

    def delete_conversation(self, conversation_id: str, *, owner: str | None = None) -> bool:
        return self._conversation_script(self._delete_conversation, conversation_id, owner)

    def add_conversation_items(self, conversation_id: str, items: list[dict[str, Any]], *,
                               owner: str | None = None) -> bool:
        return self._conversation_script(self._append_items, conversation_id, owner, *map(orjson.dumps, items))

    def conversation_items(self, conversation_id: str, *, owner: str | None = None) -> list[dict[str, Any]] | None:
        if self.get_conversation(conversation_id, owner=owner) is None:
            return None
        raw = self._run(self._redis.lrange, _conversation_key(conversation_id) + ":items", 0, -1)
        return [item for item in map(_decode, raw) if item is not None]

    def delete_conversation_item(self, conversation_id: str, item_id: str, *, owner: str | None = None) -> bool:
        return self._conversation_script(self._delete_item, conversation_id, owner, item_id)

    def _conversation_script(self, script: Any, conversation_id: str, owner: str | None, *args: Any) -> bool:
        key = _conversation_key(conversation_id)
        done = self._run(script, [PREFIX, key, key + ":items"],
                         [owner or "", "1" if self.shared else "0", self._ttl or 0, time.time(), self.max_bytes,
                          self.max_bytes_per_owner, conversation_id, *args])
        if done == -1:
            raise StoreQuotaExceeded("the conversation does not fit the quota: other conversations take the rest")
        return bool(done)

    def usage(self, owner: str | None = None) -> int:
        return int(self._run(self._redis.hget, f"{PREFIX}usage", owner or "") or 0)

    def total_usage(self) -> int:
        return int(self._run(self._redis.hget, f"{PREFIX}usage", "*") or 0)

    def check(self) -> None:
        self._run(self._redis.ping)

    def _run(self, command: Any, *args: Any) -> Any:
        """``command(*args)``, any Redis failure raised as :class:`StoreUnavailable`."""
        try:
            return command(*args)
        except redis.RedisError as exc:
            log.warning("response store %s failed: %s: %s", self.location(), type(exc).__name__, exc)
            raise StoreUnavailable(f"the Redis response store failed: {type(exc).__name__}") from exc


def _response_key(response_id: str) -> str:
    return f"{PREFIX}resp:{response_id}"


def _item_key(item_id: str) -> str:
    return f"{PREFIX}item:{item_id}"


def _conversation_key(conversation_id: str) -> str:
    return f"{PREFIX}conv:{conversation_id}"


def _decode(raw: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _decode_copy(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        copy = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return copy if isinstance(copy, dict) and "item" in copy else None
