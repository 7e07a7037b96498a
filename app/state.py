"""The per-app state toolwire keeps, and :func:`current_state` to read it (a leaf: imports nothing of toolwire's
at run time, so every module may use it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from flask import current_app, g

if TYPE_CHECKING:
    from .http.auth import KeyRing
    from .http.limits import StreamSlots
    from .responses.store import ResponseStore
    from .settings import Settings
    from .upstreams.base import Upstream

#: The key of the extension in ``app.extensions``.
EXTENSION_KEY = "toolwire"


@dataclass(frozen=True, slots=True)
class ToolwireState:
    """What toolwire keeps per Flask app.

    Fields:
        settings: the validated settings.
        upstream: the back end the endpoints call.
        store: where Responses are kept, or ``None`` when storing is off.
        api_keys: the accepted client keys (empty = open).
        streams: this worker's generations in flight, capped.
        metric_models: the configured model names, which label metrics as themselves (others are ``other``).
    """

    settings: "Settings"
    upstream: "Upstream"
    store: "ResponseStore | None"
    api_keys: "KeyRing"
    streams: "StreamSlots"
    metric_models: frozenset[str]


class _StateOwner(Protocol):
    def state(self, app: object) -> ToolwireState: ...


def current_state() -> ToolwireState:
    """The current app's toolwire state.

    Raises:
        RuntimeError: toolwire is not registered on the current app.
    """
    app = current_app._get_current_object()  # type: ignore[attr-defined]  # once: each proxy access resolves it
    ext: _StateOwner | None = app.extensions.get(EXTENSION_KEY)
    if ext is None:
        raise RuntimeError("toolwire is not registered on this Flask app. Did you forget to call "
                           "'Toolwire.init_app(app)'?")
    return ext.state(app)


def client_owner() -> str | None:
    """The owner digest of the current request's client key (see :func:`app.http.auth.owner_digest`), recorded
    by the key check; ``None`` when the API has no keys (an open API has no owners)."""
    return g.get("toolwire_client_owner")


def set_client_owner(owner: str) -> None:
    """Record the owner digest of the accepted client key for :func:`client_owner`."""
    g.toolwire_client_owner = owner
