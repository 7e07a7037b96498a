"""``POST /chat/completions``: the request validated and planned, then the shared pipeline with the Chat encoder."""

from __future__ import annotations

import time
import uuid
from typing import Any

from flask import Response

from ..pipeline.generate import generate
from ..state import current_state
from ..validation import check_chat_limits
from .encoder import ChatEncoder
from .plan import chat_generation
from .schemas import parse_chat_request


def chat_completions(body: dict[str, Any]) -> Response:
    """``POST /chat/completions`` on the request's JSON ``body``, streaming or not."""
    check_chat_limits(body)
    req = parse_chat_request(body)
    generation = chat_generation(body, req, current_state().settings)
    encoder = ChatEncoder(f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), req.model,
                          legacy_functions=generation.config.legacy_functions,
                          include_usage=req.include_usage)
    return generate(generation, encoder)
