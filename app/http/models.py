"""The mount's model list: every back end's models and the configured names (``GET /models``, and any surface's
own list route, such as Ollama's ``/api/tags``)."""

from __future__ import annotations

import logging
from typing import Any, Mapping

import gevent

from ..capabilities import capabilities
from ..routing import route
from ..upstreams.base import UpstreamError
from .state import Backend, current_state

log = logging.getLogger("toolwire.http")
#: How long the model list waits for the back ends' model lists, seconds.
MODELS_TIMEOUT = 3.0


def model_entries() -> list[dict[str, Any]]:
    """Every back end's models, each listed by the back end its name is routed to, plus the client names of
    ``model_map`` and the ``models`` of ``upstreams``, as OpenAI's entries (``id``, ``object``, ``created``,
    ``owned_by``) with what each serves here (``capabilities``: :func:`~app.capabilities.capabilities`). A single back end's failure is the answer (502…); several are asked at once, and one that
    fails or does not answer within :data:`MODELS_TIMEOUT` seconds is left out (the map's names routed to it
    stay listed)."""
    state = current_state()
    data, known = [], set()
    for name, models in _model_lists(state.upstreams).items():
        for model in models:
            if isinstance(model, dict) and model.get("id") and str(model["id"]) not in known \
                    and route(state.settings, str(model["id"])) == name:
                known.add(str(model["id"]))
                data.append(_model_entry(model, state.upstreams[name]))
    configured = [*state.settings.model_map, *(m for up in state.settings.upstreams.values() for m in up.models)]
    data += [_model_entry({"id": name}, state.upstreams[route(state.settings, name)])
             for name in dict.fromkeys(configured) if name not in known]
    return data


def openai_model_list(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The model ``entries`` as OpenAI's list."""
    return {"object": "list", "data": entries}


def _model_lists(backends: Mapping[str, Backend]) -> dict[str, list[Any]]:
    """Each back end's model list, by name; with several, those that failed or were too slow are left out."""
    if len(backends) == 1:
        return {name: backend.upstream.models() for name, backend in backends.items()}
    asked = {name: gevent.spawn(_models_or_error, backend.upstream) for name, backend in backends.items()}
    gevent.joinall(list(asked.values()), timeout=MODELS_TIMEOUT)
    lists = {}
    for name, reply in asked.items():
        if reply.successful() and not isinstance(reply.value, UpstreamError):
            lists[name] = reply.value
        else:
            reply.kill(block=False)  # still waiting: it gives up
            log.warning("the model list of back end %s is left out of /models: %s", name,
                        reply.value.message if reply.successful() else f"no answer within {MODELS_TIMEOUT} s")
    return lists


def _models_or_error(upstream: Any) -> list[Any] | UpstreamError:
    """A back end's model list, or why it has none: returned, not raised, as gevent prints the traceback of a
    greenlet that raises (one per unreachable back end, on every ``GET /models``)."""
    try:
        return upstream.models()
    except UpstreamError as exc:
        return exc


def _model_entry(model: dict[str, Any], backend: Backend) -> dict[str, Any]:
    created = model.get("created")
    model_id = str(model["id"])
    return {**model, "id": model_id, "object": "model", "created": created if isinstance(created, int) else 0,
            "owned_by": model.get("owned_by") or "toolwire",
            "capabilities": capabilities(backend.settings, model_id, model,
                                         relays=hasattr(backend.upstream, "relay"))}
