"""Ollama's API on the shared pipeline: ``/api/chat`` and ``/api/generate`` planned for it, and the routes that
describe the models (``/api/tags``, ``/api/show``, ``/api/ps``, ``/api/version``) or embed text (``/api/embed``).

Every model toolwire serves takes tools (that is what it is for), so ``/api/show`` reports ``completion`` and
``tools`` for each, and ``thinking`` when its format has reasoning delimiters or its template opens reasoning.
toolwire loads nothing: ``/api/ps`` lists the served models as loaded, of size 0.
"""

from __future__ import annotations

from typing import Any, Mapping

from flask import Response, jsonify, request

from statemachine import get_format

from ..errors import ApiError
from ..pipeline.context import RequestContext
from ..pipeline.generate import Generation
from ..profile import model_profile
from ..validation import check_chat_limits
from .encoder import OllamaEncoder, created_at
from .plan import chat_generation, generate_generation
from .schemas import parse_chat_request, parse_generate_request, parse_model_request

#: The Ollama release whose API this surface answers as (``/api/version``).
OLLAMA_API_VERSION = "0.32.0"
#: ``modified_at`` of every model: toolwire keeps no model files.
EPOCH = "1970-01-01T00:00:00Z"
#: ``details`` of every model: its back end's file format and size are not known here.
_DETAILS = {"parent_model": "", "format": "", "family": "", "families": None, "parameter_size": "",
            "quantization_level": ""}


def plan_chat(body: dict[str, Any], context: RequestContext) -> tuple[Generation, OllamaEncoder] | dict[str, Any]:
    """``POST /api/chat``: the generation and the encoder to run it with, streamed unless ``stream: false``; with
    no messages, Ollama's answer to a request to load the model (or unload it: ``keep_alive`` zero)."""
    check_chat_limits(body, context.settings)
    req = parse_chat_request(body)
    if not req.messages:
        return {"model": req.model, "created_at": created_at(), "message": {"role": "assistant", "content": ""},
                "done": True, "done_reason": "unload" if req.unloads else "load"}
    generation = chat_generation(req, context.settings, marker_requested=context.marker_requested)
    return generation, OllamaEncoder(req.model, chat=True, show_thinking=req.think is not False)


def plan_generate(body: dict[str, Any], context: RequestContext) -> tuple[Generation, OllamaEncoder] | dict[str, Any]:
    """``POST /api/generate``: the prompt (with ``system``) as a one-turn conversation; with no prompt, Ollama's
    answer to a request to load the model (or unload it: ``keep_alive`` zero)."""
    req = parse_generate_request(body)
    if not req.prompt:
        return {"model": req.model, "created_at": created_at(), "response": "", "done": True,
                "done_reason": "unload" if req.unloads else "load"}
    generation = generate_generation(req, context.settings)
    return generation, OllamaEncoder(req.model, chat=False, show_thinking=req.think is not False)


def streams(body: Mapping[str, Any], url_args: Mapping[str, str]) -> object:
    """Whether a generating request streams, for its record: Ollama's default is to stream."""
    return body.get("stream") is not False


def model_named(body: Mapping[str, Any], url_args: Mapping[str, str]) -> object:
    """The model a request names: ``model``, or ``name`` as older clients send it."""
    return body.get("model") or body.get("name")


def show_model(body: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    """``POST /api/show``: what the model can do (``capabilities``) and its details."""
    req = parse_model_request(body)
    model = req.model or req.name
    if not model:
        raise ApiError(400, "model is required", param="model", code="missing_required_parameter")
    profile = model_profile(context.settings, model)
    thinks = profile.reasoning != "hide" and (
        profile.opens_reasoning or get_format(profile.formats[0]).reasoning_delimiters is not None)
    return {"modelfile": "", "parameters": "", "template": "", "details": _DETAILS, "model_info": {},
            "capabilities": ["completion", "tools", *(["thinking"] if thinks else [])], "modified_at": EPOCH}


def model_tags(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """``GET /api/tags``: the served models as Ollama lists local ones."""
    return {"models": [_listed(entry) for entry in entries]}


def running_models(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """``GET /api/ps``: the served models as loaded ones (toolwire loads nothing; their back ends do)."""
    return {"models": [{**_listed(entry), "expires_at": EPOCH, "size_vram": 0, "context_length": 0}
                       for entry in entries]}


def _listed(entry: dict[str, Any]) -> dict[str, Any]:
    return {"name": entry["id"], "model": entry["id"], "modified_at": EPOCH, "size": 0, "digest": "",
            "details": _DETAILS}


def running() -> Response:
    """``GET /`` (and ``HEAD``): what Ollama answers there, and what its clients probe for a live server."""
    return Response("Ollama is running", mimetype="text/plain")


def version() -> Response:
    """``GET /api/version``."""
    return jsonify({"version": OLLAMA_API_VERSION})


def manages_no_models(**url_args: str) -> Response:
    """``/api/pull``, ``push``, ``create``, ``copy``, ``delete`` and ``blobs/…``: 501, as toolwire serves its
    back ends' models and keeps none of its own (a client asking to pull a model learns why it cannot)."""
    raise ApiError(501, f"{request.method} {request.path}: toolwire does not manage models; it serves its back "
                        "ends' models as they are (GET /api/tags lists them).", code="not_implemented")
