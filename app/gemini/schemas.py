"""Pydantic models of the Gemini API's ``generateContent`` and ``countTokens`` requests.

Fields are read in the API's JSON names (``systemInstruction``, ``functionDeclarations``…) and, as Google's
JSON mapping also takes them, in their proto names (``system_instruction``, ``generation_config``: the REST
examples' spelling). Only what toolwire reads is validated; everything else (``safetySettings``,
``cachedContent``, ``labels``, ``thoughtSignature``, ``mediaResolution``…) is accepted and ignored, as a text
back end has no use for it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel

from ..validation import RequestModel, ToolName, validate


class GeminiModel(RequestModel):
    """A request object read by its camelCase JSON names or its snake_case proto names."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)


class FunctionCall(GeminiModel):
    """An earlier call of the model: ``args`` is the arguments object; ``id`` pairs it with its response."""

    id: str | None = None
    name: str = Field(min_length=1)
    args: dict[str, Any] | None = None


class FunctionResponse(GeminiModel):
    """The client's result of a call, paired by ``id`` or else by ``name``."""

    id: str | None = None
    name: str = Field(min_length=1)
    response: dict[str, Any] | None = None


class Part(GeminiModel):
    """One part of a turn: text (``thought: true`` for reasoning), a call, a call's result, or media."""

    text: str | None = None
    thought: bool | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    inline_data: dict[str, Any] | None = None
    file_data: dict[str, Any] | None = None


class Content(GeminiModel):
    """One turn: ``user`` or ``model`` (``function``: an older spelling of a turn of call results)."""

    role: Literal["user", "model", "function"] | None = None
    parts: list[Part] = Field(default_factory=list)


class FunctionDeclaration(GeminiModel):
    """A function the client runs: its parameters as an OpenAPI-subset ``parameters`` schema (``type:
    "OBJECT"``…) or as a JSON Schema ``parametersJsonSchema``."""

    name: ToolName
    description: str | None = None
    parameters: dict[str, Any] | None = None
    parameters_json_schema: Any = None


class Tool(GeminiModel):
    """One ``tools`` entry: function declarations, or one of Google's own tools (``googleSearch``,
    ``codeExecution``…, kept as extra keys)."""

    function_declarations: list[FunctionDeclaration] | None = None


class FunctionCallingConfig(GeminiModel):
    """``mode`` ``AUTO`` (the default), ``ANY`` (a call is required, of ``allowedFunctionNames`` if given),
    ``NONE``, or ``VALIDATED`` (text or a valid call: as ``AUTO``)."""

    mode: Literal["MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED"] | None = None
    allowed_function_names: list[str] | None = None


class ToolConfig(GeminiModel):
    function_calling_config: FunctionCallingConfig | None = None


class ThinkingConfig(GeminiModel):
    """``includeThoughts`` shows the model's reasoning as ``thought`` parts; budgets and levels are not sent."""

    include_thoughts: bool | None = None
    thinking_budget: int | None = None
    thinking_level: str | None = None


class GenerationConfig(GeminiModel):
    """How to answer: sampling, limits, stop sequences, a JSON answer's schema, thinking."""

    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: int | None = Field(None, ge=0)
    candidate_count: Literal[1] | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    stop_sequences: list[str] | None = Field(None, max_length=5)
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    response_mime_type: Literal["text/plain", "application/json", "text/x.enum"] | None = None
    response_schema: dict[str, Any] | None = None
    response_json_schema: Any = None
    thinking_config: ThinkingConfig | None = None


class CountTokensRequest(GeminiModel):
    """What a prompt is made of: a ``countTokens`` body's (its ``generateContentRequest`` is read as a
    ``generateContent`` body), and the part of a ``generateContent`` body it counts."""

    contents: list[Content] = Field(default_factory=list)
    system_instruction: Content | None = None
    tools: list[Tool] | None = None
    tool_config: ToolConfig | None = None


class GenerateContentRequest(CountTokensRequest):
    """A ``generateContent`` / ``streamGenerateContent`` body."""

    contents: list[Content] = Field(min_length=1)
    generation_config: GenerationConfig | None = None


def parse_generate_request(body: dict[str, Any]) -> GenerateContentRequest:
    """Validate a ``generateContent`` body.

    Raises:
        InputError: 400 naming the first offending parameter.
    """
    return validate(GenerateContentRequest, body)


def parse_count_tokens_request(body: dict[str, Any]) -> CountTokensRequest:
    """Validate a ``countTokens`` body: its ``generateContentRequest`` when it has one, else its ``contents``.

    Raises:
        InputError: 400 naming the first offending parameter.
    """
    inner = body.get("generateContentRequest", body.get("generate_content_request"))
    if inner is not None:
        return validate(GenerateContentRequest, inner, "generateContentRequest")
    return validate(CountTokensRequest, body)
