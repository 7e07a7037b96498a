"""Pydantic models of a ``/v1/responses`` request, and the 400 they map to.

Lenient where clients differ (unknown keys are kept, message items may omit
``type``, ``content`` may be a string or parts), typed where toolwire acts on a
value. :func:`parse_responses_request` is the entry point: it raises
:class:`InputError` with an OpenAI-style ``param`` path such as
``input[2].call_id``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Mapping, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError

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


class InputError(Exception):
    """A request the Responses endpoint rejects with an ``invalid_request_error``.

    Attributes:
        message: the human-readable reason.
        param: the offending parameter path (``input[1].call_id``), or ``None``.
        code: a machine-readable code, or ``None``.
        status: the HTTP status: 400, or 404 for a stored response or item that is not there.
    """

    def __init__(self, message: str, param: str | None = None, code: str | None = None, status: int = 400):
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        self.status = status


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


class TextPart(_Lenient):
    """An ``input_text`` or ``output_text`` content part."""

    type: Literal["input_text", "output_text"]
    text: str


class RefusalPart(_Lenient):
    """An assistant ``refusal`` content part (echoed from an earlier output)."""

    type: Literal["refusal"]
    refusal: str


class MediaPart(_Lenient):
    """An ``input_image`` or ``input_file`` part (accepted here, not servable by a text back end)."""

    type: Literal["input_image", "input_file"]


ContentPart = Annotated[Union[TextPart, RefusalPart, MediaPart], Field(discriminator="type")]


class _EchoedItem(_Lenient):
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


class ItemReference(_Lenient):
    """A reference to a stored item by id."""

    type: Literal["item_reference"]
    id: str


class ReasoningItem(_Lenient):
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


class FunctionTool(_Lenient):
    """A function tool in the flat Responses shape."""

    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FunctionToolChoice(_Lenient):
    """``{"type": "function", "name": ...}``: force one function."""

    type: Literal["function"]
    name: str


class AllowedTool(_Lenient):
    """One entry of an ``allowed_tools`` choice."""

    type: Literal["function"]
    name: str


class AllowedToolsChoice(_Lenient):
    """``{"type": "allowed_tools", "mode": ..., "tools": [...]}``: restrict the callable set."""

    type: Literal["allowed_tools"]
    mode: Literal["auto", "required"]
    tools: list[AllowedTool]


ToolChoiceParam = Union[
    Literal["auto", "none", "required"],
    Annotated[Union[FunctionToolChoice, AllowedToolsChoice], Field(discriminator="type")],
]


class ResponsesRequest(_Lenient):
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
    try:
        return _ITEM_ADAPTER.validate_python(item)
    except ValidationError as exc:
        raise _input_error(exc, item, param) from None


def parse_responses_request(body: Any) -> ResponsesRequest:
    """Validate a request body.

    Raises:
        InputError: a 400 with the offending ``param``: a non-object body, a
            top-level ``messages`` key, a non-function tool (naming its type),
            a ``tool_choice`` naming an unknown function, or any field error.
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
    try:
        request = ResponsesRequest.model_validate(body)
    except ValidationError as exc:
        raise _input_error(exc, body, None) from None
    _check_tool_choice(request)
    return request


def _check_tool_choice(request: ResponsesRequest) -> None:
    choice = request.tool_choice
    offered = {t.name for t in request.tools}
    if choice == "required" and not offered:
        raise InputError("tool_choice 'required' needs at least one tool in 'tools'.", "tool_choice", "invalid_value")
    if isinstance(choice, FunctionToolChoice) and choice.name not in offered:
        raise InputError(f"Tool {choice.name!r} is not in 'tools'.", "tool_choice.name", "invalid_value")
    if isinstance(choice, AllowedToolsChoice):
        for i, allowed in enumerate(choice.tools):
            if allowed.name not in offered:
                raise InputError(
                    f"Tool {allowed.name!r} is not in 'tools'.", f"tool_choice.tools[{i}].name", "invalid_value"
                )


def _input_error(exc: ValidationError, data: Any, base: str | None) -> InputError:
    # The most specific error (longest location) is the useful one: the others
    # are usually the sibling union branches that also failed.
    error = max(exc.errors(include_url=False), key=lambda e: len(e["loc"]))
    param = _param_path(error["loc"], data, base, error["type"] == "missing")
    if error["type"] == "missing":
        return InputError(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")
    where = f" for '{param}'" if param else ""
    return InputError(f"Invalid value{where}: {error['msg']}.", param, "invalid_value")


def _param_path(loc: tuple[Any, ...], data: Any, base: str | None, missing: bool) -> str | None:
    """Turn a pydantic location into ``a.b[1].c``, walking the data to skip union/tag labels."""
    path = base or ""
    for n, segment in enumerate(loc):
        if isinstance(segment, int) and isinstance(data, list) and 0 <= segment < len(data):
            path += f"[{segment}]"
            data = data[segment]
        elif isinstance(segment, str) and isinstance(data, Mapping) and (
            segment in data or (missing and n == len(loc) - 1)
        ):
            path += f".{segment}" if path else segment
            data = data.get(segment)
    return path or None
