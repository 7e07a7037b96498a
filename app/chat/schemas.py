"""Pydantic models of the Chat Completions request (on the shared :mod:`app.validation` layer).

The models validate only; the view keeps the client's raw dicts (unknown keys
included) for prompting and for the parameters passed through to the upstream.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import orjson
from pydantic import BeforeValidator, Discriminator, Field, Tag

from ..pipeline.lru import BoundedLRU
from ..pipeline.plan import TOOL_SET_CACHE_BYTES, TOOL_SET_CACHE_SIZE
from ..validation import RequestModel, StopSequence, ToolName, stop_count, validate


class ContentPart(RequestModel):
    """One part of an array ``content`` (``text``, ``image_url``…)."""

    type: str
    text: str | None = None


Content = Union[str, list[ContentPart]]


class SystemMessage(RequestModel):
    role: Literal["system"]
    content: Content
    name: str | None = None


class DeveloperMessage(RequestModel):
    role: Literal["developer"]
    content: Content
    name: str | None = None


class UserMessage(RequestModel):
    role: Literal["user"]
    content: Content
    name: str | None = None


class FunctionCallValue(RequestModel):
    name: str
    arguments: str = ""


class AssistantToolCall(RequestModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCallValue


class CustomCallValue(RequestModel):
    name: str
    input: str = ""


class AssistantCustomToolCall(RequestModel):
    """An earlier call of a custom (freeform) tool: raw ``input`` text."""

    id: str
    type: Literal["custom"]
    custom: CustomCallValue


def _call_tag(value: Any) -> str:
    kind = value.get("type", "function") if isinstance(value, dict) else getattr(value, "type", "function")
    return "CustomCall" if kind == "custom" else "FunctionCall"


# Capitalised tags: never a key of the data, so the error path (validation._param) leaves them out.
AnyToolCall = Annotated[Union[Annotated[AssistantToolCall, Tag("FunctionCall")],
                              Annotated[AssistantCustomToolCall, Tag("CustomCall")]], Discriminator(_call_tag)]


class AssistantMessage(RequestModel):
    role: Literal["assistant"]
    content: Content | None = None
    name: str | None = None
    tool_calls: list[AnyToolCall] | None = None
    function_call: FunctionCallValue | None = None


class ToolMessage(RequestModel):
    role: Literal["tool"]
    content: Content
    tool_call_id: str


class FunctionMessage(RequestModel):
    role: Literal["function"]
    name: str
    content: str | None = None


Message = Annotated[
    Union[SystemMessage, DeveloperMessage, UserMessage, AssistantMessage, ToolMessage, FunctionMessage],
    Field(discriminator="role"),
]


class FunctionDef(RequestModel):
    """A function offered to the model (``tools[].function`` or legacy ``functions[]``)."""

    name: ToolName
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FunctionTool(RequestModel):
    type: Literal["function"]
    function: FunctionDef


class CustomDef(RequestModel):
    """A custom (freeform) tool offered to the model (``tools[].custom``)."""

    name: ToolName
    description: str | None = None
    format: dict[str, Any] | None = None

    def input_format(self) -> dict[str, Any] | None:
        """``format`` in the flat Responses shape the core reads (Chat nests a grammar under ``grammar``)."""
        fmt = self.format
        if isinstance(fmt, dict) and fmt.get("type") == "grammar" and isinstance(fmt.get("grammar"), dict):
            return {"type": "grammar", **fmt["grammar"]}
        return fmt


class CustomTool(RequestModel):
    type: Literal["custom"]
    custom: CustomDef


AnyTool = Annotated[Union[FunctionTool, CustomTool], Field(discriminator="type")]


class NamedFunction(RequestModel):
    name: str = Field(min_length=1)


class NamedToolChoice(RequestModel):
    type: Literal["function"]
    function: NamedFunction


class NamedCustomToolChoice(RequestModel):
    type: Literal["custom"]
    custom: NamedFunction


class AllowedTool(RequestModel):
    type: Literal["function", "custom"] = "function"
    function: NamedFunction | None = None
    custom: NamedFunction | None = None
    name: str | None = None

    @property
    def tool_name(self) -> str | None:
        """The named tool (nested Chat shape or flat shape)."""
        nested = self.function or self.custom
        return nested.name if nested else self.name


class AllowedToolsSpec(RequestModel):
    mode: Literal["auto", "required"]
    tools: list[AllowedTool]


class AllowedToolsChoice(RequestModel):
    type: Literal["allowed_tools"]
    allowed_tools: AllowedToolsSpec


ToolChoiceValue = Union[Literal["none", "auto", "required"], NamedToolChoice, NamedCustomToolChoice,
                        AllowedToolsChoice]


#: ``seed`` as OpenAI takes it: an int64, an integer in JSON (it is sent on as the client wrote it).
Seed = Annotated[int, Field(ge=-2 ** 63, le=2 ** 63 - 1, strict=True)]


class StreamOptions(RequestModel):
    include_usage: bool = False


class ChatRequest(RequestModel):
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
    stop: Annotated[Union[StopSequence, list[StopSequence], None], BeforeValidator(stop_count)] = None
    seed: Seed | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)

    @property
    def include_usage(self) -> bool:
        """Whether the stream ends with a usage chunk."""
        return bool(self.stream_options and self.stream_options.include_usage)


#: Validated ``tools`` lists by their JSON: agents resend the same tools every turn, and validating tens of
#: tools is most of a request's validation. The validated tools are shared, never changed (as tool sets are).
_validated_tools: BoundedLRU[bytes, list[Any]] = BoundedLRU(TOOL_SET_CACHE_SIZE, TOOL_SET_CACHE_BYTES,
                                                            lambda key, _: len(key))


def parse_chat_request(body: dict[str, Any]) -> ChatRequest:
    """Validate a chat body (its ``tools`` once per distinct list, see ``_validated_tools``).

    Raises:
        InputError: 400 naming the first offending parameter.
    """
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools:
        return validate(ChatRequest, body)
    try:
        key = memoryview(orjson.dumps(tools)).tobytes()  # its length only (see tools_key)
    except orjson.JSONEncodeError:  # an integer past 64 bits: validated as it is, not kept
        return validate(ChatRequest, body)
    known = _validated_tools.get(key)
    if known is None:
        request = validate(ChatRequest, body)
        if request.tools is not None:
            _validated_tools.put(key, request.tools)
        return request
    request = validate(ChatRequest, {**body, "tools": None})
    request.tools = known
    return request
