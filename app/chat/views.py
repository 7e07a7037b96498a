"""``POST /chat/completions``: the request validated and planned for the shared pipeline with the Chat encoder."""

from __future__ import annotations

import time
from typing import Any

from ..ids import uuid4_hex
from ..pipeline.context import RequestContext
from ..pipeline.generate import Generation
from ..validation import check_chat_limits
from .encoder import ChatEncoder
from .plan import chat_generation
from .schemas import parse_chat_request


def plan_chat_completion(body: dict[str, Any], context: RequestContext) -> tuple[Generation, ChatEncoder]:
    """``POST /chat/completions`` on the request's JSON ``body``, streaming or not: the generation and the
    encoder to run it with (:func:`~app.pipeline.generate.generate`).

    The plan holds what the generation needs of the body, and the parsed request is gone once it returns:
    the caller lets the body go too, so a request waiting for its back end holds neither (in a burst of
    new streams each one's leaves holes in the heap that the open streams keep).
    """
    check_chat_limits(body, context.settings)
    req = parse_chat_request(body)
    generation = chat_generation(body, req, context.settings, marker_requested=context.marker_requested)
    encoder = ChatEncoder(f"chatcmpl-{uuid4_hex()}", int(time.time()), req.model,
                          legacy_functions=generation.config.legacy_functions,
                          include_usage=req.include_usage)
    return generation, encoder
