"""``POST /responses/compact``: a summarising generation over a conversation, answered as OpenAI's compacted
response (``object: "response.compaction"``): the conversation's user messages, then one ``compaction`` item
holding the summary (:mod:`.compaction`). A client (Codex's remote compaction) replaces its history with that
output; a later request carrying it shows the model the summary in place of the turns it stands for.

The summary is the back end's answer to the conversation (its ``instructions``, ``previous_response_id`` chain
and ``input``) followed by :data:`SUMMARY_REQUEST`, with no tools offered; it is never streamed.
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
from .encoder import new_item_id, new_response_id, responses_usage
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


def plan_compaction(body: dict[str, Any], context: RequestContext,
                    store: OwnedStore | None) -> tuple[Generation, "CompactionEncoder"]:
    """``POST /responses/compact``: the summarising generation and the encoder that answers with the compacted
    response."""
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
                            config=config, fields={}, stream=False)
    kept = [kept_item(item) for item in input_items
            if item.get("type", "message") == "message" and item.get("role") == "user"]
    return generation, CompactionEncoder(kept)


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
        compaction = {"id": new_item_id("cmp"), "type": "compaction",
                      "encrypted_content": compaction_content("".join(self._summary).strip())}
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
