"""Pydantic models of a ``/v1/responses`` request, and the 400 they map to.

Lenient where clients differ (unknown keys are kept, message items may omit
``type``, ``content`` may be a string or parts), typed where toolwire acts on a
value. :func:`parse_responses_request` is the entry point: it raises
:class:`~app.errors.InputError` with an OpenAI-style ``param`` path such as
``input[2].call_id`` (the shared :mod:`app.validation` layer).
"""

from __future__ import annotations

import re
import typing
from typing import Annotated, Any, Collection, Literal, Mapping, Union

from pydantic import BaseModel, BeforeValidator, Discriminator, Field, Tag, TypeAdapter, field_validator

from ..errors import InputError
from ..validation import Metadata, RequestModel, ToolName, validate

__all__ = [
    "AllowedToolsChoice",
    "ContentPart",
    "CustomTool",
    "CustomToolCallItem",
    "CustomToolCallOutputItem",
    "CustomToolChoice",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "FunctionTool",
    "FunctionToolChoice",
    "HostedTool",
    "HostedToolChoice",
    "InputError",
    "InputItem",
    "ItemReference",
    "LocalShellCallItem",
    "LocalShellCallOutputItem",
    "LocalShellTool",
    "McpTool",
    "MessageItem",
    "NamespaceTool",
    "OtherItem",
    "ReasoningItem",
    "ResponsesRequest",
    "Tool",
    "ToolChoiceParam",
    "ToolSearchCallItem",
    "ToolSearchOutputItem",
    "ToolSearchTool",
    "parse_input_item",
    "parse_responses_request",
]


class TextPart(RequestModel):
    """An ``input_text`` or ``output_text`` content part."""

    type: Literal["input_text", "output_text"]
    text: str


class RefusalPart(RequestModel):
    """An assistant ``refusal`` content part (echoed from an earlier output)."""

    type: Literal["refusal"]
    refusal: str


class MediaPart(RequestModel):
    """An ``input_image`` or ``input_file`` part (accepted here, not servable by a text back end)."""

    type: Literal["input_image", "input_file"]


ContentPart = Annotated[Union[TextPart, RefusalPart, MediaPart], Field(discriminator="type")]


class _EchoedItem(RequestModel):
    """An item a client may echo back from an earlier output, with or without ``id``/``status``."""

    id: str | None = None
    status: str | None = None


class MessageItem(_EchoedItem):
    """A message; ``type`` may be omitted (the AI SDK does)."""

    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: Union[str, list[ContentPart]]


class FunctionCallItem(_EchoedItem):
    """A function call echoed from an earlier output, with or without ``id``/``status``;
    ``namespace`` names the namespace tool the function belongs to."""

    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    namespace: str | None = None


class FunctionCallOutputItem(_EchoedItem):
    """A tool result; ``output`` is a string, a part list, or (leniently) any JSON value."""

    type: Literal["function_call_output"]
    call_id: str
    output: Any


class CustomToolCallItem(_EchoedItem):
    """A custom (freeform) tool call: raw ``input`` text, not JSON."""

    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str
    namespace: str | None = None


class CustomToolCallOutputItem(_EchoedItem):
    """A custom tool's result (a string or a part list)."""

    type: Literal["custom_tool_call_output"]
    call_id: str
    output: Any


class ToolSearchCallItem(_EchoedItem):
    """A ``tool_search`` call; ``arguments`` is a JSON value (an object), not a string."""

    type: Literal["tool_search_call"]
    call_id: str | None = None
    arguments: Any = None
    execution: str | None = None


class ToolSearchOutputItem(_EchoedItem):
    """What a client-executed tool search loaded: tool definitions the model may call from now on."""

    type: Literal["tool_search_output"]
    call_id: str | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    execution: str | None = None


class LocalShellCallItem(_EchoedItem):
    """A ``local_shell`` call: ``action`` is ``{"type": "exec", "command": [...], ...}``."""

    type: Literal["local_shell_call"]
    call_id: str | None = None
    action: dict[str, Any]


class LocalShellCallOutputItem(_EchoedItem):
    """A ``local_shell`` result; its ``id`` is the call's ``call_id`` (OpenAI's shape), ``call_id`` is accepted too."""

    type: Literal["local_shell_call_output"]
    call_id: str | None = None
    output: Any


class ShellCallItem(_EchoedItem):
    """A ``shell`` call: ``action`` is ``{"commands": [...], "timeout_ms", "max_output_length"}``."""

    type: Literal["shell_call"]
    call_id: str
    action: dict[str, Any]


class ShellCallOutputItem(_EchoedItem):
    """A ``shell`` call's result: ``output`` lists each command's ``stdout``, ``stderr`` and ``outcome``
    (``{"type": "exit", "exit_code"}`` or ``{"type": "timeout"}``)."""

    type: Literal["shell_call_output"]
    call_id: str
    output: Any


class ApplyPatchCallItem(_EchoedItem):
    """An ``apply_patch`` call: ``operation`` is ``{"type": "create_file" | "update_file" | "delete_file",
    "path", "diff"}`` (a V4A diff; none for a deletion)."""

    type: Literal["apply_patch_call"]
    call_id: str
    operation: dict[str, Any]


class ApplyPatchCallOutputItem(_EchoedItem):
    """An ``apply_patch`` call's result: ``status`` ``completed`` or ``failed``, and what the client said."""

    type: Literal["apply_patch_call_output"]
    call_id: str
    output: str | None = None


class OtherItem(RequestModel):
    """Any other item type (hosted tool calls, MCP items, compaction, types yet unknown): kept, shown as a note."""

    type: str
    id: str | None = None


class ItemReference(RequestModel):
    """A reference to a stored item by id."""

    type: Literal["item_reference"]
    id: str


class ReasoningItem(RequestModel):
    """A reasoning item passed back by agents, with or without ``encrypted_content`` (never shown to the back end)."""

    type: Literal["reasoning"]


def _type_tag(value: Any, known: Collection[str], other: str, default: str | None = None) -> str | None:
    """The union tag of a ``{"type": …}`` object: its type when ``known``, ``other`` for any other string;
    ``None`` (an ``invalid_value`` error) for a non-string type. A missing type is ``default``."""
    kind = value.get("type") if isinstance(value, Mapping) else getattr(value, "type", None)
    kind = kind or default
    if not isinstance(kind, str):
        return None
    return kind if kind in known else other


def _item_tag(value: Any) -> str | None:
    return _type_tag(value, _ITEM_TAGS, "other", default="message")


InputItem = Annotated[
    Union[
        Annotated[MessageItem, Tag("message")],
        Annotated[FunctionCallItem, Tag("function_call")],
        Annotated[FunctionCallOutputItem, Tag("function_call_output")],
        Annotated[CustomToolCallItem, Tag("custom_tool_call")],
        Annotated[CustomToolCallOutputItem, Tag("custom_tool_call_output")],
        Annotated[ToolSearchCallItem, Tag("tool_search_call")],
        Annotated[ToolSearchOutputItem, Tag("tool_search_output")],
        Annotated[LocalShellCallItem, Tag("local_shell_call")],
        Annotated[LocalShellCallOutputItem, Tag("local_shell_call_output")],
        Annotated[ShellCallItem, Tag("shell_call")],
        Annotated[ShellCallOutputItem, Tag("shell_call_output")],
        Annotated[ApplyPatchCallItem, Tag("apply_patch_call")],
        Annotated[ApplyPatchCallOutputItem, Tag("apply_patch_call_output")],
        Annotated[ItemReference, Tag("item_reference")],
        Annotated[ReasoningItem, Tag("reasoning")],
        Annotated[OtherItem, Tag("other")],
    ],
    Discriminator(
        _item_tag,
        custom_error_type="invalid_value",
        custom_error_message="invalid input item type",
    ),
]


def _union_tags(annotated: Any) -> frozenset[str]:
    """The tags of a tagged union ``Annotated[Union[Annotated[Model, Tag(tag)], …], Discriminator]``."""
    members = typing.get_args(typing.get_args(annotated)[0])
    return frozenset(meta.tag for member in members for meta in typing.get_args(member)[1:] if isinstance(meta, Tag))


#: The item types read as their own models (any other type is an ``OtherItem``).
_ITEM_TAGS = _union_tags(InputItem) - {"other"}


def _string_input(value: Any) -> Any:
    # A bare string is one user message, which is also how it is stored and listed.
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return value


class FunctionTool(RequestModel):
    """A function tool in the flat Responses shape."""

    type: Literal["function"]
    name: ToolName
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class CustomTool(RequestModel):
    """A custom (freeform) tool: the model writes raw text in ``format`` (text, or a lark/regex grammar)."""

    type: Literal["custom"]
    name: ToolName
    description: str | None = None
    format: dict[str, Any] | None = None


class NamespaceTool(RequestModel):
    """Function and custom tools grouped under a namespace; a call carries ``namespace`` besides its ``name``."""

    type: Literal["namespace"]
    name: ToolName
    description: str | None = None
    tools: list[Annotated[Union[FunctionTool, CustomTool], Field(discriminator="type")]]


class ToolSearchTool(RequestModel):
    """Tool discovery; only ``execution: "client"`` can be offered (the client runs the search)."""

    type: Literal["tool_search"]
    execution: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


class LocalShellTool(RequestModel):
    """The client-executed ``local_shell`` tool (``local_shell_call`` items with an ``exec`` action)."""

    type: Literal["local_shell"]


class ShellTool(RequestModel):
    """The ``shell`` tool: run by the client on its own machine (``environment`` unset or ``local``); in a
    container (``container_auto``, ``container_reference``) it is the provider's, a hosted tool."""

    type: Literal["shell"]
    environment: dict[str, Any] | None = None

    @property
    def runs_on_client(self) -> bool:
        """Whether the client runs it (a ``local`` environment, or none named)."""
        return self.environment is None or self.environment.get("type") == "local"


class ApplyPatchTool(RequestModel):
    """The client-executed ``apply_patch`` tool (``apply_patch_call`` items with a file ``operation``)."""

    type: Literal["apply_patch"]


#: What an HTTP header's name may be (RFC 9110's token).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class McpTool(RequestModel):
    """A remote MCP server whose tools the gateway lists, offers and runs (docs/gateway-tools.md): by its
    ``server_url``, or an operator's server by its ``server_label`` alone."""

    type: Literal["mcp"]
    server_label: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,39}$")
    server_url: str | None = Field(default=None, max_length=2048)
    server_description: str | None = None
    headers: dict[str, str] | None = None
    authorization: str | None = None
    allowed_tools: list[str] | dict[str, Any] | None = None
    require_approval: Literal["always", "never"] | dict[str, Any] | None = None
    connector_id: str | None = None

    @field_validator("headers")
    @classmethod
    def _sendable_headers(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for name, text in (value or {}).items():
            if not _HEADER_NAME.fullmatch(name) or any(c in text for c in "\r\n\0"):
                raise ValueError(f"header {name[:40]!r} cannot be sent (a token name, a value without line breaks)")
        return value


class HostedTool(RequestModel):
    """A tool the provider would run itself (``web_search``, ``file_search``, ``mcp``, unknown types…)."""

    type: str


def _tool_tag(value: Any) -> str | None:
    return _type_tag(value, _TOOL_TAGS, "hosted")


Tool = Annotated[
    Union[
        Annotated[FunctionTool, Tag("function")],
        Annotated[CustomTool, Tag("custom")],
        Annotated[NamespaceTool, Tag("namespace")],
        Annotated[ToolSearchTool, Tag("tool_search")],
        Annotated[LocalShellTool, Tag("local_shell")],
        Annotated[ShellTool, Tag("shell")],
        Annotated[ApplyPatchTool, Tag("apply_patch")],
        Annotated[McpTool, Tag("mcp")],
        Annotated[HostedTool, Tag("hosted")],
    ],
    Discriminator(_tool_tag, custom_error_type="invalid_value", custom_error_message="invalid tool type"),
]
#: The tool types read as their own models (any other type is a ``HostedTool``).
_TOOL_TAGS = _union_tags(Tool) - {"hosted"}


class FunctionToolChoice(RequestModel):
    """``{"type": "function", "name": ...}``: force one function."""

    type: Literal["function"]
    name: str


class CustomToolChoice(RequestModel):
    """``{"type": "custom", "name": ...}``: force one custom tool."""

    type: Literal["custom"]
    name: str


class AllowedTool(RequestModel):
    """One entry of an ``allowed_tools`` choice (a function or custom tool by name, or a tool type)."""

    type: str
    name: str | None = None


class AllowedToolsChoice(RequestModel):
    """``{"type": "allowed_tools", "mode": ..., "tools": [...]}``: restrict the callable set."""

    type: Literal["allowed_tools"]
    mode: Literal["auto", "required"]
    tools: list[AllowedTool]


class HostedToolChoice(RequestModel):
    """``{"type": "web_search_preview"}`` and the like: force a tool by its type."""

    type: str


def _choice_tag(value: Any) -> str | None:
    return _type_tag(value, ("function", "custom", "allowed_tools"), "hosted")


ToolChoiceParam = Union[
    Literal["auto", "none", "required"],
    Annotated[
        Union[Annotated[FunctionToolChoice, Tag("function")], Annotated[CustomToolChoice, Tag("custom")],
              Annotated[AllowedToolsChoice, Tag("allowed_tools")], Annotated[HostedToolChoice, Tag("hosted")]],
        Discriminator(_choice_tag, custom_error_type="invalid_value", custom_error_message="invalid tool_choice"),
    ],
]


class ConversationRef(RequestModel):
    """``{"id": "conv_…"}``: the conversation a response belongs to."""

    id: str


class ResponsesRequest(RequestModel):
    """A ``/v1/responses`` request body. Unknown keys are kept in ``model_extra``."""

    model: str
    input: Annotated[list[InputItem], BeforeValidator(_string_input)] = Field(default_factory=list)
    instructions: str | None = None
    tools: list[Tool] = Field(default_factory=list)
    tool_choice: ToolChoiceParam | None = None
    parallel_tool_calls: bool = True
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_tool_calls: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    metadata: Metadata | None = None
    user: str | None = None
    store: bool = True
    stream: bool = False
    previous_response_id: str | None = None
    text: dict[str, Any] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    reasoning: dict[str, Any] | None = None
    background: bool = False
    conversation: str | ConversationRef | None = None

    @property
    def conversation_id(self) -> str | None:
        """The id of the ``conversation`` the response joins, if any."""
        return self.conversation.id if isinstance(self.conversation, ConversationRef) else self.conversation

    def response_echo(self) -> dict[str, Any]:
        """The request values a Response object repeats (wire-contract 4.4)."""
        return {
            "background": self.background,
            "conversation": None if self.conversation_id is None else {"id": self.conversation_id},
            "instructions": self.instructions,
            "max_output_tokens": self.max_output_tokens,
            "metadata": self.metadata or {},
            "parallel_tool_calls": self.parallel_tool_calls,
            "previous_response_id": self.previous_response_id,
            "reasoning": self.reasoning,
            "store": self.store,
            "temperature": self.temperature,
            "text": self.text or {"format": {"type": "text"}},
            "tool_choice": _dump(self.tool_choice) if self.tool_choice is not None else "auto",
            "tools": [_tool_echo(t) for t in self.tools],
            "top_p": self.top_p,
            "truncation": self.truncation or "disabled",
            "user": self.user,
        }


def _tool_echo(tool: BaseModel) -> dict[str, Any]:
    """A request tool as the Response object repeats it (function tools with OpenAI's defaults filled in)."""
    if isinstance(tool, FunctionTool):
        return {"type": "function", "name": tool.name, "description": tool.description,
                "parameters": tool.parameters, "strict": bool(tool.strict)}
    if isinstance(tool, McpTool):  # its credentials are never repeated (nor stored with the response)
        return tool.model_dump(exclude_none=True, exclude={"headers", "authorization"})
    return tool.model_dump(exclude_none=True)


def _dump(value: Any) -> Any:
    return value.model_dump(exclude_none=True) if isinstance(value, BaseModel) else value


_ITEM_ADAPTER: TypeAdapter[Any] = TypeAdapter(InputItem)


def parse_input_item(item: Mapping[str, Any], param: str) -> Any:
    """Validate one stored or referenced item dict as an input item.

    Raises:
        InputError: with ``param`` as the base of the reported path.
    """
    return validate(_ITEM_ADAPTER, item, param)


def parse_responses_request(body: Any) -> ResponsesRequest:
    """Validate a request body.

    Raises:
        InputError: a 400 with the offending ``param``: a non-object body, a
            top-level ``messages`` key, or any field error. Which tools can be
            offered (and what ``tool_choice`` may name) is decided by
            :func:`app.responses.tools.offered_tools`.
    """
    if not isinstance(body, Mapping):
        raise InputError("The request body must be a JSON object.", None, "invalid_type")
    if "messages" in body:
        raise InputError(
            "'messages' is a Chat Completions parameter; the Responses API takes 'input' "
            "(use /v1/chat/completions for messages).",
            "messages",
            "unknown_parameter",
        )
    return validate(ResponsesRequest, body)
