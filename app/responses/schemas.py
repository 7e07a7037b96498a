"""Pydantic models of a ``/v1/responses`` request, and the 400 they map to.

Lenient where clients differ (unknown keys are kept, message items may omit
``type``, ``content`` may be a string or parts), typed where toolwire acts on a
value. :func:`parse_responses_request` is the entry point: it raises
:class:`~app.errors.InputError` with an OpenAI-style ``param`` path such as
``input[2].call_id`` (the shared :mod:`app.validation` layer).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Mapping, Union

from pydantic import BaseModel, BeforeValidator, Discriminator, Field, Tag, TypeAdapter

from ..errors import InputError
from ..validation import RequestModel, validate

__all__ = [
    "AllowedToolsChoice",
    "ContentPart",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "FunctionTool",
    "FunctionToolChoice",
    "InputError",
    "InputItem",
    "ItemReference",
    "MessageItem",
    "ReasoningItem",
    "ResponsesRequest",
    "ToolChoiceParam",
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
    """A function call echoed from an earlier output, with or without ``id``/``status``."""

    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str


class FunctionCallOutputItem(_EchoedItem):
    """A tool result; ``output`` is a string, a part list, or (leniently) any JSON value."""

    type: Literal["function_call_output"]
    call_id: str
    output: Any


class ItemReference(RequestModel):
    """A reference to a stored item by id."""

    type: Literal["item_reference"]
    id: str


class ReasoningItem(RequestModel):
    """A reasoning item passed back by agent SDKs (not forwarded to the back end)."""

    type: Literal["reasoning"]


def _item_tag(value: Any) -> str | None:
    if isinstance(value, Mapping):
        return value.get("type") or "message"
    return getattr(value, "type", None)


InputItem = Annotated[
    Union[
        Annotated[MessageItem, Tag("message")],
        Annotated[FunctionCallItem, Tag("function_call")],
        Annotated[FunctionCallOutputItem, Tag("function_call_output")],
        Annotated[ItemReference, Tag("item_reference")],
        Annotated[ReasoningItem, Tag("reasoning")],
    ],
    Discriminator(
        _item_tag,
        custom_error_type="invalid_value",
        custom_error_message="unsupported input item type",
    ),
]


def _string_input(value: Any) -> Any:
    # A bare string is one user message, which is also how it is stored and listed.
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return value


class FunctionTool(RequestModel):
    """A function tool in the flat Responses shape."""

    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FunctionToolChoice(RequestModel):
    """``{"type": "function", "name": ...}``: force one function."""

    type: Literal["function"]
    name: str


class AllowedTool(RequestModel):
    """One entry of an ``allowed_tools`` choice."""

    type: Literal["function"]
    name: str


class AllowedToolsChoice(RequestModel):
    """``{"type": "allowed_tools", "mode": ..., "tools": [...]}``: restrict the callable set."""

    type: Literal["allowed_tools"]
    mode: Literal["auto", "required"]
    tools: list[AllowedTool]


ToolChoiceParam = Union[
    Literal["auto", "none", "required"],
    Annotated[Union[FunctionToolChoice, AllowedToolsChoice], Field(discriminator="type")],
]


class ResponsesRequest(RequestModel):
    """A ``/v1/responses`` request body. Unknown keys are kept in ``model_extra``."""

    model: str
    input: Annotated[list[InputItem], BeforeValidator(_string_input)] = Field(default_factory=list)
    instructions: str | None = None
    tools: list[FunctionTool] = Field(default_factory=list)
    tool_choice: ToolChoiceParam | None = None
    parallel_tool_calls: bool = True
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_tool_calls: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    metadata: dict[str, str] | None = None
    user: str | None = None
    store: bool = True
    stream: bool = False
    previous_response_id: str | None = None
    text: dict[str, Any] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    reasoning: dict[str, Any] | None = None

    def response_echo(self) -> dict[str, Any]:
        """The request values a Response object repeats (wire-contract 4.4)."""
        return {
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
            "tools": [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": bool(t.strict),
                }
                for t in self.tools
            ],
            "top_p": self.top_p,
            "truncation": self.truncation or "disabled",
            "user": self.user,
        }


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
            top-level ``messages`` key, a non-function tool (naming its type),
            or any field error. (``tool_choice`` is checked against ``tools``
            with the Chat endpoint's check, when the request is planned.)
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
    tools = body.get("tools")
    if isinstance(tools, list):
        for i, tool in enumerate(tools):
            if isinstance(tool, Mapping) and tool.get("type") != "function":
                raise InputError(
                    f"Tool type {tool.get('type')!r} is not supported: this server can only "
                    "offer function tools to its text-only model.",
                    f"tools[{i}].type",
                    "unsupported_tool_type",
                )
    return validate(ResponsesRequest, body)
