"""Responses ``mcp`` tools, run by the gateway (docs/gateway-tools.md): which servers a request may reach, their
tools listed (or reused from an earlier ``mcp_list_tools`` item of the conversation, as OpenAI does), filtered by
``allowed_tools``, marked by ``require_approval``, and offered to the model as gateway tools; the calls the client
approved (``mcp_approval_response``) run before the model answers.

Before the first byte, so a refused server is an ordinary 400 naming its parameter (``tools[i].server_url``,
``tools[i].server_label``): a client's ``server_url`` must match the operator's ``mcp_allowed_urls`` and reach a
public address (or one a pattern naming its host allows); an operator's server (``mcp_servers``) is named by its
label alone, and only by the client keys it lists, if it lists any.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

import orjson

from statemachine import ParserConfig, ToolChoice

from ..errors import InputError
from ..gateway_settings import GatewaySettings
from ..gateway_tools.base import GatewayTool, GatewayToolset, ToolRun
from ..gateway_tools.mcp import McpConnection, McpError, McpTool, ServerAddress, client_address, \
    model_tool_name, operator_address
from ..gateway_tools.safety import UnsafeURL
from ..ids import owner_digest, uuid4_hex
from ..observability import record as observe
from ..observability.record import RequestRecord
from .schemas import McpTool as McpToolParam

#: What the model is told of a call the client did not approve.
DENIED = "The user did not approve this call: it was not run."


def new_id(prefix: str) -> str:
    """A new item id (``mcpl_…``, ``mcp_…``, ``mcpr_…``), as the encoder's are made."""
    return f"{prefix}_{uuid4_hex()}"


@dataclass
class PendingApproval:
    """A client's ``mcp_approval_response`` to run (or refuse) in this response, and the transcript turn its
    result fills."""

    request: Mapping[str, Any]  # the mcp_approval_request item
    approve: bool
    result: dict[str, Any]  # the tool message whose content the run fills


@dataclass
class McpHistory:
    """What the conversation so far says of MCP: the tools each server listed (``mcp_list_tools`` items), the
    approval requests, the approvals of this request's input still to run, and the approvals already run (an
    ``mcp_call`` naming its ``approval_request_id``)."""

    lists: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    requests: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    pending: list[PendingApproval] = field(default_factory=list)
    ran: set[str] = field(default_factory=set)


@dataclass
class McpPlan:
    """A request's MCP tools: the toolset offered the model (``None``: none), and the output items that open
    the response (listings, approved calls that ran), in order."""

    toolset: GatewayToolset | None
    prelude: list[dict[str, Any]]


def plan_mcp(tools: list[Any], history: McpHistory, settings: GatewaySettings, record: RequestRecord | None, *,
             client_names: Collection[str] = (), run_approved: bool = True) -> McpPlan:
    """The MCP plan of a request's ``tools`` (their ``mcp`` ones at their indexes), beside the client's own tools
    (``client_names``, as the model knows them).

    Raises:
        InputError: a server the request may not reach (``tools[i].server_url`` / ``tools[i].server_label``),
            a label twice, or a server's tool named like one of the client's.
    """
    prelude: list[dict[str, Any]] = []
    offered: dict[str, GatewayTool] = {}
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, McpToolParam):
            continue
        if tool.server_label in seen:
            raise InputError(f"Two mcp tools are labelled {tool.server_label!r}.", f"tools[{i}].server_label",
                             "invalid_value")
        seen.add(tool.server_label)
        connection = McpConnection(_address(i, tool, settings, record), record)
        listed = history.lists.get(tool.server_label)
        if listed is None:
            listed, item = _listing(connection, tool.allowed_tools, settings)
            prelude.append(item)
        for entry in listed:
            if _allowed(tool.allowed_tools, entry):
                made = McpTool(connection, entry, needs_approval=_needs_approval(tool.require_approval, entry))
                if made.name in client_names:
                    raise InputError(f"The MCP server {tool.server_label!r} has a tool the model would know as "
                                     f"{made.name!r}, which one of the request's own tools is named.",
                                     f"tools[{i}].server_label", "invalid_value")
                offered.setdefault(made.name, made)
    if run_approved:
        prelude += _run_approved(history.pending, offered, settings, record)
    toolset = GatewayToolset.limited(list(offered.values()), settings) if offered else None
    return McpPlan(toolset, prelude)


def _address(i: int, tool: McpToolParam, settings: GatewaySettings, record: RequestRecord | None) -> ServerAddress:
    if tool.connector_id is not None:
        raise InputError("OpenAI's connectors are not served here: name an MCP server by its server_url, or one of "
                         "this server's by its server_label.", f"tools[{i}].connector_id", "unsupported_value")
    if tool.server_url is None:
        server = settings.mcp_servers.get(tool.server_label)
        if server is None:
            raise InputError(f"No MCP server is labelled {tool.server_label!r} here, and the tool has no server_url.",
                             f"tools[{i}].server_label", "invalid_value")
        owner = record.owner if record is not None else None
        if server.keys and (owner is None or owner not in {owner_digest(k.get_secret_value()) for k in server.keys}):
            raise InputError(f"This client key may not use the MCP server {tool.server_label!r}.",
                             f"tools[{i}].server_label", "mcp_server_not_allowed")
        return operator_address(tool.server_label, server)
    headers = dict(tool.headers or {})
    if tool.authorization:
        headers["Authorization"] = f"Bearer {tool.authorization}"
    try:
        return client_address(tool.server_label, tool.server_url, headers, settings.mcp_url_patterns)
    except UnsafeURL as exc:
        raise InputError(f"The MCP server_url is refused: {exc}.", f"tools[{i}].server_url",
                         "mcp_server_url_refused") from None


def _listing(connection: McpConnection, allowed: list[str] | dict[str, Any] | None, settings: GatewaySettings
             ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The server's tools ``allowed_tools`` allows, as an ``mcp_list_tools`` item lists them (none when the listing
    failed), and the item."""
    item: dict[str, Any] = {"id": new_id("mcpl"), "type": "mcp_list_tools",
                            "server_label": connection.address.label, "tools": []}
    deadline = time.monotonic() + settings.gateway_timeout_seconds
    try:
        tools = connection.list_tools(deadline, settings.mcp_max_listed_tools)
    except McpError as exc:
        item["error"] = f"Error retrieving tool list from MCP server {connection.address.label!r}: {exc}"
        return [], item
    item["tools"] = [_listed(tool) for tool in tools if isinstance(tool.get("name"), str)
                     and _allowed(allowed, _listed(tool))]
    return item["tools"], item


def _listed(tool: Mapping[str, Any]) -> dict[str, Any]:
    """One tool as an ``mcp_list_tools`` item carries it."""
    schema = tool.get("inputSchema")
    return {"name": tool["name"], "description": tool.get("description"),
            "input_schema": schema if isinstance(schema, dict) else {"type": "object", "properties": {}},
            "annotations": tool.get("annotations")}


def _read_only(entry: Mapping[str, Any]) -> bool:
    annotations = entry.get("annotations")
    return isinstance(annotations, dict) and annotations.get("readOnlyHint") is True


def _filter_matches(spec: Any, entry: Mapping[str, Any]) -> bool:
    """Whether a ``{tool_names, read_only}`` filter names ``entry``."""
    if not isinstance(spec, dict):
        return False
    names = spec.get("tool_names")
    if isinstance(names, list) and entry["name"] in names:
        return True
    return spec.get("read_only") is True and _read_only(entry)


def _allowed(allowed: list[str] | dict[str, Any] | None, entry: Mapping[str, Any]) -> bool:
    """Whether ``allowed_tools`` lets the model call ``entry`` (a list of names, or a filter)."""
    if allowed is None:
        return True
    if isinstance(allowed, list):
        return entry["name"] in allowed
    return _filter_matches(allowed, entry)


def _needs_approval(require: str | dict[str, Any] | None, entry: Mapping[str, Any]) -> bool:
    """Whether a call of ``entry`` waits for the client's approval: ``never``, ``always`` (OpenAI's default), or
    per tool (``{"never": {...}, "always": {...}}``; a tool neither names needs it)."""
    if require is None or require == "always":
        return True
    if require == "never":
        return False
    assert isinstance(require, dict)
    if _filter_matches(require.get("always"), entry):
        return True
    return not _filter_matches(require.get("never"), entry)


def _run_approved(pending: list[PendingApproval], offered: Mapping[str, GatewayTool], settings: GatewaySettings,
                  record: RequestRecord | None) -> list[dict[str, Any]]:
    """Run the calls the client approved (their results filling the transcript), as ``mcp_call`` items."""
    items = []
    for approval in pending:
        request = approval.request
        if not approval.approve:
            approval.result["content"] = DENIED
            continue
        name = model_tool_name(str(request.get("server_label")), str(request.get("name")))
        tool = offered.get(name)
        arguments = str(request.get("arguments") or "{}")
        if tool is None:
            run = ToolRun("Error: not run: the tool is not among this request's MCP tools", error="not offered")
        else:
            began = time.monotonic()
            run = _run(tool, arguments, began + settings.gateway_timeout_seconds)
            observe.note_gateway("mcp", "call", "error" if run.error else "ok", time.monotonic() - began, record)
        approval.result["content"] = run.output
        items.append(call_item(new_id("mcp"), str(request.get("server_label")), str(request.get("name")), arguments,
                               run, approval_request_id=str(request.get("id"))))
    return items


def _run(tool: GatewayTool, arguments: str, deadline: float) -> ToolRun:
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        return ToolRun("Error: the arguments are not a JSON object", error="the arguments are not a JSON object")
    return tool.run(parsed, deadline)


def call_item(item_id: str, server_label: str, name: str, arguments: str, run: ToolRun | None, *,
              approval_request_id: str | None = None) -> dict[str, Any]:
    """An ``mcp_call`` item: in progress (``run`` ``None``), completed with its ``output``, or failed with its
    ``error`` object."""
    item: dict[str, Any] = {"id": item_id, "type": "mcp_call", "server_label": server_label, "name": name,
                            "arguments": arguments, "approval_request_id": approval_request_id, "output": None,
                            "error": None, "status": "in_progress"}
    if run is None:
        return item
    if run.error is None:
        item.update(output=run.output, status="completed")
    else:
        error = run.payload if isinstance(run.payload, dict) and "type" in run.payload else \
            {"type": "mcp_protocol_error", "code": -32603, "message": run.error}
        item.update(error=error, status="failed")
    return item


def mcp_choice(choice: Any, config: ParserConfig, toolset: GatewayToolset | None) -> ParserConfig:
    """``config`` with the request's ``tool_choice`` made true of its MCP tools, now they are known: ``{"type":
    "mcp", "server_label", "name"?}`` requires a call of that server's tool (or any of its tools); an
    ``allowed_tools`` choice's ``{"type": "mcp", "server_label"}`` entries allow that server's tools.

    Raises:
        InputError: the choice names a server, or a tool of it, the model is not offered.
    """
    servers = [choice] if getattr(choice, "type", None) == "mcp" else \
        [entry for entry in getattr(choice, "tools", ()) if entry.type == "mcp"] \
        if getattr(choice, "type", None) == "allowed_tools" else []
    if not servers:
        return config
    names: set[str] = set()
    for server in servers:
        extra = server.model_extra or {}
        label, name = extra.get("server_label"), getattr(server, "name", None) or extra.get("name")
        names.update(tool.name for tool in (toolset.tools.values() if toolset else ())
                     if getattr(tool.origin, "server_label", None) == label
                     and (name is None or getattr(tool.origin, "name", None) == name))
    if not names and (choice.type == "mcp" or config.tool_choice.mode == "required" and not config.tool_choice.allowed):
        raise InputError("Invalid value for 'tool_choice': the MCP tool it names is not offered (its server is not "
                         "among the request's tools, or it lists no such tool).", "tool_choice", "invalid_value")
    if choice.type == "mcp":
        return dataclasses.replace(config, tool_choice=ToolChoice("required", frozenset(names)))
    allowed = config.tool_choice.allowed or frozenset()
    return dataclasses.replace(config, tool_choice=ToolChoice(config.tool_choice.mode, allowed | names))
