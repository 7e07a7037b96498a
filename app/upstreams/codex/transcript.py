"""A flattened Chat transcript as a Codex thread: base instructions, items to inject, the turn's input."""

from __future__ import annotations

from typing import Any


def split_transcript(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """``(base instructions, items to inject, turn input)`` of a flattened Chat transcript.

    The leading system message is the base instructions; the last message starts the turn when it is
    the user's (else everything is injected and the turn input is empty, which Codex accepts).
    """
    system = ""
    if messages and messages[0].get("role") == "system":
        system, messages = _text(messages[0].get("content")), messages[1:]
    last: list[dict[str, Any]] = []
    if messages and messages[-1].get("role") == "user":
        last = [{"type": "text", "text": _text(messages[-1].get("content")), "text_elements": []}]
        messages = messages[:-1]
    items = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            part = {"type": "output_text", "text": _text(message.get("content"))}
        else:
            role = "developer" if role in ("system", "developer") else "user"
            part = {"type": "input_text", "text": _text(message.get("content"))}
        items.append({"type": "message", "role": role, "content": [part]})
    return system, items, last


def output_schema(response_format: Any) -> dict[str, Any] | None:
    """The JSON schema of a ``json_schema`` ``response_format``, if that is what it is."""
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        return schema if isinstance(schema, dict) else None
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return ""
