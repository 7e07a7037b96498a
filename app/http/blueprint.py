"""The API Blueprint (OpenAI's Chat and Responses, Anthropic's Messages): its hooks (request record, auth,
limits, errors) and its routes."""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

import gevent
from flask import Blueprint, Response, jsonify, request

from ..chat.views import plan_chat_completion
from ..messages.models import anthropic_model_list
from ..messages.views import count_message_tokens, plan_message, unsupported_messages_path
from ..responses.views import delete_response, get_response, plan_response, unsupported_subpath
from ..pipeline.context import RequestContext
from ..pipeline.encoder import Encoder
from ..pipeline.generate import Generation, generate
from ..upstreams.base import UpstreamError
from .state import Backend, current_state
from . import limits
from .auth import authorize_api_request
from .errors import register_error_handlers
from .recording import open_record, stamp_response
from .request import json_body, owned_store, request_context, send

log = logging.getLogger("toolwire.http")
#: How long ``GET /models`` waits for the back ends' model lists, seconds.
MODELS_TIMEOUT = 3.0


def create_blueprint(name: str = "toolwire") -> Blueprint:
    """The API Blueprint (register it with a ``url_prefix`` such as ``/v1``)."""
    bp = Blueprint(name, __name__)
    bp.before_request(_before_request)
    bp.after_request(_after_request)
    bp.teardown_request(limits.release_unhanded_slots)
    register_error_handlers(bp)
    # The views get what they need of the request from here (HTTP's job); the endpoint names stay theirs.
    bp.add_url_rule("/chat/completions", "chat_completions", view_func=_generating(plan_chat_completion),
                    methods=["POST"])
    bp.add_url_rule("/responses", "create_response", view_func=_generating(_plan_response), methods=["POST"])
    bp.add_url_rule("/responses/<response_id>", "get_response", view_func=_get_response, methods=["GET"])
    bp.add_url_rule("/responses/<response_id>", "delete_response", view_func=_delete_response, methods=["DELETE"])
    bp.add_url_rule("/responses/<path:subpath>", view_func=unsupported_subpath,
                    methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    bp.add_url_rule("/messages", "create_message", view_func=_generating(plan_message), methods=["POST"])
    bp.add_url_rule("/messages/count_tokens", "count_message_tokens", view_func=_count_message_tokens,
                    methods=["POST"])
    bp.add_url_rule("/messages/<path:subpath>", view_func=unsupported_messages_path,
                    methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    bp.add_url_rule("/models", view_func=list_models, methods=["GET"])
    return bp


# One hook each way: Flask's cost is per hook and request.
def _before_request() -> None:
    """The request's record, then its key (before the limits, so a refused client takes no slot), then the
    declared body size."""
    req = request._get_current_object()  # type: ignore[attr-defined]  # once: each proxy access resolves it
    settings = current_state().settings
    open_record(req, settings)
    authorize_api_request(req.method)
    limits.check_declared_size(req, settings.max_body_bytes)


def _after_request(response: Response) -> Response:
    """The response stamped with the request's id (its record finished when the body closes), then the
    limits' part: an unread body finished, the slots handed to a stream."""
    return limits.after_response(request._get_current_object(), stamp_response(response))  # type: ignore[attr-defined]


#: A generating endpoint's planning: the request's JSON body and context to the generation and its encoder.
Plan = Callable[[dict[str, Any], RequestContext], tuple[Generation, Encoder]]


def _generating(plan: Plan) -> Callable[[], Response]:
    """The view of a generating endpoint: the request's JSON body planned by ``plan`` (validated, the generation
    and the encoder to answer with), the body let go, then the generation's reply."""

    def view() -> Response:
        body = json_body()
        context = request_context(body)
        generation, encoder = plan(body, context)
        del body  # the plan holds what is needed: a request waiting for its back end holds no more
        return send(generate(generation, encoder, context))

    return view


def _plan_response(body: dict[str, Any], context: RequestContext) -> tuple[Generation, Encoder]:
    return plan_response(body, context, owned_store())


def _get_response(response_id: str) -> Response:
    return get_response(response_id, owned_store())


def _delete_response(response_id: str) -> Response:
    return delete_response(response_id, owned_store())


def _count_message_tokens() -> Response:
    body = json_body()
    return send(count_message_tokens(body, request_context(body)))


def list_models() -> Response:
    """``GET /models``: every back end's models, each listed by the back end its name is routed to, plus the
    client names of ``model_map`` and the ``models`` of ``upstreams`` (with Anthropic's fields when an
    Anthropic client asks: an ``anthropic-version`` header). A single back end's failure is the answer
    (502…); several are asked at once, and one that fails or does not answer within :data:`MODELS_TIMEOUT` seconds is left out (the map's
    names routed to it stay listed)."""
    state = current_state()
    data, known = [], set()
    for name, models in _model_lists(state.upstreams).items():
        for model in models:
            if isinstance(model, dict) and model.get("id") and str(model["id"]) not in known \
                    and state.settings.route(str(model["id"])) == name:
                known.add(str(model["id"]))
                data.append(_model_entry(model))
    configured = [*state.settings.model_map, *(m for up in state.settings.upstreams.values() for m in up.models)]
    data += [_model_entry({"id": name}) for name in dict.fromkeys(configured) if name not in known]
    if request.headers.get("anthropic-version"):
        return jsonify(anthropic_model_list(data))
    return jsonify({"object": "list", "data": data})


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


def _model_entry(model: dict[str, Any]) -> dict[str, Any]:
    created = model.get("created")
    return {**model, "id": str(model["id"]), "object": "model",
            "created": created if isinstance(created, int) else 0,
            "owned_by": model.get("owned_by") or "toolwire"}
