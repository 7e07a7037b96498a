"""Core events → Ollama's NDJSON stream and its one-object answer, for ``/api/chat`` and ``/api/generate``.

A stream is one JSON object a line (``application/x-ndjson``): a piece of the message per visible event
(``done: false``), then one last object with ``done: true``, ``done_reason`` and the counts and durations
(nanoseconds). Text goes out as ``message.content`` (``response`` for ``/api/generate``), reasoning as
``message.thinking`` (``thinking``) when the request did not turn ``think`` off, and a tool call as one whole
``message.tool_calls`` entry once its arguments are complete: Ollama's clients read a call's ``arguments`` as an
object and never join fragments. Not streamed, the same events make one object holding the whole message.

A failure after the first line is one ``{"error": "..."}`` line, as Ollama ends a stream it cannot finish
(its libraries raise on it). The heartbeat is a single space: JSON parsers skip it before the next line, where
an empty line would be a line they fail to parse.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

import orjson

from statemachine import ChoiceFinished, Event, ReasoningDelta, TextDelta, ToolCallEnded

from ..errors import ApiError
from ..pipeline.encoder import Usage

#: The ``Content-Type`` of a streamed answer.
NDJSON = "application/x-ndjson"
#: Core finish reasons → Ollama's ``done_reason`` (a tool call ends with ``stop``, as Ollama's does).
DONE_REASONS = {"length": "length"}


def line(obj: dict[str, Any]) -> bytes:
    """One NDJSON line."""
    return orjson.dumps(obj) + b"\n"


def created_at() -> str:
    """Now, as Ollama writes ``created_at`` (RFC 3339, UTC, microseconds)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def tool_call(event: ToolCallEnded, position: int) -> dict[str, Any]:
    """A finished call as Ollama's ``tool_calls`` entry: its arguments an object (``{}`` for arguments that are
    not one, which the core already reported as invalid)."""
    try:
        arguments = orjson.loads(event.arguments) if event.arguments else {}
    except orjson.JSONDecodeError:
        arguments = {}
    return {"id": event.call_id, "function": {"index": position, "name": event.name,
                                              "arguments": arguments if isinstance(arguments, dict) else {}}}


class OllamaEncoder:
    """The :class:`~app.pipeline.encoder.Encoder` of one ``/api/chat`` (``chat=True``) or ``/api/generate``
    answer.

    Args:
        model: the model name shown to the client.
        chat: answer as ``/api/chat`` (a ``message``) rather than ``/api/generate`` (``response``).
        show_thinking: reasoning is shown (``think`` was not ``false``).
    """

    keepalive = b" "
    __slots__ = ("_model", "_chat", "_show_thinking", "_started", "_first_output", "_content", "_thinking", "_calls",
                 "_call_count", "_done_reason")

    def __init__(self, model: str, *, chat: bool, show_thinking: bool = True):
        self._model = model
        self._chat = chat
        self._show_thinking = show_thinking
        self._started = time.monotonic_ns()
        self._first_output: int | None = None
        self._content: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[dict[str, Any]] = []
        self._call_count = 0
        self._done_reason = "stop"

    def opening(self, usage: Usage) -> list[bytes]:
        """Nothing: Ollama's first line is the first piece of the answer."""
        return []

    def frames(self, index: int, event: Event) -> list[bytes]:
        """The line of one core event (none for what Ollama's wire does not show)."""
        piece = self._piece(event)
        return [] if piece is None else [line(self._object(piece, done=False))]

    def closing(self, usage: Usage) -> list[bytes]:
        """The last line: ``done: true``, ``done_reason``, the counts and durations."""
        return [line(self._final(usage, {}))]

    def error_frames(self, error: ApiError, usage: Usage) -> bytes:
        """``{"error": "..."}``: the line Ollama ends a failed stream with."""
        return line({"error": error.message})

    def add(self, index: int, event: Event) -> None:
        """Fold one event into the answer."""
        piece = self._piece(event)
        if piece is not None:
            for key, value in piece.items():
                if key == "tool_calls":
                    self._calls += value
                else:
                    (self._content if key in ("content", "response") else self._thinking).append(value)

    def body(self, usage: Usage) -> dict[str, Any]:
        """The whole answer as one object."""
        text_key = "content" if self._chat else "response"
        whole: dict[str, Any] = {text_key: "".join(self._content)}
        if self._thinking:
            whole["thinking"] = "".join(self._thinking)
        if self._calls:
            whole["tool_calls"] = self._calls
        return self._final(usage, whole)

    def _piece(self, event: Event) -> dict[str, Any] | None:
        """What one event adds to the answer, keyed as the wire names it, or ``None``."""
        if isinstance(event, TextDelta):
            self._output_started()
            return {"content" if self._chat else "response": event.text}
        if isinstance(event, ReasoningDelta):
            self._output_started()
            return {"thinking": event.text} if self._show_thinking else None
        if isinstance(event, ToolCallEnded):
            self._output_started()
            self._call_count += 1
            return {"tool_calls": [tool_call(event, self._call_count - 1)]} if self._chat else None
        if isinstance(event, ChoiceFinished):
            self._done_reason = DONE_REASONS.get(event.finish_reason, "stop")
        return None

    def _output_started(self) -> None:
        if self._first_output is None:
            self._first_output = time.monotonic_ns()

    def _object(self, piece: dict[str, Any], *, done: bool) -> dict[str, Any]:
        """An answer object around ``piece`` (``message`` for chat, top-level fields for generate)."""
        if self._chat:
            return {"model": self._model, "created_at": created_at(),
                    "message": {"role": "assistant", "content": "", **piece}, "done": done}
        return {"model": self._model, "created_at": created_at(), "response": "", **piece, "done": done}

    def _final(self, usage: Usage, whole: dict[str, Any]) -> dict[str, Any]:
        ended = time.monotonic_ns()
        first = self._first_output or ended
        final = self._object(whole, done=True)
        final.update(done_reason=self._done_reason, total_duration=ended - self._started, load_duration=0,
                     prompt_eval_count=int(usage["prompt_tokens"]), prompt_eval_duration=first - self._started,
                     eval_count=int(usage["completion_tokens"]), eval_duration=ended - first)
        return final
