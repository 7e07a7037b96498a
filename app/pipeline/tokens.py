"""A would-be request's prompt tokens (``count_tokens``, ``input_tokens``): the back end's own template and tokenizer
applied to the exact request toolwire would send it (the tool block, examples and system placement of prompt
mode, or the native tools), else the estimate of about four characters a token.

The back end is asked within :data:`~app.upstreams.tokenizer.TIMEOUT_SECONDS`; each count answered with the
estimate instead is counted in ``toolwire_token_count_estimates_total`` by its reason.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from ..observability import metrics
from ..upstreams.tokenizer import TokenizerUnavailable, count_prompt_tokens
from .context import RequestContext
from .encoder import CHARS_PER_TOKEN, prompt_chars
from .gateway_loop import offering
from .generate import Generation, prompt_mode_request, upstream_body
from .native import FALLBACKS, native_messages, native_tools, upstream_name

log = logging.getLogger("toolwire.pipeline.tokens")


def prompt_tokens(generation: Generation, context: RequestContext) -> int:
    """The prompt tokens of ``generation`` on the request's back end: counted by the back end when it can,
    else estimated from the prompt's characters."""
    body = would_send(generation, context)
    try:
        return count_prompt_tokens(context.upstream, body)
    except TokenizerUnavailable as exc:
        metrics.child(metrics.TOKEN_COUNT_ESTIMATES, exc.reason).inc()
        log.debug("token count estimated: %s", exc)
        return estimate_tokens(body["messages"])


def would_send(generation: Generation, context: RequestContext) -> dict[str, Any]:
    """The Chat request the back end would get for ``generation``: native tools where the model's tool mode
    sends them (unless the back end was found to refuse them), else prompt mode's messages; the gateway's tools
    offered too."""
    profile, config = generation.profile, generation.config
    if generation.gateway is not None:
        config = offering(config, generation.gateway)
    key = (upstream_name(context.upstream), profile.upstream_model)
    if profile.tool_mode != "prompt" and not FALLBACKS.prompt_only(key, context.settings.tool_mode_fallback_seconds):
        return upstream_body(profile, native_messages(generation.messages), {**generation.fields,
                                                                             **native_tools(config)})
    _, messages, fields = prompt_mode_request(generation, config, context.settings)
    return upstream_body(profile, messages, fields)


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """About four characters a token, counted as a usage estimate counts them."""
    return math.ceil(prompt_chars(messages) / CHARS_PER_TOKEN)
