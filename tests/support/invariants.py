"""Checkers for the toolwire wire contract (docs/wire-contract.md, section 9).

- ``check_chat_stream(raw, ...)``: Chat Completions SSE invariants 1, 2, 3, 5-19; returns a
  ``ChatStreamSummary`` (per choice: content, tool calls, legacy function_call, finish_reason; usage;
  error).
- ``check_responses_stream(raw, ...)``: Responses SSE invariants 1-3 and 21-32; returns a
  ``ResponsesStreamSummary`` whose ``response`` is the final Response object.
- ``check_chat_completion(body, ...)``: the non-streaming shape of section 3.9; returns the body.
- ``check_error_envelope(status, body)``: invariant 4; returns the ``error`` object.
- ``RecordingTransport`` / ``StreamRecorder``: an httpx transport that tees every response body
  passing through it, so that a test fixture can run the right checker on every stream a client saw.

Every checker collects all violations it finds and raises one ``ContractViolation`` (an
``AssertionError``) listing them; each message starts with the invariant number, e.g. ``[inv 6]``.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

import httpx

from .messages_stream import check_messages_exchange

CHAT_FINISH_REASONS = {"stop", "length", "tool_calls", "content_filter", "function_call"}
USAGE_KEYS = {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details"}

RESPONSES_EVENT_TYPES = {
    "response.created", "response.in_progress", "response.queued",
    "response.output_item.added", "response.output_item.done",
    "response.content_part.added", "response.content_part.done",
    "response.output_text.delta", "response.output_text.done", "response.output_text.annotation.added",
    "response.refusal.delta", "response.refusal.done",
    "response.function_call_arguments.delta", "response.function_call_arguments.done",
    "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done",
    "response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
    "response.reasoning_text.delta", "response.reasoning_text.done",
    "response.web_search_call.in_progress", "response.web_search_call.searching",
    "response.web_search_call.completed",
    "response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed", "response.mcp_list_tools.failed",
    "response.mcp_call.in_progress", "response.mcp_call.completed", "response.mcp_call.failed",
    "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done",
    "response.completed", "response.incomplete", "response.failed", "error",
}  # fmt: skip
#: The MCP events, each about one item of its type (issue 42): item_id and output_index required.
MCP_EVENT_ITEMS = {"response.mcp_list_tools.": "mcp_list_tools", "response.mcp_call.": "mcp_call",
                   "response.mcp_call_arguments.": "mcp_call"}
RESPONSES_LIFECYCLE = {"response.created", "response.in_progress", "response.queued"}
RESPONSES_TERMINAL = {"response.completed", "response.incomplete", "response.failed", "error"}
RESPONSE_KEYS = {
    "id", "object", "created_at", "model", "output", "parallel_tool_calls", "tool_choice", "tools",
    "status", "error", "incomplete_details", "instructions", "metadata", "temperature", "top_p",
    "max_output_tokens", "previous_response_id", "reasoning", "store", "text", "truncation", "usage", "user",
}  # fmt: skip
# Required fields besides ``type`` / ``sequence_number`` (wire-contract 4.1).
RESPONSES_REQUIRED_FIELDS = {
    "response.created": ("response",),
    "response.in_progress": ("response",),
    "response.queued": ("response",),
    "response.output_item.added": ("output_index", "item"),
    "response.output_item.done": ("output_index", "item"),
    "response.content_part.added": ("item_id", "output_index", "content_index", "part"),
    "response.content_part.done": ("item_id", "output_index", "content_index", "part"),
    "response.output_text.delta": ("item_id", "output_index", "content_index", "delta", "logprobs"),
    "response.reasoning_text.delta": ("item_id", "output_index", "content_index", "delta"),
    "response.reasoning_text.done": ("item_id", "output_index", "content_index", "text"),
    "response.output_text.done": ("item_id", "output_index", "content_index", "text", "logprobs"),
    "response.function_call_arguments.delta": ("item_id", "output_index", "delta"),
    "response.function_call_arguments.done": ("item_id", "output_index", "arguments", "name"),
    "response.custom_tool_call_input.delta": ("item_id", "output_index", "delta"),
    "response.custom_tool_call_input.done": ("item_id", "output_index", "input"),
    **{f"response.mcp_{event}": ("item_id", "output_index") for event in (
        "list_tools.in_progress", "list_tools.completed", "list_tools.failed", "call.in_progress", "call.completed",
        "call.failed")},
    "response.mcp_call_arguments.delta": ("item_id", "output_index", "delta"),
    "response.mcp_call_arguments.done": ("item_id", "output_index", "arguments"),
    "response.refusal.delta": ("item_id", "output_index", "content_index", "delta"),
    "response.refusal.done": ("item_id", "output_index", "content_index", "refusal"),
    "response.web_search_call.in_progress": ("item_id", "output_index"),
    "response.web_search_call.searching": ("item_id", "output_index"),
    "response.web_search_call.completed": ("item_id", "output_index"),
    "response.completed": ("response",),
    "response.incomplete": ("response",),
    "response.failed": ("response",),
    "error": ("message",),
}
ITEM_ID_PREFIX = {"message": "msg_", "function_call": "fc_", "custom_tool_call": "ctc_",
                  "tool_search_call": "tsc_", "local_shell_call": "lsc_", "reasoning": "rs_", "mcp_call": "mcp_",
                  "mcp_list_tools": "mcpl_", "mcp_approval_request": "mcpr_", "web_search_call": "ws_"}
#: Call items: a unique non-empty ``call_id`` each.
CALL_ITEM_TYPES = {"function_call", "custom_tool_call", "tool_search_call", "local_shell_call"}


class ContractViolation(AssertionError):
    """One or more wire-contract violations; ``violations`` holds the individual messages."""

    def __init__(self, what: str, violations: list[str], raw: str) -> None:
        self.violations = violations
        excerpt = raw if len(raw) <= 4000 else raw[:2000] + "\n…\n" + raw[-2000:]
        listing = "\n".join(f"  - {v}" for v in violations)
        super().__init__(f"{what}: {len(violations)} wire-contract violation(s):\n{listing}\n--- stream ---\n{excerpt}")


class _Violations:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, invariant: int | str, message: str) -> None:
        label = f"inv {invariant}" if isinstance(invariant, int) else invariant
        self.items.append(f"[{label}] {message}")

    def raise_if_any(self, what: str, raw: str) -> None:
        if self.items:
            raise ContractViolation(what, self.items, raw)


# ---------------------------------------------------------------------------------------------
# SSE framing
# ---------------------------------------------------------------------------------------------


@dataclass
class SseBlock:
    """One blank-line-terminated group of SSE lines.

    Fields:
        event: the ``event:`` value, if any.
        data: the ``data:`` values in order.
        comments: comment lines (without the leading ``:``).
        fields: any other ``name: value`` lines, as raw lines.
    """

    event: str | None = None
    data: list[str] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    fields: list[str] = field(default_factory=list)


def _as_text(raw: bytes | str) -> str:
    return raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else raw


def parse_sse(text: str, v: _Violations) -> list[SseBlock]:
    """Split an SSE body into blocks (LF, CR and CRLF line endings), noting framing violations."""
    lines = re.split(r"\r\n|\r|\n", text)
    terminated = lines[-1] == ""
    if not terminated:
        v.add(1, f"body does not end with a line break (last line {lines[-1][:80]!r})")
    lines = lines[:-1] if terminated else lines
    blocks: list[SseBlock] = []
    current: SseBlock | None = None
    for line in lines:
        if line == "":
            if current is not None:
                blocks.append(current)
                current = None
            continue
        current = current or SseBlock()
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "":
            current.comments.append(value)
        elif name == "data":
            current.data.append(value)
        elif name == "event":
            current.event = value
        else:
            current.fields.append(line)
    if current is not None:
        v.add(1, "the last event is not terminated by a blank line")
        blocks.append(current)
    for block in blocks:
        if block.fields:
            v.add(1, f"non-spec SSE field lines {block.fields!r}")
        if block.comments and (block.data or block.event is not None):
            v.add(2, f"comment line mixed into an event: {block.comments!r}")
        if block.event is not None and not block.data:
            v.add(2, f"'event: {block.event}' without a data line (fake keep-alive event)")
        if len(block.data) > 1:
            v.add(1, f"multi-line data payload ({len(block.data)} data lines in one event)")
        if block.comments and not any(c.strip() for c in block.comments):
            v.add(2, "empty comment line (a keep-alive must be non-empty)")
    return blocks


def _payload_object(v: _Violations, payload: str, *, not_object: int) -> dict[str, Any] | None:
    """A ``data`` payload as a JSON object; ``None`` after noting invariant 1 (not JSON) or ``not_object``."""
    try:
        obj = json.loads(payload)
    except ValueError:
        v.add(1, f"data payload is not JSON: {payload[:120]!r}")
        return None
    if not isinstance(obj, dict):
        v.add(not_object, f"data payload is not an object: {payload[:120]!r}")
        return None
    return obj


def _check_http(v: _Violations, status: int | None, content_type: str | None) -> None:
    if status is not None and status != 200:
        v.add(1, f"stream answered with status {status}, expected 200")
    if content_type is not None and not content_type.split(";")[0].strip() == "text/event-stream":
        v.add(1, f"content-type {content_type!r}, expected text/event-stream")


# ---------------------------------------------------------------------------------------------
# Chat Completions
# ---------------------------------------------------------------------------------------------


@dataclass
class ToolCall:
    """One accumulated tool call (or the legacy function_call, with ``id`` ``None``).

    ``complete`` is true when the concatenated arguments parse as a JSON object (a custom tool's
    raw ``input``, held in ``arguments``, is complete when its call ended).
    """

    index: int
    id: str | None
    name: str
    arguments: str = ""
    complete: bool = False
    kind: str = "function"

    @property
    def args(self) -> Any:
        """The arguments parsed as JSON."""
        return json.loads(self.arguments)


@dataclass
class ChoiceSummary:
    """What one choice of a chat stream accumulated to."""

    index: int
    role: str | None = None
    content: str = ""
    reasoning: str = ""
    refusal: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    function_call: ToolCall | None = None
    finish_reason: str | None = None
    deltas: int = 0
    finished_at_chunk: int | None = None


@dataclass
class ChatStreamSummary:
    """The result of ``check_chat_stream``.

    Fields:
        id, created, model: the chunk-level constants.
        choices: per-choice summaries by choice index.
        usage: the usage object of the usage chunk, if any.
        error: the ``error`` object of a mid-stream error frame, if any.
        chunks: every parsed chunk (error frame excluded), in order.
        comments: the keep-alive comment texts, in order.
        done: whether ``[DONE]`` was received.
    """

    id: str | None = None
    created: int | None = None
    model: str | None = None
    choices: dict[int, ChoiceSummary] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    chunks: list[dict[str, Any]] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    done: bool = False

    def choice(self, index: int = 0) -> ChoiceSummary:
        """The summary of choice ``index`` (``KeyError`` if the stream never had it)."""
        return self.choices[index]


def check_chat_stream(
    raw: bytes | str,
    *,
    include_usage: bool | None = None,
    legacy: bool | None = None,
    status: int | None = None,
    content_type: str | None = None,
    seen_call_ids: set[str] | None = None,
) -> ChatStreamSummary:
    """Assert the Chat Completions stream invariants (wire-contract section 9: 1, 2, 3, 5-19).

    Args:
        raw: the SSE body as received.
        include_usage: whether the request had ``stream_options.include_usage`` (``None``: unknown;
            a usage chunk is then checked if present but not required).
        legacy: whether the request used legacy ``functions`` (``None``: unknown; the two call styles
            must still not be mixed).
        status, content_type: the HTTP status and Content-Type, when known.
        seen_call_ids: call ids of earlier responses; ids must not repeat across responses. New ids
            are added to the set.

    Returns the accumulated ``ChatStreamSummary``; raises ``ContractViolation`` on any violation.
    """
    text = _as_text(raw)
    v = _Violations()
    _check_http(v, status, content_type)
    summary = ChatStreamSummary()
    done_count = 0
    after_terminal = False
    usage_chunk_at: int | None = None
    ids_here: set[str] = set()

    for block in parse_sse(text, v):
        if block.event is not None:
            v.add(3, f"chat stream carries an 'event: {block.event}' line")
        if not block.data:
            if after_terminal and block.comments:
                v.add(18, f"comment {block.comments!r} after [DONE]")
            summary.comments.extend(block.comments)
            continue
        payload = "\n".join(block.data)
        if done_count:
            v.add(18, f"frame after [DONE]: {payload[:120]!r}")
        if payload == "[DONE]":
            done_count += 1
            summary.done = after_terminal = True
            continue
        if summary.error is not None:
            v.add(19, f"frame after the error frame: {payload[:120]!r}")
        obj = _payload_object(v, payload, not_object=5)
        if obj is None:
            continue
        if obj.get("error"):
            _check_error_frame(v, obj)
            summary.error = obj["error"] if isinstance(obj["error"], dict) else {"message": obj["error"]}
            continue
        position = len(summary.chunks)
        summary.chunks.append(obj)
        if usage_chunk_at is not None:
            v.add(17, f"chunk after the usage chunk: {payload[:120]!r}")
        _check_chunk_constants(v, summary, obj)
        choices = obj.get("choices")
        if not isinstance(choices, list):
            continue
        _check_usage_field(v, obj, include_usage, is_usage_chunk=not choices)
        if not choices:
            if include_usage is False:
                v.add(17, "chunk with empty choices although include_usage was not requested")
            usage_chunk_at = position
            unfinished = [i for i, c in summary.choices.items() if c.finish_reason is None]
            if unfinished or not summary.choices:
                v.add(17, f"usage chunk before the finish chunk of choice(s) {unfinished}")
            if isinstance(obj.get("usage"), dict):
                summary.usage = obj["usage"]
            continue
        for entry in choices:
            _check_choice_entry(v, summary, entry, position, legacy, ids_here, seen_call_ids)

    if done_count == 0 and summary.error is None:
        v.add(18, "stream does not end with data: [DONE]")
    if done_count > 1:
        v.add(18, f"[DONE] sent {done_count} times")
    if include_usage and summary.error is None and usage_chunk_at is None:
        v.add(17, "include_usage requested but no usage chunk")
    if not summary.choices and summary.error is None:
        v.add(14, "stream has no choices at all")
    for choice in summary.choices.values():
        _check_choice_end(v, choice, errored=summary.error is not None)
    _check_against_openai_helper(v, summary)
    if seen_call_ids is not None:
        seen_call_ids.update(ids_here)
    v.raise_if_any("chat stream", text)
    return summary


def _check_error_frame(v: _Violations, obj: dict[str, Any]) -> None:
    error = obj["error"]
    if not isinstance(error, dict):
        v.add(19, f"error frame's 'error' is not an object: {error!r}")
    elif not isinstance(error.get("message"), str) or not error["message"]:
        v.add(19, f"error frame without a string 'message': {error!r}")


def _check_chunk_constants(v: _Violations, summary: ChatStreamSummary, obj: dict[str, Any]) -> None:
    if obj.get("object") != "chat.completion.chunk":
        v.add(5, f"object is {obj.get('object')!r}, expected 'chat.completion.chunk'")
    for key, kind in (("id", str), ("created", int), ("model", str)):
        value = obj.get(key)
        if not isinstance(value, kind) or isinstance(value, bool) or value == "":
            v.add(5, f"chunk {key} {value!r} is not a non-empty {kind.__name__}")
            continue
        first = getattr(summary, key)
        if first is None:
            setattr(summary, key, value)
        elif first != value:
            v.add(5, f"chunk {key} changed from {first!r} to {value!r}")
    if not isinstance(obj.get("choices"), list):
        v.add(5, f"chunk has no choices array: {obj.get('choices')!r}")


def _check_usage_field(v: _Violations, obj: dict[str, Any], include_usage: bool | None, *, is_usage_chunk: bool) -> None:
    usage = obj.get("usage")
    if not is_usage_chunk:
        if include_usage and ("usage" not in obj or usage is not None):
            v.add(17, f"non-final chunk must carry usage: null, has {usage!r}" if "usage" in obj else "chunk lacks usage: null")
        return
    if not isinstance(usage, dict):
        v.add(17, f"empty-choices chunk without a usage object: {usage!r}")
        return
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        if not isinstance(usage.get(key), int) or isinstance(usage.get(key), bool):
            v.add(17, f"usage.{key} is {usage.get(key)!r}, expected an int")
    extra = set(usage) - USAGE_KEYS
    if extra:
        v.add(17, f"non-standard usage fields {sorted(extra)}")


def _check_choice_entry(
    v: _Violations,
    summary: ChatStreamSummary,
    entry: Any,
    position: int,
    legacy: bool | None,
    ids_here: set[str],
    seen_call_ids: set[str] | None,
) -> None:
    if not isinstance(entry, dict):
        v.add(6, f"choice entry is not an object: {entry!r}")
        return
    index = entry.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        v.add(6, f"choice without an int index: {entry!r}")
        return
    delta = entry.get("delta")
    if not isinstance(delta, dict):
        v.add(6, f"choice {index} entry without a delta object: {entry!r}")
        delta = {}
    if index not in summary.choices and index != len(summary.choices):
        v.add("3.10", f"choice {index} appears before choice {len(summary.choices)}: choices must first appear in "
                      "index order (openai-python's stream helper places new choices by position)")
    choice = summary.choices.setdefault(index, ChoiceSummary(index=index))
    first = choice.deltas == 0
    choice.deltas += 1
    if choice.finish_reason is not None:
        v.add(14, f"choice {index} has a chunk after its finish chunk: {entry!r}")
    if first:
        if delta.get("role") != "assistant":
            v.add(6, f"first delta of choice {index} has role {delta.get('role')!r}, expected 'assistant'")
        choice.role = delta.get("role")
    elif "role" in delta:
        v.add(6, f"role repeated on a later delta of choice {index}")
    for key, value in delta.items():
        if value is None and not (first and key in ("content", "refusal")):
            v.add(7, f"choice {index} delta sends {key}: null (absent keys must be left out)")
    if isinstance(delta.get("content"), str):
        choice.content += delta["content"]
    if isinstance(delta.get("reasoning_content"), str):
        choice.reasoning += delta["reasoning_content"]
    if isinstance(delta.get("refusal"), str):
        choice.refusal += delta["refusal"]
    if "tool_calls" in delta and delta["tool_calls"] is not None:
        if legacy:
            v.add(16, f"choice {index}: tool_calls delta in a legacy functions response")
        _check_tool_call_fragments(v, choice, delta["tool_calls"], ids_here, seen_call_ids)
    if "function_call" in delta and delta["function_call"] is not None:
        if legacy is False:
            v.add(16, f"choice {index}: delta.function_call although the request did not use functions")
        _check_function_call_fragment(v, choice, delta["function_call"])
    finish = entry.get("finish_reason")
    if finish is not None:
        if choice.finish_reason is not None:
            v.add(14, f"choice {index} got a second finish_reason {finish!r}")
        if finish not in CHAT_FINISH_REASONS:
            v.add(14, f"choice {index} finish_reason {finish!r} is not a known value")
        allowed = {"content", "refusal"} | ({"role"} if first else set())
        if set(delta) - allowed:
            v.add(14, f"choice {index} finish chunk delta carries {sorted(set(delta) - allowed)} (expected {{}} or final content)")
        choice.finish_reason = finish
        choice.finished_at_chunk = position


def _check_tool_call_fragments(
    v: _Violations, choice: ChoiceSummary, fragments: Any, ids_here: set[str], seen_call_ids: set[str] | None
) -> None:
    if not isinstance(fragments, list):
        v.add(8, f"choice {choice.index} tool_calls is not an array: {fragments!r}")
        return
    for fragment in fragments:
        if not isinstance(fragment, dict):
            v.add(8, f"tool_calls entry is not an object: {fragment!r}")
            continue
        index = fragment.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            v.add(8, f"tool_calls entry without an int index: {fragment!r}")
            continue
        # a custom (freeform) tool's call carries custom.{name, input} where a function's has function.{name, arguments}
        custom = "custom" in fragment or (index < len(choice.tool_calls) and choice.tool_calls[index].kind == "custom")
        body_key, text_key = ("custom", "input") if custom else ("function", "arguments")
        function = fragment.get(body_key)
        if not isinstance(function, dict):
            v.add(8, f"tool_calls entry {index} without a {body_key} object: {fragment!r}")
            function = {}
        for key, value in [*fragment.items(), *function.items()]:
            if value is None:
                v.add(7, f"tool_calls entry {index} sends {key}: null")
        known = len(choice.tool_calls)
        if index == known:
            _open_tool_call(v, choice, index, fragment, function, ids_here, seen_call_ids, body_key)
        elif index > known:
            v.add(9, f"tool-call index {index} appears before index {known} (indices must run 0..k-1)")
            continue
        else:
            if index != known - 1:
                v.add(12, f"fragment for index {index} after index {known - 1} started (interleaving)")
            extra = set(fragment) - {"index", body_key}
            extra_fn = set(function) - {text_key}
            if extra or extra_fn:
                v.add(11, f"continuation of index {index} repeats {sorted(extra | extra_fn)}")
        arguments = function.get(text_key)
        if arguments is not None and not isinstance(arguments, str):
            v.add(13, f"arguments fragment of index {index} is not a string: {arguments!r}")
        elif arguments:
            choice.tool_calls[index].arguments += arguments


def _open_tool_call(
    v: _Violations,
    choice: ChoiceSummary,
    index: int,
    fragment: dict[str, Any],
    function: dict[str, Any],
    ids_here: set[str],
    seen_call_ids: set[str] | None,
    kind: str = "function",
) -> None:
    call_id = fragment.get("id")
    name = function.get("name")
    if not isinstance(call_id, str) or not call_id.startswith("call_") or call_id == "call_":
        v.add(10, f"first fragment of index {index} has id {call_id!r}, expected a non-empty 'call_…' id")
    elif call_id in ids_here:
        v.add(10, f"call id {call_id!r} repeats within the response")
    elif seen_call_ids is not None and call_id in seen_call_ids:
        v.add(10, f"call id {call_id!r} was already used by an earlier response")
    if isinstance(call_id, str):
        ids_here.add(call_id)
    text_key = "input" if kind == "custom" else "arguments"
    if fragment.get("type") != kind:
        v.add(10, f"first fragment of index {index} has type {fragment.get('type')!r}, expected {kind!r}")
    if not isinstance(name, str) or not name:
        v.add(10, f"first fragment of index {index} has no complete {kind}.name: {name!r}")
    if not isinstance(function.get(text_key), str):
        v.add(10, f"first fragment of index {index} has no string {kind}.{text_key}")
    choice.tool_calls.append(ToolCall(index=index, id=call_id if isinstance(call_id, str) else None,
                                      name=name if isinstance(name, str) else "", kind=kind))


def _check_function_call_fragment(v: _Violations, choice: ChoiceSummary, fragment: Any) -> None:
    if not isinstance(fragment, dict):
        v.add(16, f"delta.function_call is not an object: {fragment!r}")
        return
    for key, value in fragment.items():
        if value is None:
            v.add(7, f"function_call sends {key}: null")
    if choice.function_call is None:
        name = fragment.get("name")
        if not isinstance(name, str) or not name:
            v.add(16, f"first function_call fragment without a complete name: {fragment!r}")
        if not isinstance(fragment.get("arguments"), str):
            v.add(16, f"first function_call fragment without string arguments: {fragment!r}")
        choice.function_call = ToolCall(index=0, id=None, name=name if isinstance(name, str) else "")
    elif set(fragment) - {"arguments"}:
        v.add(16, f"function_call continuation repeats {sorted(set(fragment) - {'arguments'})}")
    if isinstance(fragment.get("arguments"), str):
        choice.function_call.arguments += fragment["arguments"]


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _check_choice_end(v: _Violations, choice: ChoiceSummary, *, errored: bool) -> None:
    i = choice.index
    if choice.finish_reason is None and not errored:
        v.add(14, f"choice {i} never got a finish_reason")
    calls = choice.tool_calls + ([choice.function_call] if choice.function_call else [])
    for position, call in enumerate(calls):
        call.complete = call.kind == "custom" or _is_json_object(call.arguments)
        open_at_error = errored and choice.finish_reason is None and position == len(calls) - 1
        if not call.complete and not open_at_error:
            v.add(13, f"choice {i} call {call.name!r} arguments {call.arguments!r} are not one JSON object")
    if choice.tool_calls and choice.function_call:
        v.add(16, f"choice {i} mixes tool_calls and function_call")
    finish = choice.finish_reason
    if finish == "tool_calls" and not choice.tool_calls:
        v.add(15, f"choice {i} finished with tool_calls but streamed no tool call")
    if finish == "function_call" and not choice.function_call:
        v.add(16, f"choice {i} finished with function_call but streamed no function_call")
    if finish == "stop" and any(c.complete for c in choice.tool_calls):
        v.add(15, f"choice {i} streamed complete tool calls but finished with 'stop'")
    if finish == "stop" and choice.function_call is not None and choice.function_call.complete:
        v.add(16, f"choice {i} streamed a complete function_call but finished with 'stop'")
    if finish == "tool_calls" and choice.function_call:
        v.add(16, f"choice {i} streamed a function_call but finished with 'tool_calls'")


def _check_against_openai_helper(v: _Violations, summary: ChatStreamSummary) -> None:
    """Invariant 13: openai-python's ``ChatCompletionStreamState`` accumulates the same calls."""
    from openai._models import construct_type
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    chunks = [c for c in summary.chunks if isinstance(c.get("choices"), list)]
    if not chunks:
        return
    state = ChatCompletionStreamState()
    try:
        for chunk in chunks:
            state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=chunk))
        snapshot = state.current_completion_snapshot
    except Exception as exc:  # the helper crashing is exactly what the contract must prevent
        v.add(13, f"openai-python ChatCompletionStreamState failed: {type(exc).__name__}: {exc}")
        return
    for choice in snapshot.choices:
        mine = summary.choices.get(choice.index)
        if mine is None:
            continue
        helper_calls = [
            (tc.id, tc.function.name if tc.function else None, tc.function.arguments if tc.function else None)
            for tc in choice.message.tool_calls or []
        ]
        # The helper accumulates only function calls: of a custom tool's call it keeps the id (and must not crash).
        naive_calls = [(c.id, None, None) if c.kind == "custom" else (c.id, c.name, c.arguments)
                       for c in mine.tool_calls]
        if helper_calls != naive_calls:
            v.add(13, f"choice {choice.index}: openai-python helper accumulated {helper_calls!r}, naive concatenation {naive_calls!r}")
        if (choice.message.content or "") != mine.content:
            v.add(13, f"choice {choice.index}: helper content {choice.message.content!r} != naive {mine.content!r}")


def check_chat_completion(body: bytes | str | dict[str, Any], *, legacy: bool | None = None,
                          seen_call_ids: set[str] | None = None) -> dict[str, Any]:
    """Assert the non-streaming response shape of wire-contract 3.9 (messages labelled ``[3.9]``,
    plus invariants 10, 15 and 16 applied to the message); return the parsed body."""
    text = body if isinstance(body, str) else json.dumps(body) if isinstance(body, dict) else body.decode("utf-8", "replace")
    v = _Violations()
    try:
        obj = body if isinstance(body, dict) else json.loads(text)
    except ValueError:
        v.add("3.9", "body is not JSON")
        v.raise_if_any("chat completion", text)
    if obj.get("object") != "chat.completion":
        v.add("3.9", f"object is {obj.get('object')!r}")
    if not isinstance(obj.get("id"), str) or not obj["id"] or not isinstance(obj.get("created"), int) or not obj.get("model"):
        v.add("3.9", "id / created / model missing or empty")
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices:
        v.add("3.9", f"choices is {choices!r}")
        choices = []
    ids_here: set[str] = set()
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict) or not isinstance(choice.get("index"), int):
            v.add("3.9", f"choice without index or message: {choice!r}")
            continue
        i, finish = choice["index"], choice.get("finish_reason")
        if message.get("role") != "assistant":
            v.add("3.9", f"choice {i} message role {message.get('role')!r}")
        if finish not in CHAT_FINISH_REASONS:
            v.add("3.9", f"choice {i} finish_reason {finish!r}")
        calls = message.get("tool_calls") or []
        for call in calls:
            custom = isinstance(call, dict) and call.get("type") == "custom"
            function = call.get("custom" if custom else "function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or call.get("type") not in ("function", "custom") or \
                    not function.get("name") or (custom and not isinstance(function.get("input"), str)):
                v.add("3.9", f"choice {i} tool call without type 'function' (or 'custom') and a name: {call!r}")
                continue
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id.startswith("call_") or call_id in ids_here or call_id in (seen_call_ids or ()):
                v.add(10, f"choice {i} tool call id {call_id!r} is not a fresh 'call_…' id")
            if isinstance(call_id, str):
                ids_here.add(call_id)
            if not custom and (not isinstance(function.get("arguments"), str)
                               or not _is_json_object(function["arguments"])):
                v.add(13, f"choice {i} tool call {function.get('name')!r} arguments {function.get('arguments')!r} are not a JSON object")
        if calls and message.get("content") == "":
            v.add("3.9", f"choice {i} holds only tool calls but content is '' (expected null)")
        if calls and finish == "stop":
            v.add(15, f"choice {i} has tool calls but finish_reason 'stop'")
        if finish == "tool_calls" and not calls:
            v.add(15, f"choice {i} finish_reason 'tool_calls' without tool calls")
        function_call = message.get("function_call")
        if function_call is not None:
            if legacy is False or calls:
                v.add(16, f"choice {i} has message.function_call (legacy={legacy}, tool_calls={bool(calls)})")
            if not isinstance(function_call, dict) or not function_call.get("name") or not _is_json_object(function_call.get("arguments") or ""):
                v.add(16, f"choice {i} function_call {function_call!r} lacks a name or JSON arguments")
        if (finish == "function_call") != (function_call is not None):
            v.add(16, f"choice {i} finish_reason {finish!r} with function_call {function_call!r}")
        if legacy and calls:
            v.add(16, f"choice {i} answers a legacy functions request with tool_calls")
    if seen_call_ids is not None:
        seen_call_ids.update(ids_here)
    v.raise_if_any("chat completion", text)
    return obj


# ---------------------------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------------------------


@dataclass
class _Item:
    output_index: int
    item: dict[str, Any]
    done: dict[str, Any] | None = None
    arg_deltas: list[str] = field(default_factory=list)
    args_done: dict[str, Any] | None = None
    parts: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass
class ResponsesStreamSummary:
    """The result of ``check_responses_stream``.

    Fields:
        response: the Response object of the terminal lifecycle event (``None`` after an ``error``).
        events: every parsed event, in order.
        items: the ``output_item.done`` items in ``output_index`` order.
        error: the ``error`` event, if the stream ended with one.
        comments: keep-alive comment texts.
    """

    response: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    comments: list[str] = field(default_factory=list)


def check_responses_stream(
    raw: bytes | str,
    *,
    status: int | None = None,
    content_type: str | None = None,
    seen_call_ids: set[str] | None = None,
) -> ResponsesStreamSummary:
    """Assert the Responses stream invariants (wire-contract section 9: 1-3, 21-32).

    Returns a ``ResponsesStreamSummary`` (``.response`` is the final Response object); raises
    ``ContractViolation`` on any violation. ``seen_call_ids`` works as in ``check_chat_stream``.
    """
    text = _as_text(raw)
    v = _Violations()
    _check_http(v, status, content_type)
    summary = ResponsesStreamSummary()
    items: list[_Item] = []
    call_ids: set[str] = set()
    response_id: str | None = None
    terminal: str | None = None

    for block in parse_sse(text, v):
        if not block.data:
            if terminal is not None and block.comments:
                v.add(22, f"comment {block.comments!r} after the terminal event")
            summary.comments.extend(block.comments)
            continue
        payload = "\n".join(block.data)
        if terminal is not None:
            v.add(22, f"frame after the terminal {terminal!r} event: {payload[:120]!r}")
        if payload == "[DONE]":
            v.add(22, "Responses stream sends data: [DONE]")
            continue
        event = _payload_object(v, payload, not_object=21)
        if event is None:
            continue
        kind = event.get("type")
        if block.event != kind:
            v.add(3, f"'event: {block.event}' line does not equal data.type {kind!r}")
        position = len(summary.events)
        summary.events.append(event)
        seq = event.get("sequence_number")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq != position:
            v.add(21, f"event {position} ({kind}) has sequence_number {seq!r}, expected {position}")
        if not isinstance(kind, str):
            v.add(21, f"event {position} has no string type")
            continue
        if kind not in RESPONSES_EVENT_TYPES:
            v.add(32, f"event type {kind!r} is not in OpenAI's catalogue")
        missing = [f for f in RESPONSES_REQUIRED_FIELDS.get(kind, ()) if f not in event]
        if missing:
            v.add(29 if missing == ["name"] else 21, f"{kind} lacks required field(s) {missing}")
        if position == 0 and kind != "response.created":
            v.add(22, f"first event is {kind!r}, expected response.created")
        if kind in RESPONSES_LIFECYCLE or (kind in RESPONSES_TERMINAL and kind != "error"):
            response_id = _check_response_object(v, kind, event.get("response"), response_id, position)
        if kind in RESPONSES_TERMINAL:
            terminal = kind
            _check_terminal(v, kind, event, items, summary)
        elif kind == "response.output_item.added":
            _on_item_added(v, event, items, call_ids, seen_call_ids)
        elif kind == "response.output_item.done":
            _on_item_done(v, event, items)
        elif kind.startswith(("response.content_part.", "response.output_text.", "response.function_call_arguments.",
                              "response.custom_tool_call_input.", "response.refusal.", "response.reasoning_text.")):
            _on_item_scoped(v, kind, event, items)
        elif kind.startswith(tuple(MCP_EVENT_ITEMS)):
            _on_mcp_event(v, kind, event, items)

    if terminal is None:
        v.add(22, "stream ends without a terminal event (completed / incomplete / failed / error)")
    if seen_call_ids is not None:
        seen_call_ids.update(call_ids)
    summary.items = [it.done for it in items if it.done is not None]
    v.raise_if_any("responses stream", text)
    return summary


def _check_response_object(v: _Violations, kind: str, response: Any, response_id: str | None, position: int) -> str | None:
    if not isinstance(response, dict):
        v.add(23, f"{kind} without a response object")
        return response_id
    missing = RESPONSE_KEYS - set(response)
    if missing:
        v.add(23, f"{kind}.response lacks documented keys {sorted(missing)}")
    if response.get("object") != "response":
        v.add(23, f"{kind}.response.object is {response.get('object')!r}")
    if not isinstance(response.get("id"), str) or not response["id"].startswith("resp_"):
        v.add(23, f"{kind}.response.id {response.get('id')!r} is not a 'resp_…' id")
    if response_id is not None and response.get("id") != response_id:
        v.add(23, f"{kind}.response.id {response.get('id')!r} differs from {response_id!r}")
    if not isinstance(response.get("output"), list):
        v.add(30 if kind == "response.completed" else 23, f"{kind}.response.output is {response.get('output')!r}, expected an array")
    if not isinstance(response.get("parallel_tool_calls"), bool) or not isinstance(response.get("tools"), list):
        v.add(23, f"{kind}.response parallel_tool_calls/tools have the wrong types")
    if kind == "response.created":
        if position != 0:
            v.add(22, f"response.created at position {position}")
        if response.get("status") != "in_progress" or response.get("output") != []:
            v.add(22, f"response.created has status {response.get('status')!r}, output {response.get('output')!r}")
    return response_id if response_id is not None else response.get("id")


def _item_at(v: _Violations, kind: str, event: dict[str, Any], items: list[_Item]) -> _Item | None:
    index = event.get("output_index")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(items):
        v.add(24, f"{kind} refers to output_index {index!r}, which was never added")
        return None
    return items[index]


def _on_item_added(v: _Violations, event: dict[str, Any], items: list[_Item], call_ids: set[str], seen: set[str] | None) -> None:
    index = event.get("output_index")
    item = event.get("item")
    if index != len(items):
        v.add(24, f"output_item.added has output_index {index!r}, expected {len(items)}")
    if not isinstance(item, dict):
        v.add(25, f"output_item.added without an item object: {item!r}")
        item = {}
    open_items = [it.output_index for it in items if it.done is None]
    if open_items:
        v.add(24, f"item {len(items)} added while item(s) {open_items} are still open")
    _check_item_identity_fields(v, "output_item.added", item)
    if item.get("type") in CALL_ITEM_TYPES:
        if item.get("type") == "function_call" and item.get("arguments") != "":
            v.add(28, f"function_call output_item.added has arguments {item.get('arguments')!r}, expected ''")
        if item.get("type") == "custom_tool_call" and item.get("input") != "":
            v.add(28, f"custom_tool_call output_item.added has input {item.get('input')!r}, expected ''")
        call_id = item.get("call_id")
        if call_id in call_ids or (seen is not None and call_id in seen):
            v.add(25, f"call_id {call_id!r} is not unique")
        if isinstance(call_id, str):
            call_ids.add(call_id)
    items.append(_Item(output_index=len(items), item=item))


def _check_item_identity_fields(v: _Violations, where: str, item: dict[str, Any]) -> None:
    item_type = item.get("type")
    item_id = item.get("id")
    prefix = ITEM_ID_PREFIX.get(item_type, "")
    if not isinstance(item_id, str) or not item_id.startswith(prefix) or item_id == prefix:
        v.add(25, f"{where}: {item_type} item id {item_id!r} is not a non-empty {prefix or 'string'}… id")
    if item_type in ("function_call", "custom_tool_call"):
        for key in ("call_id", "name"):
            if not isinstance(item.get(key), str) or not item[key]:
                v.add(25, f"{where}: {item_type} item without a non-empty {key}: {item!r}")
        text_key = "arguments" if item_type == "function_call" else "input"
        if not isinstance(item.get(text_key), str):
            v.add(25, f"{where}: {item_type} {text_key} is not a string: {item.get(text_key)!r}")


def _same_identity(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in ("id", "type", "call_id", "name"))


def _on_item_scoped(v: _Violations, kind: str, event: dict[str, Any], items: list[_Item]) -> None:
    it = _item_at(v, kind, event, items)
    if it is None:
        return
    if it.done is not None:
        v.add(24, f"{kind} for output_index {it.output_index} after its output_item.done")
    if event.get("item_id") != it.item.get("id"):
        v.add(26, f"{kind} item_id {event.get('item_id')!r} != id {it.item.get('id')!r} of item {it.output_index}")
    wanted = ("function_call" if kind.startswith("response.function_call_arguments.") else
              "custom_tool_call" if kind.startswith("response.custom_tool_call_input.") else
              "reasoning" if kind.startswith("response.reasoning_text.") else
              it.item.get("type") if kind.startswith("response.content_part.") and it.item.get("type") == "reasoning"
              else "message")
    if it.item.get("type") != wanted:
        v.add(26, f"{kind} targets a {it.item.get('type')!r} item")
        return
    if kind == "response.custom_tool_call_input.delta":
        if not isinstance(event.get("delta"), str) or not event["delta"]:
            v.add(28, f"custom_tool_call_input.delta without a non-empty string delta: {event.get('delta')!r}")
        else:
            it.arg_deltas.append(event["delta"])
    elif kind == "response.custom_tool_call_input.done":
        if it.args_done is not None:
            v.add(28, f"second custom_tool_call_input.done for item {it.output_index}")
        it.args_done = event
        if event.get("input") != "".join(it.arg_deltas):
            v.add(28, f"custom_tool_call_input.done.input {event.get('input')!r} != deltas {''.join(it.arg_deltas)!r}")
    elif kind == "response.function_call_arguments.delta":
        if not isinstance(event.get("delta"), str):
            v.add(28, f"function_call_arguments.delta without a string delta: {event.get('delta')!r}")
        else:
            it.arg_deltas.append(event["delta"])
    elif kind == "response.function_call_arguments.done":
        _on_arguments_done(v, event, it)
    else:
        _on_content_event(v, kind, event, it)


def _on_mcp_event(v: _Violations, kind: str, event: dict[str, Any], items: list[_Item]) -> None:
    """An MCP event: about an open item of its type, by that item's id; an ``mcp_call``'s arguments whole
    before its run."""
    it = _item_at(v, kind, event, items)
    if it is None:
        return
    wanted = next(item for prefix, item in MCP_EVENT_ITEMS.items() if kind.startswith(prefix))
    if it.item.get("type") != wanted or event.get("item_id") != it.item.get("id"):
        v.add(26, f"{kind} targets item {it.output_index} ({it.item.get('type')!r}, {it.item.get('id')!r})")
    if it.done is not None:
        v.add(24, f"{kind} for output_index {it.output_index} after its output_item.done")
    if kind == "response.mcp_call_arguments.delta":
        it.arg_deltas.append(str(event.get("delta")))
    elif kind == "response.mcp_call_arguments.done" and event.get("arguments") != "".join(it.arg_deltas):
        v.add(28, f"mcp_call_arguments.done.arguments {event.get('arguments')!r} != its deltas")


def _on_arguments_done(v: _Violations, event: dict[str, Any], it: _Item) -> None:
    if it.args_done is not None:
        v.add(28, f"second function_call_arguments.done for item {it.output_index}")
    it.args_done = event
    if not it.arg_deltas:
        v.add(28, f"function_call {it.output_index} has no function_call_arguments.delta")
    if event.get("arguments") != "".join(it.arg_deltas):
        v.add(28, f"function_call_arguments.done.arguments {event.get('arguments')!r} != deltas {''.join(it.arg_deltas)!r}")
    if "name" in event and event["name"] != it.item.get("name"):
        v.add(29, f"function_call_arguments.done.name {event['name']!r} != item name {it.item.get('name')!r}")


def _on_content_event(v: _Violations, kind: str, event: dict[str, Any], it: _Item) -> None:
    content_index = event.get("content_index")
    part = it.parts.get(content_index)
    if kind == "response.content_part.added":
        if part is not None:
            v.add(27, f"content_part.added twice for item {it.output_index} content {content_index}")
        it.parts[content_index] = {"deltas": [], "text_done": None, "part_done": None}
        return
    if part is None:
        v.add(27, f"{kind} before content_part.added (item {it.output_index}, content {content_index})")
        return
    if part["part_done"] is not None:
        v.add(27, f"{kind} after content_part.done (item {it.output_index}, content {content_index})")
    text = "".join(part["deltas"])
    if kind in ("response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta"):
        if not isinstance(event.get("delta"), str):
            v.add(27, f"{kind} without a string delta")
        else:
            part["deltas"].append(event["delta"])
    elif kind in ("response.output_text.done", "response.refusal.done", "response.reasoning_text.done"):
        full = event.get("refusal" if kind == "response.refusal.done" else "text")
        if full != text:
            v.add(27, f"{kind} text {full!r} != concatenated deltas {text!r}")
        part["text_done"] = full
    elif kind == "response.content_part.done":
        done_part = event.get("part") if isinstance(event.get("part"), dict) else {}
        if part["text_done"] is None:
            v.add(27, f"content_part.done before output_text.done (item {it.output_index})")
        if done_part.get("text", done_part.get("refusal")) != text:
            v.add(27, f"content_part.done part text {done_part.get('text')!r} != deltas {text!r}")
        part["part_done"] = event


def _on_item_done(v: _Violations, event: dict[str, Any], items: list[_Item]) -> None:
    it = _item_at(v, "output_item.done", event, items)
    if it is None:
        return
    item = event.get("item") if isinstance(event.get("item"), dict) else {}
    if it.done is not None:
        v.add(24, f"second output_item.done for output_index {it.output_index}")
    it.done = item
    _check_item_identity_fields(v, "output_item.done", item)
    if not _same_identity(it.item, item):
        v.add(25, f"item {it.output_index} identity changed between added {it.item!r} and done {item!r}")
    if item.get("type") == "function_call":
        arguments = item.get("arguments")
        if it.args_done is None:
            v.add(28, f"function_call {it.output_index} closed without function_call_arguments.done")
        elif arguments != it.args_done.get("arguments"):
            v.add(28, f"output_item.done arguments {arguments!r} != function_call_arguments.done {it.args_done.get('arguments')!r}")
        if item.get("status") == "completed" and not (isinstance(arguments, str) and _is_json_object(arguments)):
            v.add(28, f"completed function_call {it.output_index} arguments {arguments!r} are not a JSON object")
    elif item.get("type") == "custom_tool_call":
        if it.args_done is None:
            v.add(28, f"custom_tool_call {it.output_index} closed without custom_tool_call_input.done")
        elif item.get("input") != it.args_done.get("input"):
            v.add(28, f"output_item.done input {item.get('input')!r} != custom_tool_call_input.done {it.args_done.get('input')!r}")
    elif item.get("type") in ("message", "reasoning"):
        part_type = "output_text" if item["type"] == "message" else "reasoning_text"
        for content_index, part in it.parts.items():
            if part["part_done"] is None:
                v.add(27, f"{item['type']} {it.output_index} content {content_index} closed without content_part.done")
        texts = [c.get("text") for c in item.get("content") or [] if isinstance(c, dict) and c.get("type") == part_type]
        streamed = ["".join(it.parts[k]["deltas"]) for k in sorted(it.parts, key=lambda k: k if isinstance(k, int) else -1)]
        if it.parts and texts != streamed:
            v.add(27, f"message {it.output_index} done content {texts!r} != streamed text {streamed!r}")
        if not it.parts and any(texts):
            v.add(27, f"message {it.output_index} has text {texts!r} but no content_part/output_text lifecycle")


def _check_terminal(v: _Violations, kind: str, event: dict[str, Any], items: list[_Item], summary: ResponsesStreamSummary) -> None:
    open_items = [it.output_index for it in items if it.done is None]
    if open_items:
        v.add(24, f"{kind} while item(s) {open_items} have no output_item.done")
    if kind == "error":
        summary.error = event
        if not isinstance(event.get("message"), str) or not event["message"]:
            v.add(31, f"error event without a message: {event!r}")
        return
    response = event.get("response") if isinstance(event.get("response"), dict) else {}
    summary.response = response
    status = response.get("status")
    if kind == "response.completed":
        if status != "completed":
            v.add(30, f"response.completed has status {status!r}")
        _check_final_output(v, response, items)
        _check_responses_usage(v, response.get("usage"))
    elif kind == "response.incomplete":
        details = response.get("incomplete_details")
        if status != "incomplete" or not isinstance(details, dict) or not details.get("reason"):
            v.add(31, f"response.incomplete has status {status!r}, incomplete_details {details!r}")
    elif kind == "response.failed":
        error = response.get("error")
        if status != "failed" or not isinstance(error, dict) or "code" not in error or not error.get("message"):
            v.add(31, f"response.failed has status {status!r}, error {error!r}")


def _check_final_output(v: _Violations, response: dict[str, Any], items: list[_Item]) -> None:
    output = response.get("output")
    if not isinstance(output, list):
        return
    done = [it.done for it in items if it.done is not None]
    if len(output) != len(done):
        v.add(30, f"response.completed.output has {len(output)} item(s), {len(done)} were streamed")
    for position, (final, streamed) in enumerate(zip(output, done)):
        if not isinstance(final, dict) or not _same_identity(final, streamed):
            v.add(30, f"completed output[{position}] {final!r} does not match streamed item {streamed!r}")
        elif final.get("type") == "function_call" and final.get("arguments") != streamed.get("arguments"):
            v.add(30, f"completed output[{position}] arguments differ from the streamed item")
        elif final.get("type") == "message" and final.get("content") != streamed.get("content"):
            v.add(30, f"completed output[{position}] content differs from the streamed message")


def _check_responses_usage(v: _Violations, usage: Any) -> None:
    if not isinstance(usage, dict):
        v.add(30, f"response.completed.usage is {usage!r}")
        return
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        if not isinstance(usage.get(key), int) or isinstance(usage.get(key), bool):
            v.add(30, f"usage.{key} is {usage.get(key)!r}")
    details_in = usage.get("input_tokens_details")
    details_out = usage.get("output_tokens_details")
    if not isinstance(details_in, dict) or not {"cached_tokens", "cache_write_tokens"} <= set(details_in):
        v.add(30, f"usage.input_tokens_details is {details_in!r}")
    if not isinstance(details_out, dict) or "reasoning_tokens" not in details_out:
        v.add(30, f"usage.output_tokens_details is {details_out!r}")


# ---------------------------------------------------------------------------------------------
# Error envelopes
# ---------------------------------------------------------------------------------------------


def check_error_envelope(status: int, body: bytes | str | dict[str, Any]) -> dict[str, Any]:
    """Assert invariant 4 (a non-2xx JSON body with a full OpenAI error envelope); return ``error``."""
    v = _Violations()
    text = body if isinstance(body, str) else json.dumps(body) if isinstance(body, dict) else body.decode("utf-8", "replace")
    if not 400 <= status <= 599:
        v.add(4, f"error status {status} is not a 4xx/5xx")
    try:
        obj = body if isinstance(body, dict) else json.loads(text)
    except ValueError:
        v.add(4, "error body is not JSON")
        v.raise_if_any("error envelope", text)
    error = obj.get("error") if isinstance(obj, dict) else None
    if not isinstance(error, dict):
        v.add(4, "error body has no 'error' object")
        v.raise_if_any("error envelope", text)
    if not isinstance(error.get("message"), str) or not error["message"]:
        v.add(4, f"error.message is {error.get('message')!r}")
    if not isinstance(error.get("type"), str) or not error["type"]:
        v.add(4, f"error.type is {error.get('type')!r}")
    for key in ("param", "code"):
        if key not in error:
            v.add(4, f"error.{key} is missing (send null)")
    v.raise_if_any("error envelope", text)
    return error


# ---------------------------------------------------------------------------------------------
# Recording transport
# ---------------------------------------------------------------------------------------------

SESSION_CALL_IDS: set[str] = set()
"""Call ids seen by every recorder in this process (invariant 10: unique across responses)."""


@dataclass
class RecordedExchange:
    """One request/response pair that went through a ``RecordingTransport``.

    Fields:
        method, path: the request.
        request_body: the request JSON (``None`` if none or not JSON).
        status, headers: the response status and headers.
        body: every response byte read (including bytes drained when the client closed early).
        eof: the body was read to its end.
        summary: the checker result, set by ``StreamRecorder.check_all``.
    """

    method: str
    path: str
    request_body: Any
    status: int
    headers: httpx.Headers
    body: bytearray = field(default_factory=bytearray)
    eof: bool = False
    summary: Any = None

    @property
    def is_sse(self) -> bool:
        """Whether the response is an event stream."""
        return self.headers.get("content-type", "").split(";")[0].strip() == "text/event-stream"


class _TeeStream(httpx.SyncByteStream):
    """Passes the body through while copying it into a ``RecordedExchange``; on an early close it
    drains the rest of the body (so the checkers see everything the server sent)."""

    def __init__(self, inner: httpx.SyncByteStream, record: RecordedExchange, drain_on_close: bool) -> None:
        self._inner = inner
        self._it: Iterator[bytes] | None = None
        self._record = record
        self._drain = drain_on_close

    def _iterator(self) -> Iterator[bytes]:
        if self._it is None:
            self._it = iter(self._inner)
        return self._it

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._iterator():
            self._record.body += chunk
            yield chunk
        self._record.eof = True

    def close(self) -> None:
        try:
            if self._drain and not self._record.eof:
                for chunk in self._iterator():
                    self._record.body += chunk
                self._record.eof = True
        except httpx.HTTPError:
            pass  # the server broke the body off: what was read is what the client got
        finally:
            self._inner.close()


class RecordingTransport(httpx.BaseTransport):
    """An httpx transport that records every exchange into a ``StreamRecorder``."""

    def __init__(self, recorder: "StreamRecorder", inner: httpx.BaseTransport | None = None, *, drain_on_close: bool = True) -> None:
        self._recorder = recorder
        self._inner = inner or httpx.HTTPTransport()
        self._drain = drain_on_close

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Forward the request and wrap the response body in a tee."""
        response = self._inner.handle_request(request)
        try:
            request_body = json.loads(request.content) if request.content else None
        except ValueError:
            request_body = None
        record = RecordedExchange(
            method=request.method,
            path=request.url.path,
            request_body=request_body,
            status=response.status_code,
            headers=response.headers,
        )
        self._recorder.add(record)
        assert isinstance(response.stream, httpx.SyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_TeeStream(response.stream, record, self._drain),
            extensions=response.extensions,
        )

    def close(self) -> None:
        """Close the wrapped transport."""
        self._inner.close()


class StreamRecorder:
    """Collects ``RecordedExchange``s and checks each against the contract.

    ``transport()`` makes a ``RecordingTransport`` feeding this recorder; ``check_all()`` runs
    ``check_chat_stream`` on chat streams, ``check_chat_completion`` on non-streaming chat
    answers, ``check_responses_stream`` on Responses streams and ``check_error_envelope`` on error
    responses, and returns the failure messages.
    """

    def __init__(self, seen_call_ids: set[str] | None = None) -> None:
        self.records: list[RecordedExchange] = []
        self._lock = threading.Lock()
        self._checked = 0
        self.seen_call_ids = SESSION_CALL_IDS if seen_call_ids is None else seen_call_ids

    def add(self, record: RecordedExchange) -> None:
        """Append one exchange."""
        with self._lock:
            self.records.append(record)

    def transport(self, *, drain_on_close: bool = True) -> RecordingTransport:
        """A new transport that records into this recorder."""
        return RecordingTransport(self, drain_on_close=drain_on_close)

    def check(self, record: RecordedExchange) -> Any:
        """Run the right checker on ``record``; return its summary (``None`` if nothing applies)."""
        request = record.request_body if isinstance(record.request_body, dict) else {}
        content_type = record.headers.get("content-type")
        if "/messages" in record.path:  # Anthropic's API: its own envelope and stream
            record.summary = check_messages_exchange(record.status, bytes(record.body), record.is_sse)
        elif record.status >= 400:
            record.summary = check_error_envelope(record.status, bytes(record.body))
        elif record.is_sse and record.path.endswith("/chat/completions"):
            record.summary = check_chat_stream(
                bytes(record.body),
                include_usage=bool((request.get("stream_options") or {}).get("include_usage")),
                legacy=bool(request.get("functions") or request.get("function_call")),
                status=record.status,
                content_type=content_type,
                seen_call_ids=self.seen_call_ids,
            )
        elif record.is_sse and record.path.endswith("/responses"):
            record.summary = check_responses_stream(
                bytes(record.body), status=record.status, content_type=content_type, seen_call_ids=self.seen_call_ids
            )
        elif record.path.endswith("/chat/completions") and not request.get("stream"):
            record.summary = check_chat_completion(
                bytes(record.body), legacy=bool(request.get("functions") or request.get("function_call")),
                seen_call_ids=self.seen_call_ids,
            )
        elif request.get("stream"):
            raise ContractViolation("stream", [f"[inv 1] stream=true answered with {content_type!r}"], bytes(record.body).decode("utf-8", "replace"))
        return record.summary

    def check_all(self) -> list[str]:
        """Check every record not checked yet; return one failure text per failing record."""
        with self._lock:
            pending = self.records[self._checked :]
            self._checked = len(self.records)
        failures = []
        for record in pending:
            if not record.eof:
                failures.append(f"{record.method} {record.path}: response body was never read to the end")
                continue
            try:
                self.check(record)
            except AssertionError as exc:
                failures.append(f"{record.method} {record.path} -> {record.status}: {exc}")
        return failures

    def streams(self, path_suffix: str = "/chat/completions") -> list[RecordedExchange]:
        """The recorded event streams whose path ends with ``path_suffix``."""
        return [r for r in self.records if r.is_sse and r.path.endswith(path_suffix)]
