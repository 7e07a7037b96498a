"""What a client API family is to toolwire: a :class:`Surface` (OpenAI's Chat Completions, the Responses API,
Anthropic's Messages, …), declared by its own package and mounted by the HTTP layer (:mod:`app.http`), which
names no family.

A surface says what the HTTP layer cannot guess: its routes and how each one is answered, its error envelope,
where a client puts its key, and the shape of the shared ``GET /models`` its clients expect. The HTTP layer
mounts each surface as a child Blueprint of the API Blueprint (so Flask's blueprint-scoped error handlers pick
its envelope) and does the rest alike for all: the request record, the key check, the limits, reading the body,
routing the model to its back end, and sending the reply (one JSON body, or a stream of the encoder's frames).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from flask import Response, request

from .errors import ApiError
from .pipeline.encoder import Encoder
from .pipeline.generate import Generation

#: Where a request names something the HTTP layer needs before planning (its model, whether it streams): a
#: function of the JSON body and the URL's arguments (:func:`in_body`, :func:`in_url`, :func:`fixed`).
Source = Callable[[Mapping[str, Any], Mapping[str, str]], object]
#: A generating route's planning: ``plan(body, context, **url_args)`` -> the generation and the encoder
#: that answers it, or the JSON body of an answer given at once (Ollama's requests to load a model; a generation
#: left to run in the background), or the answer itself (the events of a background generation followed); a route
#: with ``store=True`` is also given ``store=``, the response store as the client's key sees it, or ``None``.
Plan = Callable[..., tuple[Generation, Encoder] | dict[str, Any] | Response]
#: A computing route's work: ``answer(body, context, **url_args)`` -> the JSON body of the answer.
Computation = Callable[..., dict[str, Any]]

#: The media type of a streamed reply unless a route says otherwise.
SSE = "text/event-stream"


def in_body(field: str) -> Source:
    """The source of a value the JSON body holds as ``field`` (``model``, ``stream``)."""

    def source(body: Mapping[str, Any], url_args: Mapping[str, str]) -> object:
        return body.get(field)

    return source


def in_url(arg: str) -> Source:
    """The source of a value the URL holds as its argument ``arg`` (a ``<model>`` in the route's rule)."""

    def source(body: Mapping[str, Any], url_args: Mapping[str, str]) -> object:
        return url_args.get(arg)

    return source


def fixed(value: object) -> Source:
    """The source of a value the route itself decides (a streaming verb: ``fixed(True)``)."""

    def source(body: Mapping[str, Any], url_args: Mapping[str, str]) -> object:
        return value

    return source


@dataclass(frozen=True, slots=True)
class Generate:
    """A route whose answer is a generation: ``POST rule`` with a JSON body, planned by ``plan``, then run by the
    one pipeline and sent as one JSON body or as a stream of the encoder's frames.

    Fields:
        rule: the URL rule under the mount's prefix (Werkzeug's syntax: ``/models/<path:model>:generate``).
        endpoint: the route's endpoint name within its surface.
        plan: the request to its :class:`~app.pipeline.generate.Generation` and encoder (see :data:`Plan`).
        model: where the model is named: it routes the request to a back end and labels its metrics.
        stream: where the client asks for a stream (the plan decides; this labels the record).
        media_type: the ``Content-Type`` of a streamed reply (the encoder makes its frames: SSE events,
            NDJSON lines, pieces of one JSON array), or a function of the current request giving it (Gemini's
            ``alt=sse`` asks for SSE instead of one JSON array).
        store: the plan is given ``store=``, the response store as the client's key sees it.
    """

    rule: str
    endpoint: str
    plan: Plan
    model: Source = in_body("model")
    stream: Source = in_body("stream")
    media_type: str | Callable[[], str] = SSE
    store: bool = False


@dataclass(frozen=True, slots=True)
class Compute:
    """A route answering a JSON body with a JSON body computed for the model's back end without generating
    (a token count): ``POST rule``, ``answer(body, context, **url_args)``.

    Fields:
        rule, endpoint, model, store: as :class:`Generate`'s.
        answer: the request's JSON body and context to the answer's JSON body (see :data:`Computation`).
    """

    rule: str
    endpoint: str
    answer: Computation
    model: Source = in_body("model")
    store: bool = False


@dataclass(frozen=True, slots=True)
class View:
    """Any other route: a Flask view called with the URL's arguments.

    Fields:
        rule, endpoint: as :class:`Generate`'s (``endpoint=None``: the view's name).
        view: the view (it reads the request itself, and raises :class:`~app.errors.ApiError` to refuse).
        methods: the HTTP methods it serves.
        store: the view is also given ``store=``, as a :class:`Generate` route's plan.
        refusal: it answers only refusals (a catch-all with a hint, routes of the API the server does not
            serve), so a 404 of the surface does not name it among its routes.
        body: the view is also given ``body=``, the request's JSON body read and bounded as a generating
            route's is.
    """

    rule: str
    endpoint: str | None
    view: Callable[..., Response]
    methods: tuple[str, ...] = ("GET",)
    store: bool = False
    refusal: bool = False
    body: bool = False


@dataclass(frozen=True, slots=True)
class ListModels:
    """``GET rule``: the model list in the surface's own shape (Ollama's ``/api/tags``), or what the surface makes
    of it (one model of it: Gemini's ``GET models/{model}``).

    Fields:
        rule, endpoint: as :class:`Generate`'s.
        shape: the model entries (OpenAI's: ``id``, ``object``, ``created``, ``owned_by``) and the URL's
            arguments (``shape(entries, **url_args)``) to the answer's body.
    """

    rule: str
    endpoint: str
    shape: Callable[..., dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Relay:
    """A route passed through to the model's back end: ``POST rule`` with a JSON body (or a multipart form: audio),
    sent on to the back end's ``path`` as it came, the model's name replaced by the back end's, and the answer
    relayed as it arrives (a stream chunk by chunk, never parsed).

    Fields:
        rule, endpoint: as :class:`Generate`'s.
        path: the back end's path under its base URL (``/embeddings`` under ``…/v1``); it may name the rule's
            arguments (``/audio/{kind}``).
        at_root: the path is under the back end's server root instead (llama.cpp's and vLLM's ``/tokenize``): its
            base URL without a last ``/v1``.
    """

    rule: str
    endpoint: str
    path: str
    at_root: bool = False


#: One of a surface's routes.
Route = Generate | Compute | View | ListModels | Relay


@dataclass(frozen=True, slots=True)
class KeySource:
    """Where a client may put its key.

    Fields:
        read: the current request's key there, or ``None``.
        hint: how to send it, for the 401 that asks for a key (``'x-api-key: YOUR_KEY'``).
    """

    read: Callable[[], str | None]
    hint: str


def _bearer_token() -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


#: ``Authorization: Bearer KEY``.
BEARER = KeySource(_bearer_token, "'Authorization: Bearer YOUR_KEY'")


def header_key(name: str) -> KeySource:
    """The key as the whole value of the header ``name`` (Anthropic's ``x-api-key``)."""

    def read() -> str | None:
        return request.headers.get(name, "").strip() or None

    return KeySource(read, f"'{name}: YOUR_KEY'")


def openai_envelope(error: ApiError) -> dict[str, Any]:
    """``error`` in OpenAI's envelope, ``{"error": {"message", "type", "param", "code"}}``: the default."""
    return error.body()


@dataclass(frozen=True, slots=True)
class Surface:
    """One client API family, as the HTTP layer mounts it.

    Fields:
        name: its child Blueprint's name, so its endpoints are ``MOUNT.NAME.ENDPOINT`` (no dots).
        routes: its routes, each under the mount's prefix.
        error_envelope: an :class:`~app.errors.ApiError` as the JSON body its clients read, for every error
            before the first byte of its routes (a stream's own error frames are its encoder's).
        keys: where its clients put their key, first found first; the 401 lists their hints.
        model_list: the shared ``GET /models`` in its clients' shape, given the model entries (OpenAI's:
            ``id``, ``object``, ``created``, ``owned_by``), or ``None`` when the current request is not from
            its clients; ``None``: its clients read OpenAI's list.
        url_prefix: where its routes live instead of under the mount's prefix (``""``: at the root, where
            Ollama's clients look for ``/api/chat``); ``None``: under the mount's.
    """

    name: str
    routes: tuple[Route, ...]
    error_envelope: Callable[[ApiError], dict[str, Any]] = openai_envelope
    keys: tuple[KeySource, ...] = (BEARER,)
    model_list: Callable[[list[dict[str, Any]]], dict[str, Any] | None] | None = None
    url_prefix: str | None = None

