"""Ollama's request bodies (``/api/chat``, ``/api/generate``, ``/api/show``, ``/api/embed``), validated so that a
refusal names the offending parameter (``messages[1].tool_calls[0].function.arguments``, ``options.num_predict``).

Fields Ollama takes that change nothing behind an OpenAI-compatible back end (``template``, ``context``, the
runner's options such as ``num_gpu``) are accepted and not used; ``keep_alive`` only says whether a request with
nothing to answer asks to unload its model.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, StrictFloat, field_validator

from ..validation import RequestModel, ToolName, validate

#: ``think``: on or off, or a level (Ollama's ``"low"`` … ``"max"``).
Think = bool | Literal["low", "medium", "high", "max"]
#: ``format``: ``"json"`` or a JSON schema the answer must match.
Format = Literal["json", ""] | dict[str, Any]


class Options(RequestModel):
    """The model options toolwire maps to the back end's fields (the others are accepted and not used)."""

    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: int | None = Field(None, ge=0)
    min_p: float | None = Field(None, ge=0, le=1)
    seed: int | None = None
    num_predict: int | None = None
    stop: list[str] | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    num_ctx: int | None = Field(None, ge=0)


class Function(RequestModel):
    """A call's ``function``: its name and its arguments, an object."""

    index: int | None = None
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolCall(RequestModel):
    """One entry of an assistant message's ``tool_calls``."""

    id: str | None = None
    function: Function


class Message(RequestModel):
    """One message of ``messages`` (Ollama lowercases the role)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    thinking: str | None = None
    images: list[str] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None

    @field_validator("role", mode="before")
    @classmethod
    def _lowercase(cls, role: Any) -> Any:
        return role.lower() if isinstance(role, str) else role


class ToolFunction(RequestModel):
    """A tool's ``function``: name, description, parameters (a JSON schema)."""

    name: ToolName
    description: str | None = None
    parameters: dict[str, Any] | None = None


class Tool(RequestModel):
    """One entry of ``tools``."""

    type: Literal["function"] = "function"
    function: ToolFunction


#: A Go duration, as ``keep_alive`` may be written (``"5m"``, ``"1h30m"``, ``"0"``): its parts, by unit.
_DURATION = re.compile(r"[-+]?(?:0|(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+)")
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_NANOSECONDS = {"ns": 1, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}


class Generating(RequestModel):
    """What ``/api/chat`` and ``/api/generate`` share."""

    model: str = Field(min_length=1)
    stream: bool | None = None
    format: Format | None = None
    options: Options | None = None
    think: Think | None = None
    keep_alive: StrictFloat | str | None = None  # (a JSON true is no duration)

    @property
    def streams(self) -> bool:
        """Whether to answer as a stream: Ollama streams unless ``stream`` is ``false``."""
        return self.stream is not False

    @property
    def unloads(self) -> bool:
        """Whether ``keep_alive`` is zero (seconds as a number, or a Go duration): with nothing to answer, the
        request asks Ollama to unload its model."""
        if isinstance(self.keep_alive, str):
            parts = _DURATION_PART.findall(self.keep_alive)
            return int(sum(float(number) * _NANOSECONDS[unit] for number, unit in parts)) == 0
        return self.keep_alive is not None and 0 <= self.keep_alive * 1e9 < 1

    @field_validator("keep_alive")
    @classmethod
    def _a_duration(cls, value: float | str | None) -> float | str | None:
        if isinstance(value, str) and not _DURATION.fullmatch(value):
            raise ValueError(f"time: invalid duration {value!r}: seconds as a number, or a duration such as '5m'")
        return value


class ChatRequest(Generating):
    """``POST /api/chat``."""

    messages: list[Message] = Field(default_factory=list)
    tools: list[Tool] | None = None


class GenerateRequest(Generating):
    """``POST /api/generate``."""

    prompt: str = ""
    system: str | None = None
    suffix: str | None = None
    images: list[str] | None = None
    raw: bool = False


class ModelRequest(BaseModel):
    """``POST /api/show``: the model (``name`` in older clients)."""

    model: str | None = None
    name: str | None = None


class EmbedRequest(RequestModel):
    """``POST /api/embed``: one text or a list of them (``/api/embeddings``' ``prompt``: one)."""

    model: str = Field(min_length=1)
    input: str | list[str] | None = None
    prompt: str | None = None
    dimensions: int | None = Field(None, ge=1)
    truncate: bool | None = None


def parse_chat_request(body: dict[str, Any]) -> ChatRequest:
    """The validated ``/api/chat`` body."""
    return validate(ChatRequest, body)


def parse_generate_request(body: dict[str, Any]) -> GenerateRequest:
    """The validated ``/api/generate`` body."""
    return validate(GenerateRequest, body)


def parse_model_request(body: dict[str, Any]) -> ModelRequest:
    """The validated ``/api/show`` body."""
    return validate(ModelRequest, body)


def parse_embed_request(body: dict[str, Any]) -> EmbedRequest:
    """The validated ``/api/embed`` (or ``/api/embeddings``) body."""
    return validate(EmbedRequest, body)
