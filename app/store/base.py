"""The response store interface, its errors, and :class:`OwnedStore`, the store as one client sees it.

Every stored response records its *owner*: a digest of the client key that
created it (``None`` when the API has no keys). Reads and deletes name the
owner asking; a response, or an item, whose owner differs is reported as
absent, never as forbidden, so its existence is not revealed. A store opened
with ``shared=True`` still records owners but lets every owner see everything
(one tenant).

Stored responses and items are JSON objects the store never interprets beyond
``id`` and ``output``: new item types need no store change. Conversations (the
Conversations API) are kept beside them: a conversation object and its items in
order, owned and retained as responses are (each write starts its retention
again), and counted in the quotas with their owner's responses: a conversation
write evicts the oldest responses to make room, never a conversation, and what
conversations leave no room for is refused with :class:`StoreQuotaExceeded`.

Quotas: a stored response's *size* is the bytes of JSON written for it (the
Response object, its input items and the item copies made resolvable). A store
keeps running totals per owner, and a write that would pass ``max_bytes`` (all
owners) or ``max_bytes_per_owner`` (one client key; not applied without keys)
first evicts the oldest responses (the owner's own for the per-key quota), like a
cache. A response larger than a quota on its own (or than what conversations
leave of it) evicts nothing and is refused with :class:`StoreQuotaExceeded`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

from ..errors import ApiError

__all__ = ["OwnedStore", "ResponseStore", "StoreError", "StoreQuotaExceeded", "StoreUnavailable", "StoredResponse"]


class StoreError(Exception):
    """A store operation failed; nothing was changed by it."""


class StoreUnavailable(StoreError, ApiError):
    """The store could not be reached, answered too slowly, or cannot be written.

    Raised through a request that needs the store, it is answered as 503 ``store_unavailable`` with
    ``Retry-After: 1``; ``str()`` is the internal ``detail`` (for logs), never sent to the client.
    """

    def __init__(self, detail: str):
        ApiError.__init__(self, 503, "The response store is unavailable right now. Try again shortly, or send the "
                                     "full conversation (no previous_response_id or item_reference) with "
                                     "store: false.", type="server_error", code="store_unavailable",
                          headers={"Retry-After": "1"})
        self.detail = detail

    def __str__(self) -> str:
        return self.detail


class StoreQuotaExceeded(StoreError):
    """One response is larger than a quota on its own: it is not stored, and nothing was evicted for it."""


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """A stored Response object with the input items of the request that created it."""

    response: dict[str, Any]
    input_items: list[dict[str, Any]]


class ResponseStore(abc.ABC):
    """Where finished Response objects and their items live, for ``previous_response_id``,
    ``item_reference`` and ``GET``/``DELETE /responses/{id}``.

    Every method either completes or raises :class:`StoreError` (usually
    :class:`StoreUnavailable`) within the store's timeout; a partly written
    record is never visible.

    Args:
        retention_seconds: how long a response stays resolvable; ``None`` keeps it until deleted.
        shared: let every owner read and delete every response (owners are still recorded).
        max_bytes: the most bytes all stored responses may take (see the module); 0 = no limit.
        max_bytes_per_owner: the most bytes the responses of one owner (client key) may take; 0 = no limit.
    """

    #: The URL scheme the store is opened with (``sqlite``, ``redis``).
    kind: str = ""

    def __init__(self, *, retention_seconds: float | None, shared: bool = False, max_bytes: int = 0,
                 max_bytes_per_owner: int = 0):
        self.retention_seconds = retention_seconds
        self.shared = shared
        self.max_bytes = max_bytes
        self.max_bytes_per_owner = max_bytes_per_owner

    @abc.abstractmethod
    def put(self, response: dict[str, Any], input_items: list[dict[str, Any]], *, owner: str | None = None) -> None:
        """Keep ``response`` (a Response object with a fresh ``id`` and its ``output``) and its input items.

        Output and input items that carry an ``id`` become resolvable with
        :meth:`get_item` by the same owner, the most recently stored copy winning.
        Older responses are evicted first when a quota would be passed.

        Raises:
            StoreQuotaExceeded: the response alone is larger than a quota.
            StoreUnavailable: see the class.
        """

    @abc.abstractmethod
    def load(self, response_id: str, *, owner: str | None = None) -> StoredResponse | None:
        """The stored response and its input items in one lookup; ``None`` when unknown, expired or not ``owner``'s."""

    @abc.abstractmethod
    def get_item(self, item_id: str, *, owner: str | None = None) -> dict[str, Any] | None:
        """An output or input item by its ``id``, as last stored by ``owner``; ``None`` when there is none.

        An item stays resolvable while the response that stored it last is kept.
        """

    @abc.abstractmethod
    def delete(self, response_id: str, *, owner: str | None = None) -> bool:
        """Forget a response and the items it stored last; ``False`` when it is not stored (for ``owner``)."""

    @abc.abstractmethod
    def put_conversation(self, conversation: dict[str, Any], *, owner: str | None = None) -> None:
        """Create or replace a conversation object (``id``, ``created_at``, ``metadata``), keeping its items;
        its retention starts again.

        Raises:
            StoreQuotaExceeded: no eviction of responses makes room for it.
            StoreUnavailable: see the class.
        """

    @abc.abstractmethod
    def get_conversation(self, conversation_id: str, *, owner: str | None = None) -> dict[str, Any] | None:
        """The conversation object; ``None`` when unknown, expired or not ``owner``'s."""

    @abc.abstractmethod
    def delete_conversation(self, conversation_id: str, *, owner: str | None = None) -> bool:
        """Forget a conversation and its items; ``False`` when it is not stored (for ``owner``)."""

    @abc.abstractmethod
    def add_conversation_items(self, conversation_id: str, items: list[dict[str, Any]], *,
                               owner: str | None = None) -> bool:
        """Append ``items`` (each with an ``id``) to the conversation, in order, all or none; ``False`` when the
        conversation is not stored (for ``owner``).

        Raises:
            StoreQuotaExceeded: no eviction of responses makes room for them.
        """

    @abc.abstractmethod
    def conversation_items(self, conversation_id: str, *, owner: str | None = None) -> list[dict[str, Any]] | None:
        """The conversation's items, oldest first; ``None`` when the conversation is not stored (for ``owner``)."""

    @abc.abstractmethod
    def delete_conversation_item(self, conversation_id: str, item_id: str, *, owner: str | None = None) -> bool:
        """Remove one item from the conversation; ``False`` when there is no such item (for ``owner``)."""

    @abc.abstractmethod
    def usage(self, owner: str | None = None) -> int:
        """The bytes stored responses and conversations take: ``owner``'s (``None``: those stored without a key)."""

    @abc.abstractmethod
    def total_usage(self) -> int:
        """The bytes all stored responses and conversations take (what ``max_bytes`` limits)."""

    @abc.abstractmethod
    def check(self) -> None:
        """Return when the store answers and can be used; raise :class:`StoreUnavailable` when not."""

    @abc.abstractmethod
    def location(self) -> str:
        """Where the store is, as a URL fit to show (any password masked)."""

    def get(self, response_id: str, *, owner: str | None = None) -> dict[str, Any] | None:
        """The stored Response object, or ``None`` (see :meth:`load`)."""
        found = self.load(response_id, owner=owner)
        return None if found is None else found.response

    def get_input_items(self, response_id: str, *, owner: str | None = None) -> list[dict[str, Any]] | None:
        """The response's input items in request order, or ``None`` (see :meth:`load`)."""
        found = self.load(response_id, owner=owner)
        return None if found is None else found.input_items

    def quota_check(self, size: int, owner: str | None) -> None:
        """Refuse a response of ``size`` bytes that no eviction could make room for.

        Raises:
            StoreQuotaExceeded: ``size`` is over ``max_bytes``, or over ``max_bytes_per_owner`` for a key.
        """
        if self.max_bytes and size > self.max_bytes:
            raise StoreQuotaExceeded(f"the response takes {size} bytes, more than the store's quota "
                                     f"of {self.max_bytes}")
        if owner is not None and self.max_bytes_per_owner and size > self.max_bytes_per_owner:
            raise StoreQuotaExceeded(f"the response takes {size} bytes, more than the per-key quota "
                                     f"of {self.max_bytes_per_owner}")

    def visible(self, record_owner: str | None, owner: str | None) -> bool:
        """Whether a record stored by ``record_owner`` is visible to ``owner``."""
        return self.shared or record_owner == owner

    def for_owner(self, owner: str | None) -> "OwnedStore":
        """This store as the client with owner digest ``owner`` sees it."""
        return OwnedStore(self, owner)


class OwnedStore:
    """A :class:`ResponseStore` bound to one owner: the same calls, without the ``owner`` argument."""

    def __init__(self, store: ResponseStore, owner: str | None):
        self.store = store
        self.owner = owner

    def put(self, response: dict[str, Any], input_items: list[dict[str, Any]]) -> None:
        """See :meth:`ResponseStore.put`."""
        self.store.put(response, input_items, owner=self.owner)

    def load(self, response_id: str) -> StoredResponse | None:
        """See :meth:`ResponseStore.load`."""
        return self.store.load(response_id, owner=self.owner)

    def get(self, response_id: str) -> dict[str, Any] | None:
        """See :meth:`ResponseStore.get`."""
        return self.store.get(response_id, owner=self.owner)

    def get_input_items(self, response_id: str) -> list[dict[str, Any]] | None:
        """See :meth:`ResponseStore.get_input_items`."""
        return self.store.get_input_items(response_id, owner=self.owner)

    def get_item(self, item_id: str) -> dict[str, Any] | None:
        """See :meth:`ResponseStore.get_item`."""
        return self.store.get_item(item_id, owner=self.owner)

    def delete(self, response_id: str) -> bool:
        """See :meth:`ResponseStore.delete`."""
        return self.store.delete(response_id, owner=self.owner)

    def put_conversation(self, conversation: dict[str, Any]) -> None:
        """See :meth:`ResponseStore.put_conversation`."""
        self.store.put_conversation(conversation, owner=self.owner)

    def get_conversation(self, conversation_id: str) -> dict[str, Any] | None:
        """See :meth:`ResponseStore.get_conversation`."""
        return self.store.get_conversation(conversation_id, owner=self.owner)

    def delete_conversation(self, conversation_id: str) -> bool:
        """See :meth:`ResponseStore.delete_conversation`."""
        return self.store.delete_conversation(conversation_id, owner=self.owner)

    def add_conversation_items(self, conversation_id: str, items: list[dict[str, Any]]) -> bool:
        """See :meth:`ResponseStore.add_conversation_items`."""
        return self.store.add_conversation_items(conversation_id, items, owner=self.owner)

    def conversation_items(self, conversation_id: str) -> list[dict[str, Any]] | None:
        """See :meth:`ResponseStore.conversation_items`."""
        return self.store.conversation_items(conversation_id, owner=self.owner)

    def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool:
        """See :meth:`ResponseStore.delete_conversation_item`."""
        return self.store.delete_conversation_item(conversation_id, item_id, owner=self.owner)
