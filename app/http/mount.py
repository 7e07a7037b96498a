"""A :class:`~app.surface.Surface` as a child Blueprint of the API Blueprint: its routes' views and its error
envelope. Every route kind is answered alike for every surface: the JSON body read and bounded, the model routed
to its back end, the reply sent (one JSON body, or the encoder's frames as the route's media type)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, TypeVar, assert_never

from flask import Blueprint, Response, jsonify

from ..pipeline.generate import generate
from ..surface import Compute, Generate, ListModels, Surface, View
from .errors import register_error_handlers
from .models import model_entries
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
        else:
            assert_never(route)
    return bp


def _generating(route: Generate) -> Callable[..., Response]:
    """The view of a generating route: the request's JSON body planned (validated, the generation and the
    encoder to answer with), the body let go, then the generation's reply."""
    if route.store:
        route = dataclasses.replace(route, plan=_with_store(route.plan), store=False)

    def view(**url_args: str) -> Response:
        body = json_body()
        context = request_context(route.model(body, url_args), route.stream(body, url_args))
        planned = route.plan(body, context, **url_args)
        del body  # the plan holds what is needed: a request waiting for its back end holds no more
        if isinstance(planned, dict):  # answered at once: the generation runs in the background
            return jsonify(planned)
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
