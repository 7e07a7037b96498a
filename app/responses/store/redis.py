"""The shared response store: Redis or Valkey, for several toolwire hosts behind one load balancer.

Layout (``toolwire:`` is the key prefix):

- ``toolwire:resp:<response id>``: a hash ``owner``, ``response``, ``input``,
  ``items`` (the ids of the items it stored, JSON); its TTL is the retention.
- ``toolwire:item:<item id>``: a hash with one field per owner (``""`` for none)
  holding the copy that owner stored last, as JSON
  ``{"response": id, "expires_at": t, "stored_at": t, "item": {...}}``; its TTL
  is renewed to the retention on every write, so it outlives each copy in it.

A lookup is one round trip (``HMGET`` or ``HGET``/``HGETALL``); a write is one
``MULTI``/``EXEC`` pipeline, so a record and its items appear together or not at
all. A field that does not decode reads as absent.
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

from ...settings import mask_url
from .base import ResponseStore, StoredResponse, StoreUnavailable

__all__ = ["RedisResponseStore"]

log = logging.getLogger("toolwire.responses.store")

PREFIX = "toolwire:"


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
    """

    kind = "redis"

    def __init__(self, url: str, retention_seconds: float | None = 30 * 24 * 3600, *,
                 shared: bool = False, timeout: float = 2.0):
        super().__init__(retention_seconds=retention_seconds, shared=shared)
        self.url = url
        self.timeout = timeout
        # A broken pooled connection (server restarted) is retried once on a new one; a timeout is not
        # retried, so a stalled server costs one timeout.
        self._redis = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)))
        self._ttl = None if retention_seconds is None else max(1, math.ceil(retention_seconds))

    def location(self) -> str:
        return mask_url(self.url)

    def put(self, response: dict[str, Any], input_items: list[dict[str, Any]], *, owner: str | None = None) -> None:
        response_id = response["id"]
        now = time.time()
        expires_at = None if self._ttl is None else now + self._ttl
        items = {item["id"]: item for item in (*input_items, *(response.get("output") or [])) if item.get("id")}
        record = {"owner": owner or "", "response": orjson.dumps(response), "input": orjson.dumps(input_items),
                  "items": orjson.dumps(list(items))}
        pipe = self._redis.pipeline(transaction=True)
        pipe.hset(_response_key(response_id), mapping=record)
        self._expire(pipe, _response_key(response_id))
        for item_id, item in items.items():
            copy = {"response": response_id, "expires_at": expires_at, "stored_at": now, "item": item}
            pipe.hset(_item_key(item_id), owner or "", orjson.dumps(copy))
            self._expire(pipe, _item_key(item_id))
        self._run(pipe.execute)

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
        key = _response_key(response_id)
        record_owner, item_ids = self._run(self._redis.hmget, key, ["owner", "items"])
        if record_owner is None or not self.visible(record_owner.decode() or None, owner):
            return False
        try:
            ids = orjson.loads(item_ids) if item_ids is not None else []
        except orjson.JSONDecodeError:
            ids = []
        field = record_owner.decode()
        # Only the item copies this response stored last are removed; a later response's copy stays.
        read = self._redis.pipeline(transaction=False)
        for item_id in ids:
            read.hget(_item_key(item_id), field)
        copies = self._run(read.execute) if ids else []
        write = self._redis.pipeline(transaction=True)
        write.delete(key)
        for item_id, raw in zip(ids, copies):
            copy = _decode_copy(raw)
            if copy is not None and copy["response"] == response_id:
                write.hdel(_item_key(item_id), field)
        return bool(self._run(write.execute)[0])

    def check(self) -> None:
        self._run(self._redis.ping)

    def _expire(self, pipe: Any, key: str) -> None:
        if self._ttl is None:
            pipe.persist(key)
        else:
            pipe.expire(key, self._ttl)

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


def _decode_copy(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        copy = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return copy if isinstance(copy, dict) and "item" in copy else None
