"""A :class:`~app.surface.Surface` as a child Blueprint of the API Blueprint: its routes' views and its error
envelope. Every route kind is answered alike for every surface: the JSON body read and bounded, the model routed
to its back end, the reply sent (one JSON body, or the encoder's frames as the route's media type). The paths
under its routes' first segments that none of them takes are its own too: a 404 in its envelope."""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Callable, TypeVar, assert_never

from flask import Blueprint, Response, current_app, jsonify, request
from flask.blueprints import BlueprintSetupState
from werkzeug.exceptions import HTTPException, MethodNotAllowed
from werkzeug.routing import BaseConverter

from ..errors import ApiError
from ..pipeline.generate import generate
from ..surface import Compute, Generate, ListModels, Relay, Route, Surface, View
from .errors import register_error_handlers
from .models import model_entries
from .relay import relaying
from .request import json_body, owned_store, request_context, send

F = TypeVar("F", bound=Callable[..., Any])


def surface_blueprint(surface: Surface) -> Blueprint:
    """``surface``'s routes as a Blueprint (to register on the API Blueprint), its errors in its envelope."""
    bp = Blueprint(surface.name, __name__)
    register_error_handlers(bp, surface.error_envelope)
    for route in surface.routes:
        if isinstance(route, Generate):
            bp.add_url_rule(route.rule, route.endpoint, view_func=_generating(route), methods=["POST"])
        elif isinstance(route, Compute):
            bp.add_url_rule(route.rule, route.endpoint, view_func=_computing(route), methods=["POST"])
        elif isinstance(route, View):
            view = _with_store(route.view) if route.store else route.view
            view = _with_body(view) if route.body else view
            bp.add_url_rule(route.rule, route.endpoint, view_func=view, methods=list(route.methods))
        elif isinstance(route, ListModels):
            bp.add_url_rule(route.rule, route.endpoint, view_func=_listing(route), methods=["GET"])
        elif isinstance(route, Relay):
            bp.add_url_rule(route.rule, route.endpoint, view_func=relaying(route), methods=["POST"])
        else:
            assert_never(route)
    _claim_unrouted(bp, surface)
    return bp


#: The methods an unrouted path a surface claims is answered for.
_ANY_METHOD = ("GET", "POST", "PUT", "PATCH", "DELETE")
#: A rule's variable (``<path:subpath>``, ``<response_id>``, ``<any(a, b):name>``): its converter and its name.
_VARIABLE = re.compile(r"<(?:(\w+)(?:\([^)]*\))?:)?(\w+)>")


def _claim_unrouted(bp: Blueprint, surface: Surface) -> None:
    """The paths under the first segment of ``surface``'s routes that none of them takes (``/messages/batches``,
    ``/api/nothing``; ``/messages/`` when ``/messages`` is a route) answer a 404 in its envelope naming what it
    serves, not Werkzeug's in OpenAI's (a route of its own of such a shape, with a better hint, takes them
    instead)."""
    rules = {route.rule for route in surface.routes}
    shapes = {_shape(rule) for rule in rules}
    view = _unrouted(surface)
    bp.record_once(_add_nothing_converter)
    for head in sorted({_head(rule) for rule in rules} - {""}):
        claimed = (head + "/<path:subpath>", head + "/<nothing:subpath>") if head in rules \
            else (head + "/<path:subpath>",)
        for rule in claimed:
            if _shape(rule) not in shapes:
                bp.add_url_rule(rule, "unrouted", view_func=view, methods=_ANY_METHOD)


def _add_nothing_converter(state: BlueprintSetupState) -> None:
    state.app.url_map.converters.setdefault("nothing", _Nothing)


class _Nothing(BaseConverter):
    """Takes the empty rest of a path: ``/messages/<nothing:subpath>`` is ``/messages/`` alone. (A rule ending
    in ``/`` would redirect ``/messages`` to it for a method its own route does not take.)"""

    regex = ""
    part_isolating = False


def _shape(rule: str) -> str:
    """``rule`` with its variables' names left out: two rules of one shape take the same paths."""
    return _VARIABLE.sub(lambda match: f"<{match.group(1) or 'default'}>", rule)


def _head(rule: str) -> str:
    """``rule``'s first segment if it is fixed (``/messages`` of ``/messages/count_tokens``), else ``""``."""
    head = "/" + rule.split("/")[1]
    return "" if "<" in head or head == "/" else head


def _unrouted(surface: Surface) -> Callable[..., Response]:
    served = [(_methods(route), _VARIABLE.sub(r"{\2}", route.rule)) for route in surface.routes
              if not (isinstance(route, View) and route.refusal)]

    def unrouted(subpath: str = "") -> Response:
        """A path under ``surface``'s routes that none of them takes: 404, naming those it serves (405 for a
        path a route takes with other methods)."""
        allowed = _methods_of_routes()
        if allowed:
            raise MethodNotAllowed(valid_methods=allowed)
        claim = _VARIABLE.sub("", request.url_rule.rule).rstrip("/")  # type: ignore[union-attr]  # the head
        prefix = claim[:claim.rindex("/")]
        routes = ", ".join(f"{methods} {prefix}{rule}" for methods, rule in served)
        raise ApiError(404, f"{request.method} {request.path} is not supported by this server: it serves "
                            f"{routes}.", code="not_supported")

    return unrouted


def _methods_of_routes() -> list[str]:
    """The methods another route than the current one takes the current request's path with."""
    adapter = current_app.create_url_adapter(request)
    allowed = []
    for method in _ANY_METHOD:
        try:
            rule, _ = adapter.match(method=method, return_rule=True)  # type: ignore[union-attr]
        except HTTPException:
            continue
        if rule is not request.url_rule:
            allowed.append(method)
    return allowed


def _methods(route: Route) -> str:
    """The methods ``route`` takes, as a client would write them."""
    if isinstance(route, View):
        return "/".join(route.methods)
    return "GET" if isinstance(route, ListModels) else "POST"


def _generating(route: Generate) -> Callable[..., Response]:
    """The view of a generating route: the request's JSON body planned (validated, the generation and the
    encoder to answer with, or an answer needing none), the body let go, then the generation's reply."""
    if route.store:
        route = dataclasses.replace(route, plan=_with_store(route.plan), store=False)

    def view(**url_args: str) -> Response:
        body = json_body()
        context = request_context(route.model(body, url_args), route.stream(body, url_args), body)
        planned = route.plan(body, context, **url_args)
        del body  # the plan holds what is needed: a request waiting for its back end holds no more
        if isinstance(planned, dict):  # answered at once: the generation runs in the background
            return jsonify(planned)
        if isinstance(planned, Response):  # answered by the plan itself (a background generation's events)
            return planned
        generation, encoder = planned
        return send(generate(generation, encoder, context), route.media_type)

    return view


def _computing(route: Compute) -> Callable[..., Response]:
    answer = _with_store(route.answer) if route.store else route.answer

    def view(**url_args: str) -> Response:
        body = json_body()
        return jsonify(answer(body, request_context(route.model(body, url_args)), **url_args))

    return view


def _listing(route: ListModels) -> Callable[..., Response]:
    def view(**url_args: str) -> Response:
        return jsonify(route.shape(model_entries(), **url_args))

    return view


def _with_body(func: F) -> F:
    """``func``, given ``body=``: the request's JSON body (:func:`~app.http.request.json_body`)."""

    @functools.wraps(func)
    def with_body(*args: Any, **kwargs: Any) -> Any:
        return func(*args, body=json_body(), **kwargs)

    return with_body  # type: ignore[return-value]


def _with_store(func: F) -> F:
    """``func``, given ``store=``: the response store as the current request's client key sees it."""

    @functools.wraps(func)
    def with_store(*args: Any, **kwargs: Any) -> Any:
        return func(*args, store=owned_store(), **kwargs)

    return with_store  # type: ignore[return-value]
