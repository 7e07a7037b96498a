"""A Messages request's ``system`` and ``messages`` → the Chat messages the shared pipeline flattens.

The back end speaks Chat, so an Anthropic transcript becomes the same Chat transcript the other two APIs
build (:func:`~app.pipeline.prompt.build_upstream_messages` then writes it for a text model, or native mode
sends it as it is):

- ``system`` (a string or text blocks) is the first system message; Claude Code's billing-header block
  (``x-anthropic-billing-header: …``) is not text for the model and is left out. A ``role: "system"``
  message inside ``messages`` (Claude Code's mid-conversation system turn) is a system message where it
  stands (the flattening moves its text to the front).
- An assistant turn's text blocks are its content and its ``tool_use`` blocks its ``tool_calls`` (the
  ``input`` object as the arguments' JSON); text after a call starts a new assistant message, so the
  order is kept. A server tool's ``server_tool_use`` is a call too, and its ``web_search_tool_result`` /
  ``web_fetch_tool_result`` the ``tool`` message after it, read as the model read it then
  (:func:`~app.messages.web_blocks.result_text`). ``thinking`` blocks are not shown to the model again (as
  reasoning items on Responses).
- A user turn's ``tool_result`` blocks are ``role: "tool"`` messages (``is_error`` results start with
  ``Error:``); its other blocks are a user message, an ``image`` as a Chat ``image_url`` part (read as
  ``[image]`` by a text model), any other block as a part of its type (``[document]``).
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from .schemas import (Content, CountTokensRequest, OtherBlock, TextBlock, ThinkingBlock, ToolResultBlock,
                      ToolUseBlock)
from .web_blocks import result_text

#: The result blocks of server tools, each answering the ``server_tool_use`` before it.
SERVER_RESULTS = ("web_search_tool_result", "web_fetch_tool_result")

#: The first line of the system block Claude Code sends for Anthropic's billing, not for the model.
BILLING_HEADER = "x-anthropic-billing-header:"


def to_chat_messages(req: CountTokensRequest) -> list[dict[str, Any]]:
    """The request's ``system`` and ``messages`` as Chat messages, in order."""
    out: list[dict[str, Any]] = []
    system = system_text(req.system)
    if system:
        out.append({"role": "system", "content": system})
    for message in req.messages:
        if message.role == "system":
            out.append({"role": "system", "content": _text_of(message.content)})
        elif message.role == "assistant":
            out += _assistant_messages(message.content)
        else:
            out += _user_messages(message.content)
    return out


def system_text(system: str | list[TextBlock] | None) -> str:
    """The ``system`` parameter as one text (blocks joined by blank lines, the billing header left out)."""
    if system is None or isinstance(system, str):
        return system or ""
    return "\n\n".join(block.text for block in system if not block.text.startswith(BILLING_HEADER))


def _text_of(content: Content) -> str:
    if isinstance(content, str):
        return content
    return "\n\n".join(block.text for block in content if isinstance(block, TextBlock))


def _assistant_messages(content: Content) -> list[dict[str, Any]]:
    """One assistant message per run of text followed by calls."""
    if isinstance(content, str):
        return [{"role": "assistant", "content": content}]
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    queries: dict[str, str] = {}  # a server call's query, by its id
    for block in content:
        if isinstance(block, TextBlock):
            if calls:  # text after a call: the calls end this message
                out.append(_assistant(texts, calls))
                texts, calls = [], []
            texts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            calls.append({"id": block.id, "type": "function",
                          "function": {"name": block.name, "arguments": json.dumps(block.input, ensure_ascii=False)}})
        elif isinstance(block, OtherBlock) and block.type == "server_tool_use":
            calls.append(_server_call(block.model_extra or {}, queries))
        elif isinstance(block, OtherBlock) and block.type in SERVER_RESULTS and calls:
            out.append(_assistant(texts, calls))
            texts, calls = [], []
            out.append(_server_result(block.type, block.model_extra or {}, queries))
        # thinking blocks and anything else an assistant turn may carry are not shown to the model
    if texts or calls:
        out.append(_assistant(texts, calls))
    return out


def _server_call(block: dict[str, Any], queries: dict[str, str]) -> dict[str, Any]:
    """A ``server_tool_use`` block as a Chat call (its query kept in ``queries`` for its result)."""
    given = block.get("input")
    given = given if isinstance(given, dict) else {}
    queries[str(block.get("id"))] = str(given.get("query", ""))
    return {"id": str(block.get("id")), "type": "function",
            "function": {"name": str(block.get("name")), "arguments": json.dumps(given, ensure_ascii=False)}}


def _server_result(kind: str, block: dict[str, Any], queries: dict[str, str]) -> dict[str, Any]:
    """A server tool's result block as the ``tool`` message answering its call."""
    called = str(block.get("tool_use_id"))
    return {"role": "tool", "tool_call_id": called,
            "content": result_text({**block, "type": kind}, queries.get(called, ""))}


def _assistant(texts: list[str], calls: list[dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _user_messages(content: Content) -> list[dict[str, Any]]:
    """Tool results as ``tool`` messages and the other blocks as user messages, in their order."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, ToolResultBlock):
            if parts:
                out.append({"role": "user", "content": parts})
                parts = []
            out.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": _result_content(block)})
        elif not isinstance(block, ThinkingBlock):
            parts.append(_chat_part(block.model_dump()))
    if parts:
        out.append({"role": "user", "content": parts})
    return out


def _result_content(block: ToolResultBlock) -> str | list[dict[str, Any]]:
    content = block.content
    parts = [{"type": "text", "text": content or ""}] if not isinstance(content, list) else \
        [_chat_part(part) for part in content if isinstance(part, dict)]
    if block.is_error:
        parts.insert(0, {"type": "text", "text": "Error:"})
    texts = list(_texts(parts))
    return "\n".join(texts) if len(texts) == len(parts) else parts


def _texts(parts: Iterable[dict[str, Any]]) -> Iterable[str]:
    return (part["text"] for part in parts if part.get("type") == "text" and isinstance(part.get("text"), str))


def _chat_part(block: dict[str, Any]) -> dict[str, Any]:
    """A content block as a Chat content part: text, an ``image_url``, or the block itself (a placeholder)."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": str(block.get("text") or "")}
    source = block.get("source")
    if kind == "image" and isinstance(source, dict):
        if source.get("type") == "base64":
            return {"type": "image_url",
                    "image_url": {"url": f"data:{source.get('media_type')};base64,{source.get('data')}"}}
        if source.get("type") == "url":
            return {"type": "image_url", "image_url": {"url": source.get("url")}}
    return {"type": str(kind or "content")}
