"""Responses request ``tools`` / ``tool_choice`` → what the model is offered, and what its calls become.

A text-only model can call what the client runs: ``function`` tools, the
function and custom tools of a ``namespace``, ``custom`` (freeform) tools, a
client-executed ``tool_search``, ``local_shell``, ``shell`` (in a local environment) and ``apply_patch``.
Each gets a model-facing
name (a namespaced tool is ``namespace__name``, as Codex's own Chat bridge names it: namespaces stay
apart, and the name stays a valid Chat tool name for native tool mode) and a
:class:`ToolOrigin` that tells the encoder which output item a call becomes.

``mcp`` tools are the gateway's own: :mod:`app.responses.mcp` lists, offers and runs them; so are ``web_search``
tools when the operator configured a search back end (:mod:`app.responses.web_search`). Other hosted tools
(``web_search`` otherwise, ``file_search``, ``shell`` in a container, any unknown type) are not offered: by
default they are dropped (counted in
``toolwire_dropped_tools_total``, a warning once per type and worker, named on the request's access line);
with ``TOOLWIRE_UNSUPPORTED_TOOLS=fail`` they are a 400 naming the tool. A request whose tools were all dropped
(none left to call) is a 400 naming ``tools``: the model would answer as if nothing had been asked.
A ``tool_choice`` that forces a tool the model is not offered is a 400.

Tools a client-executed tool search loaded (the ``tools`` of a
``tool_search_output`` input item) are offered too, as OpenAI does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Literal

from pydantic import TypeAdapter, ValidationError

from statemachine import ToolChoice, ToolSpec, schema_problem

from ..errors import InputError
from ..observability.dropped import DroppedTools
from ..pipeline.plan import ChoiceRequest, check_tool
from .web_search import WEB_SEARCH_TYPES, runs_here
from .schemas import (
    AllowedToolsChoice,
    CustomTool,
    CustomToolChoice,
    FunctionTool,
    FunctionToolChoice,
    HostedTool,
    HostedToolChoice,
    ApplyPatchTool,
    LocalShellTool,
    McpTool,
    NamespaceTool,
    ResponsesRequest,
    ShellTool,
    Tool,
    ToolSearchOutputItem,
    ToolSearchTool,
)

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = ["APPLY_PATCH", "LOCAL_SHELL", "SHELL", "TOOL_SEARCH", "OfferedTools", "ToolOrigin", "model_name",
           "offered_tools"]

log = logging.getLogger("toolwire.responses.tools")

#: Model-facing names of the client-executed built-in tools (each also its type).
TOOL_SEARCH = "tool_search"
LOCAL_SHELL = "local_shell"
SHELL = "shell"
APPLY_PATCH = "apply_patch"
_BUILT_IN = (TOOL_SEARCH, LOCAL_SHELL, SHELL, APPLY_PATCH)

_TOOL_SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "What to look for."},
                   "limit": {"type": "integer", "description": "How many tools to load at most."}},
    "required": ["query"],
}
_LOCAL_SHELL_DESCRIPTION = (
    "Run a command on the user's machine. The client runs it and sends back its output."
)
_LOCAL_SHELL_PARAMETERS = {
    "type": "object",
    "properties": {
        "command": {"type": "array", "items": {"type": "string"},
                    "description": 'The program and its arguments, e.g. ["bash", "-lc", "ls -la"].'},
        "working_directory": {"type": "string", "description": "Where to run it."},
        "timeout_ms": {"type": "integer", "description": "Stop the command after this many milliseconds."},
        "env": {"type": "object", "additionalProperties": {"type": "string"},
                "description": "Extra environment variables."},
    },
    "required": ["command"],
}

_SHELL_DESCRIPTION = (
    "Run shell commands on the user's machine, in order. The client runs them and sends back each one's "
    "stdout, stderr and exit code."
)
_SHELL_PARAMETERS = {
    "type": "object",
    "properties": {
        "commands": {"type": "array", "items": {"type": "string"},
                     "description": 'Shell command lines, run one after another, e.g. ["ls -la", "git status"].'},
        "timeout_ms": {"type": "integer", "description": "Stop a command after this many milliseconds."},
        "max_output_length": {"type": "integer", "description": "The most characters of output to send back."},
    },
    "required": ["commands"],
}
_APPLY_PATCH_DESCRIPTION = (
    "Create, change or delete one file on the user's machine. The client applies it and says whether it "
    "worked. The diff is in V4A form: for create_file, every line of the new file prefixed with '+'; for "
    "update_file, hunks that each start with an '@@' line (a line of context to find the place, or empty) "
    "followed by the lines around the change, kept lines prefixed with ' ', removed ones with '-', added ones "
    "with '+'; delete_file takes no diff."
)
_APPLY_PATCH_PARAMETERS = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": ["create_file", "update_file", "delete_file"],
                 "description": "What to do with the file."},
        "path": {"type": "string", "description": "The file's path, relative to the project's root."},
        "diff": {"type": "string", "description": "The V4A diff (not for delete_file)."},
    },
    "required": ["type", "path"],
}

_TOOL_ADAPTER: TypeAdapter[Any] = TypeAdapter(Tool)
#: Hosted tool types that label the dropped-tools metric; any other type counts as ``other`` (bounded labels).
_HOSTED_TYPES = frozenset({
    "web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26", "file_search",
    "code_interpreter", "image_generation", "computer", "computer_use", "computer_use_preview", "mcp",
    "tool_search", "shell", "apply_patch",
})


#: The hosted tools this API drops (and this worker has warned about).
_DROPPED = DroppedTools(log, _HOSTED_TYPES, "OpenAI")


@dataclass(frozen=True, slots=True)
class ToolOrigin:
    """What a model-facing tool name stands for in the client's request.

    Fields:
        type: the output item a call becomes: ``function`` (``function_call``),
            ``custom`` (``custom_tool_call``), ``tool_search``
            (``tool_search_call``), ``local_shell`` (``local_shell_call``), ``shell`` (``shell_call``) or
            ``apply_patch`` (``apply_patch_call``).
        name: the tool's name as the client knows it.
        namespace: the namespace tool it belongs to, if any.
    """

    type: Literal["function", "custom", "tool_search", "local_shell", "shell", "apply_patch"]
    name: str
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class OfferedTools:
    """The tools offered to the model for one request.

    Fields:
        specs: core tool specs, by model-facing name order.
        origins: model-facing name → :class:`ToolOrigin`.
        choice: the request's ``tool_choice`` in model-facing names, for the plan's one check
            (a name that is not offered stays as the client wrote it, so that check names it).
        dropped: the types of the hosted tools that were not offered.
    """

    specs: list[ToolSpec]
    origins: dict[str, ToolOrigin]
    choice: ChoiceRequest
    dropped: list[str] = field(default_factory=list)


def offered_tools(request: ResponsesRequest, settings: "Settings") -> OfferedTools:
    """The offered tools, their origins and the normalised ``tool_choice`` of ``request``.

    Raises:
        InputError: a hosted tool when ``settings.unsupported_tools`` is
            ``fail`` (``tools[i].type``); tools that were all dropped, none left to call (``tools``, unless
            ``tool_choice`` is ``none``); a ``tool_choice`` that forces a
            hosted tool (``tool_choice``), or requires a call from an
            ``allowed_tools`` list none of which can be called (``tool_choice.tools``); a tool named like an
            earlier one (``ns``/``f`` beside a function ``ns__f`` too), a strict schema or regex grammar the
            worker cannot use (:func:`~app.pipeline.plan.check_tool`).
    """
    builder = _Offer()
    for i, tool in enumerate(request.tools):
        if isinstance(tool, McpTool) or runs_here(tool, settings):
            continue  # the gateway's own (app.responses.mcp, app.responses.web_search)
        if _hosted(tool):
            if settings.unsupported_tools == "fail":
                raise InputError(
                    f"Tool type {tool.type!r} is not supported: the model behind this server can only call "
                    "tools the client runs (function, custom, namespace, client tool_search, local_shell, "
                    "shell in a local environment, apply_patch).", f"tools[{i}].type", "unsupported_tool_type")
            builder.dropped.append(tool.type)
        else:
            builder.add(tool, f"tools[{i}]")
    for tool in _searched_tools(request):
        builder.add(tool)
    if builder.dropped:
        _DROPPED.note(builder.dropped)
    choice = builder.choice(request.tool_choice,
                            web_search=any(runs_here(tool, settings) for tool in request.tools))
    if builder.dropped and not builder.specs and request.tool_choice != "none":
        raise InputError(
            f"None of the request's tools can be called here: {', '.join(dict.fromkeys(builder.dropped))} "
            "would be run by the provider, and the model behind this server can only call tools the client "
            "runs. Send function, custom or client-run tools, or no tools.", "tools", "unsupported_tool_type")
    return OfferedTools(builder.specs, builder.origins, choice, builder.dropped)


def _hosted(tool: Any) -> bool:
    """Whether ``tool`` is run by the provider, not the client (so not offered here)."""
    return isinstance(tool, HostedTool) or (isinstance(tool, ToolSearchTool) and tool.execution != "client") \
        or (isinstance(tool, ShellTool) and not tool.runs_on_client)


def model_name(name: str, namespace: str | None) -> str:
    """The name the model knows a tool by: ``namespace__name`` inside a namespace, else ``name``."""
    return f"{namespace}__{name}" if namespace else name


def _searched_tools(request: ResponsesRequest) -> Iterable[Any]:
    """Valid tool definitions from the request's ``tool_search_output`` items (invalid ones are skipped)."""
    for item in request.input:
        if isinstance(item, ToolSearchOutputItem):
            for definition in item.tools:
                try:
                    tool = _TOOL_ADAPTER.validate_python(definition)
                except ValidationError:
                    continue
                if not isinstance(tool, (HostedTool, ToolSearchTool)):
                    yield tool


class _Offer:
    """Collects specs and origins, then maps the client's ``tool_choice`` onto them."""

    def __init__(self) -> None:
        self.specs: list[ToolSpec] = []
        self.origins: dict[str, ToolOrigin] = {}
        self.dropped: list[str] = []

    def add(self, tool: Any, param: str | None = None) -> None:
        """Offer ``tool``, defined at ``param`` (``tools[3]``), checked (:func:`check_tool`); a tool a tool
        search loaded (no ``param``) replaces one of the same name instead."""
        if isinstance(tool, NamespaceTool):
            note = f"(In namespace `{tool.name}`" + (f": {_first_line(tool.description)})" if tool.description
                                                      else ")")
            for j, inner in enumerate(tool.tools):
                self._add_one(inner, tool.name, note, param and f"{param}.tools[{j}]")
        elif isinstance(tool, ToolSearchTool):
            self._put(ToolSpec(TOOL_SEARCH, tool.description or "Search for more tools.",
                               tool.parameters or _TOOL_SEARCH_PARAMETERS), ToolOrigin("tool_search", TOOL_SEARCH),
                      param and f"{param}.type")
        elif isinstance(tool, LocalShellTool):
            self._put(ToolSpec(LOCAL_SHELL, _LOCAL_SHELL_DESCRIPTION, _LOCAL_SHELL_PARAMETERS),
                      ToolOrigin("local_shell", LOCAL_SHELL), param and f"{param}.type")
        elif isinstance(tool, ShellTool):
            self._put(ToolSpec(SHELL, _SHELL_DESCRIPTION, _SHELL_PARAMETERS), ToolOrigin("shell", SHELL),
                      param and f"{param}.type")
        elif isinstance(tool, ApplyPatchTool):
            self._put(ToolSpec(APPLY_PATCH, _APPLY_PATCH_DESCRIPTION, _APPLY_PATCH_PARAMETERS),
                      ToolOrigin("apply_patch", APPLY_PATCH), param and f"{param}.type")
        else:
            self._add_one(tool, None, None, param)

    def _add_one(self, tool: FunctionTool | CustomTool, namespace: str | None, note: str | None,
                 param: str | None) -> None:
        name = model_name(tool.name, namespace)
        description = "\n".join(p for p in (tool.description or "", note or "") if p)
        if isinstance(tool, CustomTool):
            spec = ToolSpec(name, description, kind="custom", input_format=tool.format)
            self._put(spec, ToolOrigin("custom", tool.name, namespace), param and f"{param}.name",
                      param and f"{param}.format.definition")
        else:
            spec = ToolSpec(name, description, tool.parameters, strict=bool(tool.strict))
            self._put(spec, ToolOrigin("function", tool.name, namespace), param and f"{param}.name",
                      param and f"{param}.parameters")

    def _put(self, spec: ToolSpec, origin: ToolOrigin, name_param: str | None,
             definition_param: str | None = None) -> None:
        if name_param is not None:
            check_tool(spec, self.origins, name=name_param, definition=definition_param or name_param)
        elif spec.strict and spec.parameters is not None and schema_problem(spec.parameters):
            return  # loaded by a tool search, with a strict schema that cannot be used: skipped like a malformed one
        elif spec.name in self.origins:
            self.specs = [s for s in self.specs if s.name != spec.name]
        self.specs.append(spec)
        self.origins[spec.name] = origin

    def choice(self, choice: Any, *, web_search: bool = False) -> ChoiceRequest:
        """``choice`` in model-facing names (``web_search``: the gateway runs the request's web search)."""
        if choice is None:
            return ChoiceRequest()
        if isinstance(choice, str):
            return ChoiceRequest(ToolChoice(choice))  # type: ignore[arg-type]
        if isinstance(choice, (FunctionToolChoice, CustomToolChoice)):
            name = self._named(choice.type, choice.name, "tool_choice.name")
            return ChoiceRequest(ToolChoice("required", frozenset({name})), name_params={name: "tool_choice.name"})
        if isinstance(choice, HostedToolChoice):
            if choice.type == "mcp" or (web_search and choice.type in WEB_SEARCH_TYPES):
                return ChoiceRequest()  # the gateway's tools, applied later (mcp.mcp_choice, web_search.web_choice)
            return ChoiceRequest(ToolChoice("required", frozenset({self._by_type(choice.type)})))
        assert isinstance(choice, AllowedToolsChoice)
        names: dict[str, str] = {}
        for i, allowed in enumerate(choice.tools):
            if allowed.type in ("function", "custom"):
                param = f"tool_choice.tools[{i}].name"
                names.setdefault(self._named(allowed.type, allowed.name or "", param), param)
            elif allowed.type in _BUILT_IN and self._built_in(allowed.type):
                names.setdefault(allowed.type, f"tool_choice.tools[{i}].type")
            # an allowed hosted tool is simply not callable here; an MCP server's tools are added once listed
        if choice.mode == "required" and not names and not any(a.type == "mcp" for a in choice.tools):
            raise InputError("Invalid value for 'tool_choice.tools': it requires a call, but none of its tools "
                             "can be called here (hosted tools are not run).", "tool_choice.tools", "invalid_value")
        return ChoiceRequest(ToolChoice(choice.mode, frozenset(names)), name_params=names)

    def _named(self, kind: str, name: str, param: str) -> str:
        """The model-facing name of the ``kind`` tool the client calls ``name`` (or ``namespace__name``);
        ``name`` itself when no tool has it (the plan's one check then refuses it).

        Raises:
            InputError: ``name`` is a tool of another kind (a custom tool named as a function).
        """
        found = self.origins.get(name)
        if found is not None and found.type == kind:
            return name
        for offered, origin in self.origins.items():
            if origin.type == kind and origin.name == name:
                return offered
        if found is not None:
            raise InputError(f"Invalid value for '{param}': {name!r} is a {found.type} tool, not a {kind} tool.",
                             param, "invalid_value")
        return name

    def _built_in(self, kind: str) -> bool:
        """Whether the built-in tool of type ``kind`` is offered (not a client tool that shares its name)."""
        origin = self.origins.get(kind)
        return origin is not None and origin.type == kind

    def _by_type(self, kind: str) -> str:
        if kind in _BUILT_IN and self._built_in(kind):
            return kind
        raise InputError(f"Invalid value for 'tool_choice': it forces {kind!r}, a tool this server cannot offer "
                         "to its text-only model (hosted tools are not run here).", "tool_choice",
                         "unsupported_tool_type")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""
