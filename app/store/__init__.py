"""Stored responses, for ``previous_response_id``, ``item_reference`` and GET/DELETE by id.

One interface, :class:`ResponseStore`, with two stores behind it, chosen at
start by :func:`open_store` from ``TOOLWIRE_RESPONSE_STORE_URL``:
:class:`SQLiteResponseStore` (one host, embedded) and :class:`RedisResponseStore`
(several hosts). The caller decides what to keep: responses created with
``store: false`` are simply never ``put``.
"""

from __future__ import annotations

from .base import OwnedStore, ResponseStore, StoredResponse, StoreError, StoreQuotaExceeded, StoreUnavailable
from .redis import RedisResponseStore
from .sqlite import SQLiteResponseStore
from .urls import check_store_url, sqlite_path, store_url

__all__ = ["OwnedStore", "RedisResponseStore", "ResponseStore", "SQLiteResponseStore", "StoreError",
           "StoreQuotaExceeded", "StoreUnavailable", "StoredResponse", "open_store", "store_url"]

def open_store(url: str, retention_seconds: float | None, *, shared: bool = False, timeout: float = 2.0,
               max_bytes: int = 0, max_bytes_per_owner: int = 0) -> ResponseStore | None:
    """The store ``url`` names, or ``None`` for an empty ``url`` (nothing is stored).

    ``max_bytes`` and ``max_bytes_per_owner`` are the quotas (see :mod:`.base`; 0 = no limit).

    Nothing is connected yet: a store that is down at start is reported by
    :meth:`ResponseStore.check` (``/readyz``) and by the requests that need it.

    Raises:
        ValueError: an unknown scheme or a malformed ``sqlite`` URL.
    """
    if not check_store_url(url):
        return None
    quotas = {"max_bytes": max_bytes, "max_bytes_per_owner": max_bytes_per_owner}
    if url.startswith("sqlite:"):
        return SQLiteResponseStore(sqlite_path(url), retention_seconds, shared=shared, timeout=timeout, **quotas)
    return RedisResponseStore(url, retention_seconds, shared=shared, timeout=timeout, **quotas)
