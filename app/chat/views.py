"""``POST /chat/completions``: the request validated and planned, then the shared pipeline with the Chat encoder."""

from __future__ import annotations

import time
from typing import Any

from ..ids import uuid4_hex
from ..pipeline.context import RequestContext
from ..pipeline.generate import Reply, generate
from ..validation import check_chat_limits
from .encoder import ChatEncoder
from .plan import chat_generation
from .schemas import parse_chat_request


def chat_completions(body: dict[str, Any], context: RequestContext) -> Reply:
    """``POST /chat/completions`` on the request's JSON ``body``, streaming or not."""
    check_chat_limits(body, context.settings)
    req = parse_chat_request(body)
    generation = chat_generation(body, req, context.settings, marker_requested=context.marker_requested)
    encoder = ChatEncoder(f"chatcmpl-{uuid4_hex()}", int(time.time()), req.model,
                          legacy_functions=generation.config.legacy_functions,
                          include_usage=req.include_usage)
    return generate(generation, encoder, context)
