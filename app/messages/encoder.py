"""Core events → the Anthropic Messages stream (``event:`` + ``data:`` frames) and the non-streamed message.

:class:`MessageBuilder` turns each core event into Anthropic's stream events and keeps the message's
content blocks, so the stream and the body cannot disagree. The stream is exactly Anthropic's:
``message_start`` (then a ``ping``), per content block in index order ``content_block_start`` →
deltas of the block's kind → ``content_block_stop``, one ``message_delta`` (``stop_reason``,
``usage``), ``message_stop``; ``ping`` frames are the heartbeat, and a failure after the first byte is
``event: error``. Blocks are one at a time: ``text`` (``text_delta``), ``thinking`` (``thinking_delta``,
when the request's ``thinking`` is on and shown), ``tool_use`` (``input: {}`` first, then
``input_json_delta`` pieces that concatenate to the input's JSON). A call of a web tool the gateway ran
(:mod:`.web_blocks`) is a ``server_tool_use`` block streamed as a ``tool_use`` is, then its result block whole
in its ``content_block_start``; ``usage.server_tool_use`` counts the searches and fetches that ran.

The core's call ids (``call_…``) are shown as ``toolu_…``; the ids only pair a ``tool_use`` with the
``tool_result`` the client sends back, which the flattening labels with whatever id it carries.
"""

from __future__ import annotations

from typing import Any, assert_never

import orjson

from statemachine import (ChoiceFinished, Event, ReasoningDelta, TextDelta, ToolCallArgumentsDelta, ToolCallEnded,
                          ToolCallInputDelta, ToolCallNote, ToolCallStarted)

from ..errors import ApiError
from ..gateway_tools.base import GatewayApprovalRequested, GatewayCallFinished, GatewayCallStarted, GatewayEvent
from ..pipeline.driver import FinishedAtStopSequence
from ..pipeline.encoder import Usage
from .errors import error_body
from .web_blocks import USAGE_KEYS, ran, server_tool_use, tool_result

#: Core finish reasons → Anthropic stop reasons.
STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens",
                "content_filter": "refusal"}
PING = b'event: ping\ndata: {"type":"ping"}\n\n'


def encode_event(event: dict[str, Any]) -> bytes:
    """One SSE frame: ``event: <type>``, then the event as compact JSON."""
    return b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


def messages_usage(usage: Usage) -> dict[str, int]:
    """A Chat ``usage`` as Anthropic's: input tokens not read from the back end's cache, cache reads, output."""
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = cached if isinstance(cached, int) else 0
    return {"input_tokens": max(int(usage["prompt_tokens"]) - cached, 0), "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached, "output_tokens": int(usage["completion_tokens"])}


class _Block:
    """The open content block: its kind, its ``content`` entry, its text or input pieces."""

    __slots__ = ("kind", "head", "pieces")

    def __init__(self, kind: str, head: dict[str, Any]):
        self.kind = kind
        self.head = head
        self.pieces: list[str] = []

    def done(self) -> dict[str, Any]:
        """The finished block as ``content`` holds it."""
        joined = "".join(self.pieces)
        if self.kind in ("tool_use", "server_tool_use"):
            try:
                value = orjson.loads(joined) if joined else {}
            except orjson.JSONDecodeError:
                value = {}
            return {**self.head, "input": value if isinstance(value, dict) else {}}
        return {**self.head, self.kind: joined}


class MessageBuilder:
    """One message: the stream events of each core event, and the message they add up to.

    Args:
        message_id: the ``msg_…`` id.
        model: the model name shown to the client.
        show_thinking: reasoning becomes ``thinking`` blocks (else it is not shown).
        stop_sequences: the request's; the one of them the back end says ended the answer is its
            ``stop_sequence`` (``stop_reason: "stop_sequence"``).
    """

    def __init__(self, message_id: str, model: str, *, show_thinking: bool = False,
                 stop_sequences: list[str] | None = None):
        self._message: dict[str, Any] = {"id": message_id, "type": "message", "role": "assistant", "model": model,
                                         "content": [], "stop_reason": None, "stop_sequence": None}
        self._show_thinking = show_thinking
        self._stop_sequences = stop_sequences or ()
        self._open: _Block | None = None
        self._server_uses: dict[str, int] | None = None  # the web tools' runs, once one was called

    def start(self, usage: Usage) -> dict[str, Any]:
        """``message_start``, with the prompt's token count so far."""
        return {"type": "message_start",
                "message": {**self._message, "usage": {**messages_usage(usage), "output_tokens": 0}}}

    def feed(self, event: Event | GatewayEvent) -> list[dict[str, Any]]:
        """The stream events of one core or gateway event (none for what the wire does not show)."""
        if isinstance(event, TextDelta):  # isinstance: as fast as a class check for these final classes
            out = self._open_block("text", {"type": "text", "text": ""})
            out.append(self._piece("text_delta", "text", event.text))
            return out
        if isinstance(event, ToolCallArgumentsDelta):  # the call's tool_use block is the open one
            return [self._piece("input_json_delta", "partial_json", event.fragment)]
        if isinstance(event, ReasoningDelta):
            if not self._show_thinking:
                return []
            out = self._open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            out.append(self._piece("thinking_delta", "thinking", event.text))
            return out
        if isinstance(event, ToolCallStarted):
            head = {"type": "tool_use", "id": "toolu_" + event.call_id.removeprefix("call_"), "name": event.name}
            out = self._close()
            self._open = _Block("tool_use", head)
            out.append(self._start({**head, "input": {}}))
            return out
        if isinstance(event, ChoiceFinished):
            self._message["stop_reason"] = STOP_REASONS.get(event.finish_reason, "end_turn")
            if isinstance(event, FinishedAtStopSequence) and event.stop_sequence in self._stop_sequences:
                self._message.update(stop_reason="stop_sequence", stop_sequence=event.stop_sequence)
            return self._close()
        if isinstance(event, (ToolCallEnded, ToolCallNote, ToolCallInputDelta)):
            # a call's end shows in the next block or the finish; notes are not on the wire; no freeform tools here
            return []
        if isinstance(event, GatewayCallStarted):
            block = server_tool_use(event)
            out = self._close()
            self._open = _Block("server_tool_use", {key: value for key, value in block.items() if key != "input"})
            out.append(self._start({**block, "input": {}}))
            out.append(self._piece("input_json_delta", "partial_json", event.arguments))
            return out + self._close()
        if isinstance(event, GatewayCallFinished):
            uses = self._server_uses = self._server_uses or dict.fromkeys(USAGE_KEYS.values(), 0)
            uses[USAGE_KEYS.get(event.tool.kind, "web_search_requests")] += ran(event)
            return self._whole(tool_result(event))
        if isinstance(event, GatewayApprovalRequested):  # (no Messages tool asks for approval)
            return []
        assert_never(event)

    def finish(self, usage: Usage) -> list[dict[str, Any]]:
        """The open block's stop, ``message_delta`` (stop reason, usage) and ``message_stop``."""
        out = self._close()
        if self._message["stop_reason"] is None:
            self._message["stop_reason"] = "end_turn"
        self._message["usage"] = messages_usage(usage)
        if self._server_uses is not None:
            self._message["usage"]["server_tool_use"] = dict(self._server_uses)
        out.append({"type": "message_delta",
                    "delta": {"stop_reason": self._message["stop_reason"],
                              "stop_sequence": self._message["stop_sequence"]},
                    "usage": self._message["usage"]})
        out.append({"type": "message_stop"})
        return out

    def message(self) -> dict[str, Any]:
        """The message (complete after :meth:`finish`)."""
        return self._message

    def _open_block(self, kind: str, shown: dict[str, Any]) -> list[dict[str, Any]]:
        """The events that make a ``kind`` block the open one (none when it is): the open block's stop, the
        new block's start (``shown``: its first ``content_block``)."""
        if self._open is not None and self._open.kind == kind:
            return []
        out = self._close()
        self._open = _Block(kind, {k: v for k, v in shown.items() if k != kind})
        out.append(self._start(shown))
        return out

    def _whole(self, block: dict[str, Any]) -> list[dict[str, Any]]:
        """The events of a block given whole in its start (a server tool's result)."""
        out = self._close()
        out.append(self._start(block))
        out.append({"type": "content_block_stop", "index": len(self._message["content"])})
        self._message["content"].append(block)
        return out

    def _start(self, shown: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_start", "index": len(self._message["content"]), "content_block": shown}

    def _piece(self, delta_type: str, key: str, piece: str) -> dict[str, Any]:
        """The delta of one piece of the open block's text or input."""
        assert self._open is not None, "a piece needs an open block"
        self._open.pieces.append(piece)
        return {"type": "content_block_delta", "index": len(self._message["content"]),
                "delta": {"type": delta_type, key: piece}}

    def _close(self) -> list[dict[str, Any]]:
        block, self._open = self._open, None
        if block is None:
            return []
        index = len(self._message["content"])
        self._message["content"].append(block.done())
        return [{"type": "content_block_stop", "index": index}]


class MessagesEncoder:
    """The Messages :class:`~app.pipeline.encoder.Encoder`: one choice as Anthropic's stream, or one message."""

    keepalive = PING

    def __init__(self, builder: MessageBuilder):
        self._builder = builder

    def opening(self, usage: Usage) -> list[bytes]:
        """``message_start``, then a ``ping`` as Anthropic sends one."""
        return [encode_event(self._builder.start(usage)), PING]

    def frames(self, index: int, event: Event | GatewayEvent) -> list[bytes]:
        """The frames of one core or gateway event."""
        return [encode_event(out) for out in self._builder.feed(event)]

    def closing(self, usage: Usage) -> list[bytes]:
        """The open block's stop, ``message_delta`` and ``message_stop``."""
        return [encode_event(out) for out in self._builder.finish(usage)]

    def error_frames(self, error: ApiError, usage: Usage) -> bytes:
        """``event: error`` with Anthropic's error envelope (the SDK raises on it)."""
        return encode_event(error_body(error))

    def add(self, index: int, event: Event | GatewayEvent) -> None:
        """Fold one event into the message."""
        self._builder.feed(event)

    def body(self, usage: Usage) -> dict[str, Any]:
        """The finished message."""
        self._builder.finish(usage)
        return self._builder.message()
