"""The view of a :class:`~app.surface.Relay` route: the request's body sent on to its model's back end as it came
(the model's name replaced by the back end's), the back end's answer relayed as it arrives."""

from __future__ import annotations

from typing import Any, Callable

import orjson
from flask import Response, request

from ..pipeline.generate import SSE_HEADERS
from ..pipeline.relay import relay
from ..profile import model_profile
from ..settings import Settings
from ..surface import Relay
from . import limits
from .forms import form_boundary, form_field, with_form_field
from .request import StreamResponse, json_object, request_context


def relaying(route: Relay) -> Callable[..., Response]:
    """The view of ``route``: a JSON body (or a multipart form, whose ``model`` and ``stream`` fields are read)
    routed by its ``model`` as a generation is, then relayed."""

    def view(**url_args: str) -> Response:
        raw = limits.read_body()
        content_type = request.environ.get("CONTENT_TYPE") or "application/json"
        boundary = form_boundary(content_type)
        body: dict[str, Any] = {}
        if boundary is None:
            body = json_object(raw)
            model, stream = body.get("model"), body.get("stream")
        else:
            model, stream = form_field(raw, boundary, "model"), form_field(raw, boundary, "stream") == "true"
        context = request_context(model, stream)
        reply = relay(context, f"POST {request.path}", route.path.format(**url_args),
                      _as_served(raw, body, boundary, model), content_type, at_root=route.at_root)
        if isinstance(reply.body, bytes):
            return Response(reply.body, status=reply.status, content_type=reply.content_type)
        return StreamResponse(reply.body, status=reply.status, content_type=reply.content_type, headers=SSE_HEADERS)

    return view


def _as_served(raw: bytes, body: dict[str, Any], boundary: bytes | None, model: object) -> Callable[[Settings], bytes]:
    """The request's bytes as a back end seeing given settings is sent them: the client's ``model`` renamed to the
    back end's (a JSON body dumped again, a form's field replaced), else as they came."""

    def body_for(settings: Settings) -> bytes:
        if not isinstance(model, str):
            return raw
        served = model_profile(settings, model).upstream_model
        if served == model:
            return raw
        return orjson.dumps({**body, "model": served}) if boundary is None \
            else with_form_field(raw, boundary, "model", served)

    return body_for
