"""Responses API events and the Response object, built from one choice's core events.

:class:`ResponsesEncoder` turns ``TextDelta`` / ``ToolCall*`` / ``ChoiceFinished``
into the event sequence of wire-contract 4.1-4.2: every event numbered from 0,
each output item added, streamed and closed in ``output_index`` order, and
exactly one terminal event. The same object serves the non-streaming path:
feed everything, call :meth:`~ResponsesEncoder.finish`, return
:meth:`~ResponsesEncoder.response`. :class:`ResponsesWireEncoder` is the
endpoint's :class:`~app.pipeline.encoder.Encoder` on top of it: SSE frames, and a
hook that stores the finished response.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, assert_never

import orjson

from statemachine import (
    ChoiceFinished,
    Event,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnded,
    ToolCallInputDelta,
    ToolCallNote,
    ToolCallStarted,
)

from .mcp import call_item
from .tools import ToolOrigin
from .web_search import WEB_KINDS, call_finished, call_started
from ..gateway_tools.base import GatewayApprovalRequested, GatewayCallFinished, GatewayCallStarted, GatewayEvent

from ..errors import ApiError
from ..ids import uuid4_hex
from ..pipeline.encoder import Usage
from ..pipeline.streaming import KEEPALIVE

__all__ = ["ResponsesEncoder", "ResponsesWireEncoder", "encode_sse", "new_item_id", "new_response_id",
           "responses_usage"]


def new_item_id(prefix: str) -> str:
    """A random, globally unique id such as ``msg_…`` or ``fc_…`` (32 hex digits, :func:`~app.ids.uuid4_hex`)."""
    return f"{prefix}_{uuid4_hex()}"


def new_response_id() -> str:
    """A random ``resp_…`` id."""
    return new_item_id("resp")


def encode_sse(event: Mapping[str, Any]) -> bytes:
    """One SSE frame: ``event: <type>``, the compact JSON ``data:`` line, a blank line."""
    return b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


def responses_usage(usage: Mapping[str, Any] | None) -> dict[str, Any]:
    """Responses ``usage`` from an upstream Chat usage object (zeros when the upstream sent none)."""
    usage = usage or {}
    input_tokens = int(usage.get("prompt_tokens") or 0)
    output_tokens = int(usage.get("completion_tokens") or 0)
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {
            "cached_tokens": int(prompt_details.get("cached_tokens") or 0),
            "cache_write_tokens": int(prompt_details.get("cache_write_tokens") or 0),
        },
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": int(completion_details.get("reasoning_tokens") or 0)},
        "total_tokens": int(usage.get("total_tokens") or input_tokens + output_tokens),
    }


# Request values the Response object repeats, with what OpenAI sends when absent.
_ECHO_DEFAULTS: dict[str, Any] = {
    "background": False,
    "conversation": None,
    "instructions": None,
    "max_output_tokens": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "previous_response_id": None,
    "reasoning": None,
    "store": True,
    "temperature": None,
    "text": {"format": {"type": "text"}},
    "tool_choice": "auto",
    "tools": [],
    "top_p": None,
    "truncation": "disabled",
    "user": None,
}

_INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}

# ``error.code`` is an enum in the SDKs (a pydantic Literal in openai-python); other
# codes would fail strict validation, so they travel in the message instead.
_RESPONSE_ERROR_CODES = frozenset({"server_error", "rate_limit_exceeded", "invalid_prompt"})


class _Span:
    """An open item made of one text part: its id, position and text so far.

    A subclass names its item's id prefix and text events (``response.<text_events>.delta`` / ``.done``)
    and builds its item and part.
    """

    __slots__ = ("id", "index", "parts")
    prefix: str
    text_events: str
    delta_fields: dict[str, Any] = {}

    def __init__(self, item_id: str, index: int):
        self.id = item_id
        self.index = index
        self.parts: list[str] = []

    @staticmethod
    def part(text: str) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def item(cls, item_id: str, status: str, text: str | None) -> dict[str, Any]:
        raise NotImplementedError


class _Message(_Span):
    """An open message item (``output_text``)."""

    __slots__ = ()
    prefix, text_events, delta_fields = "msg", "output_text", {"logprobs": []}

    @staticmethod
    def part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    @classmethod
    def item(cls, item_id: str, status: str, text: str | None) -> dict[str, Any]:
        return {"id": item_id, "type": "message", "role": "assistant", "status": status,
                "content": [] if text is None else [cls.part(text)]}


class _Reasoning(_Span):
    """An open reasoning item: one span of the model's reasoning (``reasoning_text``)."""

    __slots__ = ()
    prefix, text_events = "rs", "reasoning_text"

    @staticmethod
    def part(text: str) -> dict[str, Any]:
        return {"type": "reasoning_text", "text": text}

    @classmethod
    def item(cls, item_id: str, status: str, text: str | None) -> dict[str, Any]:
        return {"id": item_id, "type": "reasoning", "summary": [],
                "content": [] if text is None else [cls.part(text)], "status": status}


#: Item id prefix per call item type.
_CALL_ID_PREFIXES = {"function": "fc", "custom": "ctc", "tool_search": "tsc", "local_shell": "lsc", "shell": "sh",
                     "apply_patch": "apc"}
#: The operations an ``apply_patch_call`` may carry.
_PATCH_OPERATIONS = ("create_file", "update_file", "delete_file")


class _Call:
    """An open call item: a ``function_call``, ``custom_tool_call``, ``tool_search_call``, ``local_shell_call``,
    ``shell_call`` or ``apply_patch_call``."""

    __slots__ = ("id", "index", "call_id", "origin", "fragments")

    def __init__(self, item_id: str, index: int, call_id: str, origin: ToolOrigin):
        self.id = item_id
        self.index = index
        self.call_id = call_id
        self.origin = origin
        self.fragments: list[str] = []


class ResponsesEncoder:
    """Encodes one choice as a Responses stream and Response object.

    Args:
        response_id: the ``resp_…`` id (see :func:`new_response_id`).
        model: the model name to report.
        request_echo: request values to repeat (``ResponsesRequest.response_echo()``);
            missing keys get OpenAI's defaults, unknown keys are ignored.
        created_at: Unix time; now when omitted.
        id_factory: ``prefix -> id`` for item ids (``msg``, ``rs``, ``fc``, ``ctc``, ``tsc``, ``lsc``); random by default.
        tools: model-facing tool name → :class:`~app.responses.tools.ToolOrigin`: which item a call
            becomes, under which client name and namespace. A name not in it is a plain function
            (a custom call, by its ``kind``, a custom tool call).
        prelude: finished output items that open the response (MCP listings, approved MCP calls run before the
            model answered), streamed as their own events first.

    Call :meth:`start` once, :meth:`feed` per core event, then exactly one of
    :meth:`finish` or :meth:`fail`. Each returns event dicts to send in order.
    A span of ``ReasoningDelta`` is one ``reasoning`` item whose ``reasoning_text``
    content streams as ``response.reasoning_text.delta`` events, placed before
    what followed it; ``ToolCallNote`` produces nothing. A function call
    streams ``function_call_arguments`` events, a custom call
    ``custom_tool_call_input`` events; a ``tool_search_call``, ``local_shell_call``, ``shell_call`` or
    ``apply_patch_call`` carries parsed JSON, so it is only added and done.
    """

    def __init__(self, response_id: str, model: str, request_echo: Mapping[str, Any], *,
                 created_at: float | None = None, id_factory: Callable[[str], str] = new_item_id,
                 tools: Mapping[str, ToolOrigin] | None = None, prelude: list[dict[str, Any]] | None = None):
        self._prelude = prelude or []
        self._mcp_calls: dict[str, tuple[str, int]] = {}  # a running gateway call's item id and index, by call id
        self._id_factory = id_factory
        self._tools = tools or {}
        self._web_call = ("", 0)  # the running web_search_call's item id and output index
        self._seq = 0
        self._open: _Span | _Call | None = None
        self._delta_parts: tuple[object, bytes, bytes, bytes] | None = None  # see delta_frame
        self._finish_reason = "stop"
        self._ended = False
        self._response: dict[str, Any] = {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()) if created_at is None else created_at,
            "status": "in_progress",
            "error": None,
            "incomplete_details": None,
            "model": model,
            "output": [],
            "usage": None,
        }
        for key, default in _ECHO_DEFAULTS.items():
            self._response[key] = request_echo.get(key, default)

    @property
    def ended(self) -> bool:
        """Whether the terminal event was produced."""
        return self._ended

    def not_stored(self) -> None:
        """Keeping the response failed: it says ``store: false`` from now on."""
        self._response["store"] = False

    def response(self) -> dict[str, Any]:
        """The Response object as it stands (after the end: the one the terminal event carried)."""
        return {**self._response, "output": list(self._response["output"])}

    def start(self) -> list[dict[str, Any]]:
        """``response.created`` and ``response.in_progress``, then the prelude's items."""
        return [
            self._event("response.created", response=self.response()),
            self._event("response.in_progress", response=self.response()),
            *self._opened_by_prelude(),
        ]

    def _opened_by_prelude(self) -> list[dict[str, Any]]:
        """The prelude's items put in ``output``, and their events (once)."""
        out: list[dict[str, Any]] = []
        for item in self._prelude:
            index = len(self._response["output"])
            if item["type"] == "mcp_list_tools":
                out += [self._event("response.output_item.added", output_index=index, item={**item, "tools": []}),
                        self._event("response.mcp_list_tools.in_progress", item_id=item["id"], output_index=index),
                        self._event("response.mcp_list_tools.failed" if item.get("error") else
                                    "response.mcp_list_tools.completed", item_id=item["id"], output_index=index)]
                self._response["output"].append(item)
                out.append(self._event("response.output_item.done", output_index=index, item=item))
            else:  # an mcp_call that ran
                out += self._call_started(item)
                out += self._call_finished(item)
        self._prelude = []
        return out

    def gateway(self, event: GatewayEvent) -> list[dict[str, Any]]:
        """The Responses events of a gateway tool's call: an MCP server's ``mcp_call`` item as it starts and ends,
        or an ``mcp_approval_request`` item; a web tool's ``web_search_call`` item."""
        self._check_open()
        out = [*self._opened_by_prelude(), *self._close_open("completed")]
        if event.tool.kind in WEB_KINDS and not isinstance(event, GatewayApprovalRequested):
            return [*out, *self._web_search_call(event)]
        origin = event.tool.origin
        label, name = getattr(origin, "server_label", ""), getattr(origin, "name", event.tool.name)
        if isinstance(event, GatewayApprovalRequested):
            item = {"id": self._id_factory("mcpr"), "type": "mcp_approval_request", "server_label": label,
                    "name": name, "arguments": event.arguments}
            index = len(self._response["output"])
            self._response["output"].append(item)
            return [*out, self._event("response.output_item.added", output_index=index, item=item),
                    self._event("response.output_item.done", output_index=index, item=item)]
        if isinstance(event, GatewayCallStarted):
            return [*out, *self._call_started(call_item(self._id_factory("mcp"), label, name, event.arguments, None),
                                              event.call_id)]
        assert isinstance(event, GatewayCallFinished)
        item_id, _ = self._mcp_calls[event.call_id]
        return [*out, *self._call_finished(call_item(item_id, label, name, event.arguments, event.run),
                                           event.call_id)]

    def _call_started(self, item: dict[str, Any], call_id: str = "") -> list[dict[str, Any]]:
        """An ``mcp_call`` item added, its arguments and ``response.mcp_call.in_progress``."""
        index = len(self._response["output"])
        self._mcp_calls[call_id or item["id"]] = (item["id"], index)
        ids = {"item_id": item["id"], "output_index": index}
        return [self._event("response.output_item.added", output_index=index,
                            item={**item, "output": None, "error": None, "status": "in_progress"}),
                self._event("response.mcp_call_arguments.delta", **ids, delta=item["arguments"]),
                self._event("response.mcp_call_arguments.done", **ids, arguments=item["arguments"]),
                self._event("response.mcp_call.in_progress", **ids)]

    def _call_finished(self, item: dict[str, Any], call_id: str = "") -> list[dict[str, Any]]:
        """``response.mcp_call.completed`` (or ``failed``) and the finished ``mcp_call`` item."""
        _, index = self._mcp_calls.pop(call_id or item["id"])
        self._response["output"].append(item)
        return [self._event("response.mcp_call.failed" if item["status"] == "failed" else
                            "response.mcp_call.completed", item_id=item["id"], output_index=index),
                self._event("response.output_item.done", output_index=index, item=item)]

    def feed(self, event: Event) -> list[dict[str, Any]]:
        """The Responses events for one core event."""
        self._check_open()
        if self._prelude:
            return [*self._opened_by_prelude(), *self.feed(event)]
        if isinstance(event, TextDelta):
            return self._text(_Message, event.text)
        if isinstance(event, ReasoningDelta):
            return self._text(_Reasoning, event.text)
        if isinstance(event, ToolCallStarted):
            out = self._close_open("completed")
            origin = self._tools.get(event.name) or ToolOrigin("custom" if event.kind == "custom" else "function",
                                                               event.name)
            call = _Call(self._id_factory(_CALL_ID_PREFIXES[origin.type]), len(self._response["output"]),
                         event.call_id, origin)
            self._open = call
            return [*out, self._event("response.output_item.added", output_index=call.index,
                                      item=_call_item(call, "in_progress", None))]
        if isinstance(event, (ToolCallArgumentsDelta, ToolCallInputDelta)):
            open_call = self._open
            if not isinstance(open_call, _Call):
                raise RuntimeError("arguments delta outside a call")
            open_call.fragments.append(event.fragment)
            if open_call.origin.type == "function":
                return [self._arguments_delta(open_call, event.fragment)]
            if open_call.origin.type == "custom":
                return [self._event("response.custom_tool_call_input.delta", item_id=open_call.id,
                                    output_index=open_call.index, delta=event.fragment)]
            return []  # tool_search, local_shell, shell, apply_patch: JSON made whole at the end
        if isinstance(event, ToolCallEnded):
            return self._close_open("completed" if event.valid else "incomplete")
        if isinstance(event, ChoiceFinished):
            self._finish_reason = event.finish_reason
            return []
        if isinstance(event, ToolCallNote):
            return []  # telemetry, never on the wire
        assert_never(event)

    def _web_search_call(self, event: GatewayCallStarted | GatewayCallFinished) -> list[dict[str, Any]]:
        """A web tool's call as its ``web_search_call`` item starts or ends (:mod:`.web_search`)."""
        if isinstance(event, GatewayCallStarted):
            self._web_call = (self._id_factory("ws"), len(self._response["output"]))
            return call_started(event, *self._web_call, self._event)[1]
        item, out = call_finished(event, *self._web_call, self._event)
        self._response["output"].append(item)
        return out

    def delta_frame(self, event: Event) -> bytes | None:
        """The SSE frame of a text, reasoning or function-arguments delta into the item open for it, else ``None``.

        A stream's hot path: the frame is :func:`encode_sse` of the one event :meth:`feed` would return, byte for
        byte, with the same bookkeeping, written from the fixed bytes around its sequence number and its
        fragment (made once per item), with no event dict built or dumped.
        """
        item = self._open
        if item is None or self._ended:
            return None
        if isinstance(event, TextDelta):  # isinstance: as fast as a class check for these final classes
            if item.__class__ is not _Message:
                return None
            fragment = event.text
        elif isinstance(event, ToolCallArgumentsDelta):
            if not isinstance(item, _Call) or item.origin.type != "function":
                return None
            fragment = event.fragment
        elif isinstance(event, ReasoningDelta):
            if item.__class__ is not _Reasoning:
                return None
            fragment = event.text
        else:
            return None
        parts = self._delta_parts
        if parts is None or parts[0] is not item:
            parts = self._delta_parts = (item, *_delta_frame_parts(item))
        (item.fragments if isinstance(item, _Call) else item.parts).append(fragment)
        seq = self._seq
        self._seq = seq + 1
        return parts[1] + b"%d" % seq + parts[2] + orjson.dumps(fragment) + parts[3]

    def finish(self, usage: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Close open items and emit the terminal event for the recorded finish reason.

        ``stop``/``tool_calls``/``function_call`` → ``response.completed``;
        ``length`` and ``content_filter`` → ``response.incomplete`` with the
        matching ``incomplete_details.reason`` (open items end ``incomplete``).

        Args:
            usage: the upstream's Chat usage object, if any (see :func:`responses_usage`).
        """
        self._check_open()
        reason = _INCOMPLETE_REASONS.get(self._finish_reason)
        out = [*self._opened_by_prelude(), *self._close_open("completed" if reason is None else "incomplete")]
        self._response["usage"] = responses_usage(usage)
        if reason is None:
            self._response["status"] = "completed"
            return [*out, self._terminal("response.completed")]
        self._response["status"] = "incomplete"
        self._response["incomplete_details"] = {"reason": reason}
        return [*out, self._terminal("response.incomplete")]

    def fail(self, code: str, message: str, usage: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Close open items as ``incomplete`` and emit ``response.failed`` with ``error{code, message}``.

        Codes outside the SDKs' ``error.code`` enum are sent as ``server_error``
        with the original code in the message.
        """
        self._check_open()
        out = [*self._opened_by_prelude(), *self._close_open("incomplete")]
        self._response["usage"] = responses_usage(usage)
        if code not in _RESPONSE_ERROR_CODES:
            code, message = "server_error", f"{message} ({code})"
        self._response["status"] = "failed"
        self._response["error"] = {"code": code, "message": message}
        return [*out, self._terminal("response.failed")]

    # -- internals ---------------------------------------------------------------------------

    def _event(self, type_: str, **fields: Any) -> dict[str, Any]:
        event = {"type": type_, "sequence_number": self._seq, **fields}
        self._seq += 1
        return event

    def _terminal(self, type_: str) -> dict[str, Any]:
        self._ended = True
        return self._event(type_, response=self.response())

    def _check_open(self) -> None:
        if self._ended:
            raise RuntimeError("the response already ended")

    def _text(self, kind: type[_Span], text: str) -> list[dict[str, Any]]:
        """Stream ``text`` into the open item of ``kind``, opening one (closing the item before) if needed."""
        out: list[dict[str, Any]] = []
        span = self._open
        if not isinstance(span, kind):
            out.extend(self._close_open("completed"))
            span = kind(self._id_factory(kind.prefix), len(self._response["output"]))
            self._open = span
            out.append(self._event("response.output_item.added", output_index=span.index,
                                   item=kind.item(span.id, "in_progress", None)))
            out.append(self._event("response.content_part.added", item_id=span.id, output_index=span.index,
                                   content_index=0, part=kind.part("")))
        span.parts.append(text)
        out.append(self._event(f"response.{kind.text_events}.delta", item_id=span.id, output_index=span.index,
                               content_index=0, delta=text, **kind.delta_fields))
        return out

    def _arguments_delta(self, call: _Call, fragment: str) -> dict[str, Any]:
        return self._event("response.function_call_arguments.delta", item_id=call.id,
                           output_index=call.index, delta=fragment)

    def _close_open(self, status: str) -> list[dict[str, Any]]:
        """The closing events of the open item, if any, which then joins ``output``.

        Only one item is open at a time and it is always the last, so its
        ``output_index`` is the length of ``output`` when it was opened.
        """
        item, self._open = self._open, None
        if item is None:
            return []
        if isinstance(item, _Span):
            text = "".join(item.parts)
            done = item.item(item.id, status, text)
            out = [
                self._event(f"response.{item.text_events}.done", item_id=item.id, output_index=item.index,
                            content_index=0, text=text, **item.delta_fields),
                self._event("response.content_part.done", item_id=item.id, output_index=item.index,
                            content_index=0, part=item.part(text)),
            ]
        elif item.origin.type == "function":
            out = []
            if not item.fragments:
                # Clients that build arguments from deltas alone need at least one.
                item.fragments.append("{}")
                out.append(self._arguments_delta(item, "{}"))
            arguments = "".join(item.fragments)
            done = _call_item(item, status, arguments)
            out.append(self._event("response.function_call_arguments.done", item_id=item.id,
                                   output_index=item.index, name=item.origin.name, arguments=arguments))
        elif item.origin.type == "custom":
            text = "".join(item.fragments)
            done = _call_item(item, status, text)
            out = [self._event("response.custom_tool_call_input.done", item_id=item.id, output_index=item.index,
                               input=text)]
        else:
            done = _call_item(item, status, "".join(item.fragments))
            out = []
        self._response["output"].append(done)
        out.append(self._event("response.output_item.done", output_index=item.index, item=done))
        return out


def _delta_frame_parts(item: _Span | _Call) -> tuple[bytes, bytes, bytes]:
    """An open item's delta frame up to its sequence number, from there to its fragment, and after that."""
    if isinstance(item, _Call):
        kind, content_index, fields = b"response.function_call_arguments.delta", b"", b""
    else:
        kind, content_index = b"response.%s.delta" % item.text_events.encode(), b',"content_index":0'
        fields = b"," + orjson.dumps(item.delta_fields)[1:-1] if item.delta_fields else b""
    return (b'event: %s\ndata: {"type":"%s","sequence_number":' % (kind, kind),
            b',"item_id":%s,"output_index":%d%s,"delta":' % (orjson.dumps(item.id), item.index, content_index),
            fields + b"}\n\n")


def _call_item(call: _Call, status: str, text: str | None) -> dict[str, Any]:
    """The output item of ``call`` with its arguments or input ``text`` (``None``: not yet known)."""
    origin = call.origin
    item: dict[str, Any] = {"id": call.id, "type": f"{origin.type}_call", "status": status, "call_id": call.call_id}
    if origin.type == "function":
        item["type"] = "function_call"
        item.update(arguments=text or "", name=origin.name)
    elif origin.type == "custom":
        item["type"] = "custom_tool_call"
        item.update(input=text or "", name=origin.name)
    elif origin.type == "tool_search":
        item.update(execution="client", arguments=_json_object(text))
    elif origin.type == "shell":
        item["action"] = _shell_action(_json_object(text))
    elif origin.type == "apply_patch":
        item["operation"] = _patch_operation(_json_object(text))
        if status == "incomplete":
            item["status"] = "in_progress"  # the item has no incomplete status: not completed
    else:  # local_shell
        action = _json_object(text)
        command = action.get("command")
        item["action"] = {**action, "type": "exec", "env": action.get("env") or {},
                          "command": [str(c) for c in command] if isinstance(command, list) else
                          [str(command)] if command else []}
    if origin.namespace is not None:
        item["namespace"] = origin.namespace
    return item


def _shell_action(arguments: dict[str, Any]) -> dict[str, Any]:
    """A ``shell_call``'s ``action`` from the model's arguments: ``commands`` (one string is one command),
    ``timeout_ms`` and ``max_output_length`` (``None`` unless whole numbers)."""
    commands = arguments.get("commands")
    if isinstance(commands, str):
        commands = [commands]
    return {"commands": [str(c) for c in commands] if isinstance(commands, list) else [],
            **{key: value if isinstance(value, int) and not isinstance(value, bool) else None
               for key in ("timeout_ms", "max_output_length") for value in (arguments.get(key),)}}


def _patch_operation(arguments: dict[str, Any]) -> dict[str, Any]:
    """An ``apply_patch_call``'s ``operation`` from the model's arguments: its ``type`` (``update_file`` unless
    one of the three), ``path`` and V4A ``diff`` (none for ``delete_file``)."""
    kind = arguments.get("type") if arguments.get("type") in _PATCH_OPERATIONS else "update_file"
    operation = {"type": kind, "path": str(arguments.get("path") or "")}
    if kind != "delete_file":
        operation["diff"] = str(arguments.get("diff") or "")
    return operation


def _json_object(text: str | None) -> dict[str, Any]:
    """Arguments text as an object (``{}`` while unknown or when they are not an object)."""
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


#: The gateway's events a Responses stream carries beside the core's (its MCP and web calls).
_GATEWAY_EVENTS = (GatewayCallStarted, GatewayCallFinished, GatewayApprovalRequested)


class ResponsesWireEncoder:
    """The Responses :class:`~app.pipeline.encoder.Encoder`: one choice (index 0) as SSE events or a body.

    Args:
        encoder: the :class:`ResponsesEncoder` of the response.
        keep: called with the finished (or failed) Response object before its terminal event is sent,
            so a follow-up request can name it at once (the response store); it answers whether the
            response was stored.
    """

    def __init__(self, encoder: ResponsesEncoder, keep: Callable[[dict[str, Any]], bool] | None = None):
        self._encoder = encoder
        self._keep = keep

    keepalive = KEEPALIVE

    def opening(self, usage: Usage) -> list[bytes]:
        """``response.created`` and ``response.in_progress``."""
        return [encode_sse(event) for event in self._encoder.start()]

    def frames(self, index: int, event: Event) -> list[bytes]:
        """The events of one core event (or a gateway tool's, :mod:`~app.pipeline.gateway_loop`)."""
        frame = self._encoder.delta_frame(event)
        if frame is not None:
            return [frame]
        if isinstance(event, _GATEWAY_EVENTS):  # (after the deltas' path: it costs them nothing)
            return [encode_sse(out) for out in self._encoder.gateway(event)]
        return [encode_sse(out) for out in self._encoder.feed(event)]

    def closing(self, usage: Usage) -> list[bytes]:
        """The open items' closing events and the terminal event (the response kept first)."""
        return [encode_sse(event) for event in self._kept(self._encoder.finish(usage))]

    def error_frames(self, error: ApiError, usage: Usage) -> bytes:
        """The open items closed ``incomplete``, then ``response.failed`` (the response kept first)."""
        events = self._encoder.fail(error.code or "server_error", error.message, usage)
        return b"".join(encode_sse(event) for event in self._kept(events))

    def add(self, index: int, event: Event) -> None:
        """Feed one core event, or a gateway tool's (a body needs no ``response.created``: the encoder is not
        started)."""
        if isinstance(event, _GATEWAY_EVENTS):
            self._encoder.gateway(event)
        else:
            self._encoder.feed(event)

    def body(self, usage: Usage) -> dict[str, Any]:
        """The finished Response object (kept first)."""
        self._kept(self._encoder.finish(usage))
        return self._encoder.response()

    def failed(self, error: ApiError) -> dict[str, Any]:
        """The Response object failed by ``error`` (a generation that raised before it ended), not kept."""
        if not self._encoder.ended:
            self._encoder.fail(error.code or "server_error", error.message)
        return self._encoder.response()

    def _kept(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``events``, ending in the terminal event, once the response is kept; when keeping it failed, the
        response (and so the terminal event) says ``store: false``: it never claims to be stored when it is not."""
        if self._keep is not None and not self._keep(self._encoder.response()):
            self._encoder.not_stored()
            events[-1] = {**events[-1], "response": self._encoder.response()}
        return events
