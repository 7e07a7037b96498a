"""Pydantic models of the Anthropic Messages request (on the shared :mod:`app.validation` layer).

They validate only what toolwire reads; everything else a client sends (``cache_control`` on any block,
``output_config``, ``context_management``, ``defer_loading``, ``citations``…) is accepted and ignored, as
a text back end has no use for it. Claude Code's shapes are in ``/work/shared/docs/claude-code.md``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Discriminator, Field, Tag

from ..validation import RequestModel, StopSequence, ToolName, stop_count, validate


class TextBlock(RequestModel):
    type: Literal["text"]
    text: str


class ToolUseBlock(RequestModel):
    """An earlier call of the assistant: ``input`` is the arguments object."""

    type: Literal["tool_use"]
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResultBlock(RequestModel):
    """The client's answer to a ``tool_use``: a string or blocks (text, images)."""

    type: Literal["tool_result"]
    tool_use_id: str = Field(min_length=1)
    content: Union[str, list[dict[str, Any]], None] = None
    is_error: bool | None = None


class ThinkingBlock(RequestModel):
    """Earlier reasoning sent back (``thinking`` or ``redacted_thinking``): never shown to the model again."""

    type: Literal["thinking", "redacted_thinking"]


class OtherBlock(RequestModel):
    """Any other block (``image``, ``document``, a server tool's result…): a placeholder for the model."""

    type: str


def _block_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if kind in ("text", "tool_use", "tool_result"):
        return str(kind)
    return "thinking" if kind in ("thinking", "redacted_thinking") else "other"


# Tag names equal the data's type values, so the error path (validation._param) reads naturally.
ContentBlock = Annotated[Union[Annotated[TextBlock, Tag("text")], Annotated[ToolUseBlock, Tag("tool_use")],
                               Annotated[ToolResultBlock, Tag("tool_result")],
                               Annotated[ThinkingBlock, Tag("thinking")], Annotated[OtherBlock, Tag("other")]],
                         Discriminator(_block_tag)]

Content = Union[str, list[ContentBlock]]


class Message(RequestModel):
    """One turn. ``system`` is Claude Code's mid-conversation system turn (the per-turn-control beta)."""

    role: Literal["user", "assistant", "system"]
    content: Content


class CustomTool(RequestModel):
    """A tool the client runs (``type`` absent or ``custom``)."""

    type: Literal["custom"] | None = None
    name: ToolName
    description: str | None = None
    input_schema: dict[str, Any]


class ServerTool(RequestModel):
    """One of Anthropic's own tools (``web_search_20250305``, ``bash_20250124``, ``text_editor_…``…)."""

    type: str
    name: str | None = None


def _tool_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return "custom" if kind in (None, "custom") else "server"


Tool = Annotated[Union[Annotated[CustomTool, Tag("custom")], Annotated[ServerTool, Tag("server")]],
                 Discriminator(_tool_tag)]


class ToolChoice(RequestModel):
    """``auto``, ``any``, ``tool`` (with ``name``) or ``none``; ``disable_parallel_tool_use`` for the first three."""

    type: Literal["auto", "any", "tool", "none"]
    name: str | None = Field(None, min_length=1)
    disable_parallel_tool_use: bool | None = None


class Thinking(RequestModel):
    """``enabled`` (with ``budget_tokens``), ``adaptive``, ``disabled`` or a newer kind; ``display: omitted`` hides
    it."""

    type: str
    budget_tokens: int | None = Field(None, ge=1, strict=True)
    display: str | None = None

    @property
    def shown(self) -> bool:
        """Whether the answer carries thinking blocks."""
        return self.type != "disabled" and self.display != "omitted"


class CountTokensRequest(RequestModel):
    """A ``POST /v1/messages/count_tokens`` body: what the prompt is made of."""

    model: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    system: Union[str, list[TextBlock], None] = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: Thinking | None = None


class MessagesRequest(CountTokensRequest):
    """A ``POST /v1/messages`` body: the prompt, and how to answer it (numbers and flags as JSON types: a
    ``"10"`` or ``"yes"`` is refused, as Anthropic does, not coerced)."""

    max_tokens: int = Field(ge=1, strict=True)
    stream: bool = Field(False, strict=True)
    stop_sequences: Annotated[list[StopSequence] | None, BeforeValidator(stop_count)] = None
    temperature: float | None = Field(None, ge=0, le=1)
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: int | None = Field(None, ge=0)
    metadata: dict[str, Any] | None = None


def parse_messages_request(body: dict[str, Any]) -> MessagesRequest:
    """Validate a Messages body.

    Raises:
        InputError: 400 naming the first offending parameter.
    """
    return validate(MessagesRequest, body)


def parse_count_tokens_request(body: dict[str, Any]) -> CountTokensRequest:
    """Validate a ``count_tokens`` body.

    Raises:
        InputError: 400 naming the first offending parameter.
    """
    return validate(CountTokensRequest, body)
