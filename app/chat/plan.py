"""A Chat Completions request → its :class:`~app.pipeline.generate.Generation`.

``tools`` / ``tool_choice`` / ``parallel_tool_calls`` and the legacy
``functions`` / ``function_call`` normalise to the same ``ToolSpec`` list and
:class:`~app.pipeline.plan.ChoiceRequest` the Responses endpoint builds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from statemachine import ParserConfig, ToolChoice, ToolSpec

from ..errors import InputError
from ..pipeline.generate import Generation
from ..pipeline.lru import BoundedLRU
from ..pipeline.plan import (
    TOOL_SET_CACHE_SIZE,
    ChoiceRequest,
    ToolSet,
    build_parser_config,
    check_tool,
    is_json_format,
    shared_tool_set,
    tool_specs,
)
from ..profile import ModelProfile, model_profile
from .schemas import AllowedToolsChoice, ChatRequest, CustomTool, NamedCustomToolChoice, NamedFunction, NamedToolChoice

if TYPE_CHECKING:
    from ..settings import Settings

#: The shared tool set of each validated ``tools`` list, by the list's id (with the list, which it checks).
_tool_sets_by_list: BoundedLRU[int, tuple[list[Any], ToolSet]] = BoundedLRU(TOOL_SET_CACHE_SIZE,
                                                                             TOOL_SET_CACHE_SIZE, lambda *_: 1)
#: Request keys toolwire consumes; everything else goes to the upstream as sent.
_CONSUMED_KEYS = frozenset({"model", "messages", "stream", "stream_options", "tools", "tool_choice",
                            "parallel_tool_calls", "functions", "function_call"})


def chat_generation(body: dict[str, Any], req: ChatRequest, settings: "Settings", *,
                    marker_requested: bool = False) -> Generation:
    """The generation a validated Chat body asks for (``body`` the raw dict: unknown keys pass through);
    ``marker_requested``: the client asked for marker mode."""
    profile = model_profile(settings, req.model)
    return Generation(
        profile=profile,
        messages=body["messages"],
        config=chat_parser_config(req, settings, profile, marker_requested=marker_requested),
        fields={key: value for key, value in body.items() if key not in _CONSUMED_KEYS},
        stream=req.stream,
        n=req.n,
    )


def chat_parser_config(req: ChatRequest, settings: "Settings", profile: ModelProfile, *,
                       marker_requested: bool = False) -> ParserConfig:
    """The parser configuration for a Chat Completions request to the model of ``profile``.

    Raises:
        InputError: 400 for ``tools`` together with ``functions``, an
            inconsistent ``tool_choice`` / ``function_call``, or a tool
            :func:`~app.pipeline.plan.check_tool` refuses (a name used twice, a
            strict schema or regex grammar the worker cannot use).
    """
    if req.tools and req.functions:
        raise InputError("Use either 'tools' or the legacy 'functions', not both.", "functions", "invalid_value")
    json_output = is_json_format((req.model_extra or {}).get("response_format"))
    choice: ChoiceRequest | ToolChoice
    tools: list[ToolSpec] | ToolSet
    if req.functions:
        tools = tool_specs(req.functions)
        for i, spec in enumerate(tools):
            check_tool(spec, {f.name for f in tools[:i]}, name=f"functions[{i}].name",
                       definition=f"functions[{i}].parameters")
        choice, parallel, legacy = _legacy_choice(req.function_call), False, True
    else:
        tools = _offered_tool_set(req.tools) if req.tools else []
        choice, parallel, legacy = _chat_choice(req.tool_choice), req.parallel_tool_calls is not False, False
    return build_parser_config(tools, choice, parallel_tool_calls=parallel, legacy_functions=legacy, settings=settings,
                               profile=profile, marker_requested=marker_requested, json_output=json_output)


def _offered_tool_set(tools: list[Any]) -> ToolSet:
    """The validated ``tools`` as the shared tool set (:func:`~app.pipeline.plan.shared_tool_set`), each
    checked: once per list, since :func:`~app.chat.schemas.parse_chat_request` hands every request with the
    same tools JSON the same validated list (never changed)."""
    known = _tool_sets_by_list.get(id(tools))
    if known is not None and known[0] is tools:
        return known[1]
    tool_set = shared_tool_set(_offered_tools(tools))
    _tool_sets_by_list.put(id(tools), (tools, tool_set))  # the list held: its id is not reused meanwhile
    return tool_set


def _offered_tools(tools: list[Any]) -> list[ToolSpec]:
    """The ``tools`` as core specs, each checked (:func:`~app.pipeline.plan.check_tool`)."""
    specs: dict[str, ToolSpec] = {}
    for i, tool in enumerate(tools):
        if isinstance(tool, CustomTool):
            spec, base = _custom_spec(tool), f"tools[{i}].custom"
            nested = isinstance((tool.custom.format or {}).get("grammar"), dict)  # Chat's nested grammar shape
            definition = f"{base}.format.grammar.definition" if nested else f"{base}.format.definition"
        else:
            spec, base = tool_specs([tool.function])[0], f"tools[{i}].function"
            definition = f"{base}.parameters"
        check_tool(spec, specs, name=f"{base}.name", definition=definition)
        specs[spec.name] = spec
    return list(specs.values())


def _custom_spec(tool: CustomTool) -> ToolSpec:
    """A custom (freeform) tool: raw text input, its ``format`` in the flat shape the core reads."""
    return ToolSpec(name=tool.custom.name, description=tool.custom.description or "", kind="custom",
                    input_format=tool.custom.input_format())


def _chat_choice(choice: object) -> ChoiceRequest:
    if choice is None:
        return ChoiceRequest()
    if isinstance(choice, str):
        return ChoiceRequest(ToolChoice(choice))  # type: ignore[arg-type]
    if isinstance(choice, NamedToolChoice):
        name = choice.function.name
        return ChoiceRequest(ToolChoice("required", frozenset({name})), name_params={name: "tool_choice.function.name"})
    if isinstance(choice, NamedCustomToolChoice):
        name = choice.custom.name
        return ChoiceRequest(ToolChoice("required", frozenset({name})), name_params={name: "tool_choice.custom.name"})
    assert isinstance(choice, AllowedToolsChoice)
    names: dict[str, str] = {}
    for i, tool in enumerate(choice.allowed_tools.tools):
        if tool.tool_name:
            where = "function.name" if tool.function else "custom.name" if tool.custom else "name"
            names.setdefault(tool.tool_name, f"tool_choice.allowed_tools.tools[{i}].{where}")
    return ChoiceRequest(ToolChoice(choice.allowed_tools.mode, frozenset(names)), name_params=names)


def _legacy_choice(choice: object) -> ChoiceRequest:
    if choice is None:
        core, names = ToolChoice(), {}
    elif isinstance(choice, NamedFunction):
        core, names = ToolChoice("required", frozenset({choice.name})), {choice.name: "function_call.name"}
    else:
        core, names = ToolChoice(choice), {}  # type: ignore[arg-type]
    return ChoiceRequest(core, "function_call", names, "functions")
