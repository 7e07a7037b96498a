"""The Responses endpoint: ``POST /responses``, ``GET`` and ``DELETE /responses/{id}``; any other
``/responses/…`` path is a 404 ``not_supported``.

A Responses request becomes the same upstream Chat request the chat endpoint
sends (one prompt builder, one transcript flattener), its single choice runs
through the same :class:`~app.pipeline.driver.ChoiceDriver`, and
:class:`~app.responses.encoder.ResponsesEncoder` turns the core events into
Responses events. Everything that can be refused (body shape, unknown
``previous_response_id`` or ``item_reference``, upstream refusal) is refused
before the first byte; a failure after it ends the stream with
``response.failed``.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Iterator

from flask import Response, current_app, request

from statemachine import ParserConfig

from ..http import limits
from ..pipeline.driver import ChoiceDriver
from ..http.errors import ApiError, as_api_error
from ..state import current_state
from ..pipeline.prompt import build_upstream_messages
from .input import resolve_input_items, to_chat_messages
from .schemas import ResponsesRequest, parse_responses_request
from .tools import OfferedTools, offered_tools
from .encoder import ResponsesEncoder, encode_sse, new_response_id
from .store import ResponseStore
from ..pipeline.streaming import cooperative
from ..pipeline.plan import build_parser_config, is_json_format, prompt_format
from ..http.request import json_body, open_upstream, sse_response

log = logging.getLogger(__name__)

#: Request fields with the same meaning in a Chat request, sent on as they are.
_PASSTHROUGH = ("temperature", "top_p", "user")
#: Fields agents send that Chat back ends also take under the same name (others, such as ``include``,
#: ``client_metadata`` or ``truncation``, are accepted and not sent: a Chat back end has no use for them).
_EXTRA_PASSTHROUGH = ("prompt_cache_key", "safety_identifier", "service_tier")


def create_response() -> Response:
    """``POST /responses``, streaming or not."""
    body = json_body()
    limits.check_responses_limits(body)
    req = parse_responses_request(body)
    store = current_state().store
    # the items to store, when storing: their references are then looked up once, here
    input_items = resolve_input_items(req, store) if req.store and store is not None else None
    messages = to_chat_messages(req, store, input_items)
    tools = offered_tools(req, current_state().settings)
    config = _parser_config(req, tools)
    fields = _upstream_fields(req)
    stream = open_upstream(req.model, build_upstream_messages(messages, config, prompt_format(config)), fields)
    driver = ChoiceDriver(stream, config)
    encoder = ResponsesEncoder(new_response_id(), req.model, req.response_echo(), tools=tools.origins)

    def keep() -> None:
        if input_items is not None:
            _keep(store, encoder.response(), input_items)

    if not req.stream:
        encoder.start()
        for _, event in cooperative(driver):
            encoder.feed(event)
        encoder.finish(driver.usage)
        keep()
        return current_app.json.response(encoder.response())

    def frames() -> Iterator[bytes]:
        for event in encoder.start():
            yield encode_sse(event)
        for _, core_event in driver:
            for event in encoder.feed(core_event):
                yield encode_sse(event)
        terminal = encoder.finish(driver.usage)
        keep()  # before the terminal event, so a follow-up can name this response at once
        for event in terminal:
            yield encode_sse(event)

    def failed(exc: Exception) -> bytes:
        error = as_api_error(exc)
        events = encoder.fail(error.code or "server_error", error.message, driver.usage)
        keep()
        return b"".join(encode_sse(event) for event in events)

    return sse_response(frames(), on_error=failed, on_abandon=stream.close)


def get_response(response_id: str) -> Response:
    """``GET /responses/{id}``: a stored Response object."""
    response = _store().get(response_id)
    if response is None:
        raise _not_found(response_id)
    return current_app.json.response(response)


def delete_response(response_id: str) -> Response:
    """``DELETE /responses/{id}``: forget a stored response."""
    if not _store().delete(response_id):
        raise _not_found(response_id)
    return current_app.json.response({"id": response_id, "object": "response.deleted", "deleted": True})


def unsupported_subpath(subpath: str) -> Response:
    """Any other ``/responses/…`` path (``POST /responses/compact``…): 404 ``not_supported``, not a 405."""
    hint = (" Compaction happens on the client (Codex compacts locally with this provider)."
            if subpath.strip("/") == "compact" else "")
    raise ApiError(404, f"{request.method} {request.path} is not supported by this server: it serves "
                   "POST /v1/responses and GET/DELETE /v1/responses/{id}." + hint, code="not_supported")


def _parser_config(req: ResponsesRequest, tools: OfferedTools) -> ParserConfig:
    """The chat endpoint's parser configuration, with the request's ``max_tool_calls`` on top."""
    config = build_parser_config(tools.specs, tools.choice,
                                 parallel_tool_calls=req.parallel_tool_calls, legacy_functions=False,
                                 settings=current_state().settings,
                                 json_output=is_json_format((req.text or {}).get("format")))
    if req.max_tool_calls is None:
        return config
    limit = config.policy.max_tool_calls
    limit = min(limit, req.max_tool_calls) if limit else req.max_tool_calls
    return dataclasses.replace(config, policy=dataclasses.replace(config.policy, max_tool_calls=limit))


def _upstream_fields(req: ResponsesRequest) -> dict[str, Any]:
    """The Chat request fields besides model and messages: sampling, limits, output format and the
    agent fields a Chat back end understands (``reasoning.effort`` as ``reasoning_effort``,
    ``text.verbosity`` as ``verbosity``)."""
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


def _keep(store: ResponseStore, response: dict[str, Any], input_items: list[dict[str, Any]]) -> None:
    """Store a finished response; a store failure is logged, not sent: the client's answer is complete."""
    try:
        store.put(response, input_items)
    except Exception:
        log.exception("could not store response %s", response["id"])


def _store() -> ResponseStore:
    store = current_state().store
    if store is None:
        raise ApiError(404, "Responses are not stored on this server (the response store is disabled).",
                       code="not_found")
    return store


def _not_found(response_id: str) -> ApiError:
    return ApiError(404, f"Response with id {response_id!r} not found.", param="response_id", code="not_found")
