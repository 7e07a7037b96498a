"""``POST /messages`` and ``POST /messages/count_tokens``: Anthropic's Messages API on the shared pipeline.

A Messages request becomes the same :class:`~app.pipeline.generate.Generation` the Chat and Responses
requests do (its transcript as Chat messages, its tools and ``tool_choice`` as the parser configuration),
and :class:`~app.messages.encoder.MessagesEncoder` puts the core events on Anthropic's wire. Clients may
add ``?beta=true`` and any ``anthropic-version`` / ``anthropic-beta`` headers: they change nothing here.
"""

from __future__ import annotations

from typing import Any

from ..ids import uuid4_hex
from ..pipeline.context import RequestContext
from ..pipeline.generate import Generation
from ..pipeline.tokens import prompt_tokens
from ..validation import check_messages_limits
from .encoder import MessageBuilder, MessagesEncoder
from .plan import messages_generation
from .schemas import parse_count_tokens_request, parse_messages_request


def plan_message(body: dict[str, Any], context: RequestContext) -> tuple[Generation, MessagesEncoder]:
    """``POST /messages`` on the request's JSON ``body``, streaming or not: the generation and the encoder to
    run it with (:func:`~app.pipeline.generate.generate`), as :func:`~app.chat.views.plan_chat_completion`
    plans a Chat one."""
    check_messages_limits(body, context.settings)
    req = parse_messages_request(body)
    generation = messages_generation(req, context.settings, marker_requested=context.marker_requested)
    builder = MessageBuilder(f"msg_{uuid4_hex()}", req.model,
                             show_thinking=req.thinking is not None and req.thinking.shown,
                             stop_sequences=req.stop_sequences)
    return generation, MessagesEncoder(builder)


def count_message_tokens(body: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    """``POST /messages/count_tokens``: the tokens of the prompt the back end would get, built as the generation
    builds it (tool block included), counted by the back end's own tokenizer where it offers one, else estimated
    as usage is (:func:`~app.pipeline.tokens.prompt_tokens`)."""
    check_messages_limits(body, context.settings)
    req = parse_count_tokens_request(body)
    generation = messages_generation(req, context.settings, marker_requested=context.marker_requested)
    return {"input_tokens": prompt_tokens(generation, context)}
