"""Responses request → chat-format messages, tool specs and tool choice.

The back end only speaks Chat, so ``instructions``, the history of a
``previous_response_id`` chain and the ``input`` items become the message dicts
that ``prompting.build_upstream_messages`` takes. Stored items come from a
:class:`~app.store.ResponseStore`; anything that can't be resolved is an
:class:`InputError` (400; 404 for a stored response or item that is not there, or not the caller's) raised before
the first byte is sent.
"""

from __future__ import annotations

from typing import Any, Mapping

import orjson

from ..errors import InputError
from ..pipeline.prompt import media_placeholder
from .compaction import SUMMARY_HEADING, compaction_summary
from .schemas import (
    ApplyPatchCallItem,
    ApplyPatchCallOutputItem,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    ItemReference,
    LocalShellCallItem,
    LocalShellCallOutputItem,
    MessageItem,
    MediaPart,
    OtherItem,
    RefusalPart,
    ReasoningItem,
    ResponsesRequest,
    ShellCallItem,
    ShellCallOutputItem,
    ToolSearchCallItem,
    ToolSearchOutputItem,
    parse_input_item,
)
from ..gateway_tools.mcp import model_tool_name
from ..store import OwnedStore, ResponseStore
from .mcp import DENIED, McpHistory, PendingApproval

#: What stored items are read from: the store as the request's client key sees it (or the whole store).
Lookup = OwnedStore | ResponseStore
from .tools import APPLY_PATCH, LOCAL_SHELL, SHELL, TOOL_SEARCH, model_name

__all__ = ["InputError", "resolve_input_items", "to_chat_messages"]

#: Longest item note (an item type the model cannot act on, shown as one line).
NOTE_LIMIT = 240

_NO_STORE_HINT = (
    " Responses are only kept when created with store enabled and within the retention period. "
    "Send the full items instead (with the AI SDK: providerOptions.openai.store = false)."
)


def resolve_input_items(request: ResponsesRequest, lookup: Lookup | None) -> list[dict[str, Any]]:
    """The request's own input as item dicts, with every ``item_reference`` replaced by its stored item.

    This is what to store as the response's input items (a string input is one
    user message item).

    Raises:
        InputError: an ``item_reference`` that is not stored (``param`` ``input[i].id``).
    """
    return [
        _stored_item(item, i, lookup) if isinstance(item, ItemReference) else item.model_dump(exclude_none=True)
        for i, item in enumerate(request.input)
    ]


def to_chat_messages(
    request: ResponsesRequest, lookup: Lookup | None, input_items: list[dict[str, Any]] | None = None, *,
    max_history_items: int = 0, max_history_bytes: int = 0, conversation: list[dict[str, Any]] | None = None,
    mcp: McpHistory | None = None,
) -> list[dict[str, Any]]:
    """Chat-format messages for ``build_upstream_messages``.

    Order: ``instructions`` (a system message; never carried over from an
    earlier response), then the input and output items of every response in the
    ``previous_response_id`` chain, oldest first, then this request's input.
    Consecutive function calls (and a call right after assistant text) share
    one assistant message; the Responses ``call_id`` is the tool-call id.
    Custom tool calls keep their raw input (a Chat ``custom`` tool call);
    ``tool_search``, ``local_shell``, ``shell`` and ``apply_patch`` calls become calls of the tools of
    those names, their outputs results in words; a toolwire compaction item is its summary in a user message;
    reasoning (readable or encrypted) and other compaction items are not
    shown to the model; any other item (a hosted tool's call, an MCP item, a
    type never heard of) becomes one short readable line.

    ``input_items`` is :func:`resolve_input_items`'s answer when the caller has
    it already (only its referenced items are read: the store is not asked again).
    ``max_history_items`` and ``max_history_bytes`` (0 = no limit) bound the history the
    ``previous_response_id`` chain resolves to, checked as the chain is walked: a short
    request naming a long chain must not rebuild hundreds of megabytes for the back end.
    ``conversation`` is the items of the request's ``conversation``, which come where a chain's would.
    MCP items (:mod:`.mcp`): an ``mcp_call`` is the call of its tool and its result; a listing is a note (``mcp``
    collects its tools), an approval request is not shown (``mcp`` collects it); an ``mcp_approval_response`` of this request's input not yet
    run is the approved call and a result its run fills (``mcp.pending``), a denial the call and its refusal.

    Raises:
        InputError: a chain past those limits (400 ``history_too_long``), unknown ``previous_response_id``, unresolvable
            ``item_reference``, or a ``function_call_output`` whose ``call_id``
            matches no earlier ``function_call``; ``param`` names the offending parameter.
            (A media part becomes a placeholder such as ``[image]``, as on the Chat endpoint.)
    """
    builder = _ChatBuilder(mcp if mcp is not None else McpHistory())
    builder.mcp.ran.update(str((item.model_extra or {}).get("approval_request_id")) for item in request.input
                           if isinstance(item, OtherItem) and item.type == "mcp_call")
    if request.instructions:
        builder.messages.append({"role": "system", "content": request.instructions})
    if request.previous_response_id is not None:
        for earlier in _history(request.previous_response_id, lookup, max_history_items, max_history_bytes):
            builder.add(parse_input_item(earlier, "previous_response_id"), "previous_response_id")
    for earlier in conversation or ():
        builder.add(parse_input_item(earlier, "conversation"), "conversation")
    # The request's own items are parsed already; only a referenced (stored) one needs parsing,
    # and every reference is resolved before any item is added, as resolve_input_items does.
    stored = {i: input_items[i] if input_items is not None else _stored_item(item, i, lookup)
              for i, item in enumerate(request.input) if isinstance(item, ItemReference)}
    for i, item in enumerate(request.input):
        param = f"input[{i}]"
        builder.add(parse_input_item(stored[i], param) if i in stored else item, param)
    return builder.messages


def _stored_item(reference: ItemReference, index: int, lookup: Lookup | None) -> dict[str, Any]:
    stored = lookup.get_item(reference.id) if lookup is not None else None
    if stored is None:
        raise InputError(
            f"Item with id {reference.id!r} not found." + _NO_STORE_HINT, f"input[{index}].id", "item_not_found",
            status=404,
        )
    return stored


def _history(response_id: str, lookup: Lookup | None, max_items: int, max_bytes: int) -> list[dict[str, Any]]:
    """Input and output items of the chain ending at ``response_id``, oldest response first (see
    :func:`to_chat_messages` for the limits)."""
    chain: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []
    seen: set[str] = set()
    next_id: str | None = response_id
    count = size = 0
    while next_id is not None and next_id not in seen:
        seen.add(next_id)
        stored = lookup.load(next_id) if lookup is not None else None
        if stored is None:
            raise InputError(
                f"Previous response with id {next_id!r} not found." + _NO_STORE_HINT,
                "previous_response_id",
                "previous_response_not_found",
                status=404,
            )
        chain.append((stored.input_items, stored.response))
        items = [*stored.input_items, *(stored.response.get("output") or [])]
        count += len(items)
        size += sum(len(orjson.dumps(item)) for item in items)
        if (max_items and count > max_items) or (max_bytes and size > max_bytes):
            raise InputError(
                "The conversation behind 'previous_response_id' is longer than a request may be "
                f"({max_items or 'any number of'} items, {max_bytes or 'any number of'} bytes): start from a "
                "later response, or send a shorter history in 'input'.",
                "previous_response_id", "history_too_long")
        next_id = stored.response.get("previous_response_id")
    history: list[dict[str, Any]] = []
    for input_items, response in reversed(chain):
        history.extend(input_items)
        history.extend(response.get("output") or [])
    return history


class _ChatBuilder:
    """Accumulates chat messages, merging calls into the preceding assistant turn."""

    def __init__(self, mcp: McpHistory) -> None:
        self.mcp = mcp
        self.messages: list[dict[str, Any]] = []
        self._call_ids: set[str] = set()
        self._reasoning: list[str] = []  # readable reasoning items waiting for the assistant turn they led to

    def add(self, item: Any, param: str) -> None:
        if isinstance(item, MessageItem):
            message = {"role": item.role, "content": _content_text(item.content)}
            self.messages.append(self._with_reasoning(message) if item.role == "assistant" else message)
            if item.role == "user":
                self._reasoning.clear()  # a new turn: the last one's reasoning is never given back
        elif isinstance(item, ReasoningItem):
            self._reasoning += _reasoning_texts(item)
        elif isinstance(item, FunctionCallItem):
            self._add_call(item.call_id, {"type": "function", "function": {
                "name": model_name(item.name, item.namespace), "arguments": item.arguments}})
        elif isinstance(item, CustomToolCallItem):
            self._add_call(item.call_id, {"type": "custom", "custom": {
                "name": model_name(item.name, item.namespace), "input": item.input}})
        elif isinstance(item, ToolSearchCallItem):
            self._add_call(item.call_id or item.id or "", _function(TOOL_SEARCH, item.arguments or {}))
        elif isinstance(item, LocalShellCallItem):
            action = {k: v for k, v in item.action.items() if k != "type" and v is not None}
            self._add_call(item.call_id or item.id or "", _function(LOCAL_SHELL, action))
        elif isinstance(item, (FunctionCallOutputItem, CustomToolCallOutputItem)):
            if item.call_id not in self._call_ids:
                raise InputError(
                    f"No tool call found for {item.type} with call_id {item.call_id!r}.",
                    f"{param}.call_id",
                    "invalid_value",
                )
            self._add_result(item.call_id, _output_text(item.output))
        elif isinstance(item, ToolSearchOutputItem):
            names = [_loaded_name(t) for t in item.tools]
            self._add_result(item.call_id or "", "Tools loaded (callable from now on): "
                             + (", ".join(n for n in names if n) or "none") + ".")
        elif isinstance(item, LocalShellCallOutputItem):
            self._add_result(item.call_id or item.id or "", _output_text(item.output))
        elif isinstance(item, ShellCallItem):
            self._add_call(item.call_id, _function(SHELL, {k: v for k, v in item.action.items() if v is not None}))
        elif isinstance(item, ShellCallOutputItem):
            self._add_result(item.call_id, _shell_output_text(item.output))
        elif isinstance(item, ApplyPatchCallItem):
            self._add_call(item.call_id, _function(APPLY_PATCH, item.operation))
        elif isinstance(item, ApplyPatchCallOutputItem):
            said = f": {item.output}" if item.output else ""
            self._add_result(item.call_id, f"{item.status or 'completed'}{said}")
        elif isinstance(item, OtherItem) and item.type.startswith("mcp_"):
            self._add_mcp(item, param)
        elif isinstance(item, OtherItem) and item.type == "compaction":
            summary = compaction_summary(item.model_extra or {})
            if summary is not None:
                self.messages.append({"role": "user", "content": f"{SUMMARY_HEADING}\n{summary}"})
        elif isinstance(item, OtherItem):
            role = "assistant" if _is_model_action(item.type) else "user"
            self._add_note(role, _note(item))
        # Another server's compaction items and encrypted reasoning are opaque: never replayed as text.

    def _add_mcp(self, item: OtherItem, param: str) -> None:
        """An MCP item (see :func:`to_chat_messages`)."""
        fields = item.model_extra or {}
        label, name = str(fields.get("server_label") or ""), str(fields.get("name") or "")
        if item.type == "mcp_list_tools":  # (its note stays: the model knew of the server)
            tools = fields.get("tools")
            if isinstance(tools, list) and not fields.get("error"):
                self.mcp.lists[label] = [t for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]
            self._add_note("assistant", _note(item))
        elif item.type == "mcp_approval_request" and item.id:
            self.mcp.requests[item.id] = {"id": item.id, **fields}
        elif item.type == "mcp_call":
            call_id = item.id or str(fields.get("approval_request_id") or "")
            self._add_call(call_id, {"type": "function", "function": {
                "name": model_tool_name(label, name), "arguments": str(fields.get("arguments") or "{}")}})
            error = fields.get("error")
            self._add_result(call_id, str(fields.get("output") or "") if not error else
                             f"Error: {error.get('message') if isinstance(error, dict) and error.get('message') else error}")
        elif item.type == "mcp_approval_response" and param.startswith("input["):
            self._answer(fields, param)
        elif item.type not in ("mcp_approval_response", "mcp_approval_request"):
            self._add_note("assistant", _note(item))

    def _answer(self, fields: Mapping[str, Any], param: str) -> None:
        """This request's answer to an approval request: the call, and the result its run fills (or its refusal)."""
        request_id = str(fields.get("approval_request_id") or "")
        request = self.mcp.requests.get(request_id)
        if request is None:
            raise InputError(f"No mcp_approval_request found for approval_request_id {request_id!r}.",
                             f"{param}.approval_request_id", "invalid_value")
        if request_id in self.mcp.ran:
            return  # its mcp_call item follows, and says how it went
        self._add_call(request_id, {"type": "function", "function": {
            "name": model_tool_name(str(request.get("server_label") or ""), str(request.get("name") or "")),
            "arguments": str(request.get("arguments") or "{}")}})
        approve = fields.get("approve") is True
        self._add_result(request_id, "" if approve else DENIED)
        self.mcp.pending.append(PendingApproval(request, approve, self.messages[-1]))

    def _with_reasoning(self, message: dict[str, Any]) -> dict[str, Any]:
        """``message`` (an assistant turn) carrying the readable reasoning items that came before it."""
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
            self._reasoning.clear()
        return message

    def _add_call(self, call_id: str, call: dict[str, Any]) -> None:
        self._call_ids.add(call_id)
        call = {"id": call_id, **call}
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "assistant":
            last.setdefault("tool_calls", []).append(call)
        else:
            self.messages.append(self._with_reasoning({"role": "assistant", "content": None, "tool_calls": [call]}))

    def _add_result(self, call_id: str, text: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})

    def _add_note(self, role: str, text: str) -> None:
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == role and role == "assistant" and "tool_calls" not in last:
            last["content"] = f"{last['content']}\n{text}" if last["content"] else text
        else:
            self.messages.append({"role": role, "content": text})


def _reasoning_texts(item: ReasoningItem) -> list[str]:
    """The readable text of a reasoning item: its ``reasoning_text`` parts (summaries and encrypted content
    are not the model's words)."""
    content = (item.model_extra or {}).get("content")
    return [part["text"] for part in content or () if isinstance(part, dict)
            and part.get("type") == "reasoning_text" and isinstance(part.get("text"), str)]


def _function(name: str, arguments: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": orjson.dumps(arguments).decode()}}


def _loaded_name(tool: dict[str, Any]) -> str:
    """A loaded tool's model-facing name (each tool of a namespace), for the tool-search result line."""
    if tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
        return ", ".join(model_name(str(t.get("name")), str(tool.get("name"))) for t in tool["tools"]
                         if isinstance(t, dict) and t.get("name"))
    return str(tool.get("name") or tool.get("type") or "")


def _is_model_action(kind: str) -> bool:
    """Whether an item type records something the model did (a call, a request) rather than a reply to it."""
    return kind.endswith("_call") or kind in ("mcp_list_tools", "mcp_approval_request")


#: Fields of an unknown item worth a word in its note, in order (never ``encrypted_content`` or other blobs).
_NOTE_FIELDS = ("name", "server_label", "action", "query", "queries", "arguments", "status", "output", "error")


def _note(item: OtherItem) -> str:
    """``[web_search_call ws_1: action={"query":"x"}, status=completed]``, capped at :data:`NOTE_LIMIT`."""
    extra = item.model_extra or {}
    details = []
    for key in _NOTE_FIELDS:
        value = extra.get(key)
        if value not in (None, "", [], {}):
            details.append(f"{key}={value if isinstance(value, str) else orjson.dumps(value).decode()}")
    head = item.type + (f" {item.id}" if item.id else "")
    text = f"{head}: {', '.join(details)}" if details else head
    if len(text) > NOTE_LIMIT - 2:
        text = text[: NOTE_LIMIT - 3] + "…"
    return f"[{text}]"


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(_part_text(part) for part in content)


def _part_text(part: Any) -> str:
    if isinstance(part, MediaPart):
        return media_placeholder(part.type)
    return part.refusal if isinstance(part, RefusalPart) else part.text


def _output_text(output: Any) -> str:
    """A tool result as text: a string as is, a list of content parts as their text (media as
    placeholders), anything else as JSON."""
    if isinstance(output, str):
        return output
    if isinstance(output, list) and output and all(_is_output_part(p) for p in output):
        return "\n".join(p["text"] if p["type"] == "input_text" else media_placeholder(p["type"]) for p in output)
    return orjson.dumps(output).decode()


def _shell_output_text(output: Any) -> str:
    """A ``shell_call_output``'s ``output`` (each command's ``stdout``, ``stderr`` and ``outcome``) as words: per
    command its output streams and how it ended; anything else as JSON."""
    if not isinstance(output, list) or not all(isinstance(entry, dict) for entry in output):
        return _output_text(output)
    parts = []
    for entry in output:
        outcome = entry.get("outcome") if isinstance(entry.get("outcome"), dict) else {}
        code = outcome.get("exit_code")
        ended = "timed out" if outcome.get("type") == "timeout" else \
            f"exit code {code}" if isinstance(code, int) else "exit code unknown"
        streams = [f"{name}:\n{entry[name]}" for name in ("stdout", "stderr") if entry.get(name)]
        parts.append("\n".join([*streams, ended]))
    return "\n\n".join(parts)


def _is_output_part(part: Any) -> bool:
    if not isinstance(part, dict):
        return False
    if part.get("type") == "input_text":
        return isinstance(part.get("text"), str)
    return part.get("type") in ("input_image", "input_file")
