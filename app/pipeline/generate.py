"""The one generation path of both endpoints: plan → prompt → upstream → driver → encoder.

An endpoint validates its request, turns it into a :class:`Generation` (the
parser configuration, the client's transcript as Chat messages, the fields the
back end gets) and calls :func:`generate` with its :class:`~app.pipeline.encoder.Encoder`.
The upstream is opened in the model's tool mode (:func:`open_in_tool_mode`) before the first byte, so a refusal
is an ordinary HTTP error; then the same :class:`~app.pipeline.driver.ChoiceDriver`
events are either streamed (:func:`~app.pipeline.streaming.sse_body`) or folded
into one body, so the two cannot disagree. What the pipeline knows of the HTTP
request comes in a :class:`~app.pipeline.context.RequestContext`; it answers
with a :data:`Reply` the HTTP layer sends.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Protocol, TypeAlias, cast

import gevent
import orjson

from statemachine import ParserConfig

from ..gateway_tools.base import GatewayToolset
from ..observability import metrics
from ..pool import Pool, PoolMember, retry_after_seconds
from ..profile import ModelProfile, model_profile
from ..settings import Settings
from ..upstreams.base import UpstreamError, UpstreamStream
from .affinity import affinity_key
from .client_watch import abandon_if_client_leaves
from .constrain import constraint_fields, resolve
from .context import RequestContext
from .driver import ChoiceDriver
from .encoder import Encoder, Usage, prompt_chars
from .gateway_loop import Again, GatewayLoop, NextGeneration, following, offering
from .native import EMPTY_STREAM, FALLBACKS, native_messages, native_tools, refuses_tools, upstream_name
from .plan import is_json_format, prompt_format, with_auto_marker
from .prompt import build_upstream_messages, example_arguments
from .reask import Reasking, checked
from .repeats import without_repeats
from .streaming import Events, SSEBody, cooperative, sse_body, tick_seconds
from .usage import KeptOutput, UsageSoFar, keeps_output

log = logging.getLogger("toolwire.pipeline.generate")

#: The Chat request's output limits, clamped to the model's ``max_output_tokens``.
OUTPUT_LIMITS = ("max_tokens", "max_completion_tokens")
#: The headers of a streamed answer (sent as ``text/event-stream``).
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

#: A generation's answer: one JSON body, or the body of an SSE stream (sent with :data:`SSE_HEADERS`).
Reply: TypeAlias = "dict[str, Any] | SSEBody"


@dataclass(frozen=True, slots=True)
class Generation:
    """One request's generation, as the endpoint planned it.

    Fields:
        profile: the client's model as the request's back end serves it (:func:`~app.profile.model_profile`).
        messages: the client's transcript as Chat messages (tool calls and results included).
        config: the parser configuration (offered tools, ``tool_choice``, policy, marker).
        fields: the other parameters the back end gets, as the Chat request sends them.
        stream: answer as an SSE stream (else one JSON body).
        n: the number of choices.
        gateway: the tools the gateway runs itself for this request, offered beside the client's (one choice
            only; :mod:`~app.pipeline.gateway_loop`).
    """

    profile: ModelProfile
    messages: list[dict[str, Any]]
    config: ParserConfig
    fields: dict[str, Any]
    stream: bool
    n: int = 1
    gateway: GatewayToolset | None = None

    @property
    def model(self) -> str:
        """The model name the client asked for."""
        return self.profile.model


class Opened(NamedTuple):
    """A back end opened in the model's tool mode (:func:`open_in_tool_mode`)."""

    stream: UpstreamStream
    config: ParserConfig
    messages: list[dict[str, Any]]
    native: bool  # the tools went as the back end's own (native mode), not taught in the prompt


def generate(generation: Generation, encoder: Encoder, context: RequestContext) -> Reply:
    """Run ``generation`` for the request ``context`` describes and answer with ``encoder``'s stream or body.

    Raises:
        UpstreamError: the upstream refused (the client got nothing yet).
    """
    limit = context.settings.stream_max_seconds
    deadline = time.monotonic() + limit if limit else None
    client = context.client_socket
    toolset = generation.gateway
    if toolset is not None:
        generation = dataclasses.replace(generation, config=offering(generation.config, toolset))
    with abandon_if_client_leaves(client), _time_limit(limit):  # the wait for the first output counts too
        opening = open_with_fallbacks if context.pool is None else open_in_pool  # (no frame more for a pool)
        (stream, config, messages, native), context, generation = opening(generation, context)
    reask = not native and _reasks(generation, config)  # (a back end given the tools enforces its own choice)
    if reask or not generation.stream or toolset is not None:
        # a call goes out whole once it checks (a gateway call is known whole before anything of it could go out)
        config = checked(config, validate=reask, examples=None if native else example_arguments(
            config, prompt_format(config), generation.messages))
    sent_chars = prompt_chars(messages)  # for a usage estimate
    kept = None
    if toolset is None and keeps_output(context.upstream):  # no usage seen from it: its tokenizer counts the
        # answer at the end (one generation's: a gateway loop's later ones are estimated)
        stream = kept = KeptOutput(stream, context.upstream, _prompt_of(generation.profile, messages, config, native))
    driver = ChoiceDriver(stream, config, n=generation.n, reasoning=generation.profile.reasoning,
                          record=context.record)
    events: ChoiceDriver | Reasking = driver
    source: UpstreamStream | Reasking = stream
    if reask:
        events = source = Reasking(driver, stream, config, _second_answer(generation, context, kept), context,
                                  hold_first=not generation.stream)
    loop = None if toolset is None else GatewayLoop(events, source, toolset, _next_generation(generation, context),
                                                    deadline=deadline, record=context.record)
    usage = UsageSoFar(loop or events, sent_chars, context.record, kept)
    # (a loop's items carry the gateway's events beside the core's: only a surface whose encoder knows them offers
    # gateway tools)
    items = events if loop is None else cast(Events, loop)
    if reask or not generation.stream or toolset is not None:  # calls held: each known whole before it goes out
        items = without_repeats(items, generation.profile.repeated_calls)

    left = max(deadline - time.monotonic(), 0.001) if deadline is not None else None
    if not generation.stream:
        with abandon_if_client_leaves(client), _time_limit(left, limit):  # one timer per request, none per chunk
            for index, event in cooperative(items):
                encoder.add(index, event)
        return encoder.body(usage())

    return stream_body(items, encoder, usage, loop or source, context, max_seconds=left)


def _reasks(generation: Generation, config: ParserConfig) -> bool:
    """Whether a call failing its check (or a forced choice unmet) is asked for again (``reask_calls``): one choice,
    tools that may be called."""
    mode = generation.profile.reask_calls
    return generation.n == 1 and config.parsing_enabled and (mode == "on" or (mode == "unstreamed" and
                                                                              not generation.stream))


def _second_answer(generation: Generation, context: RequestContext, kept: KeptOutput | None
                   ) -> Callable[[list[dict[str, Any]]], tuple[UpstreamStream, ChoiceDriver]]:
    """Opens the model's second answer, ``added`` after the transcript, under the operator's own policies (its
    output ``kept`` in place of the first's, if that was)."""
    def again(added: list[dict[str, Any]]) -> tuple[UpstreamStream, ChoiceDriver]:
        retry = dataclasses.replace(generation, messages=[*generation.messages, *added])
        stream, config, messages, native = open_in_tool_mode(retry, context)
        if kept is not None:
            stream = kept.follow(stream, _prompt_of(generation.profile, messages, config, native))
        if not generation.stream:
            config = checked(config, validate=False)
        return stream, ChoiceDriver(stream, config, reasoning=generation.profile.reasoning,
                                    record=context.record)
    return again


def _prompt_of(profile: ModelProfile, messages: list[dict[str, Any]], config: ParserConfig, native: bool
               ) -> dict[str, Any]:
    """The part of a request sent to the back end that its template makes the prompt of (the tools if native)."""
    return upstream_body(profile, messages, native_tools(config) if native else {})


def _next_generation(generation: Generation, context: RequestContext) -> Again:
    """Opens the generation after gateway calls ran, ``added`` after the transcript (:data:`Again`)."""
    assert generation.gateway is not None
    toolset = generation.gateway

    def again(added: list[dict[str, Any]], gateway: bool) -> NextGeneration:
        config = following(generation.config, toolset, gateway=gateway)
        follow = dataclasses.replace(generation, messages=[*generation.messages, *added], config=config)
        stream, config, messages, _ = open_in_tool_mode(follow, context)
        driver = ChoiceDriver(stream, checked(config, validate=False), reasoning=generation.profile.reasoning,
                              record=context.record)
        return NextGeneration(stream, driver, prompt_chars(messages))
    return again


#: The failures after which a model's next fallback back end is tried: nothing was read (a refused
#: connection), or the back end said it failed (5xx) before its first byte.
FALLS_BACK = ("connect", "server_error")


def _time_limit(seconds: float | None, limit: float | None = None) -> gevent.Timeout:
    """The timer that ends a generation after ``seconds`` (of its ``limit``, which the error names)."""
    limit = limit or seconds
    expired = UpstreamError("timeout", f"The generation went past its {limit:g}-second limit.", status=504,
                            code="stream_time_limit")
    return gevent.Timeout(seconds or None, expired)


def open_with_fallbacks(generation: Generation, context: RequestContext
                        ) -> tuple[Opened, RequestContext, Generation]:
    """:func:`open_in_tool_mode` on the request's back end, then on each of its ``fallbacks`` in turn while the
    one before refused the connection or answered 5xx; nothing has gone to the client yet. Each back end
    serves the model as its own settings say (its own profile of the model).

    Returns:
        What :func:`open_in_tool_mode` returns, the context of the back end that answered and the generation as
        it ran it (with its profile of the model).
    Raises:
        UpstreamError: the last back end tried refused (or one refused in another way).
    """
    *earlier, last = (context, *context.fallbacks)
    # Each attempt calls open_in_tool_mode itself: the wait for the back end's answer is the deepest point of a
    # request, and each Python frame below it grows every open stream's data stack (docs/upstream-client.md).
    for attempt in earlier:
        generation = _served_by(generation, attempt, context)
        try:
            return open_in_tool_mode(generation, attempt), attempt, generation
        except UpstreamError as exc:
            if exc.kind not in FALLS_BACK:
                raise
            falling_back(attempt, exc)
    generation = _served_by(generation, last, context)
    return open_in_tool_mode(generation, last), last, generation


#: The failures after which a pool's next member is tried (a refusal, a timeout, a 5xx or a 429 before the first
#: byte); the request's own time limit running out is not one.
FAILS_OVER = (*FALLS_BACK, "timeout", "rate_limited")


def open_in_pool(generation: Generation, context: RequestContext) -> tuple[Opened, RequestContext, Generation]:
    """:func:`open_in_tool_mode` on the member of the request's pool (``context.pool``) chosen for the
    generation's affinity key (holding one of its slots), then once on the next member if it failed before its
    first byte (:data:`FAILS_OVER`; it cools down), then on the model's ``fallbacks`` as
    :func:`open_with_fallbacks`; nothing has gone to the client yet.

    Returns, raises: as :func:`open_with_fallbacks`.
    """
    request = context.pool
    assert request is not None
    pool = request.pool
    members, own = pool.choose(affinity_key(request.session, generation.messages, generation.config))
    error = UpstreamError("rate_limited", f"Every back end of {generation.model} is at its limit of concurrent "
                                          "requests; retry shortly.", status=429, retry_after="1",
                          code="concurrency_limit_exceeded")
    failed = False
    for member in members:
        slot = member.backend.slots.try_acquire()
        if slot is None:  # its own upstream_max_concurrent
            continue
        backend = member.backend
        attempt = dataclasses.replace(context, settings=backend.settings, upstream=backend.upstream,
                                      upstream_name=member.name, pool=None, fallbacks=())
        served = dataclasses.replace(generation, profile=model_profile(backend.settings, generation.model))
        try:
            opened = open_in_tool_mode(served, attempt)
        except UpstreamError as exc:
            slot.release()
            if exc.kind not in FAILS_OVER or exc.code == "stream_time_limit":
                raise
            _member_failed(pool, member, exc, attempt)
            error, failed = exc, True
            continue
        request.hold(slot)
        reason = "retry" if failed else "affinity" if own and member is members[0] else "overflow"
        metrics.child(metrics.POOL_ROUTED, member.name, reason).inc()
        return opened, attempt, served
    if not context.fallbacks:
        raise error
    first, *rest = context.fallbacks
    return open_with_fallbacks(generation, dataclasses.replace(first, pool=None, fallbacks=tuple(rest)))


def _member_failed(pool: Pool, member: PoolMember, error: UpstreamError, attempt: RequestContext) -> None:
    """A pool member failed before its first byte: it cools down (or waits for its health check), counted and
    logged."""
    pool.failed(member, refused=error.kind == "connect", retry_after=retry_after_seconds(error.retry_after))
    metrics.child(metrics.POOL_FAILURES, member.name, error.kind).inc()
    falling_back(attempt, error)


def _served_by(generation: Generation, attempt: RequestContext, first: RequestContext) -> Generation:
    """``generation`` as the back end of ``attempt`` serves it: with the model's profile under its settings."""
    if attempt is first:
        return generation
    return dataclasses.replace(generation, profile=model_profile(attempt.settings, generation.model))


def falling_back(context: RequestContext, error: UpstreamError) -> None:
    """Say that the back end of ``context`` failed with ``error`` before its first byte and the next is tried."""
    log.warning("back end %s failed before its first byte (%s); trying the next", context.upstream_name,
                error.kind, extra={"fields": {"upstream": context.upstream_name, "status": error.status}})


def open_in_tool_mode(generation: Generation, context: RequestContext) -> Opened:
    """Open the request's back end (``context``'s) in the model's tool mode (docs/tool-modes.md;
    :mod:`app.pipeline.native`).

    Returns:
        The open stream, its parser configuration, the messages sent and whether they went natively.
    Raises:
        UpstreamError: the upstream refused (in ``auto`` mode: anything but a tools refusal, or the
            prompt-mode retry's refusal; the tools refusal is remembered only once that retry was taken).
    """
    settings, profile, config = context.settings, generation.profile, generation.config
    mode = profile.tool_mode
    record = context.record
    if record is not None:
        record.upstream = context.upstream_name
    refusal: UpstreamError | None = None
    if mode != "prompt":
        key = (upstream_name(context.upstream), profile.upstream_model)
        if not FALLBACKS.prompt_only(key, settings.tool_mode_fallback_seconds):
            messages = native_messages(generation.messages)
            try:
                body = upstream_body(profile, messages, {**generation.fields, **native_tools(config)})
                stream = context.upstream.open(body, request_id=context.request_id)
                stream.confirm()  # a back end that fails after its 200 headers still falls back
            except UpstreamError as exc:
                # native mode takes only a back end that cannot stream tool calls at all (its stream ends empty:
                # llama-cpp-python's chatml-function-calling) to prompt mode; auto any refusal of tools
                if not refuses_tools(exc) or (mode == "native" and exc.code != EMPTY_STREAM):
                    raise
                refusal = exc
            else:
                if record is not None:
                    record.tool_mode = "native"
                return Opened(stream, dataclasses.replace(config, marker=None) if config.marker else config, messages,
                              native=True)
    config, messages, fields = prompt_mode_request(generation, config, settings, context.upstream)
    stream = context.upstream.open(upstream_body(profile, messages, fields), request_id=context.request_id)
    if refusal is not None:
        # Remembered (for every client of this worker) only now: the same request without tools was taken,
        # so the tools were what the back end refused, not some other field of this one client's request.
        _remember_refusal(key, refusal, context)
    if record is not None:
        record.tool_mode = "prompt"
    return Opened(stream, config, messages, native=False)


def prompt_mode_request(generation: Generation, config: ParserConfig, settings: Settings, upstream: Any = None
                        ) -> tuple[ParserConfig, list[dict[str, Any]], dict[str, Any]]:
    """Prompt mode's parser configuration (its marker, if any), the messages that teach the tools and the
    back end's other fields (with the constraint of ``upstream``'s decoding,
    :mod:`~app.pipeline.constrain`; ``count_tokens`` counts these messages too)."""
    profile = generation.profile
    config = with_auto_marker(config, generation.messages, settings)
    fields, answer_format = prompt_mode_fields(generation.fields, config)
    messages = build_upstream_messages(generation.messages, config, prompt_format(config), answer_format=answer_format,
                                       manifest=profile.manifest, examples=profile.examples,
                                       system_in=profile.system_in)
    # (a back end is asked who it is only when a call may come: its model list may hang)
    way = resolve(profile.constrain_calls, upstream) if upstream is not None and config.parsing_enabled else None
    if way is not None and "response_format" not in fields and config.marker is None:
        fields = {**fields, **constraint_fields(config, way, prompt_format(config).name)}
    return config, messages, fields


def _remember_refusal(key: tuple[str, str], refusal: UpstreamError, context: RequestContext) -> None:
    FALLBACKS.remember(key)
    metrics.child(metrics.TOOL_MODE_FALLBACKS, context.model_label).inc()
    log.warning("the back end refused tools: prompt mode for %s", key[1],
                extra={"fields": {"upstream_model": key[1], "status": refusal.status}})


def prompt_mode_fields(fields: dict[str, Any], config: ParserConfig) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The back end's fields in prompt mode, and the JSON ``response_format`` the prompt teaches instead of them.

    A back end that enforces ``response_format`` (vLLM's guided decoding, llama.cpp's grammars, Ollama's
    ``format``) makes the answer JSON from its first token, so a call block could never be written. While a
    call may come (tools offered, ``tool_choice`` not ``none``) the format is taught in the prompt and not
    sent; when none can, the back end gets it as the client sent it (``strict`` included).
    """
    response_format = fields.get("response_format")
    if not config.parsing_enabled or not is_json_format(response_format):
        return fields, None
    return {key: value for key, value in fields.items() if key != "response_format"}, response_format


def upstream_body(profile: ModelProfile, messages: list[dict[str, Any]], fields: dict[str, Any]) -> dict[str, Any]:
    """The back end's request for ``messages`` to the model of ``profile``.

    ``fields`` are the other request parameters the back end gets (an output limit above the model's
    ``max_output_tokens`` clamped to it); it is always asked for a stream with usage (a non-streaming
    answer is accumulated from it).
    """
    body = {**fields, "model": profile.upstream_model, "messages": messages, "stream": True,
            "stream_options": {"include_usage": True}}
    limit = profile.max_output_tokens
    if limit:
        for key in OUTPUT_LIMITS:
            if isinstance(body.get(key), int) and body[key] > limit:
                body[key] = limit
    return body


class Paced(Protocol):
    """What a streamed body needs of the upstream stream behind its events (an HTTP one also has ``wait``)."""

    def pause_every(self, tick: float | None) -> None:
        """Pause at least every ``tick`` seconds (``None``: never)."""

    def close(self) -> None:
        """Close the stream."""


def stream_body(events: Events, encoder: Encoder, usage: Callable[[], Usage], stream: Paced,
                context: RequestContext, *, max_seconds: float | None) -> SSEBody:
    """The SSE body streaming ``events`` (made from ``stream``) as ``encoder``'s frames for at most
    ``max_seconds`` more, with keep-alives unless the client opted out.

    ``stream`` is asked for pauses, which ``events`` passes on; the rest is
    :func:`~app.pipeline.streaming.sse_body`'s.
    """
    settings = context.settings
    heartbeat = settings.heartbeat_seconds if context.keepalive else None
    stream.pause_every(tick_seconds(heartbeat, max_seconds))
    return sse_body(events, encoder, usage, heartbeat_seconds=heartbeat, on_abandon=stream.close,
                    max_seconds=max_seconds, limit_seconds=settings.stream_max_seconds, client=context.client_socket,
                    write_timeout=settings.stream_write_timeout_seconds, record=context.record,
                    wait=getattr(stream, "wait", None))  # an HTTP stream's (the others wait in their own way)
