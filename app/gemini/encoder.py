"""Core events → Gemini's ``GenerateContentResponse``: the stream's chunks and the non-streamed answer.

:class:`CandidateBuilder` turns each core event into the parts a chunk shows and keeps the candidate's parts,
so the stream and the body cannot disagree. A chunk is a whole ``GenerateContentResponse`` with one candidate
whose ``content`` holds the new parts: ``text`` pieces, ``thought: true`` text for reasoning (when the
request's ``thinkingConfig.includeThoughts`` is on), and each ``functionCall`` whole (``id``, ``name``,
``args`` as an object) once its arguments are complete, as Gemini sends calls. The last chunk has no new
parts, the ``finishReason`` and ``usageMetadata``; every chunk carries ``modelVersion`` and ``responseId``.
The answer's body is the same response with the parts joined (adjacent text of one kind merged).

:class:`GeminiEncoder` frames the chunks as ``?alt=sse`` asks: ``data: {…}`` SSE events, or else the pieces
of one JSON array (``[``, chunks separated by ``,``, ``]``). Its heartbeat is a line break, which both framings
skip (an SSE comment would reach the Python SDK as a chunk); a failure after the first byte is one last chunk
holding Google's error envelope, which both SDKs raise.
"""

from __future__ import annotations

from typing import Any, assert_never

import orjson

from statemachine import (ChoiceFinished, Event, ReasoningDelta, TextDelta, ToolCallArgumentsDelta, ToolCallEnded,
                          ToolCallInputDelta, ToolCallNote, ToolCallStarted)

from ..errors import ApiError
from ..pipeline.encoder import Usage
from .errors import error_body

#: Core finish reasons → Gemini's (a call ends a turn with ``STOP``, as Gemini's own calls do).
FINISH_REASONS = {"stop": "STOP", "tool_calls": "STOP", "function_call": "STOP", "length": "MAX_TOKENS",
                  "content_filter": "SAFETY"}


def usage_metadata(usage: Usage) -> dict[str, int]:
    """A Chat ``usage`` as Gemini's ``usageMetadata``: reasoning tokens as ``thoughtsTokenCount`` (not in
    ``candidatesTokenCount``), cache reads as ``cachedContentTokenCount``."""
    prompt, completion = int(usage["prompt_tokens"]), int(usage["completion_tokens"])
    out = {"promptTokenCount": prompt, "candidatesTokenCount": completion, "totalTokenCount": prompt + completion}
    thoughts = _detail(usage, "completion_tokens_details", "reasoning_tokens")
    if thoughts:
        out.update(candidatesTokenCount=max(completion - thoughts, 0), thoughtsTokenCount=thoughts)
    cached = _detail(usage, "prompt_tokens_details", "cached_tokens")
    if cached:
        out["cachedContentTokenCount"] = cached
    return out


def _detail(usage: Usage, group: str, key: str) -> int:
    details = usage.get(group)
    value = details.get(key) if isinstance(details, dict) else None
    return value if isinstance(value, int) else 0


class CandidateBuilder:
    """One candidate: the parts each core event shows, and the response they add up to.

    Args:
        response_id: the ``responseId``.
        model: the model name shown as ``modelVersion``.
        show_thoughts: reasoning becomes ``thought`` parts (else it is not shown).
    """

    def __init__(self, response_id: str, model: str, *, show_thoughts: bool = False):
        self.response_id = response_id
        self.model = model
        self.show_thoughts = show_thoughts
        self.parts: list[dict[str, Any]] = []
        self.finish_reason: str | None = None

    def feed(self, event: Event) -> list[dict[str, Any]]:
        """The new parts of one core event (none for what the wire does not show)."""
        if isinstance(event, TextDelta):
            return self._add({"text": event.text})
        if isinstance(event, ReasoningDelta):
            return self._add({"text": event.text, "thought": True}) if self.show_thoughts else []
        if isinstance(event, ToolCallEnded):
            return self._add({"functionCall": {"id": event.call_id, "name": event.name,
                                               "args": _arguments(event.arguments)}})
        if isinstance(event, ChoiceFinished):
            self.finish_reason = FINISH_REASONS.get(event.finish_reason, "STOP")
            return []
        if isinstance(event, (ToolCallStarted, ToolCallArgumentsDelta, ToolCallNote, ToolCallInputDelta)):
            return []  # a call is shown whole at its end; notes are not on the wire; no freeform tools here
        assert_never(event)

    def chunk(self, parts: list[dict[str, Any]]) -> dict[str, Any]:
        """A stream chunk showing ``parts``."""
        return self._response({"content": {"role": "model", "parts": parts}, "index": 0})

    def last_chunk(self, usage: Usage) -> dict[str, Any]:
        """The stream's last chunk: no new parts, the finish reason and the usage."""
        return {**self._response({"content": {"role": "model", "parts": []}, "finishReason": self._finish(),
                                  "index": 0}), "usageMetadata": usage_metadata(usage)}

    def body(self, usage: Usage) -> dict[str, Any]:
        """The whole answer."""
        return {**self._response({"content": {"role": "model", "parts": self.parts}, "finishReason": self._finish(),
                                  "index": 0}), "usageMetadata": usage_metadata(usage)}

    def _add(self, part: dict[str, Any]) -> list[dict[str, Any]]:
        last = self.parts[-1] if self.parts else None
        if "text" in part and last is not None and "text" in last and last.get("thought") == part.get("thought"):
            last["text"] += part["text"]
        else:
            self.parts.append(dict(part))
        return [part]

    def _finish(self) -> str:
        return self.finish_reason or "STOP"

    def _response(self, candidate: dict[str, Any]) -> dict[str, Any]:
        return {"candidates": [candidate], "modelVersion": self.model, "responseId": self.response_id}


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


class GeminiEncoder:
    """The Gemini :class:`~app.pipeline.encoder.Encoder`: one candidate as SSE events (``sse``) or as one JSON
    array's pieces, or as one response."""

    keepalive = b"\n"

    def __init__(self, builder: CandidateBuilder, *, sse: bool):
        self._builder = builder
        self._sse = sse
        self._sent = False

    def opening(self, usage: Usage) -> list[bytes]:
        """Nothing for SSE; the array's ``[``."""
        return [] if self._sse else [b"["]

    def frames(self, index: int, event: Event) -> list[bytes]:
        """The chunk of one core event's new parts, if it has any."""
        parts = self._builder.feed(event)
        return [self._frame(self._builder.chunk(parts))] if parts else []

    def closing(self, usage: Usage) -> list[bytes]:
        """The last chunk (and the array's ``]``)."""
        return [self._frame(self._builder.last_chunk(usage)), *self._end()]

    def error_frames(self, error: ApiError, usage: Usage) -> bytes:
        """Google's error envelope as the last chunk."""
        return b"".join([self._frame(error_body(error)), *self._end()])

    def add(self, index: int, event: Event) -> None:
        """Fold one event into the response."""
        self._builder.feed(event)

    def body(self, usage: Usage) -> dict[str, Any]:
        """The finished response."""
        return self._builder.body(usage)

    def _frame(self, chunk: dict[str, Any]) -> bytes:
        data = orjson.dumps(chunk)
        if self._sse:
            return b"data: " + data + b"\r\n\r\n"
        separator, self._sent = (b",\r\n" if self._sent else b""), True
        return separator + data

    def _end(self) -> list[bytes]:
        return [] if self._sse else [b"]"]
