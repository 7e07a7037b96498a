"""What a toolwire mount keeps per Flask app (:class:`ToolwireState`), and :func:`current_state` to read it:
the settings, the back end, the store, the client keys and the stream slots. Only the HTTP layer reads it;
it hands the endpoints and the pipeline what they need."""

from __future__ import annotations

import hashlib
import hmac
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Protocol

from flask import Blueprint, current_app, g, has_request_context, request
from flask.blueprints import BlueprintSetupState

from ..routing import route
from ..upstream_settings import DEFAULT_UPSTREAM

if TYPE_CHECKING:
    from ..pool import Pool
    from ..pool_health import PoolHealth
    from ..store import ResponseStore
    from ..settings import Settings
    from ..surface import KeySource
    from ..upstreams.base import Upstream

#: The key in ``app.extensions`` of the app's toolwire mounts: ``{mount name: Toolwire}``.
EXTENSION_KEY = "toolwire"
#: The key in ``app.extensions`` of the ops and debug Blueprints bound to a mount: ``{Blueprint name: mount name}``.
BOUND_KEY = "toolwire_bound_blueprints"


@dataclass(frozen=True, slots=True)
class ToolwireState:
    """What a toolwire mount keeps per Flask app.

    Fields:
        settings: the validated settings.
        upstreams: every back end by name (``default`` first), each with the settings it sees
            (:func:`~app.routing.upstream_settings`).
        store: where Responses are kept, or ``None`` when storing is off.
        api_keys: the accepted client keys (empty = open).
        streams: this worker's generations in flight, capped.
        metric_models: the configured model names, which label metrics as themselves (others are ``other``).
        key_sources: where the mount's surfaces take a client key: the routes they share take any of them.
        pools: the models served by a pool of back ends (:mod:`app.pool`), by client model name.
        pool_health: the background checks of the pools' members (started by the worker's first pooled request).
    """

    settings: Settings
    upstreams: Mapping[str, Backend]
    store: ResponseStore | None
    api_keys: KeyRing
    streams: StreamSlots
    metric_models: frozenset[str]
    key_sources: tuple[KeySource, ...]
    pools: Mapping[str, Pool] = field(default_factory=dict)
    pool_health: PoolHealth | None = None

    @property
    def upstream(self) -> Upstream:
        """The default back end (the one ``upstream_url`` & co. describe)."""
        return self.upstreams[DEFAULT_UPSTREAM].upstream

    def backend_for(self, client_model: object) -> Backend:
        """The back end routed to serve a client's ``model`` (:func:`~app.routing.route`)."""
        return self.upstreams[route(self.settings, client_model)]


@dataclass(frozen=True, slots=True)
class Backend:
    """One named back end of a mount.

    Fields:
        name: its name (``default``, or its key in ``upstreams``): labels its metrics and access lines.
        upstream: the back end itself, with its own connections (or app-server).
        settings: the settings as it sees them (its keys over the top-level ones).
        slots: its generations in flight in this worker, capped by its ``upstream_max_concurrent``.
    """

    name: str
    upstream: Upstream
    settings: Settings
    slots: StreamSlots


class KeyRing:
    """The SHA-256 digests of the accepted client keys.

    Args:
        keys: the keys in clear (blank entries ignored).
    """

    def __init__(self, keys: list[str]):
        self._digests = tuple(_digest(k) for k in keys if k)

    def __bool__(self) -> bool:
        return bool(self._digests)

    def __len__(self) -> int:
        return len(self._digests)

    def accepts(self, presented: str) -> bool:
        """Whether ``presented`` is one of the keys.

        Every digest is compared (``hmac.compare_digest``), match or not, so the
        time taken says nothing about which key, or how much of one, matched.
        """
        candidate = _digest(presented)
        found = False
        for digest in self._digests:
            found |= hmac.compare_digest(candidate, digest)
        return found


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()



class StreamSlots:
    """A per-worker count of generations in flight, with a cap (0 = none).

    Safe under gevent and threads: the check and the increment happen under
    one lock (gevent-patched in the worker).
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.in_use = 0
        self._lock = threading.Lock()

    def try_acquire(self) -> "Slot | None":
        """A :class:`Slot`, or ``None`` when all are taken."""
        with self._lock:
            if self.limit and self.in_use >= self.limit:
                return None
            self.in_use += 1
        return Slot(self)

    def _release(self) -> None:
        with self._lock:
            self.in_use -= 1


class Slot:
    """One taken place in :class:`StreamSlots`; :meth:`release` is idempotent."""

    __slots__ = ("_slots", "_held")

    def __init__(self, slots: StreamSlots):
        self._slots = slots
        self._held = True

    def release(self) -> None:
        """Give the place back (once; later calls do nothing)."""
        if self._held:
            self._held = False
            self._slots._release()


class _StateOwner(Protocol):
    def state(self, app: object) -> ToolwireState: ...


def bind_to_mount(blueprint: Blueprint, mount: str | None) -> None:
    """Make ``blueprint``'s routes (ops, debug) read the state of the mount named ``mount`` (``None``: the first
    mount registered on the app), wherever the Blueprint is registered."""
    if mount is None:
        return

    def remember(setup: BlueprintSetupState) -> None:
        setup.app.extensions.setdefault(BOUND_KEY, {})[setup.name] = mount

    blueprint.record(remember)


def current_state() -> ToolwireState:
    """The toolwire state of the current app: of the mount whose routes serve the current request, or the mount
    an ops or debug Blueprint was bound to (:func:`bind_to_mount`), else of the first mount registered on the app.

    Raises:
        RuntimeError: toolwire is not registered on the current app.
    """
    app = current_app._get_current_object()  # type: ignore[attr-defined]  # once: each proxy access resolves it
    mounts: dict[str, _StateOwner] | None = app.extensions.get(EXTENSION_KEY)
    if not mounts:
        raise RuntimeError("toolwire is not registered on this Flask app. Did you forget to call "
                           "'Toolwire.init_app(app)'?")
    owner = None
    if len(mounts) > 1 and has_request_context():
        blueprint = request.blueprint or ""
        owner = mounts.get(blueprint.partition(".")[0]) \
            or mounts.get(app.extensions.get(BOUND_KEY, {}).get(blueprint, ""))  # a surface's: its mount's child
    return (owner or next(iter(mounts.values()))).state(app)


def client_owner() -> str | None:
    """The owner digest of the current request's client key (see :func:`~app.ids.owner_digest`), recorded
    by the key check; ``None`` when the API has no keys (an open API has no owners)."""
    return g.get("toolwire_client_owner")


def set_client_owner(owner: str) -> None:
    """Record the owner digest of the accepted client key for :func:`client_owner`."""
    g.toolwire_client_owner = owner
