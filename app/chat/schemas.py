"""Pydantic models of the Chat Completions request, and pydantic errors → 400 with ``param``.

The models validate only; the view keeps the client's raw dicts (unknown keys
included) for prompting and for the parameters passed through to the upstream.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError

from ..http.errors import ApiError


class _Open(BaseModel):
    """A request object that accepts keys it does not know (newer API fields)."""

    model_config = ConfigDict(extra="allow")


class ContentPart(_Open):
    """One part of an array ``content`` (``text``, ``image_url``…)."""

    type: str
    text: str | None = None


Content = Union[str, list[ContentPart]]


class SystemMessage(_Open):
    role: Literal["system"]
    content: Content
    name: str | None = None


class DeveloperMessage(_Open):
    role: Literal["developer"]
    content: Content
    name: str | None = None


class UserMessage(_Open):
    role: Literal["user"]
    content: Content
    name: str | None = None


class FunctionCallValue(_Open):
    name: str
    arguments: str = ""


class AssistantToolCall(_Open):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCallValue


class CustomCallValue(_Open):
    name: str
    input: str = ""


class AssistantCustomToolCall(_Open):
    """An earlier call of a custom (freeform) tool: raw ``input`` text."""

    id: str
    type: Literal["custom"]
    custom: CustomCallValue


def _call_tag(value: Any) -> str:
    kind = value.get("type", "function") if isinstance(value, dict) else getattr(value, "type", "function")
    return "CustomCall" if kind == "custom" else "FunctionCall"


# Capitalised tags: loc_to_param drops them from error paths as union branch labels.
AnyToolCall = Annotated[Union[Annotated[AssistantToolCall, Tag("FunctionCall")],
                              Annotated[AssistantCustomToolCall, Tag("CustomCall")]], Discriminator(_call_tag)]


class AssistantMessage(_Open):
    role: Literal["assistant"]
    content: Content | None = None
    name: str | None = None
    tool_calls: list[AnyToolCall] | None = None
    function_call: FunctionCallValue | None = None


class ToolMessage(_Open):
    role: Literal["tool"]
    content: Content
    tool_call_id: str


class FunctionMessage(_Open):
    role: Literal["function"]
    name: str
    content: str | None = None


Message = Annotated[
    Union[SystemMessage, DeveloperMessage, UserMessage, AssistantMessage, ToolMessage, FunctionMessage],
    Field(discriminator="role"),
]


class FunctionDef(_Open):
    """A function offered to the model (``tools[].function`` or legacy ``functions[]``)."""

    name: str = Field(min_length=1, max_length=128)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FunctionTool(_Open):
    type: Literal["function"]
    function: FunctionDef


class CustomDef(_Open):
    """A custom (freeform) tool offered to the model (``tools[].custom``)."""

    name: str = Field(min_length=1, max_length=128)
    description: str | None = None
    format: dict[str, Any] | None = None

    def input_format(self) -> dict[str, Any] | None:
        """``format`` in the flat Responses shape the core reads (Chat nests a grammar under ``grammar``)."""
        fmt = self.format
        if isinstance(fmt, dict) and fmt.get("type") == "grammar" and isinstance(fmt.get("grammar"), dict):
            return {"type": "grammar", **fmt["grammar"]}
        return fmt


class CustomTool(_Open):
    type: Literal["custom"]
    custom: CustomDef


AnyTool = Annotated[Union[FunctionTool, CustomTool], Field(discriminator="type")]


class NamedFunction(_Open):
    name: str = Field(min_length=1)


class NamedToolChoice(_Open):
    type: Literal["function"]
    function: NamedFunction


class NamedCustomToolChoice(_Open):
    type: Literal["custom"]
    custom: NamedFunction


class AllowedTool(_Open):
    type: Literal["function", "custom"] = "function"
    function: NamedFunction | None = None
    custom: NamedFunction | None = None
    name: str | None = None

    @property
    def tool_name(self) -> str | None:
        """The named tool (nested Chat shape or flat shape)."""
        nested = self.function or self.custom
        return nested.name if nested else self.name


class AllowedToolsSpec(_Open):
    mode: Literal["auto", "required"]
    tools: list[AllowedTool]


class AllowedToolsChoice(_Open):
    type: Literal["allowed_tools"]
    allowed_tools: AllowedToolsSpec


ToolChoiceValue = Union[Literal["none", "auto", "required"], NamedToolChoice, NamedCustomToolChoice,
                        AllowedToolsChoice]


class StreamOptions(_Open):
    include_usage: bool = False


class ChatRequest(_Open):
    """A ``POST /v1/chat/completions`` body."""

    model: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[AnyTool] | None = None
    tool_choice: ToolChoiceValue | None = None
    parallel_tool_calls: bool | None = None
    functions: list[FunctionDef] | None = None
    function_call: Union[Literal["none", "auto"], NamedFunction, None] = None
    n: int = Field(1, ge=1, le=128)
    stop: Union[str, list[str], None] = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)

    @property
    def include_usage(self) -> bool:
        """Whether the stream ends with a usage chunk."""
        return bool(self.stream_options and self.stream_options.include_usage)


def parse_chat_request(body: dict[str, Any]) -> ChatRequest:
    """Validate a chat body.

    Raises:
        ApiError: 400 naming the first offending parameter.
    """
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as exc:
        raise validation_error(exc) from None


def validation_error(exc: ValidationError) -> ApiError:
    """A 400 :class:`ApiError` for the first problem in ``exc``.

    Of the errors pydantic reports for one parameter (one per union branch),
    the most specific (deepest) one is used.
    """
    errors = [(_param(err), err) for err in exc.errors(include_url=False)]
    first = errors[0][0]
    param, err = max((e for e in errors if e[0].startswith(first)), key=lambda e: len(e[0]))
    if err["type"] in ("missing", "union_tag_not_found"):
        return ApiError(400, f"Missing required parameter: '{param}'.", param=param,
                        code="missing_required_parameter")
    return ApiError(400, f"Invalid value for '{param}': {err['msg']}.", param=param, code="invalid_value")


def _param(err: Any) -> str:
    param = loc_to_param(list(err["loc"]))
    if err["type"] in ("union_tag_not_found", "union_tag_invalid"):
        param += "." + str(err["ctx"]["discriminator"]).strip("'\"")
    return param


_TYPE_LABELS = frozenset({"str", "int", "float", "bool", "none", "dict", "list"})


def loc_to_param(loc: list[Any]) -> str:
    """Turn a pydantic ``loc`` into an OpenAI ``param``: ``messages[0].content``.

    Labels that pydantic inserts for union branches (the role tag after
    ``messages[i]``, the type tag after ``tools[i]``, ``literal[...]``, class names, ``str``) are dropped.
    """
    if len(loc) >= 3 and loc[0] in ("messages", "tools") and isinstance(loc[1], int):
        loc = loc[:2] + loc[3:]  # the role / tool type tag of the discriminated union
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _is_branch_label(part):
            out += f".{part}" if out else part
    return out


def _is_branch_label(part: str) -> bool:
    return (not part.isidentifier()) or part[:1].isupper() or part in _TYPE_LABELS
