"""Request tools and tool choice → :class:`statemachine.ParserConfig`.

Chat ``tools`` / ``tool_choice`` / ``parallel_tool_calls`` and legacy
``functions`` / ``function_call`` normalise to the same ``ToolSpec`` list and
``ToolChoice``; :func:`build_parser_config` adds the operator's policy and is
shared with the Responses endpoint.

Marker mode (``TOOLWIRE_MARKER_MODE``, or ``X-Toolwire-Marker: 1`` on one
request) gives each request a fresh random marker that the model's calls must
repeat in their opener; :func:`prompt_format` is the format the prompt then
describes (and re-renders earlier calls in).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Iterable

from flask import has_request_context, request

from statemachine import ParserConfig, Policy, TextFormat, ToolChoice, ToolSpec, get_format

from ..http.errors import ApiError
from ..chat.schemas import (
    AllowedToolsChoice,
    ChatRequest,
    CustomTool,
    FunctionDef,
    NamedCustomToolChoice,
    NamedFunction,
    NamedToolChoice,
)

if TYPE_CHECKING:
    from ..responses.schemas import FunctionTool as ResponsesFunctionTool
    from ..settings import Settings

_DEFAULT_FORMATS = ParserConfig().formats


def build_parser_config(tools: list[ToolSpec], tool_choice: ToolChoice, *, parallel_tool_calls: bool,
                        legacy_functions: bool, settings: "Settings", json_output: bool = False) -> ParserConfig:
    """The parser configuration for one request.

    Args:
        tools: the offered function tools.
        tool_choice: the normalised choice; names it allows must be offered.
        parallel_tool_calls: ``False`` keeps one call per choice.
        legacy_functions: the request used ``functions`` (answers use ``function_call``).
        settings: the operator's parser policy, preferred text format and
            marker mode (a marker is drawn per call when it is on, see
            :func:`request_marker`).
        json_output: the client asked for JSON output, so a bare JSON
            answer is content, not a call (parsing.md case 31).
    Raises:
        ApiError: 400 when ``tool_choice`` names a tool that is not offered, or
            demands a call while no tool is offered.
    """
    param = "function_call" if legacy_functions else "tool_choice"
    offered = {t.name for t in tools}
    if tool_choice.allowed is not None:
        missing = sorted(tool_choice.allowed - offered)
        if missing:
            raise ApiError(400, f"'{param}' names a function that is not in the request's tools: {missing[0]!r}.",
                           param=param, code="invalid_value")
    elif tool_choice.mode == "required" and not tools:
        raise ApiError(400, f"'{param}' is 'required' but no tools are specified.", param=param,
                       code="invalid_value")
    return ParserConfig(
        tools={t.name: t for t in tools},
        tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls and not legacy_functions,
        legacy_functions=legacy_functions,
        formats=(settings.tool_format, *(f for f in _DEFAULT_FORMATS if f != settings.tool_format)),
        policy=policy_from_settings(settings),
        marker=request_marker(settings) if tools else None,
        bare_json=not json_output,
    )


def request_marker(settings: "Settings") -> str | None:
    """A fresh marker when marker mode is on for this request, else ``None``.

    On with ``marker_mode`` or the request header ``X-Toolwire-Marker: 1``; a
    header cannot turn off what the operator turned on.
    """
    header = request.headers.get("X-Toolwire-Marker", "") if has_request_context() else ""
    if settings.marker_mode or header.strip().lower() in ("1", "true", "yes", "on"):
        return secrets.token_urlsafe(12)
    return None


def prompt_format(config: ParserConfig) -> TextFormat:
    """The format the prompt asks the model to write calls in (the preferred one, marked if ``config`` is)."""
    return get_format(config.formats[0]).with_marker(config.marker)


def is_json_format(value: object) -> bool:
    """Whether a ``response_format`` / ``text.format`` object asks for JSON (``json_object``, ``json_schema``)."""
    return isinstance(value, dict) and value.get("type") in ("json_object", "json_schema")


def policy_from_settings(settings: "Settings") -> Policy:
    """The parser :class:`~statemachine.Policy` the operator configured."""
    return Policy(
        unknown_tool=settings.unknown_tool,
        invalid_json=settings.invalid_json,
        schema_mismatch=settings.schema_mismatch,
        strict_mismatch=settings.strict_mismatch,
        text_after_calls="suppress" if settings.suppress_tail_after_tools else "keep",
        stop_after_first_call=settings.stop_after_tools == "first",
        max_tool_calls=settings.max_tool_calls,
    )


def chat_parser_config(req: ChatRequest, settings: "Settings") -> ParserConfig:
    """The parser configuration for a Chat Completions request.

    Raises:
        ApiError: 400 for ``tools`` together with ``functions``, or an
            inconsistent ``tool_choice`` / ``function_call``.
    """
    if req.tools and req.functions:
        raise ApiError(400, "Use either 'tools' or the legacy 'functions', not both.", param="functions",
                       code="invalid_value")
    json_output = is_json_format((req.model_extra or {}).get("response_format"))
    if req.functions:
        tools = tool_specs(req.functions)
        return build_parser_config(tools, _legacy_choice(req.function_call), parallel_tool_calls=False,
                                   legacy_functions=True, settings=settings, json_output=json_output)
    tools = [ToolSpec(name=t.custom.name, description=t.custom.description or "", kind="custom",
                      input_format=t.custom.input_format()) if isinstance(t, CustomTool) else tool_specs([t.function])[0]
             for t in req.tools or ()]
    parallel = req.parallel_tool_calls is not False
    return build_parser_config(tools, _chat_choice(req.tool_choice), parallel_tool_calls=parallel,
                               legacy_functions=False, settings=settings, json_output=json_output)


def tool_specs(functions: Iterable[FunctionDef | ResponsesFunctionTool]) -> list[ToolSpec]:
    """Function definitions (Chat ``tools[].function`` or ``functions[]``, Responses flat ``tools[]``) as
    core ``ToolSpec``s (``strict`` only when sent as true)."""
    return [ToolSpec(name=fn.name, description=fn.description or "", parameters=fn.parameters,
                     strict=bool(fn.strict)) for fn in functions]


def _chat_choice(choice: object) -> ToolChoice:
    if choice is None:
        return ToolChoice()
    if isinstance(choice, str):
        return ToolChoice(choice)  # type: ignore[arg-type]
    if isinstance(choice, NamedToolChoice):
        return ToolChoice("required", frozenset({choice.function.name}))
    if isinstance(choice, NamedCustomToolChoice):
        return ToolChoice("required", frozenset({choice.custom.name}))
    assert isinstance(choice, AllowedToolsChoice)
    names = frozenset(n for n in (t.tool_name for t in choice.allowed_tools.tools) if n)
    return ToolChoice(choice.allowed_tools.mode, names)


def _legacy_choice(choice: object) -> ToolChoice:
    if choice is None:
        return ToolChoice()
    if isinstance(choice, NamedFunction):
        return ToolChoice("required", frozenset({choice.name}))
    return ToolChoice(choice)  # type: ignore[arg-type]
