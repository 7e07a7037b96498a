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
from typing import Any, Callable, Iterator, NamedTuple

from flask import Response, g, jsonify, request

from statemachine import ParserConfig

from ..errors import ApiError, InputError
from ..pipeline.context import RequestContext
from ..pipeline.failures import as_api_error
from ..pipeline.encoder import Encoder
from ..pipeline.generate import SSE_HEADERS, Generation, generate
from ..pipeline.plan import build_parser_config, is_json_format
from ..profile import ModelProfile, model_profile
from ..pipeline.tokens import prompt_tokens
from ..validation import check_responses_limits
from . import background
from .compact import is_compaction_turn, plan_compaction_turn
from .conversations import append_turn, conversation_transcript
from .listing import listed_item, page, parse_list_query
from .encoder import ResponsesEncoder, ResponsesWireEncoder, new_response_id
from .input import resolve_input_items, to_chat_messages
from .mcp import McpHistory, mcp_choice, plan_mcp
from .schemas import ResponsesRequest, parse_responses_request
from .web_search import web_choice, web_search_gateway
from ..gateway_tools.base import GatewayTool, GatewayToolset
from ..settings import Settings
from ..store import OwnedStore, StoredResponse, StoreError
from ..observability.metrics import STORE_WRITE_FAILURES
from ..observability.record import RequestRecord
from .tools import OfferedTools, offered_tools

log = logging.getLogger("toolwire.responses")

#: Request fields with the same meaning in a Chat request, sent on as they are.
_PASSTHROUGH = ("temperature", "top_p", "user")
#: Fields agents send that Chat back ends also take under the same name (others, such as ``include``,
#: ``client_metadata`` or ``truncation``, are accepted and not sent: a Chat back end has no use for them).
_EXTRA_PASSTHROUGH = ("prompt_cache_key", "safety_identifier", "service_tier")


def plan_response(body: dict[str, Any], context: RequestContext, store: OwnedStore | None
                  ) -> tuple[Generation, Encoder] | dict[str, Any] | Response:
    """``POST /responses`` on the request's JSON ``body``, streaming or not, with the client's view of the
    response ``store`` (``None`` when storing is off): the generation and the encoder to run it with
    (:func:`~app.pipeline.generate.generate`), as :func:`~app.chat.views.plan_chat_completion` plans a Chat one;
    for ``background: true``, the ``queued`` Response object, the generation left running (:mod:`.background`),
    or with ``stream`` its events as they come."""
    if is_compaction_turn(body):  # Codex's remote compaction v2
        return plan_compaction_turn(body, context, store)
    check_responses_limits(body, context.settings)
    req = parse_responses_request(body)
    if req.background:
        _check_background(req, store)
    planned = _planned(req, context, store)
    input_items = planned.input_items  # resolved when the response is stored or joins a conversation
    keep = None if store is None or input_items is None else \
        functools.partial(_keep, store, input_items, req.conversation_id, req.store)
    encoder = ResponsesEncoder(new_response_id(), req.model, req.response_echo(), tools=planned.tools.origins,
                               prelude=planned.mcp_items)
    if not req.background:
        return planned.generation, ResponsesWireEncoder(encoder, keep)
    assert store is not None and input_items is not None and keep is not None  # _check_background
    # the back end's slot (app.http.limits.take_backend_slot) goes with the generation, not with this request
    slot = g.pop("toolwire_backend_slot", None)
    release = slot.release if slot is not None else _nothing
    run = _BackgroundRun(planned.generation, encoder, _in_background(context), release)
    try:
        queued = background.start(encoder.response(), input_items, store, run, keep, run.done)
    except StoreError as exc:
        release()
        if isinstance(exc, ApiError):
            raise
        raise InputError(f"The background response cannot be stored: {exc}.", "background",
                         "store_quota_exceeded") from None
    return _event_stream(background.follow(store, queued["id"], -1)) if req.stream else queued


class _Planned(NamedTuple):
    """A Responses request planned: its generation, its tools, its input items to store (or ``None``) and the
    MCP items that open its output (:mod:`.mcp`)."""

    generation: Generation
    tools: OfferedTools
    input_items: list[dict[str, Any]] | None
    mcp_items: list[dict[str, Any]]


def _planned(req: ResponsesRequest, context: RequestContext, store: OwnedStore | None, *, counting: bool = False
             ) -> _Planned:
    """The generation of ``req``: its transcript (the ``previous_response_id`` chain or the ``conversation``'s
    items, then its input), tools (its MCP servers' listed, the calls the client approved run, unless only
    ``counting``) and fields; the input items resolved when they are to be stored."""
    settings = context.settings
    # the items to store, when storing: their references are then looked up once, here
    wanted = store is not None and (req.store or req.conversation_id is not None)
    input_items = resolve_input_items(req, store) if wanted else None
    tools = offered_tools(req, settings)
    history = McpHistory()
    # a stored history counts as if the client had sent it: the same item and size limits
    messages = to_chat_messages(req, store, input_items, max_history_items=settings.max_messages,
                                max_history_bytes=settings.max_body_bytes,
                                conversation=conversation_transcript(req, store, settings.max_messages), mcp=history)
    mcp = plan_mcp(req.tools, history, settings, context.record, client_names=tools.origins.keys() | {
        spec.name for spec in tools.specs}, run_approved=not counting)
    profile = model_profile(settings, req.model)
    web = web_search_gateway(req.tools, settings, client_names=tools.origins.keys() | {s.name for s in tools.specs})
    config = mcp_choice(req.tool_choice, _parser_config(req, tools, context, profile), mcp.toolset)
    generation = Generation(profile=profile, messages=messages, config=web_choice(req.tool_choice, config, web),
                            fields=_chat_fields(req), stream=req.stream, gateway=_toolset(mcp.toolset, web, settings))
    return _Planned(generation, tools, input_items, mcp.prelude)


def _toolset(mcp: GatewayToolset | None, web: list[GatewayTool], settings: Settings) -> GatewayToolset | None:
    """The request's gateway tools: its MCP servers' and its web search's, under the operator's limits."""
    if not web:
        return mcp
    return GatewayToolset.limited([*(mcp.tools.values() if mcp is not None else ()), *web], settings)


def count_input_tokens(body: dict[str, Any], context: RequestContext, store: OwnedStore | None) -> dict[str, Any]:
    """``POST /responses/input_tokens``: the tokens of the prompt a ``POST /responses`` of this body would send,
    counted by the back end's own tokenizer where it offers one, else estimated
    (:func:`~app.pipeline.tokens.prompt_tokens`)."""
    check_responses_limits(body, context.settings)
    req = parse_responses_request({**body, "store": False, "stream": False})
    generation = _planned(req, context, store, counting=True).generation
    return {"object": "response.input_tokens", "input_tokens": prompt_tokens(generation, context)}


def get_response(response_id: str, store: OwnedStore | None) -> Response:
    """``GET /responses/{id}``: a stored Response object (a background one as it stands); with ``stream=true``, a
    background response's events after ``starting_after`` (all without it), then the live ones until it ends."""
    owned = _enabled(store)
    response = background.settled(owned, _stored(owned, response_id))
    if request.args.get("stream", "false").lower() not in ("true", "1"):
        return jsonify(response)
    if not response.get("background"):
        raise InputError("Only a background response can be streamed again: this one was created without "
                         "background: true.", "stream", "invalid_value")
    after = request.args.get("starting_after", "-1")
    if not after.lstrip("-").isdigit() or int(after) < -1:
        raise InputError(f"Invalid value for 'starting_after': {after!r} is not a sequence number.",
                         "starting_after", "invalid_value")
    return _event_stream(background.follow(owned, response_id, int(after)))


def delete_response(response_id: str, store: OwnedStore | None) -> Response:
    """``DELETE /responses/{id}``: forget a stored response."""
    if not _enabled(store).delete(response_id):
        raise _not_found(response_id)
    return jsonify({"id": response_id, "object": "response.deleted", "deleted": True})


def list_input_items(response_id: str, store: OwnedStore | None) -> Response:
    """``GET /responses/{id}/input_items``: the input items of a stored response, paged as OpenAI pages them."""
    query = parse_list_query(request.args)
    items = _stored(store, response_id).input_items
    return jsonify(page([listed_item(item, f"{response_id}:{i}") for i, item in enumerate(items)], query))


def cancel_response(response_id: str, store: OwnedStore | None) -> Response:
    """``POST /responses/{id}/cancel``: stop a background response that has not ended (a cancelled one is
    answered as it is); any other is a 400, as OpenAI's."""
    owned = _enabled(store)
    stored = _stored(owned, response_id)
    response = background.settled(owned, stored)
    if not response.get("background"):
        raise ApiError(400, "Cannot cancel a synchronous response: only a response created with background: "
                            "true can be cancelled.", param="response_id", code="invalid_request")
    if response["status"] == "cancelled":
        return jsonify(response)
    if response["status"] not in background.UNFINISHED:
        raise ApiError(400, f"Cannot cancel a {response['status']} response.", param="response_id",
                       code="invalid_request")
    return jsonify(background.cancel(owned, stored))


def unsupported_subpath(subpath: str) -> Response:
    """Any other ``/responses/…`` path: 404 ``not_supported``, not a 405."""
    raise ApiError(404, f"{request.method} {request.path} is not supported by this server: it serves "
                   "POST /v1/responses, POST /v1/responses/input_tokens, POST /v1/responses/compact, "
                   "GET/DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items and "
                   "POST /v1/responses/{id}/cancel.", code="not_supported")


class _BackgroundRun:
    """A background response's generation (:class:`.background.Generation`), streamed into its event log, with a
    record of its own whose access line is written when it is over (:meth:`done`)."""

    def __init__(self, generation: Generation, encoder: ResponsesEncoder, context: RequestContext,
                 release: Callable[[], None]):
        self._generation = dataclasses.replace(generation, stream=True)
        self._encoder, self._wire = encoder, ResponsesWireEncoder(encoder)
        self._context, self._release = context, release

    def generate(self, log: background.EventLog) -> dict[str, Any]:
        reply = generate(self._generation, self._wire, self._context)
        assert not isinstance(reply, dict)  # (a streamed generation)
        try:
            for data in reply:
                log.add(data)
        finally:
            reply.close()
        return self._encoder.response()

    def failed(self, error: BaseException) -> dict[str, Any]:
        api_error = as_api_error(error)
        if self._context.record is not None:
            self._context.record.outcome = api_error.code or api_error.type
        return self._wire.failed(api_error)

    def done(self, status: str) -> None:
        """The response is over (``status``: how it ended): the back end's slot goes back, the access line out."""
        self._release()
        record = self._context.record
        if record is not None:
            record.status = record.status or 200
            if status == "cancelled":
                record.outcome = "cancelled"
            record.finish()


def _check_background(req: ResponsesRequest, store: OwnedStore | None) -> None:
    if not req.store or store is None:
        raise InputError("background: true needs the response stored (store: true, and a server with its "
                         "response store on).", "background", "unsupported_value")


def _in_background(context: RequestContext) -> RequestContext:
    """``context`` for a generation that outlives its request: no client connection, no keep-alives, and a record
    of its own (on the request's route with `` background``, under its request id)."""
    record = context.record
    if record is not None:
        record = RequestRecord(record.request_id, record.method, f"{record.route} background", model=record.model,
                               model_label=record.model_label, owner=record.owner, stream_requested=True,
                               dropped_tools=record.dropped_tools)
    return dataclasses.replace(context, record=record, client_socket=None, keepalive=False,
                               fallbacks=tuple(dataclasses.replace(f, record=record, client_socket=None,
                                                                   keepalive=False) for f in context.fallbacks))


def _event_stream(frames: Iterator[bytes]) -> Response:
    """An SSE answer of ``frames``."""
    return Response(frames, mimetype="text/event-stream", headers=SSE_HEADERS)


def _nothing() -> None:
    return None


def _stored(store: OwnedStore | None, response_id: str) -> StoredResponse:
    stored = _enabled(store).load(response_id)
    if stored is None:
        raise _not_found(response_id)
    return stored


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


def _keep(store: OwnedStore, input_items: list[dict[str, Any]], conversation: str | None, stored: bool,
          response: dict[str, Any]) -> bool:
    """Store a finished response (when ``stored``), append its turn to its ``conversation`` (when it ended
    well), and say whether all went as the response claims. A store failure is logged and counted, not sent as
    an error: the client's answer is complete, and says ``store: false`` (a later ``previous_response_id``
    naming it gets a 404)."""
    try:
        if stored:
            store.put(response, input_items)
        if conversation is not None and response["status"] in ("completed", "incomplete"):
            append_turn(store, conversation, input_items, response)
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
