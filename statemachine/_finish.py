"""Upstream finish reasons, normalised to OpenAI's five."""

from __future__ import annotations

_ALIASES = {
    "stop": "stop", "completed": "stop", "complete": "stop", "finished": "stop", "done": "stop",
    "halt": "stop", "end_turn": "stop", "eos": "stop",
    "length": "length", "max_tokens": "length", "truncated": "length", "max_tokens_reached": "length",
    "tool_calls": "tool_calls", "tool_call": "tool_calls", "tool_completion": "tool_calls",
    "tool_execution": "tool_calls", "requires_tool": "tool_calls", "tool_use": "tool_calls",
    "function_call": "function_call", "function_calls": "function_call", "function_execution": "function_call",
    "content_filter": "content_filter", "filtered": "content_filter", "moderation": "content_filter",
    "policy_filter": "content_filter",
}


def normalize_finish_reason(reason: str | None) -> str:
    """Map an upstream finish reason (or ``None``) onto stop/length/tool_calls/function_call/content_filter.

    Unknown values fall back to ``stop``; ``token_limit…`` and ``safety…`` prefixes are recognised.
    """
    if not reason:
        return "stop"
    key = reason.strip().lower()
    if key in _ALIASES:
        return _ALIASES[key]
    if key.startswith("token_limit"):
        return "length"
    if key.startswith("safety"):
        return "content_filter"
    return "stop"
