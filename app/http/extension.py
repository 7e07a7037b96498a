"""The ``Toolwire`` Flask extension: mount the OpenAI-compatible API into any Flask app.

::

    Toolwire(host_app, url_prefix="/llm/v1", name="llm")          # or: tw = Toolwire(); tw.init_app(host_app)

It serves OpenAI's Chat Completions and Responses and Anthropic's Messages (:data:`~app.surfaces.DEFAULT_SURFACES`),
or the client APIs given as ``surfaces`` (:class:`~app.surface.Surface`).

An app may hold several mounts, each its own ``Toolwire`` with its own prefix, name (its Blueprint's
and its endpoints' prefix) and settings. Settings come from a :class:`~app.settings.Settings` object; without one,
``init_app`` reads the ``TOOLWIRE_*`` keys of the host's ``app.config`` (Flask's
convention: ``app.config["TOOLWIRE_UPSTREAM_URL"]``), which win over the
environment and the config file. See that class for every key. Later changes
are not picked up. ``init_app`` never touches the host's logging. Each mount
is kept in ``app.extensions["toolwire"]`` under its name, and keeps its per-app
state (settings, upstream) keyed by the app; it never holds the app itself.
"""

from __future__ import annotations

import logging
import warnings
import weakref
from typing import Sequence

from flask import Flask, current_app
from gevent import monkey

from ..store import ResponseStore, StoreError, open_store, store_url
from ..loading import load_settings, settings_from_config
from ..profile import upstream_models
from ..pool import Pool, PoolMember
from ..pool_health import PoolHealth
from ..routing import pools, upstream_names, upstream_settings
from ..settings import Settings, SettingsError
from ..upstream_settings import DEFAULT_UPSTREAM
from ..surface import Surface
from ..surfaces import DEFAULT_SURFACES
from .state import EXTENSION_KEY, Backend, StreamSlots, ToolwireState
from ..upstreams.base import Upstream
from ..upstreams.kinds import make_upstream
from .auth import key_sources, load_keyring
from .blueprint import create_blueprint

log = logging.getLogger("toolwire.http.extension")


class UnpatchedSocketWarning(RuntimeWarning):
    """toolwire is served without gevent's socket patch (one blocked worker per stream)."""


class Toolwire:
    """The toolwire extension.

    Args:
        app: a Flask app to register on now (or call :meth:`init_app` later).
        url_prefix: where the routes live (``/v1`` → ``/v1/chat/completions``).
        name: the mount's name: its Blueprint's, so its endpoints are ``NAME.SURFACE.ENDPOINT``
            (``NAME.chat.chat_completions``…); two mounts on one app need two names.
        settings: settings to use; default the app's ``TOOLWIRE_*`` config keys over ``Settings()``
            (environment and config file).
        upstream: a ready :class:`~app.upstreams.base.Upstream` as the default back end; default built
            from the settings (HTTP when ``upstream_url`` is set, else the demo). The ``upstreams`` are
            built from the settings.
        store: a :class:`~app.store.ResponseStore`; default the store
            ``response_store_url`` names (see :func:`~app.store.store_url`).
        surfaces: the client APIs served, each a child Blueprint of the mount's; default
            :data:`~app.surfaces.DEFAULT_SURFACES`.
    """

    def __init__(self, app: Flask | None = None, *, url_prefix: str = "/v1", name: str = "toolwire",
                 settings: Settings | None = None, upstream: Upstream | None = None,
                 store: ResponseStore | None = None, surfaces: Sequence[Surface] = DEFAULT_SURFACES):
        self.url_prefix = url_prefix
        self.name = name
        self.surfaces = tuple(surfaces)
        self._settings = settings
        self._upstream = upstream
        self._store = store
        self._states: weakref.WeakKeyDictionary[Flask, ToolwireState] = weakref.WeakKeyDictionary()
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask, url_prefix: str | None = None, name: str | None = None) -> None:
        """Register the API Blueprint on ``app``.

        Args:
            app: the Flask app.
            url_prefix: where the routes live; default the one given to the constructor.
            name: the mount's name; default the one given to the constructor.
        Raises:
            RuntimeError: this instance, or another mount of that name, is already registered on ``app``.
            SettingsError: the settings are invalid, or the client key settings are unusable (see
                :func:`~app.http.auth.load_keyring`).
        """
        name = name or self.name
        mounts: dict[str, Toolwire] = app.extensions.setdefault(EXTENSION_KEY, {})
        if name in mounts or app in self._states:
            raise RuntimeError(f"A 'Toolwire' mount named {name!r} (or this instance) is already registered on "
                               "this Flask app. Call init_app once per app; a second mount needs another "
                               "Toolwire with another name.")
        if not monkey.is_module_patched("socket"):
            warnings.warn("gevent has not patched socket: each stream will block a worker. Serve toolwire "
                          "with gunicorn's gevent worker (see app/gunicorn.conf.py).", UnpatchedSocketWarning,
                          stacklevel=2)
        settings = self._settings or load_settings(**settings_from_config(app.config))
        api_keys = load_keyring(settings)
        backends = make_backends(settings, default=self._upstream)
        store = self._store or make_store(settings)
        if store is not None:
            check_store_at_start(store)
        model_pools = make_pools(settings, backends)
        self._states[app] = ToolwireState(settings, backends, store, api_keys,
                                          StreamSlots(settings.max_concurrent_streams), configured_models(settings),
                                          key_sources(self.surfaces), model_pools,
                                          PoolHealth(model_pools.values(), settings.pool_health_seconds,
                                                     settings.pool_health_path))
        mounts[name] = self

        prefix = self.url_prefix if url_prefix is None else url_prefix
        app.register_blueprint(create_blueprint(name, self.surfaces, prefix))

    def state(self, app: Flask | None = None) -> ToolwireState:
        """The state for ``app`` (default: the current app).

        Raises:
            RuntimeError: the app is not registered with this instance.
        """
        if app is None:
            app = current_app._get_current_object()  # type: ignore[attr-defined]
        try:
            return self._states[app]
        except KeyError:
            raise RuntimeError("The current Flask app is not registered with this 'Toolwire' instance. "
                               "Did you forget to call 'init_app', or did you create multiple "
                               "'Toolwire' instances?") from None


def configured_models(settings: Settings) -> frozenset[str]:
    """Every model name the settings configure: ``model_map`` (both sides), ``default_upstream_model``, the
    ``models`` of ``upstreams``, and ``demo_model`` of each demo back end."""
    names = set(settings.model_map)
    for name in upstream_names(settings):
        routed = upstream_settings(settings, name)
        names |= upstream_models(routed)
        if routed.default_upstream_model is not None:
            names.add(routed.default_upstream_model)
        if routed.backend == "demo":
            names.add(routed.demo_model)
    return frozenset(names)


def make_backends(settings: Settings, default: Upstream | None = None) -> dict[str, Backend]:
    """Every back end the settings name, ``default`` first, each with its own upstream (connections, Codex
    app-server) and stream slots.

    Args:
        settings: the mount's settings.
        default: a ready upstream for the default back end; default built from the settings.
    Raises:
        SettingsError, CodexSetupError: as :func:`~app.upstreams.kinds.make_upstream`.
    """
    backends = {}
    for name in upstream_names(settings):
        routed = upstream_settings(settings, name)
        upstream = default if default is not None and name == DEFAULT_UPSTREAM else make_upstream(routed, name)
        backends[name] = Backend(name, upstream, routed, StreamSlots(routed.upstream_max_concurrent))
    return backends


def make_pools(settings: Settings, backends: dict[str, Backend]) -> dict[str, Pool]:
    """Each pool of the settings by its client model name (:func:`~app.routing.pools`); a back end in two pools
    is one member of both (one cooldown, one health)."""
    members: dict[str, PoolMember] = {}
    made = {}
    for model, names in pools(settings).items():
        for name in names:
            if name not in members:
                named = settings.upstreams.get(name)
                members[name] = PoolMember(backends[name], named.weight if named is not None else 1.0)
        made[model] = Pool(model, [members[name] for name in names], load_factor=settings.pool_load_factor,
                           least_busy=settings.pool_tie_breaker == "least_busy",
                           cooldown_seconds=settings.pool_cooldown_seconds,
                           health_checked=bool(settings.pool_health_seconds))
    return made


def check_store_at_start(store: ResponseStore) -> None:
    """Say at start, not at the first response lost, when the store cannot be used (an unwritable file, a full
    disk, an unreachable server); toolwire serves on, answering such responses with ``store: false``, and
    ``/readyz`` answers 503 until the store works."""
    try:
        store.check()
    except StoreError as exc:
        log.error("the response store %s cannot be used: %s; responses are answered with store: false "
                  "until it can (/readyz answers 503)", store.location(), exc)


def make_store(settings: Settings) -> ResponseStore | None:
    """The response store the settings name (``None`` when storing is off); nothing is connected yet.

    Raises:
        SettingsError: its URL names no store toolwire can open.
    """
    return open_store(store_url(settings), settings.response_retention_seconds,
                      shared=settings.response_store_shared, timeout=settings.response_store_timeout,
                      max_bytes=settings.response_store_max_bytes,
                      max_bytes_per_owner=settings.response_store_max_bytes_per_key)
