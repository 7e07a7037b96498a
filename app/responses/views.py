"""The Responses endpoint: ``POST /responses``, ``GET`` and ``DELETE /responses/{id}``; any other
``/responses/…`` path is a 404 ``not_supported``.

A Responses request becomes the same :class:`~app.pipeline.generate.Generation`
a Chat request does (its input items flattened to Chat messages, one choice),
runs through the shared pipeline, and :class:`~app.responses.encoder.ResponsesWireEncoder`
puts the core events on the Responses wire. Everything that can be refused (body
shape, unknown ``previous_response_id`` or ``item_reference``, upstream refusal)
is refused before the first byte; a failure after it ends the stream with
``response.failed``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import Any

from flask import Response, jsonify, request

from statemachine import ParserConfig

from ..errors import ApiError
from ..pipeline.context import RequestContext
from ..pipeline.generate import Generation
from ..pipeline.plan import build_parser_config, is_json_format
from ..profile import ModelProfile, model_profile
from ..validation import check_responses_limits
from .encoder import ResponsesEncoder, ResponsesWireEncoder, new_response_id
from .input import resolve_input_items, to_chat_messages
from .schemas import ResponsesRequest, parse_responses_request
from ..store import OwnedStore, StoreError
from ..observability.metrics import STORE_WRITE_FAILURES
from .tools import OfferedTools, offered_tools

log = logging.getLogger("toolwire.responses")

#: Request fields with the same meaning in a Chat request, sent on as they are.
_PASSTHROUGH = ("temperature", "top_p", "user")
#: Fields agents send that Chat back ends also take under the same name (others, such as ``include``,
#: ``client_metadata`` or ``truncation``, are accepted and not sent: a Chat back end has no use for them).
_EXTRA_PASSTHROUGH = ("prompt_cache_key", "safety_identifier", "service_tier")


def plan_response(body: dict[str, Any], context: RequestContext,
                  store: OwnedStore | None) -> tuple[Generation, ResponsesWireEncoder]:
    """``POST /responses`` on the request's JSON ``body``, streaming or not, with the client's view of the
    response ``store`` (``None`` when storing is off): the generation and the encoder to run it with
    (:func:`~app.pipeline.generate.generate`), as :func:`~app.chat.views.plan_chat_completion` plans a Chat one."""
    settings = context.settings
    check_responses_limits(body, settings)
    req = parse_responses_request(body)
    # the items to store, when storing: their references are then looked up once, here
    input_items = resolve_input_items(req, store) if req.store and store is not None else None
    tools = offered_tools(req, settings)
    # a stored history counts as if the client had sent it: the same item and size limits
    messages = to_chat_messages(req, store, input_items, max_history_items=settings.max_messages,
                                max_history_bytes=settings.max_body_bytes)
    profile = model_profile(settings, req.model)
    generation = Generation(profile=profile, messages=messages, config=_parser_config(req, tools, context, profile),
                            fields=_chat_fields(req), stream=req.stream)

    keep = functools.partial(_keep, store, input_items) if store is not None and input_items is not None else None
    encoder = ResponsesEncoder(new_response_id(), req.model, req.response_echo(), tools=tools.origins)
    return generation, ResponsesWireEncoder(encoder, keep)


def get_response(response_id: str, store: OwnedStore | None) -> Response:
    """``GET /responses/{id}``: a stored Response object."""
    response = _enabled(store).get(response_id)
    if response is None:
        raise _not_found(response_id)
    return jsonify(response)


def delete_response(response_id: str, store: OwnedStore | None) -> Response:
    """``DELETE /responses/{id}``: forget a stored response."""
    if not _enabled(store).delete(response_id):
        raise _not_found(response_id)
    return jsonify({"id": response_id, "object": "response.deleted", "deleted": True})


def unsupported_subpath(subpath: str) -> Response:
    """Any other ``/responses/…`` path (``POST /responses/compact``…): 404 ``not_supported``, not a 405."""
    hint = (" Compaction happens on the client (Codex compacts locally with this provider)."
            if subpath.strip("/") == "compact" else "")
    raise ApiError(404, f"{request.method} {request.path} is not supported by this server: it serves "
                   "POST /v1/responses and GET/DELETE /v1/responses/{id}." + hint, code="not_supported")


def _parser_config(req: ResponsesRequest, tools: OfferedTools, context: RequestContext,
                   profile: ModelProfile) -> ParserConfig:
    """The chat endpoint's parser configuration, with the request's ``max_tool_calls`` on top."""
    config = build_parser_config(tools.specs, tools.choice,
                                 parallel_tool_calls=req.parallel_tool_calls, legacy_functions=False,
                                 settings=context.settings, profile=profile,
                                 marker_requested=context.marker_requested,
                                 json_output=is_json_format((req.text or {}).get("format")))
    if req.max_tool_calls is None:
        return config
    limit = config.policy.max_tool_calls
    limit = min(limit, req.max_tool_calls) if limit else req.max_tool_calls
    return dataclasses.replace(config, policy=dataclasses.replace(config.policy, max_tool_calls=limit))


def _chat_fields(req: ResponsesRequest) -> dict[str, Any]:
    """The request's parameters as the back end's Chat request takes them: sampling, limits, output
    format and the agent fields a Chat back end understands (``reasoning.effort`` as
    ``reasoning_effort``, ``text.verbosity`` as ``verbosity``)."""
    fields = {key: getattr(req, key) for key in _PASSTHROUGH if getattr(req, key) is not None}
    extra = req.model_extra or {}
    fields.update((key, extra[key]) for key in _EXTRA_PASSTHROUGH if extra.get(key) is not None)
    if req.max_output_tokens is not None:
        fields["max_tokens"] = req.max_output_tokens
    text = req.text or {}
    response_format = _chat_response_format(text.get("format"))
    if response_format is not None:
        fields["response_format"] = response_format
    if isinstance(text.get("verbosity"), str):
        fields["verbosity"] = text["verbosity"]
    effort = (req.reasoning or {}).get("effort")
    if isinstance(effort, str):
        fields["reasoning_effort"] = effort
    return fields


def _chat_response_format(fmt: Any) -> dict[str, Any] | None:
    """A Responses ``text.format`` as the Chat ``response_format`` the back end understands (``None`` for text)."""
    if not is_json_format(fmt):
        return None
    if fmt["type"] == "json_object":
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {k: v for k, v in fmt.items() if k != "type"}}


def _keep(store: OwnedStore, input_items: list[dict[str, Any]], response: dict[str, Any]) -> bool:
    """Store a finished response and say whether it was stored. A store failure is logged and counted, not
    sent as an error: the client's answer is complete, and says ``store: false`` (a later
    ``previous_response_id`` naming it gets a 404)."""
    try:
        store.put(response, input_items)
        return True
    except StoreError as exc:
        log.error("response %s was answered but not stored: %s", response["id"], exc)
    except Exception:
        log.exception("response %s was answered but not stored", response["id"])
    STORE_WRITE_FAILURES.inc()
    return False


def _enabled(store: OwnedStore | None) -> OwnedStore:
    if store is None:
        raise ApiError(404, "Responses are not stored on this server (the response store is disabled).",
                       code="not_found")
    return store


def _not_found(response_id: str) -> ApiError:
    return ApiError(404, f"Response with id {response_id!r} not found.", param="response_id", code="not_found")
