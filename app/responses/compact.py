"""``POST /responses/compact``: a summarising generation over a conversation, answered as OpenAI's compacted
response (``object: "response.compaction"``): the conversation's user messages, then one ``compaction`` item
holding the summary (:mod:`.compaction`). A client (Codex's remote compaction) replaces its history with that
output; a later request carrying it shows the model the summary in place of the turns it stands for.

The summary is the back end's answer to the conversation (its ``instructions``, ``previous_response_id`` chain
and ``input``) followed by :data:`SUMMARY_REQUEST`, with no tools offered; it is never streamed.

Codex's second way (``remote_compaction_v2``) is a ``POST /responses`` whose input ends with a
``compaction_trigger`` item (:func:`is_compaction_turn`): the same summarising generation over the items before
it, answered as a Response whose output is that one ``compaction`` item, streamed or not
(:func:`plan_compaction_turn`).
"""

from __future__ import annotations

import time
from typing import Any, Iterable

from statemachine import Event, TextDelta

from ..errors import ApiError
from ..pipeline.context import RequestContext
from ..pipeline.encoder import Usage
from ..pipeline.generate import Generation
from ..pipeline.plan import build_parser_config
from ..pipeline.streaming import KEEPALIVE
from ..profile import model_profile
from ..store import OwnedStore
from ..validation import check_responses_limits
from .compaction import compaction_content
from .encoder import ResponsesEncoder, encode_sse, new_item_id, new_response_id, responses_usage
from .input import resolve_input_items, to_chat_messages
from .listing import kept_item
from .schemas import parse_responses_request
from .tools import offered_tools

#: What the model is asked once the conversation is shown to it.
SUMMARY_REQUEST = (
    "Write a summary of the conversation so far for whoever continues it: the user's goals and requests, what "
    "has been done and found (files, commands, results, errors), the decisions made and why, and what remains "
    "to do next. Keep names, paths and numbers exact. Answer with the summary alone."
)


#: The input item that asks for a compaction turn (Codex's ``remote_compaction_v2``).
TRIGGER = "compaction_trigger"


def plan_compaction(body: dict[str, Any], context: RequestContext,
                    store: OwnedStore | None) -> tuple[Generation, "CompactionEncoder"]:
    """``POST /responses/compact``: the summarising generation and the encoder that answers with the compacted
    response."""
    generation, input_items = _summarising(body, context, store, stream=False)
    kept = [kept_item(item) for item in input_items
            if item.get("type", "message") == "message" and item.get("role") == "user"]
    return generation, CompactionEncoder(kept)


def is_compaction_turn(body: dict[str, Any]) -> bool:
    """Whether a ``POST /responses`` body asks for a compaction turn: its input ends with a ``compaction_trigger``."""
    items = body.get("input")
    return isinstance(items, list) and bool(items) and isinstance(items[-1], dict) and items[-1].get("type") == TRIGGER


def plan_compaction_turn(body: dict[str, Any], context: RequestContext,
                         store: OwnedStore | None) -> tuple[Generation, "CompactionTurnEncoder"]:
    """A compaction turn (:func:`is_compaction_turn`): the summarising generation over the items before the
    trigger, and the encoder answering with the Response whose output is the one ``compaction`` item."""
    stream = body.get("stream") is True
    generation, _ = _summarising({**body, "input": body["input"][:-1]}, context, store, stream=stream)
    response = ResponsesEncoder(new_response_id(), generation.model,
                                parse_responses_request({**body, "input": body["input"][:-1]}).response_echo())
    return generation, CompactionTurnEncoder(response)


def _summarising(body: dict[str, Any], context: RequestContext, store: OwnedStore | None, *, stream: bool
                 ) -> tuple[Generation, list[dict[str, Any]]]:
    """The generation that summarises the conversation of ``body`` (no tools offered), and its input items."""
    settings = context.settings
    check_responses_limits(body, settings)
    req = parse_responses_request({**body, "tools": [], "tool_choice": None, "stream": False, "store": False})
    input_items = resolve_input_items(req, store)
    messages = to_chat_messages(req, store, input_items, max_history_items=settings.max_messages,
                                max_history_bytes=settings.max_body_bytes)
    profile = model_profile(settings, req.model)
    tools = offered_tools(req, settings)  # none: the request's tools were taken out
    config = build_parser_config(tools.specs, tools.choice, parallel_tool_calls=False, legacy_functions=False, settings=settings,
                                 profile=profile, marker_requested=False)
    generation = Generation(profile=profile, messages=[*messages, {"role": "user", "content": SUMMARY_REQUEST}],
                            config=config, fields={}, stream=stream)
    return generation, input_items


def _compaction_item(summary: list[str]) -> dict[str, Any]:
    return {"id": new_item_id("cmp"), "type": "compaction", "encrypted_content": compaction_content("".join(summary)
                                                                                                  .strip())}


class CompactionEncoder:
    """The compacted response of a summarising generation: its text is the summary (never streamed)."""

    keepalive = KEEPALIVE

    def __init__(self, user_messages: list[dict[str, Any]]):
        self._user_messages = user_messages
        self._summary: list[str] = []

    def add(self, index: int, event: Event) -> None:
        """Keep the answer's text (reasoning and notes are not the summary)."""
        if isinstance(event, TextDelta):
            self._summary.append(event.text)

    def body(self, usage: Usage) -> dict[str, Any]:
        """``{"object": "response.compaction", "output": [user messages…, compaction item], "usage": …}``."""
        compaction = _compaction_item(self._summary)
        return {"id": new_response_id(), "object": "response.compaction", "created_at": int(time.time()),
                "output": [*self._user_messages, compaction], "usage": responses_usage(usage)}

    # A compaction is answered whole: the stream's side of the protocol is never called.
    def opening(self, usage: Usage) -> Iterable[bytes]:
        return ()

    def frames(self, index: int, event: Event) -> Iterable[bytes]:
        return ()

    def closing(self, usage: Usage) -> Iterable[bytes]:
        return ()

    def error_frames(self, error: ApiError, usage: Usage) -> bytes:
        return b""


class CompactionTurnEncoder:
    """A compaction turn's Response: its stream opens as any response's, shows nothing of the summary as it comes,
    and ends with the one ``compaction`` item added and done, then ``response.completed`` (or ``response.failed``)."""

    keepalive = KEEPALIVE

    def __init__(self, response: ResponsesEncoder):
        self._response = response
        self._summary: list[str] = []
        self._events: list[dict[str, Any]] = []
        self._completed: dict[str, Any] = {}

    def opening(self, usage: Usage) -> list[bytes]:
        self._events = self._response.start()
        return [encode_sse(event) for event in self._events]

    def frames(self, index: int, event: Event) -> list[bytes]:
        self.add(index, event)
        return []

    def add(self, index: int, event: Event) -> None:
        """Keep the answer's text: the summary."""
        if isinstance(event, TextDelta):
            self._summary.append(event.text)

    def closing(self, usage: Usage) -> list[bytes]:
        return [encode_sse(event) for event in self._ended(usage)]

    def error_frames(self, error: ApiError, usage: Usage) -> bytes:
        return b"".join(encode_sse(event) for event in self._response.fail(error.code or "server_error",
                                                                            error.message, usage))

    def body(self, usage: Usage) -> dict[str, Any]:
        """The completed Response, its output the compaction item."""
        self._ended(usage)
        return self._completed

    def _ended(self, usage: Usage) -> list[dict[str, Any]]:
        """The compaction item's events and ``response.completed``, numbered after the opening's."""
        item = _compaction_item(self._summary)
        self._completed = {**self._response.response(), "status": "completed", "output": [item],
                           "usage": responses_usage(usage)}
        kinds: tuple[tuple[str, dict[str, Any]], ...] = (
                 ("response.output_item.added", {"output_index": 0, "item": item}),
                 ("response.output_item.done", {"output_index": 0, "item": item}),
                 ("response.completed", {"response": self._completed}))
        return [{"type": kind, "sequence_number": len(self._events) + i, **fields}
                for i, (kind, fields) in enumerate(kinds)]
