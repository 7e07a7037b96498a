"""``POST /chat/completions``.

The view reads everything it needs from the request, opens the upstream
(:func:`~app.http.request.open_upstream`, so its refusal is an ordinary HTTP error), then either
streams through the pump (:func:`~app.http.request.sse_response`) or accumulates the same events into one body.
"""

from __future__ import annotations

import math
import time
import uuid
from typing import Any

import orjson
from flask import Response, current_app

from ..http import limits
from ..http.errors import as_api_error
from ..http.request import json_body, sse_response
from ..pipeline.driver import ChoiceDriver
from ..pipeline.native import open_with_tools
from ..pipeline.plan import chat_parser_config
from ..pipeline.streaming import DONE, cooperative, data_frame
from ..state import current_state
from .encoder import ChatAccumulator, ChatChunker, usage_object
from .schemas import parse_chat_request

#: Request keys toolwire consumes; everything else goes to the upstream as sent.
_CONSUMED_KEYS = frozenset({"model", "messages", "stream", "stream_options", "tools", "tool_choice",
                            "parallel_tool_calls", "functions", "function_call"})


def chat_completions() -> Response:
    """``POST /chat/completions``, streaming or not."""
    body = json_body()
    limits.check_chat_limits(body)
    req = parse_chat_request(body)
    config = chat_parser_config(req, current_state().settings)
    passthrough = {key: value for key, value in body.items() if key not in _CONSUMED_KEYS}
    stream, config, messages, _ = open_with_tools(req.model, config, body["messages"], passthrough)
    driver = ChoiceDriver(stream, config, n=req.n)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    legacy = config.legacy_functions

    if not req.stream:
        accumulator = ChatAccumulator(completion_id, created, req.model, legacy_functions=legacy)
        for index, event in cooperative(driver):
            accumulator.add(index, event)
        return current_app.json.response(accumulator.body(_usage(driver, messages)))

    include_usage = req.include_usage
    chunker = ChatChunker(completion_id, created, req.model, legacy_functions=legacy, include_usage=include_usage)
    # An open stream keeps the prompt only for a usage estimate it may send (memory per stream).
    prompt = messages if include_usage else []

    def frames():
        for index, event in driver:
            for chunk in chunker.chunks(index, event):
                yield data_frame(chunk)
        if include_usage:
            yield data_frame(chunker.usage_chunk(_usage(driver, prompt)))
        yield DONE

    return sse_response(frames(), on_error=_error_frame, on_abandon=stream.close)


def _error_frame(exc: Exception) -> bytes:
    """The Chat mid-stream failure: one error frame, then ``[DONE]``."""
    return data_frame(as_api_error(exc).body()) + DONE


def _usage(driver: ChoiceDriver, messages: list[dict[str, Any]]) -> dict[str, int]:
    """The upstream's token counts, or an estimate (~4 characters a token) when it sent none."""
    usage = driver.usage or {}
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(prompt, int) and isinstance(completion, int):
        return usage_object(prompt, completion)
    prompt_chars = len(orjson.dumps(messages))  # only when estimating: most upstreams send usage
    return usage_object(math.ceil(prompt_chars / 4), math.ceil(driver.output_chars / 4))
