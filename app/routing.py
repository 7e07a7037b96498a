"""Which back end serves a client's model, and the settings each back end sees.

A ``model_map`` object's ``upstream`` names the back end of a model (a ``model_map`` entry without one: the
default back end), else the back end of ``upstreams`` whose ``models`` list holds it (or whose demo serves
it), else the default. Routing never asks a back end: it does not change while one is down. An ``upstream``
listing several back ends makes them a pool (:func:`pool_members`): :mod:`app.pool` picks one per request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .settings import ModelRoute, Settings, mask_url
from .upstream_settings import DEFAULT_UPSTREAM, served_models


def upstream_names(settings: Settings) -> list[str]:
    """Every back end's name: ``default`` first, then ``upstreams`` in their order."""
    return [DEFAULT_UPSTREAM, *settings.upstreams]


def route(settings: Settings, client_model: Any) -> str:
    """The name of the back end serving a client's ``model`` (any JSON value: one that is not a name goes to
    the default back end)."""
    if not isinstance(client_model, str):
        return DEFAULT_UPSTREAM
    entry = settings.model_map.get(client_model)
    if entry is not None:
        upstream = entry.upstream if isinstance(entry, ModelRoute) else None
        return (upstream[0] if isinstance(upstream, list) else upstream) or DEFAULT_UPSTREAM
    return next((name for name, named in settings.upstreams.items()
                 if client_model in served_models(named, settings.demo_model)), DEFAULT_UPSTREAM)


def pool_members(settings: Settings, client_model: Any) -> list[str]:
    """The back ends of a client's ``model`` when its ``model_map`` object lists several (a pool), else none."""
    entry = settings.model_map.get(client_model) if isinstance(client_model, str) else None
    upstream = entry.upstream if isinstance(entry, ModelRoute) else None
    return list(upstream) if isinstance(upstream, list) and len(upstream) > 1 else []


def pools(settings: Settings) -> dict[str, list[str]]:
    """Every pool of the settings: client model name → its members."""
    return {client: members for client in settings.model_map if (members := pool_members(settings, client))}


def fallbacks(settings: Settings, client_model: Any) -> list[str]:
    """The back ends tried in turn after :func:`route`'s for a client's ``model`` (its ``model_map`` object's
    ``fallback``)."""
    entry = settings.model_map.get(client_model) if isinstance(client_model, str) else None
    return list(entry.fallback) if isinstance(entry, ModelRoute) else []


def upstream_settings(settings: Settings, name: str) -> Settings:
    """The settings as the back end ``name`` sees them (made once per settings and name): its own keys over the
    top-level settings, and only the ``model_map`` entries routed to it (as one of a pool's members too, or falling
    back to it), its ``models``
    as entries of their own (``default_upstream_model`` stays the default back end's).

    Raises:
        KeyError: no back end has that name.
    """
    if name == DEFAULT_UPSTREAM and not settings.upstreams:
        return settings
    if name != DEFAULT_UPSTREAM and name not in settings.upstreams:
        raise KeyError(name)
    return settings.derived(("upstream settings", name), lambda: _seen_by(settings, name))


def _seen_by(settings: Settings, name: str) -> Settings:
    named = settings.upstreams.get(name) if name != DEFAULT_UPSTREAM else None
    update = named.overrides() if named else {}
    own = {model: model for model in (served_models(named, settings.demo_model) if named else ())
           if model not in settings.model_map}
    update["model_map"] = {**{client: entry for client, entry in settings.model_map.items()
                              if name in (route(settings, client), *pool_members(settings, client),
                                          *fallbacks(settings, client))}, **own}
    if named:
        update.update(upstreams={}, default_upstream_model=None,
                      codex_work_dir=str(Path(settings.codex_work_dir) / name))
    return settings.model_copy(update=update)


def routing_table(settings: Settings) -> list[dict[str, Any]]:
    """Each back end as ``toolwire config`` and the debug page show it: ``name``, ``kind``, ``url``
    (password masked), and the client model names routed to it (the default also gets every other name)."""
    table = []
    for name in upstream_names(settings):
        seen = upstream_settings(settings, name)
        table.append({"name": name, "kind": seen.backend, "url": mask_url(seen.upstream_url or ""),
                      "models": sorted(seen.model_map)})
    return table
