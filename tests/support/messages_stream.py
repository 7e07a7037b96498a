"""Anthropic Messages streams in tests: parse an SSE body into events and check Anthropic's event grammar.

``check_messages_stream(body)`` asserts what Anthropic's clients rely on (and Claude Code needs: without
``event:`` lines it falls back to non-streamed requests): every frame has an ``event:`` line equal to its
data's ``type``; ``message_start`` first; content blocks one at a time in index order, each
``content_block_start`` → deltas of the block's kind → ``content_block_stop``; a ``tool_use`` block
starting with ``input: {}`` whose ``input_json_delta`` pieces join to a JSON object (a ``server_tool_use`` the same way, its result block given
whole in its start, answering it by ``tool_use_id``); one ``message_delta``
with integer usage; ``message_stop`` last (or an ``error`` event instead of the end); ``ping`` anywhere.
It returns the events (data objects, pings included).
"""

from __future__ import annotations

import json
from typing import Any

DELTA_OF = {"text": "text_delta", "thinking": "thinking_delta", "tool_use": "input_json_delta",
            "server_tool_use": "input_json_delta"}
#: Server tools' result blocks: given whole in their ``content_block_start``, no deltas.
SERVER_RESULTS = ("web_search_tool_result", "web_fetch_tool_result")


def parse_events(body: bytes | str) -> list[tuple[str | None, dict[str, Any]]]:
    """``(event name, data)`` per SSE frame (comment-only frames are skipped)."""
    text = body.decode() if isinstance(body, bytes) else body
    out = []
    for frame in text.split("\n\n"):
        name, data = None, None
        for line in frame.splitlines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: "):])
        if data is not None:
            out.append((name, data))
    return out


def check_messages_stream(body: bytes | str) -> list[dict[str, Any]]:
    """Assert Anthropic's stream grammar on ``body``; return the events' data."""
    events = parse_events(body)
    for name, data in events:
        assert name == data["type"], f"event: {name} carries a {data['type']} (Claude Code needs them equal)"
    kinds = [data for _, data in events if data["type"] != "ping"]
    assert kinds and kinds[0]["type"] == "message_start", kinds[:1]
    start = kinds[0]["message"]
    assert start["type"] == "message" and start["role"] == "assistant" and start["content"] == []
    assert isinstance(start["usage"]["input_tokens"], int) and start["usage"]["output_tokens"] == 0
    index, open_kind, pieces = 0, None, []
    server_calls: set[str] = set()
    rest = kinds[1:]
    for n, data in enumerate(rest):
        kind = data["type"]
        if kind == "error":
            assert n == len(rest) - 1, "an error event ends the stream"
            assert set(data) == {"type", "error"} and data["error"]["type"] and data["error"]["message"]
            return [d for _, d in events]
        if kind == "content_block_start":
            assert open_kind is None and data["index"] == index, data
            block = data["content_block"]
            open_kind, pieces = block["type"], []
            if open_kind in ("tool_use", "server_tool_use"):
                assert block["input"] == {} and block["id"] and block["name"], block
            if open_kind == "server_tool_use":
                server_calls.add(block["id"])
            if open_kind in SERVER_RESULTS:
                assert block["tool_use_id"] in server_calls and block["content"] is not None, block
        elif kind == "content_block_delta":
            assert open_kind is not None and data["index"] == index, data
            assert data["delta"]["type"] == DELTA_OF[open_kind], data
            if open_kind in ("tool_use", "server_tool_use"):
                pieces.append(data["delta"]["partial_json"])
        elif kind == "content_block_stop":
            assert open_kind is not None and data["index"] == index, data
            if open_kind in ("tool_use", "server_tool_use"):
                assert isinstance(json.loads("".join(pieces) or "{}"), dict)
            index, open_kind = index + 1, None
        elif kind == "message_delta":
            assert open_kind is None, "message_delta inside a block"
            assert data["delta"]["stop_reason"] in ("end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal")
            assert isinstance(data["usage"]["output_tokens"], int)
            assert [d["type"] for d in rest[n + 1:]] == ["message_stop"], "message_delta, then message_stop"
        elif kind != "message_stop":
            raise AssertionError(f"unexpected event {kind}")
    assert rest and rest[-1]["type"] == "message_stop"
    return [d for _, d in events]


def check_anthropic_error(status: int, body: bytes | str) -> dict[str, Any]:
    """Assert Anthropic's error envelope (``{"type": "error", "error": {"type", "message"}}``); return ``error``."""
    assert 400 <= status <= 599, status
    obj = json.loads(body)
    assert obj.get("type") == "error" and isinstance(obj.get("error"), dict), obj
    assert obj["error"].get("type") and obj["error"].get("message"), obj
    return obj["error"]


def check_messages_exchange(status: int, body: bytes, is_sse: bool) -> Any:
    """The checker for one recorded ``/v1/messages…`` exchange: an error envelope, a stream, or a message."""
    if status >= 400:
        return check_anthropic_error(status, body)
    if is_sse:
        return check_messages_stream(body)
    obj = json.loads(body)
    if obj.get("type") == "message":
        assert obj["role"] == "assistant" and obj["stop_reason"] and isinstance(obj["usage"]["output_tokens"], int)
        for block in obj["content"]:
            assert block["type"] in ("text", "thinking", "tool_use", "server_tool_use", *SERVER_RESULTS), block
            if block["type"] == "tool_use":
                assert isinstance(block["input"], dict) and block["id"] and block["name"]
    return obj
