"""The OpenAI-compatible Blueprint: chat completions, responses (:mod:`.responses_api`), models.

Routes are added in :func:`create_blueprint`. Views read everything they need from the
request, open the upstream (:func:`.web.open_upstream`, so its refusal is an ordinary
HTTP error), then either stream through the pump (:func:`.web.sse_response`) or
accumulate the same events into one body.
"""

from __future__ import annotations

import math
import time
import uuid
from typing import Any

import orjson
from flask import Blueprint, Response, current_app

from . import limits, observe
from .auth import api_before_request
from .chat_wire import ChatAccumulator, ChatChunker, usage_object
from .errors import as_api_error, register_error_handlers
from .extension import current_state
from .prompting import build_upstream_messages
from .responses_api import create_response, delete_response, get_response
from .schemas import parse_chat_request
from .driver import ChoiceDriver
from .streaming import DONE, cooperative, data_frame
from .tools import chat_parser_config, prompt_format
from .web import json_body, open_upstream, sse_response

#: Request keys toolwire consumes; everything else goes to the upstream as sent.
_CONSUMED_KEYS = frozenset({"model", "messages", "stream", "stream_options", "tools", "tool_choice",
                            "parallel_tool_calls", "functions", "function_call"})


def create_blueprint(name: str = "toolwire") -> Blueprint:
    """The API Blueprint (register it with a ``url_prefix`` such as ``/v1``)."""
    bp = Blueprint(name, __name__)
    bp.before_request(_before_request)
    bp.before_request(api_before_request)  # auth: before the limits, so a refused client takes no slot
    limits.install(bp)
    bp.after_request(observe.respond)
    register_error_handlers(bp)
    bp.add_url_rule("/chat/completions", view_func=chat_completions, methods=["POST"])
    bp.add_url_rule("/responses", view_func=create_response, methods=["POST"])
    bp.add_url_rule("/responses/<response_id>", view_func=get_response, methods=["GET"])
    bp.add_url_rule("/responses/<response_id>", view_func=delete_response, methods=["DELETE"])
    bp.add_url_rule("/models", view_func=list_models, methods=["GET"])
    return bp


def _before_request() -> None:
    observe.begin()  # not the hook itself: a before_request hook's return value would be the response


def chat_completions() -> Response:
    """``POST /chat/completions``, streaming or not."""
    body = json_body()
    limits.check_chat_limits(body)
    req = parse_chat_request(body)
    config = chat_parser_config(req, current_state().settings)
    messages = build_upstream_messages(body["messages"], config, prompt_format(config))
    passthrough = {key: value for key, value in body.items() if key not in _CONSUMED_KEYS}
    stream = open_upstream(req.model, messages, passthrough)
    driver = ChoiceDriver(stream, config, n=req.n)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    legacy = config.legacy_functions

    if not req.stream:
        accumulator = ChatAccumulator(completion_id, created, req.model, legacy_functions=legacy)
        for index, event in cooperative(driver):
            accumulator.add(index, event)
        return current_app.json.response(accumulator.body(_usage(driver, messages)))

    include_usage = req.include_usage
    chunker = ChatChunker(completion_id, created, req.model, legacy_functions=legacy, include_usage=include_usage)
    # An open stream keeps the prompt only for a usage estimate it may send (memory per stream).
    prompt = messages if include_usage else []

    def frames():
        for index, event in driver:
            for chunk in chunker.chunks(index, event):
                yield data_frame(chunk)
        if include_usage:
            yield data_frame(chunker.usage_chunk(_usage(driver, prompt)))
        yield DONE

    return sse_response(frames(), on_error=_error_frame, on_abandon=stream.close)


def _error_frame(exc: Exception) -> bytes:
    """The Chat mid-stream failure: one error frame, then ``[DONE]``."""
    return data_frame(as_api_error(exc).body()) + DONE


def _usage(driver: ChoiceDriver, messages: list[dict[str, Any]]) -> dict[str, int]:
    """The upstream's token counts, or an estimate (~4 characters a token) when it sent none."""
    usage = driver.usage or {}
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(prompt, int) and isinstance(completion, int):
        return usage_object(prompt, completion)
    prompt_chars = len(orjson.dumps(messages))  # only when estimating: most upstreams send usage
    return usage_object(math.ceil(prompt_chars / 4), math.ceil(driver.output_chars / 4))


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
