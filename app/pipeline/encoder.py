"""The encoder protocol: what an endpoint gives the pipeline to put core events on its wire.

The pipeline (:func:`app.pipeline.generate.generate`) runs one generation and
hands every core event to an :class:`Encoder`: the Chat Completions encoder
(``app.chat.encoder.ChatEncoder``) and the Responses encoder
(``app.responses.encoder.ResponsesWireEncoder``) and the Messages encoder
(``app.messages.encoder.MessagesEncoder``) implement it. Streaming calls
:meth:`~Encoder.opening`, then :meth:`~Encoder.frames` per event, then
:meth:`~Encoder.closing` — or, when the generation fails after the first
byte, :meth:`~Encoder.error_frames` instead of ``closing``. Not streaming
calls :meth:`~Encoder.add` per event, then :meth:`~Encoder.body` once.

Usage is one decision for every endpoint (:func:`usage_of`): the upstream's
token counts when it sent them, else an estimate of about four characters a
token.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Protocol

import orjson

from statemachine import Event

from ..errors import ApiError

#: A Chat Completions ``usage`` object (``prompt_tokens``, ``completion_tokens``, ``total_tokens``, and the
#: upstream's ``*_details`` when it sent them); the Responses encoder converts it to its own shape.
Usage = Mapping[str, Any]

#: Characters per token of the usage estimate.
CHARS_PER_TOKEN = 4


class Encoder(Protocol):
    """One response's encoding: SSE frames while streaming, or one body.

    Frames are whole, encoded SSE events (bytes) ready to send. An encoder
    serves one response, streamed or not, never both.
    """

    #: The bytes sent while nothing else is (the heartbeat), e.g. an SSE comment.
    keepalive: bytes

    def opening(self, usage: Usage) -> Iterable[bytes]:
        """The frames sent before any event (may be none); ``usage`` is the prompt's, before any output."""
        ...

    def frames(self, index: int, event: Event) -> Iterable[bytes]:
        """The frames that carry ``event`` of choice ``index`` (none for an event the wire does not show).

        An encoder may also have ``one_frame(index, event) -> bytes | None`` (optional: :class:`~app.pipeline.streaming.SSEBody` looks for
        it once a stream): the one frame of a common event (a text or argument fragment), or ``None`` when
        ``frames`` must say; a stream's every chunk then costs one call and no list."""
        ...

    def closing(self, usage: Usage) -> Iterable[bytes]:
        """The frames that end a complete stream (the finish, usage and terminal frames)."""
        ...

    def error_frames(self, error: ApiError, usage: Usage) -> bytes:
        """The bytes that end a stream the generation failed in, after ``error`` happened mid-stream."""
        ...

    def add(self, index: int, event: Event) -> None:
        """Fold one event of choice ``index`` into the non-streaming body."""
        ...

    def body(self, usage: Usage) -> dict[str, Any]:
        """The non-streaming response body, after every event was added."""
        ...


def usage_object(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """A Chat ``usage`` object."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def prompt_chars(messages: list[dict[str, Any]]) -> int:
    """The characters of a Chat request's ``messages`` that a usage estimate counts: each content (parts as their
    JSON) and each turn's tool calls as their JSON."""
    chars = 0
    for message in messages:
        content = message.get("content")
        chars += len(content) if isinstance(content, str) else len(orjson.dumps(content)) if content else 0
        if message.get("tool_calls"):
            chars += len(orjson.dumps(message["tool_calls"]))
    return chars


def usage_of(upstream_usage: Mapping[str, Any] | None, prompt_chars: int, output_chars: int) -> Usage:
    """The upstream's usage when it has both token counts, else an estimate from the characters sent and made.

    Args:
        upstream_usage: the upstream's last usage object, if any.
        prompt_chars: characters of the prompt sent upstream.
        output_chars: characters of visible text and call arguments produced.
    """
    usage = upstream_usage or {}
    if isinstance(usage.get("prompt_tokens"), int) and isinstance(usage.get("completion_tokens"), int):
        return usage
    return usage_object(math.ceil(prompt_chars / CHARS_PER_TOKEN), math.ceil(output_chars / CHARS_PER_TOKEN))
