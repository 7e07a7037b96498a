"""Request tools and tool choice → :class:`statemachine.ParserConfig`, for both endpoints.

Each endpoint normalises its tools and tool choice to ``ToolSpec`` objects and a
:class:`ChoiceRequest`; :func:`build_parser_config` checks the choice against
the offered tools (the one ``tool_choice`` check of every endpoint) and adds the
model's formats and policy (its :class:`~app.profile.ModelProfile`).

Marker mode (``TOOLWIRE_MARKER_MODE``, or ``X-Toolwire-Marker: 1`` on one
request) gives each request a fresh random marker that the model's calls must
repeat in their opener; :func:`prompt_format` is the format the prompt then
describes (and re-renders earlier calls in). With ``TOOLWIRE_AUTO_MARKER`` (on by
default) a request whose user text or tool results already hold call syntax gets
a marker too (:func:`with_auto_marker`): a model quoting that text back would
otherwise make a call nobody asked for.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol

import orjson

from statemachine import (
    ParserConfig,
    TextFormat,
    ToolChoice,
    ToolSpec,
    get_format,
    regex_problem,
    schema_problem,
)

from ..errors import InputError
from ..profile import ModelProfile
from .lru import BoundedLRU

if TYPE_CHECKING:
    from ..settings import Settings

#: Tool sets kept to be shared: agents resend the same tools every turn, and an open stream holds its
#: tools (schemas included) to its end, so streams offering the same tools share one copy of them.
TOOL_SET_CACHE_SIZE = 64
#: Bytes of tool JSON kept in all; a larger set is not shared.
TOOL_SET_CACHE_BYTES = 4 * 1024 * 1024

_tool_sets: BoundedLRU[bytes, ToolSet] = BoundedLRU(TOOL_SET_CACHE_SIZE, TOOL_SET_CACHE_BYTES,
                                                                 lambda key, _: len(key))


@dataclass(frozen=True, slots=True)
class ChoiceRequest:
    """A request's tool choice, normalised, with where the client wrote it (for the error's ``param``).

    Fields:
        choice: the core ``ToolChoice``.
        param: the request parameter (``tool_choice``, or ``function_call`` in legacy requests).
        name_params: each name the choice allows → the path it was given at (``tool_choice.function.name``).
        tools_param: the parameter that offers the tools (``tools`` or ``functions``).
    """

    choice: ToolChoice = field(default_factory=ToolChoice)
    param: str = "tool_choice"
    name_params: Mapping[str, str] = field(default_factory=dict)
    tools_param: str = "tools"


class FunctionLike(Protocol):
    """A function definition as either endpoint's schema holds it."""

    name: str
    description: str | None
    parameters: dict | None
    strict: bool | None


def build_parser_config(tools: list[ToolSpec] | ToolSet, tool_choice: ChoiceRequest | ToolChoice, *,
                        parallel_tool_calls: bool, legacy_functions: bool, settings: "Settings", profile: ModelProfile,
                        marker_requested: bool = False, json_output: bool = False) -> ParserConfig:
    """The parser configuration for one request.

    Args:
        tools: the offered function tools (or their :func:`shared_tool_set`, made already).
        tool_choice: the normalised choice (a bare ``ToolChoice``: one sent as
            ``tool_choice``, or ``function_call`` in a legacy request); names it allows must be offered.
        parallel_tool_calls: ``False`` keeps one call per choice.
        legacy_functions: the request used ``functions`` (answers use ``function_call``).
        settings: the operator's marker mode (a marker is drawn per call when it is on, see
            :func:`request_marker`).
        profile: the model's profile: its formats, its policy, whether its answers start in reasoning.
        marker_requested: the client asked for marker mode (``X-Toolwire-Marker: 1``).
        json_output: the client asked for JSON output, so a bare JSON
            answer is content, not a call (parsing.md case 31).
    Raises:
        InputError: 400 when ``tool_choice`` names a tool that is not offered, or
            demands a call while no tool is offered.
    """
    if isinstance(tool_choice, ToolChoice):
        tool_choice = (ChoiceRequest(tool_choice, "function_call", tools_param="functions") if legacy_functions
                       else ChoiceRequest(tool_choice))
    offered = tools if isinstance(tools, ToolSet) else shared_tool_set(tools)
    check_tool_choice(tool_choice, set(offered))
    return ParserConfig(
        tools=offered,
        tool_choice=tool_choice.choice,
        parallel_tool_calls=parallel_tool_calls and not legacy_functions,
        legacy_functions=legacy_functions,
        formats=profile.formats,
        policy=profile.policy,
        marker=request_marker(settings, marker_requested) if tools else None,
        bare_json=not json_output,
        starts_in_reasoning=profile.opens_reasoning,
    )


def tools_key(tools: Iterable[ToolSpec]) -> bytes | None:
    """Everything ``tools`` are, as JSON bytes (a cache key), or ``None`` for a schema JSON cannot hold
    (only from an embedding host)."""
    try:
        key = orjson.dumps([(t.name, t.description, t.parameters, t.strict, t.kind, t.input_format) for t in tools])
    except TypeError:
        return None
    # A copy of exactly its length: orjson's result keeps its whole growth buffer (4 KiB for 134 bytes of tools
    # with one non-ASCII character), and the caches keep their keys and count them by length.
    return memoryview(key).tobytes()


class ToolSet(dict):
    """Offered tools by name, with ``key``, their :func:`tools_key`: computed once a request (the prompt's
    cache is keyed by it too)."""

    __slots__ = ("key",)

    def __init__(self, tools: Iterable[ToolSpec], key: bytes | None):
        super().__init__((t.name, t) for t in tools)
        self.key = key


def shared_key(tools: Mapping[str, ToolSpec]) -> bytes | None:
    """:func:`tools_key` of ``tools``: the one :func:`shared_tool_set` computed, if it made them."""
    return tools.key if isinstance(tools, ToolSet) else tools_key(tools.values())


def shared_tool_set(tools: list[ToolSpec]) -> ToolSet:
    """``tools`` by name: the very mapping an earlier request offering the same tools got, if it is still
    kept. Shared mappings (and the schemas in them) are never changed."""
    key = tools_key(tools)
    by_name = ToolSet(tools, key)
    if key is None or not tools:
        return by_name
    shared = _tool_sets.get(key)
    if shared is None:
        _tool_sets.put(key, by_name)
        return by_name
    return shared


def check_tool_choice(request: ChoiceRequest, offered: set[str]) -> None:
    """Refuse a choice that allows a tool not offered, or demands a call while none is.

    Raises:
        InputError: 400 ``invalid_value``, ``param`` the path of the unknown name (else the choice's).
    """
    choice = request.choice
    if choice.allowed is not None:
        for name in sorted(choice.allowed - offered):
            param = request.name_params.get(name, request.param)
            raise InputError(f"Invalid value for '{param}': {name!r} is not in '{request.tools_param}'.",
                             param, "invalid_value")
    elif choice.mode == "required" and not offered:
        raise InputError(f"Invalid value for '{request.param}': 'required' needs at least one tool in "
                         f"'{request.tools_param}'.", request.param, "invalid_value")


def request_marker(settings: "Settings", requested: bool = False) -> str | None:
    """A fresh marker when marker mode is on for this request, else ``None``.

    On with ``marker_mode`` or when the client ``requested`` it (``X-Toolwire-Marker: 1``); a
    request cannot turn off what the operator turned on.
    """
    if settings.marker_mode or requested:
        return secrets.token_urlsafe(12)
    return None


def with_auto_marker(config: ParserConfig, messages: Iterable[Mapping[str, Any]],
                     settings: "Settings") -> ParserConfig:
    """``config`` with a fresh marker when ``auto_marker`` is on, it has none yet, tools are offered, and a
    user message or tool result in ``messages`` holds an opener of the request's formats or a call of an offered
    tool written without one (:func:`_call_finder`)."""
    if config.marker is not None or not config.tools or not settings.auto_marker:
        return config
    find_opener = _opener_finder(config.formats)
    find_call = _call_finder(tuple(config.tools))
    for message in messages:
        if message.get("role") in ("user", "tool", "function"):
            content = message.get("content")
            text = content if isinstance(content, str) else orjson.dumps(content).decode() if content else ""
            if find_opener(text) or find_call(text):
                return dataclasses.replace(config, marker=secrets.token_urlsafe(12))
    return config


@functools.lru_cache(maxsize=64)
def _call_finder(names: tuple[str, ...]) -> Callable[[str], re.Match[str] | None]:
    """A search for a call of one of the tools ``names`` written without an opener, as toolwire reads one at an
    answer's start (issue 43 item 4): a JSON call object naming it (bare, fenced, OpenAI-shaped:
    ``"name": "delete_repo"``), a Python call (``[delete_repo(confirm=True)]``) or the name before a JSON object
    (``delete_repo\n{…}``). A model quoting such a document back would otherwise make a call nobody asked for."""
    alternatives = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
    return re.compile(rf"(?<![\w.-])(?:{alternatives})\s*[({{]"
                      rf'|"(?:name|tool_name|tool|function)"\s*:\s*"(?:functions\.)?(?:{alternatives})"').search


@functools.lru_cache(maxsize=64)
def _opener_finder(formats: tuple[str, ...]) -> Callable[[str], re.Match[str] | None]:
    """A search for any opener of ``formats`` in a text (built once per set of formats, not per request:
    ``all`` has 33): one regex pass over a message instead of one ``in`` per opener (15-30x faster)."""
    openers = sorted({opener for name in formats for opener in get_format(name).openers}, key=len, reverse=True)
    if not openers:
        return lambda text: None  # an empty pattern would match every text
    return re.compile("|".join(map(re.escape, openers))).search


def forced_call_format(config: ParserConfig) -> dict[str, Any] | None:
    """The ``response_format`` that makes a back end with a JSON-schema constraint (llama.cpp's grammar) write
    the call a ``required`` or named ``tool_choice`` demands, as a bare ``{"name", "arguments"}`` object (read
    as a call at the message's start); ``None`` when no call is forced or a custom tool could be the one."""
    choice = config.tool_choice
    if choice.mode != "required" or not config.tools:
        return None
    names = sorted(choice.allowed) if choice.allowed is not None else sorted(config.tools)
    specs = [config.tools[name] for name in names if name in config.tools]
    if not specs or any(spec.kind != "function" for spec in specs):
        return None
    calls = [{"type": "object", "properties": {"name": {"const": spec.name},
                                               "arguments": spec.parameters or {"type": "object"}},
              "required": ["name", "arguments"]} for spec in specs]
    return {"type": "json_object", "schema": calls[0] if len(calls) == 1 else {"anyOf": calls}}


def prompt_format(config: ParserConfig) -> TextFormat:
    """The format the prompt asks the model to write calls in (the preferred one, marked if ``config`` is)."""
    return get_format(config.formats[0]).with_marker(config.marker)


def is_json_format(value: object) -> bool:
    """Whether a ``response_format`` / ``text.format`` object asks for JSON (``json_object``, ``json_schema``)."""
    return isinstance(value, dict) and value.get("type") in ("json_object", "json_schema")


def check_tool(spec: ToolSpec, offered: Iterable[str], *, name: str, definition: str) -> None:
    """Refuse a tool the worker could not safely use: a name an earlier tool of the request has (the model's
    call would go to one of them), a strict function's schema :func:`~statemachine.schema_problem` refuses
    (a remote ``$ref``, a ref cycle, a typo jsonschema cannot run…), a custom tool's regex grammar RE2
    cannot run. Lark grammars and non-strict schemas are never evaluated as code: not refused.

    Args:
        offered: the model-facing names of the tools before it.
        name: the ``param`` of its name (``tools[2].function.name``).
        definition: the ``param`` of its schema (``tools[2].function.parameters``) or of its grammar's
            ``definition``.
    Raises:
        InputError: 400 naming ``name`` (``duplicate_tool_name``) or ``definition``.
    """
    if spec.name in offered:
        raise InputError(f"Invalid value for '{name}': the tool name {spec.name!r} is already used by an earlier "
                         "tool (a namespaced tool is named namespace__name).", name, "duplicate_tool_name")
    if spec.kind == "function" and spec.strict and spec.parameters is not None:
        problem = schema_problem(spec.parameters)
        if problem:
            raise InputError(f"Invalid schema for function {spec.name!r}: {problem}.", definition,
                             "invalid_function_parameters")
    grammar = spec.input_format or {}
    if spec.kind == "custom" and grammar.get("type") == "grammar" and grammar.get("syntax") == "regex":
        problem = regex_problem(grammar.get("definition"))
        if problem:
            raise InputError(f"Invalid grammar for tool {spec.name!r}: {problem}.", definition, "invalid_value")


def tool_specs(functions: Iterable[FunctionLike]) -> list[ToolSpec]:
    """Function definitions (Chat ``tools[].function`` or ``functions[]``, Responses flat ``tools[]``) as
    core ``ToolSpec``s (``strict`` only when sent as true)."""
    return [ToolSpec(name=fn.name, description=fn.description or "", parameters=fn.parameters,
                     strict=bool(fn.strict)) for fn in functions]
