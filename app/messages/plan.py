"""A Messages request → its :class:`~app.pipeline.generate.Generation`: tools, ``tool_choice``, parameters.

Custom tools (``input_schema``) are offered as functions. Two of Anthropic's own tools are run by the
client with an ordinary input object, so they are offered as functions of their documented shape:
``bash_…`` (``command``, ``restart``) and ``text_editor_…`` (``command`` ``view`` / ``create`` /
``str_replace`` / ``insert``, and ``undo_edit`` before the 2025-07-28 version, with ``path``,
``file_text``, ``old_str``, ``new_str``, ``insert_line``, ``view_range``); a call is the ``tool_use`` the
client expects. The others (``web_search_…``, ``web_fetch_…``, ``code_execution_…``, ``computer_…``,
``memory_…``…) run on Anthropic's side or need what a text model lacks: like the Responses endpoint's hosted
tools they are not offered (counted in ``toolwire_dropped_tools_total``), or with
``TOOLWIRE_UNSUPPORTED_TOOLS=fail`` a 400 naming the tool; except ``web_search_…`` and ``web_fetch_…`` when
the operator configured a search back end: toolwire runs those itself, as gateway tools (:mod:`.web_tools`).
``tool_choice`` maps to the Chat choice (``any`` → ``required``, ``tool`` → that tool,
``disable_parallel_tool_use`` → one call at most).

The back end gets ``max_tokens`` (clamped to the model's ``max_output_tokens`` by the pipeline), the
``stop_sequences`` as ``stop``, ``temperature``, ``top_p`` and ``top_k``; ``metadata``, ``thinking``,
``output_config``, ``context_management`` and the other Anthropic-only keys are not sent.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import TYPE_CHECKING, Any

from statemachine import ParserConfig, ToolChoice, ToolSpec

from ..errors import InputError
from ..gateway_tools.base import GatewayTool, GatewayToolset
from ..observability.dropped import DroppedTools
from ..pipeline.generate import Generation
from ..pipeline.plan import ChoiceRequest, build_parser_config, check_tool, shared_tool_set
from ..profile import ModelProfile, model_profile
from .schemas import CountTokensRequest, CustomTool, MessagesRequest, ServerTool, ToolChoice as MessagesChoice
from .transcript import to_chat_messages
from .web_tools import web_gateway_tool

if TYPE_CHECKING:
    from ..settings import Settings

log = logging.getLogger("toolwire.messages.plan")

#: Families of Anthropic's own tools, for the dropped-tools metric's label (anything else is ``other``).
_SERVER_FAMILIES = frozenset({"web_search", "web_fetch", "code_execution", "computer",
                              "memory", "tool_search_tool_regex", "tool_search_tool_bm25", "mcp_toolset"})
_DATED = re.compile(r"_(\d{8})$")
#: The server tools this API drops (and this worker has warned about).
_DROPPED = DroppedTools(log, _SERVER_FAMILIES, "Anthropic")
_BASH = {"type": "object", "properties": {
    "command": {"type": "string", "description": "The shell command to run."},
    "restart": {"type": "boolean", "description": "Restart the shell session instead of running a command."}}}
_EDITOR_PROPERTIES = {
    "path": {"type": "string", "description": "Absolute path of the file or directory."},
    "file_text": {"type": "string", "description": "create: the new file's content."},
    "old_str": {"type": "string", "description": "str_replace: the exact text to replace (unique in the file)."},
    "new_str": {"type": "string", "description": "str_replace: the replacement; insert: the text to insert."},
    "insert_line": {"type": "integer", "description": "insert: the line after which to insert (0 = the start)."},
    "view_range": {"type": "array", "items": {"type": "integer"},
                   "description": "view: first and last line to show (-1 = to the end)."}}
_EDITOR_COMMANDS = ["view", "create", "str_replace", "insert"]


def messages_generation(req: CountTokensRequest, settings: "Settings", *,
                        marker_requested: bool = False) -> Generation:
    """The generation a validated Messages request asks for (``marker_requested``: the client asked for marker
    mode); of a ``count_tokens`` request, the same without the sampling parameters it does not have."""
    profile = model_profile(settings, req.model)
    gateway: list[GatewayTool] = []
    config = parser_config(req, settings, profile, marker_requested=marker_requested, gateway=gateway)
    if not isinstance(req, MessagesRequest):
        return Generation(profile=profile, messages=to_chat_messages(req), config=config, fields={}, stream=False)
    toolset = GatewayToolset.limited(gateway, settings) if gateway else None
    if toolset is not None:  # the pipeline offers the gateway's tools itself, beside the client's
        client_tools = [spec for name, spec in config.tools.items() if name not in toolset.tools]
        config = dataclasses.replace(config, tools=shared_tool_set(client_tools))
    return Generation(profile=profile, messages=to_chat_messages(req), config=config, fields=_chat_fields(req),
                      stream=req.stream, gateway=toolset)


def parser_config(req: CountTokensRequest, settings: "Settings", profile: ModelProfile, *,
                  marker_requested: bool = False, gateway: list[GatewayTool] | None = None) -> ParserConfig:
    """The parser configuration for the model of ``profile``: the custom tools as functions, and the request's
    ``tool_choice``, as the Chat and Responses endpoints build theirs (the model's formats and policy, a marker
    when the operator or the client asked for one). The server tools the gateway runs are offered too, and
    added to ``gateway``.

    Raises:
        InputError: two tools of one name (``tools[i].name``, the second; the last would silently win); an
            Anthropic tool with ``TOOLWIRE_UNSUPPORTED_TOOLS=fail`` (``tools[i].type``), or only such tools
            (``tools``, unless ``tool_choice`` is ``none``); a
            ``tool_choice`` naming a tool not offered (``tool_choice.name``) or demanding a call with none.
    """
    specs: list[ToolSpec] = []
    dropped: list[str] = []
    for i, tool in enumerate(req.tools or ()):
        if isinstance(tool, CustomTool):
            spec = ToolSpec(name=tool.name, description=tool.description or "", parameters=tool.input_schema)
        elif (client_run := _client_run_tool(tool)) is not None:
            spec = client_run
        elif (run := web_gateway_tool(tool, _DATED.sub("", tool.type), i, settings)) is not None:
            spec = run.spec()
            if gateway is not None:
                gateway.append(run)
        else:
            dropped.append(_dropped(tool, i, settings))
            continue
        check_tool(spec, (s.name for s in specs), name=f"tools[{i}].name", definition=f"tools[{i}].input_schema")
        specs.append(spec)
    _DROPPED.note(dropped)
    choice = req.tool_choice or MessagesChoice(type="auto")
    if dropped and not specs and choice.type != "none":
        raise InputError(f"None of the request's tools can be called here: {', '.join(dict.fromkeys(dropped))} "
                         "would run on Anthropic's side, and the model behind this server can only call tools "
                         "the client runs.", "tools", "unsupported_tool_type")
    return build_parser_config(specs, _choice_request(choice), parallel_tool_calls=not choice.disable_parallel_tool_use,
                               legacy_functions=False, settings=settings, profile=profile,
                               marker_requested=marker_requested)


def _client_run_tool(tool: ServerTool) -> ToolSpec | None:
    """A ``bash_…`` or ``text_editor_…`` tool as the function of its documented input, else ``None``."""
    dated = _DATED.search(tool.type)
    family = tool.type[:dated.start()] if dated else tool.type
    if family == "bash":
        return ToolSpec(name=tool.name or "bash", description="Run a command in a persistent bash shell on the "
                        "user's machine; the client runs it and sends back its output.", parameters=_BASH)
    if family == "text_editor" and dated:
        commands = _EDITOR_COMMANDS + (["undo_edit"] if dated.group(1) < "20250728" else [])
        schema = {"type": "object", "required": ["command", "path"], "properties": {
            "command": {"type": "string", "enum": commands}, **_EDITOR_PROPERTIES}}
        return ToolSpec(name=tool.name or "str_replace_based_edit_tool", parameters=schema,
                        description="View, create and edit text files on the user's machine; the client runs it.")
    return None


def _dropped(tool: ServerTool, index: int, settings: "Settings") -> str:
    """The family of an Anthropic-defined tool that is not offered (``web_search`` of ``web_search_20250305``)."""
    if settings.unsupported_tools == "fail":
        raise InputError(f"Tool type {tool.type!r} is not supported: the model behind this server can only call "
                         "custom tools (name, description, input_schema) that the client runs.",
                         f"tools[{index}].type", "unsupported_tool_type")
    return _DATED.sub("", tool.type)


def _choice_request(choice: MessagesChoice) -> ChoiceRequest:
    if choice.type == "tool":
        if not choice.name:
            raise InputError("Missing required parameter: 'tool_choice.name'.", "tool_choice.name",
                             "missing_required_parameter")
        return ChoiceRequest(ToolChoice("required", frozenset({choice.name})),
                             name_params={choice.name: "tool_choice.name"})
    mode = {"auto": "auto", "any": "required", "none": "none"}[choice.type]
    return ChoiceRequest(ToolChoice(mode))  # type: ignore[arg-type]


def _chat_fields(req: MessagesRequest) -> dict[str, Any]:
    """The sampling parameters and limits as the back end's Chat request takes them."""
    fields: dict[str, Any] = {"max_tokens": req.max_tokens}
    if req.stop_sequences:
        fields["stop"] = req.stop_sequences
    for key in ("temperature", "top_p", "top_k"):
        value = getattr(req, key)
        if value is not None:
            fields[key] = value
    return fields
