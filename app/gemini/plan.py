"""A Gemini request → its :class:`~app.pipeline.generate.Generation`: tools, ``toolConfig``, ``generationConfig``.

``functionDeclarations`` are offered as functions: a ``parameters`` schema in the API's OpenAPI subset
(``type: "OBJECT"``, ``nullable``…) as the JSON Schema it means (:func:`json_schema`), a
``parametersJsonSchema`` as it is. Google's own tools (``googleSearch``, ``codeExecution``, ``urlContext``…)
run on Google's side: like the other APIs' hosted tools they are not offered (counted in
``toolwire_dropped_tools_total``), or with ``TOOLWIRE_UNSUPPORTED_TOOLS=fail`` a 400 naming the tool.
``toolConfig.functionCallingConfig`` maps to the Chat choice: ``AUTO`` and ``VALIDATED`` → ``auto``, ``ANY`` →
``required`` (of ``allowedFunctionNames`` when given), ``NONE`` → ``none``.

The back end gets ``maxOutputTokens`` as ``max_tokens`` (clamped to the model's ``max_output_tokens`` by the
pipeline), ``stopSequences`` as ``stop``, ``temperature``, ``topP``, ``topK``, ``seed`` and the penalties; a
``responseMimeType`` of ``application/json`` as a ``json_object`` ``response_format``, with
``responseJsonSchema`` (or ``responseSchema``) as a ``json_schema`` one.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from statemachine import ParserConfig, ToolChoice, ToolSpec

from ..errors import InputError
from ..observability.dropped import DroppedTools
from ..pipeline.generate import Generation
from ..pipeline.plan import ChoiceRequest, build_parser_config, check_tool
from ..profile import ModelProfile, model_profile
from .schemas import CountTokensRequest, FunctionCallingConfig, FunctionDeclaration, GenerateContentRequest, Tool
from .transcript import to_chat_messages

if TYPE_CHECKING:
    from ..settings import Settings

log = logging.getLogger("toolwire.gemini.plan")

#: Google's own tools, for the dropped-tools metric's label (anything else is ``other``).
_GOOGLE_TOOLS = frozenset({"googleSearch", "googleSearchRetrieval", "codeExecution", "urlContext", "computerUse",
                           "fileSearch", "googleMaps", "enterpriseWebSearch", "retrieval", "mcpServers"})
#: OpenAPI-subset keys that are not JSON Schema's (``propertyOrdering`` only orders the model's output).
_NOT_JSON_SCHEMA = frozenset({"nullable", "propertyOrdering", "property_ordering"})
_CHOICE_PARAM = "toolConfig.functionCallingConfig"
#: Google's tools this API drops (and this worker has warned about).
_DROPPED = DroppedTools(log, _GOOGLE_TOOLS, "Google")


def gemini_generation(req: CountTokensRequest, settings: "Settings", *, model: str, stream: bool = False,
                      marker_requested: bool = False) -> Generation:
    """The generation a validated ``generateContent`` request asks for (its model from the URL); of a
    ``countTokens`` request, the same without the parameters it does not have."""
    profile = model_profile(settings, model)
    fields = _chat_fields(req) if isinstance(req, GenerateContentRequest) else {}
    config = parser_config(req, settings, profile, marker_requested=marker_requested,
                           json_output="response_format" in fields)
    return Generation(profile=profile, messages=to_chat_messages(req), config=config, fields=fields, stream=stream)


def parser_config(req: CountTokensRequest, settings: "Settings", profile: ModelProfile, *,
                  marker_requested: bool = False, json_output: bool = False) -> ParserConfig:
    """The parser configuration for the model of ``profile``: the declared functions, and ``toolConfig``'s mode.

    Raises:
        InputError: two declarations of one name, one of Google's tools with ``TOOLWIRE_UNSUPPORTED_TOOLS=fail``
            (``tools[i]``), only such tools (``tools``, unless the mode is ``NONE``), an allowed name not declared,
            or ``ANY`` with nothing declared.
    """
    specs: list[ToolSpec] = []
    dropped: list[str] = []
    for i, tool in enumerate(req.tools or ()):
        for j, declaration in enumerate(tool.function_declarations or ()):
            spec = _function(declaration)
            check_tool(spec, [s.name for s in specs], name=f"tools[{i}].functionDeclarations[{j}].name",
                       definition=f"tools[{i}].functionDeclarations[{j}].parameters")
            specs.append(spec)
        dropped += _google_tools(tool, i, settings)
    _DROPPED.note(dropped)
    calling = req.tool_config.function_calling_config if req.tool_config else None
    if dropped and not specs and (calling is None or calling.mode != "NONE"):
        raise InputError(f"None of the request's tools can be called here: {', '.join(dict.fromkeys(dropped))} "
                         "would run on Google's side, and the model behind this server can only call the "
                         "functionDeclarations that the client runs.", "tools", "unsupported_tool_type")
    return build_parser_config(specs, _choice_request(calling or FunctionCallingConfig()), parallel_tool_calls=True,
                               legacy_functions=False, settings=settings, profile=profile,
                               marker_requested=marker_requested, json_output=json_output)


def _function(declaration: FunctionDeclaration) -> ToolSpec:
    schema = declaration.parameters_json_schema
    if not isinstance(schema, dict):
        schema = json_schema(declaration.parameters) if declaration.parameters is not None else None
    return ToolSpec(name=declaration.name, description=declaration.description or "", parameters=schema)


def json_schema(schema: Any) -> Any:
    """An OpenAPI-subset schema (Gemini's ``Schema``) as the JSON Schema it means: ``type`` names in lower case
    (``"OBJECT"`` → ``"object"``), ``nullable: true`` as a ``"null"`` type, ``propertyOrdering`` left out; the
    nested ``properties``, ``items`` and ``anyOf`` alike."""
    if isinstance(schema, list):
        return [json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _NOT_JSON_SCHEMA:
            continue
        if key == "type" and isinstance(value, str):
            if value.upper() != "TYPE_UNSPECIFIED":
                out["type"] = value.lower()
        elif key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "anyOf", "any_of", "oneOf", "allOf", "additionalProperties", "not"):
            out["anyOf" if key == "any_of" else key] = json_schema(value)
        else:
            out[key] = value
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _google_tools(tool: Tool, index: int, settings: "Settings") -> list[str]:
    """Google's own tools in ``tools[index]`` (its keys other than ``functionDeclarations``), which are not offered."""
    kinds = list(tool.model_extra or {})
    for kind in kinds:
        if settings.unsupported_tools == "fail":
            param = f"tools[{index}].{kind}"
            raise InputError(f"Invalid value for '{param}': Google's {kind} tool is not supported; the model behind "
                             "this server can only call the functionDeclarations that the client runs.", param,
                             "unsupported_tool_type")
    return kinds


def _choice_request(calling: FunctionCallingConfig) -> ChoiceRequest:
    names = calling.allowed_function_names
    if calling.mode == "NONE":
        return ChoiceRequest(ToolChoice("none"), param=f"{_CHOICE_PARAM}.mode")
    mode = "required" if calling.mode == "ANY" else "auto"
    allowed = frozenset(names) if names and calling.mode in ("ANY", "VALIDATED") else None
    return ChoiceRequest(ToolChoice(mode, allowed), param=f"{_CHOICE_PARAM}.mode",  # type: ignore[arg-type]
                         name_params={name: f"{_CHOICE_PARAM}.allowedFunctionNames[{n}]"
                                      for n, name in enumerate(names or ())})


def _chat_fields(req: GenerateContentRequest) -> dict[str, Any]:
    """The sampling parameters, limits and answer format as the back end's Chat request takes them."""
    config = req.generation_config
    if config is None:
        return {}
    fields: dict[str, Any] = {}
    for ours, theirs in (("temperature", "temperature"), ("top_p", "top_p"), ("top_k", "top_k"),
                         ("max_output_tokens", "max_tokens"), ("stop_sequences", "stop"), ("seed", "seed"),
                         ("presence_penalty", "presence_penalty"), ("frequency_penalty", "frequency_penalty")):
        value = getattr(config, ours)
        if value is not None:
            fields[theirs] = value
    if config.response_mime_type == "application/json":
        schema = config.response_json_schema if config.response_json_schema is not None else \
            json_schema(config.response_schema) if config.response_schema is not None else None
        fields["response_format"] = {"type": "json_object"} if schema is None else \
            {"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}
    return fields
