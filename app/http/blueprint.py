"""The API Blueprint (OpenAI's Chat and Responses, Anthropic's Messages): its hooks (request record, auth, limits, errors) and its routes."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app

from ..chat.views import chat_completions
from ..messages.views import count_message_tokens, create_message, unsupported_messages_path
from ..observability import record as observe
from ..responses.views import create_response, delete_response, get_response, unsupported_subpath
from ..state import current_state
from . import limits
from .auth import api_before_request
from .errors import register_error_handlers
from .request import json_body


def create_blueprint(name: str = "toolwire") -> Blueprint:
    """The API Blueprint (register it with a ``url_prefix`` such as ``/v1``)."""
    bp = Blueprint(name, __name__)
    bp.before_request(_before_request)
    bp.before_request(api_before_request)  # auth: before the limits, so a refused client takes no slot
    limits.install(bp)
    bp.after_request(observe.respond)
    register_error_handlers(bp)
    # The generation views get the body read here (HTTP's job); the endpoint names stay theirs.
    bp.add_url_rule("/chat/completions", "chat_completions", view_func=_chat_completions, methods=["POST"])
    bp.add_url_rule("/responses", "create_response", view_func=_create_response, methods=["POST"])
    bp.add_url_rule("/responses/<response_id>", view_func=get_response, methods=["GET"])
    bp.add_url_rule("/responses/<response_id>", view_func=delete_response, methods=["DELETE"])
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
    observe.begin()  # not the hook itself: a before_request hook's return value would be the response


def _chat_completions() -> Response:
    return chat_completions(json_body())


def _create_response() -> Response:
    return create_response(json_body())


def _create_message() -> Response:
    return create_message(json_body())


def _count_message_tokens() -> Response:
    return count_message_tokens(json_body())


def list_models() -> Response:
    """``GET /models``: the upstream's models plus the client names of ``model_map``."""
    settings = current_state().settings
    data = [_model_entry(m) for m in current_state().upstream.models() if isinstance(m, dict) and m.get("id")]
    known = {m["id"] for m in data}
    data += [_model_entry({"id": name}) for name in settings.model_map if name not in known]
    return current_app.json.response({"object": "list", "data": data})


def _model_entry(model: dict[str, Any]) -> dict[str, Any]:
    created = model.get("created")
    return {**model, "id": str(model["id"]), "object": "model",
            "created": created if isinstance(created, int) else 0,
            "owned_by": model.get("owned_by") or "toolwire"}
