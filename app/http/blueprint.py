"""The API Blueprint (OpenAI's Chat and Responses, Anthropic's Messages): its hooks (request record, auth,
limits, errors) and its routes."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify, request

from ..chat.views import chat_completions
from ..messages.models import anthropic_model_list
from ..messages.views import count_message_tokens, create_message, unsupported_messages_path
from ..responses.views import create_response, delete_response, get_response, unsupported_subpath
from .state import current_state
from . import limits
from .auth import api_before_request
from .errors import register_error_handlers
from .recording import open_record, stamp_response
from .request import json_body, owned_store, request_context, send


def create_blueprint(name: str = "toolwire") -> Blueprint:
    """The API Blueprint (register it with a ``url_prefix`` such as ``/v1``)."""
    bp = Blueprint(name, __name__)
    bp.before_request(_before_request)
    bp.before_request(api_before_request)  # auth: before the limits, so a refused client takes no slot
    limits.install(bp)
    bp.after_request(stamp_response)
    register_error_handlers(bp)
    # The views get what they need of the request from here (HTTP's job); the endpoint names stay theirs.
    bp.add_url_rule("/chat/completions", "chat_completions", view_func=_chat_completions, methods=["POST"])
    bp.add_url_rule("/responses", "create_response", view_func=_create_response, methods=["POST"])
    bp.add_url_rule("/responses/<response_id>", "get_response", view_func=_get_response, methods=["GET"])
    bp.add_url_rule("/responses/<response_id>", "delete_response", view_func=_delete_response, methods=["DELETE"])
    bp.add_url_rule("/responses/<path:subpath>", view_func=unsupported_subpath,
                    methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    bp.add_url_rule("/messages", "create_message", view_func=_create_message, methods=["POST"])
    bp.add_url_rule("/messages/count_tokens", "count_message_tokens", view_func=_count_message_tokens,
                    methods=["POST"])
    bp.add_url_rule("/messages/<path:subpath>", view_func=unsupported_messages_path,
                    methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    bp.add_url_rule("/models", view_func=list_models, methods=["GET"])
    return bp


def _before_request() -> None:
    open_record()  # not the hook itself: a before_request hook's return value would be the response


def _chat_completions() -> Response:
    return send(chat_completions(json_body(), request_context()))


def _create_response() -> Response:
    return send(create_response(json_body(), request_context(), owned_store()))


def _get_response(response_id: str) -> Response:
    return get_response(response_id, owned_store())


def _delete_response(response_id: str) -> Response:
    return delete_response(response_id, owned_store())


def _create_message() -> Response:
    return send(create_message(json_body(), request_context()))


def _count_message_tokens() -> Response:
    return send(count_message_tokens(json_body(), request_context()))


def list_models() -> Response:
    """``GET /models``: the upstream's models plus the client names of ``model_map`` (with Anthropic's fields
    when an Anthropic client asks: an ``anthropic-version`` header)."""
    settings = current_state().settings
    data = [_model_entry(m) for m in current_state().upstream.models() if isinstance(m, dict) and m.get("id")]
    known = {m["id"] for m in data}
    data += [_model_entry({"id": name}) for name in settings.model_map if name not in known]
    if request.headers.get("anthropic-version"):
        return jsonify(anthropic_model_list(data))
    return jsonify({"object": "list", "data": data})


def _model_entry(model: dict[str, Any]) -> dict[str, Any]:
    created = model.get("created")
    return {**model, "id": str(model["id"]), "object": "model",
            "created": created if isinstance(created, int) else 0,
            "owned_by": model.get("owned_by") or "toolwire"}
