"""The API Blueprint: its hooks (request record, client key, limits, errors), the shared ``GET /models``, and each
client API family as a child Blueprint (:mod:`app.http.mount`)."""

from __future__ import annotations

from typing import Callable, Sequence

from flask import Blueprint, Response, jsonify, request

from ..surface import KeySource, Surface
from .state import current_state
from . import cors, limits
from .auth import authorize_api_request, key_sources
from .errors import register_error_handlers
from .models import model_entries, openai_model_list
from .mount import surface_blueprint
from .recording import open_record, stamp_response


def create_blueprint(name: str, surfaces: Sequence[Surface], url_prefix: str) -> Blueprint:
    """The API Blueprint serving ``surfaces`` under ``url_prefix`` (such as ``/v1``; register it without one):
    each one a child Blueprint named as the surface, so its endpoints are ``NAME.SURFACE.ENDPOINT``, under
    ``url_prefix`` unless it has a prefix of its own."""
    bp = Blueprint(name, __name__)
    # Each surface's routes take its clients' keys; the shared routes take any of them.
    keys = {name: key_sources(surfaces), **{f"{name}.{surface.name}": surface.keys for surface in surfaces}}
    bp.before_request(_before_request(keys))
    bp.after_request(_after_request)
    bp.teardown_request(limits.release_unhanded_slots)
    register_error_handlers(bp)
    bp.add_url_rule(url_prefix.rstrip("/") + "/models", view_func=_list_models(surfaces), endpoint="list_models",
                    methods=["GET"])
    for surface in surfaces:
        bp.register_blueprint(surface_blueprint(surface),
                              url_prefix=url_prefix if surface.url_prefix is None else surface.url_prefix)
    return bp


# One hook each way: Flask's cost is per hook and request.
def _before_request(keys: dict[str, tuple[KeySource, ...]]) -> Callable[[], Response | None]:
    def before_request() -> Response | None:
        """A CORS preflight's answer; else the request's record, then its key (before the limits, so a refused
        client takes no slot), then the declared body size."""
        req = request._get_current_object()  # type: ignore[attr-defined]  # once: each proxy access resolves it
        settings = current_state().settings
        if req.method == "OPTIONS":
            answer = cors.preflight(req, settings)
            if answer is not None:
                return answer
        open_record(req, settings)
        authorize_api_request(req.method, keys[req.blueprint])
        limits.check_declared_size(req, settings.max_body_bytes)
        return None

    return before_request


def _after_request(response: Response) -> Response:
    """The response stamped with the request's id (its record finished when the body closes), its CORS headers,
    then the limits' part: an unread body finished, the slots handed to a stream."""
    req = request._get_current_object()  # type: ignore[attr-defined]
    response = cors.with_cors(stamp_response(response), cors.allowed_origin(req, current_state().settings))
    return limits.after_response(req, response)


def _list_models(surfaces: Sequence[Surface]) -> Callable[[], Response]:
    shapes = [surface.model_list for surface in surfaces if surface.model_list is not None]

    def list_models() -> Response:
        """``GET /models``: :func:`~app.http.models.model_entries` in the shape of the first surface that claims
        the client (:attr:`~app.surface.Surface.model_list`), else OpenAI's."""
        entries = model_entries()
        for shape in shapes:
            shaped = shape(entries)
            if shaped is not None:
                return jsonify(shaped)
        return jsonify(openai_model_list(entries))

    return list_models
