"""The one generation path of both endpoints: plan → prompt → upstream → driver → encoder.

An endpoint validates its request, turns it into a :class:`Generation` (the
parser configuration, the client's transcript as Chat messages, the fields the
back end gets) and calls :func:`generate` with its :class:`~app.pipeline.encoder.Encoder`.
The upstream is opened in the model's tool mode (:func:`open_in_tool_mode`) before the first byte, so a refusal
is an ordinary HTTP error; then the same :class:`~app.pipeline.driver.ChoiceDriver`
events are either streamed (:func:`~app.pipeline.streaming.sse_body`) or folded
into one body, so the two cannot disagree.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

import gevent
import orjson
from flask import Response, current_app, request

from statemachine import ParserConfig

from ..observability import metrics
from ..observability import record as observe
from ..state import current_state
from ..upstreams.base import UpstreamError, UpstreamStream
from .client_watch import abandon_if_client_leaves
from .driver import ChoiceDriver
from .encoder import Encoder, Usage, usage_of
from .native import FALLBACKS, native_messages, native_tools, refuses_tools, upstream_name
from .plan import prompt_format, with_auto_marker
from .prompt import build_upstream_messages
from .streaming import Events, cooperative, sse_body, tick_seconds

log = logging.getLogger("toolwire.pipeline.generate")

#: The Chat request's output limits, clamped to the model's ``max_output_tokens``.
OUTPUT_LIMITS = ("max_tokens", "max_completion_tokens")
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@dataclass(frozen=True, slots=True)
class Generation:
    """One request's generation, as the endpoint planned it.

    Fields:
        model: the model name the client asked for (mapped to the upstream's by the settings).
        messages: the client's transcript as Chat messages (tool calls and results included).
        config: the parser configuration (offered tools, ``tool_choice``, policy, marker).
        fields: the other parameters the back end gets, as the Chat request sends them.
        stream: answer as an SSE stream (else one JSON body).
        n: the number of choices.
    """

    model: str
    messages: list[dict[str, Any]]
    config: ParserConfig
    fields: dict[str, Any]
    stream: bool
    n: int = 1


def generate(generation: Generation, encoder: Encoder) -> Response:
    """Run ``generation`` and answer with ``encoder``'s stream or body.

    Raises:
        UpstreamError: the upstream refused (the client got nothing yet).
    """
    limit = current_state().settings.stream_max_seconds
    deadline = time.monotonic() + limit if limit else None
    client = request.environ.get("gunicorn.socket")
    with abandon_if_client_leaves(client), _time_limit(limit):  # the wait for the first output counts too
        stream, config, messages = open_in_tool_mode(generation)
    prompt_chars = sum(_content_chars(message.get("content")) for message in messages)  # for a usage estimate
    driver = ChoiceDriver(stream, config, n=generation.n,
                          reasoning=current_state().settings.reasoning_for(generation.model))

    def usage() -> Usage:
        return usage_of(driver.usage, prompt_chars, driver.output_chars)

    left = max(deadline - time.monotonic(), 0.001) if deadline is not None else None
    if not generation.stream:
        with abandon_if_client_leaves(client), _time_limit(left, limit):  # one timer per request, none per chunk
            for index, event in cooperative(driver):
                encoder.add(index, event)
        return current_app.json.response(encoder.body(usage()))

    return sse_response(driver, encoder, usage, stream, max_seconds=left)


def _time_limit(seconds: float | None, limit: float | None = None) -> gevent.Timeout:
    """The timer that ends a generation after ``seconds`` (of its ``limit``, which the error names)."""
    limit = limit or seconds
    expired = UpstreamError("timeout", f"The generation went past its {limit:g}-second limit.", status=504,
                            code="stream_time_limit")
    return gevent.Timeout(seconds or None, expired)


def open_in_tool_mode(generation: Generation) -> tuple[UpstreamStream, ParserConfig, list[dict[str, Any]]]:
    """Open the upstream in the model's tool mode (docs/tool-modes.md; :mod:`app.pipeline.native`).

    Returns:
        The open stream, the parser configuration for it (no marker in native mode: the model never
        saw one), and the messages sent.
    Raises:
        UpstreamError: the upstream refused (in ``auto`` mode: anything but a tools refusal, or the
            prompt-mode retry's refusal).
    """
    state = current_state()
    settings = state.settings
    model, config = generation.model, generation.config
    mode = settings.tool_mode_for(model)
    record = observe.current()
    if mode != "prompt":
        key = (upstream_name(state.upstream), settings.upstream_model(model))
        if mode == "native" or not FALLBACKS.prompt_only(key, settings.tool_mode_fallback_seconds):
            messages = native_messages(generation.messages)
            try:
                stream = open_upstream(model, messages, {**generation.fields, **native_tools(config)})
            except UpstreamError as exc:
                if mode == "native" or not refuses_tools(exc):
                    raise
                FALLBACKS.remember(key)
                metrics.child(metrics.TOOL_MODE_FALLBACKS, record.model_label if record else "other").inc()
                log.warning("the back end refused tools: prompt mode for %s", key[1],
                            extra={"fields": {"upstream_model": key[1], "status": exc.status}})
            else:
                if record is not None:
                    record.tool_mode = "native"
                return stream, dataclasses.replace(config, marker=None) if config.marker else config, messages
    config = with_auto_marker(config, generation.messages, settings)
    messages = build_upstream_messages(generation.messages, config, prompt_format(config))
    stream = open_upstream(model, messages, generation.fields)
    if record is not None:
        record.tool_mode = "prompt"
    return stream, config, messages


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    return len(orjson.dumps(content)) if content else 0  # content parts (native mode keeps them)


def open_upstream(model: str, messages: list[dict[str, Any]], fields: dict[str, Any]) -> UpstreamStream:
    """Open the upstream's answer to ``messages`` for the client's ``model``.

    ``fields`` are the other request parameters the back end gets (an output limit above the model's
    ``max_output_tokens`` clamped to it); it is always asked for a stream with usage (a non-streaming
    answer is accumulated from it).

    Raises:
        UpstreamError: the upstream refused (an ordinary HTTP error: the client got nothing yet).
    """
    state = current_state()
    body = {**fields, "model": state.settings.upstream_model(model), "messages": messages, "stream": True,
            "stream_options": {"include_usage": True}}
    limit = state.settings.max_output_tokens_for(model)
    if limit:
        for key in OUTPUT_LIMITS:
            if isinstance(body.get(key), int) and body[key] > limit:
                body[key] = limit
    return state.upstream.open(body, request_id=observe.current_request_id())


def wants_keepalive() -> bool:
    """``False`` when the client opted out of keep-alive comments (``X-No-Keepalive: 1``)."""
    return request.headers.get("X-No-Keepalive", "").strip().lower() not in ("1", "true", "yes")


def sse_response(events: Events, encoder: Encoder, usage: Callable[[], Usage], stream: UpstreamStream, *,
                 max_seconds: float | None) -> Response:
    """The ``text/event-stream`` response streaming ``events`` (made from ``stream``) as ``encoder``'s frames
    for at most ``max_seconds`` more, with keep-alives unless the client opted out.

    ``stream`` is asked for pauses, which ``events`` passes on; the rest is
    :func:`~app.pipeline.streaming.sse_body`'s.
    """
    settings = current_state().settings
    heartbeat = settings.heartbeat_seconds if wants_keepalive() else None
    stream.pause_every(tick_seconds(heartbeat, max_seconds))
    body = sse_body(events, encoder, usage, heartbeat_seconds=heartbeat, on_abandon=stream.close,
                    max_seconds=max_seconds, client=request.environ.get("gunicorn.socket"),
                    write_timeout=settings.stream_write_timeout_seconds)
    return Response(body, mimetype="text/event-stream", headers=SSE_HEADERS)
