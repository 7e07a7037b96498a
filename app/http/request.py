"""What every endpoint takes from the HTTP request: its JSON body, the pipeline's request context, the
client's view of the response store; and how a generation's reply goes back."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Iterator

import orjson
from flask import Response, jsonify, request

from ..errors import ApiError
from ..observability import record as observe
from ..pipeline.context import RequestContext
from ..pipeline.generate import SSE_HEADERS, Reply
from ..pipeline.streaming import SSEBody
from ..pool import PoolRequest
from ..routing import fallbacks
from ..settings import Settings
from ..store import OwnedStore
from ..surface import SSE
from . import limits
from .state import client_owner, current_state

_YES = ("1", "true", "yes", "on")


def json_body() -> dict[str, Any]:
    """The request body as a JSON object.

    Raises:
        ApiError: 400 ``invalid_json`` when it holds too many values to parse
            (``limits.check_breadth``), does not parse, is not an object or nests
            too deep (``limits.check_nesting``); 413 over the body-size limit.
    """
    return json_object(limits.read_body())


def json_object(raw: bytes) -> dict[str, Any]:
    """A request body read whole (:func:`limits.read_body`) as a JSON object.

    Raises:
        ApiError: 400 ``invalid_json`` as :func:`json_body`'s.
    """
    limits.check_breadth(raw)
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ApiError(400, "We could not parse the JSON body of your request.", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
    limits.check_nesting(raw)
    return body


def request_context(model: object, stream: object = None, body: dict[str, Any] | None = None) -> RequestContext:
    """What the pipeline needs of the current request for ``model``: the back end it is routed to (with the
    settings that back end sees, and one of its slots), the request's record, and the headers that steer a
    generation (``X-No-Keepalive``, ``X-Toolwire-Marker``). The record learns the model (a metric label) and
    whether the client asked for a ``stream``, even if the request is refused after.

    A generation's request (its ``body`` given) to a model a pool serves gets the pool and the client's session
    signal instead: the pipeline chooses the member (and takes its slot) once it knows the prompt.

    Raises:
        ApiError: 429 when the back end has no slot free (``upstream_max_concurrent``).
    """
    state = current_state()
    observe.note_model(model, state.metric_models)
    observe.note_stream(stream)
    backend = state.backend_for(model)
    environ = request.environ  # the headers read from it, without EnvironHeaders' lookup
    pool = state.pools.get(model) if body is not None and state.pools and isinstance(model, str) else None
    if pool is None:
        observe.note_upstream(backend.name)
        limits.take_backend_slot(backend)
    elif state.pool_health is not None:
        state.pool_health.start()
    record = observe.current()
    if record is not None:
        record.owner = client_owner()  # (known now: what the request may reach can depend on its key)
    context = RequestContext(
        settings=backend.settings, upstream=backend.upstream, upstream_name=backend.name, record=record,
        keepalive=environ.get("HTTP_X_NO_KEEPALIVE", "").strip().lower() not in _YES,
        marker_requested=environ.get("HTTP_X_TOOLWIRE_MARKER", "").strip().lower() in _YES,
        client_socket=environ.get("gunicorn.socket"),
        pool=None if pool is None else PoolRequest(pool, session_signal(body or {}, environ, state.settings),
                                                   limits.hold_backend_slot))
    names = fallbacks(state.settings, model)
    if not names:
        return context
    return dataclasses.replace(context, fallbacks=tuple(
        dataclasses.replace(context, settings=b.settings, upstream=b.upstream, upstream_name=b.name)
        for b in (state.upstreams[name] for name in names)))


#: The body fields that name a client's session, first found wins: OpenAI's ``prompt_cache_key`` (Responses,
#: Chat), a Responses ``conversation`` (its id), Anthropic's ``metadata.user_id`` (Claude Code's holds its session).
#: A ``previous_response_id`` is not one: it changes every turn (the chain's rebuilt prompt keeps its prefix).
SESSION_FIELDS = (("prompt_cache_key",), ("conversation",), ("conversation", "id"), ("metadata", "user_id"))
#: The longest session signal kept (a longer one is cut: it only keys a hash).
MAX_SESSION_CHARS = 512


def session_signal(body: dict[str, Any], environ: dict[str, Any], settings: Settings) -> str | None:
    """The client's own name for its session: the ``pool_session_header``, else a :data:`SESSION_FIELDS` field of
    ``body``; ``None`` when it gave none."""
    header = settings.pool_session_header
    value = environ.get("HTTP_" + header.upper().replace("-", "_"), "").strip() if header else ""
    if value:
        return value[:MAX_SESSION_CHARS]
    for path in SESSION_FIELDS:
        found: Any = body
        for key in path:
            found = found.get(key) if isinstance(found, dict) else None
        if isinstance(found, str) and found:
            return found[:MAX_SESSION_CHARS]
    return None


def owned_store() -> OwnedStore | None:
    """The response store as the current request's client key sees it (``None`` when storing is off)."""
    store = current_state().store
    return None if store is None else store.for_owner(client_owner())


def send(reply: Reply, media_type: str | Callable[[], str] = SSE) -> Response:
    """A generation's reply as the HTTP response: its JSON body, or its stream of frames as ``media_type`` (or as
    the media type that function of the request gives)."""
    if isinstance(reply, dict):
        return jsonify(reply)
    return StreamResponse(reply, mimetype=media_type if isinstance(media_type, str) else media_type(),
                          headers=SSE_HEADERS)


class StreamResponse(Response):
    """A streamed reply's response, whose WSGI iterable hands the server the body's own generator.

    werkzeug's would wrap it in a ``ClosingIterator`` and an encoding generator: two more frames, and their
    slices of C stack, that every open stream holds through each wait for the back end (~1 KiB a stream).
    """

    def get_app_iter(self, environ: dict[str, Any]) -> Iterable[bytes]:
        if environ["REQUEST_METHOD"] == "HEAD" or self.status_code != 200:
            return super().get_app_iter(environ)
        return _StreamIterable(self.response, self)  # type: ignore[arg-type]


class _StreamIterable:
    """Iterating it iterates the SSE body; closing it closes the response (the body, then the hooks' callbacks)."""

    __slots__ = ("_body", "_response")

    def __init__(self, body: SSEBody, response: Response):
        self._body = body
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._body)

    def close(self) -> None:
        """Close the response (the server calls this once the body is done or the client left)."""
        self._response.close()
