"""MCP servers as gateway tools: where a server is (:class:`ServerAddress`), one request's use of it
(:class:`McpConnection`: its listing and calls over one session) and each of its tools as the model calls it
(:class:`McpTool`). A surface decides which servers a request may reach (:func:`client_address`,
:func:`operator_address`); this module only talks to them, every exchange bounded by its deadline.

A local command (stdio) is started once per worker and shared by its requests one exchange at a time; a URL
gets a session per request.
"""

from __future__ import annotations

import http.client
import re
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import gevent
import gevent.lock
import orjson

from ..gateway_settings import McpServer
from ..observability import record as observe
from ..observability.record import RequestRecord
from .base import GatewayTool, ToolRun
from .mcp_client import LegacySse, McpError, McpSession, Stdio, StreamableHttp, Transport
from .safety import UnsafeURL, check_url, matches

#: What a name the model is taught may hold (a Chat tool name's characters, at most 64).
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_-]")
#: MCP's error code for a request that timed out (the SDKs' ``REQUEST_TIMEOUT``).
TIMEOUT_CODE = -32001


@dataclass(frozen=True)
class ServerAddress:
    """Where one MCP server is: a URL (with its headers and transport) or a local command.

    Fields:
        label: the server's label (``server_label``).
        url: its URL, for ``streamable_http`` or ``sse``.
        headers: headers sent with every request (never logged).
        transport: ``streamable_http``, ``sse`` or ``stdio``.
        command: the command of a ``stdio`` server; ``env`` its extra environment.
        pin: the checked address the URL's host is reached at (a client's URL: never resolved again).
    """

    label: str
    transport: str
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    pin: str | None = None
    command: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    def open(self) -> Transport:
        """A transport to the server (a stdio one is the worker's shared process)."""
        if self.transport == "stdio":
            raise ValueError("a stdio server is shared: use McpConnection")
        assert self.url is not None
        kind = LegacySse if self.transport == "sse" else StreamableHttp
        return kind(self.url, self.headers, self.pin)


def url_transport(url: str, transport: str | None = None) -> str:
    """A URL's transport: as named, else ``sse`` for a path ending in ``/sse``, else ``streamable_http``."""
    if transport:
        return transport
    return "sse" if url.split("?", 1)[0].rstrip("/").endswith("/sse") else "streamable_http"


def operator_address(label: str, server: McpServer) -> ServerAddress:
    """The address of an operator's server (settings ``mcp_servers``)."""
    if server.command is not None:
        return ServerAddress(label, "stdio", command=server.command,
                             env={k: v.get_secret_value() for k, v in server.env.items()})
    assert server.url is not None
    return ServerAddress(label, url_transport(server.url, server.transport), url=server.url,
                         headers={k: v.get_secret_value() for k, v in server.headers.items()})


def client_address(label: str, url: str, headers: Mapping[str, str], patterns: list[str]) -> ServerAddress:
    """The address of a server the client names by URL, once the operator's ``patterns`` allow it.

    Raises:
        UnsafeURL: no pattern matches the URL, or it reaches a non-public address no pattern naming its host
            allows (:func:`~app.gateway_tools.safety.check_url`).
    """
    if matches(url, patterns) is None:
        raise UnsafeURL("this server only reaches MCP servers its operator allows (TOOLWIRE_MCP_ALLOWED_URLS), "
                        "and this URL is not among them")
    addresses = check_url(url, patterns)
    return ServerAddress(label, url_transport(url), url=url, headers=dict(headers),
                         pin=addresses[0] if addresses else None)


class _SharedProcess:
    """A worker's stdio server: one process, one exchange at a time, started again if it ended."""

    def __init__(self, address: ServerAddress):
        self.address = address
        self.lock = gevent.lock.BoundedSemaphore()
        self.session: McpSession | None = None
        self.stdio: Stdio | None = None

    def ready(self) -> McpSession:
        if self.session is None or self.stdio is None or not self.stdio.alive:
            if self.stdio is not None:
                self.stdio.close()
            assert self.address.command is not None
            self.stdio = Stdio(self.address.command, self.address.env)
            self.session = McpSession(self.stdio)
        return self.session

    def broken(self) -> None:
        """An exchange failed midway (its answer may still come): the next one starts a fresh process."""
        if self.stdio is not None:
            self.stdio.close()
        self.session = self.stdio = None


#: The worker's stdio servers, by command and environment.
_PROCESSES: dict[tuple[str | None, tuple[tuple[str, str], ...]], _SharedProcess] = {}


class McpConnection:
    """One request's use of one MCP server: a session opened at its first exchange, shared by the listing and
    the calls. Each exchange is counted and named on the request's access line (``mcp.list_tools:ok``…)."""

    def __init__(self, address: ServerAddress, record: RequestRecord | None = None):
        self.address = address
        self._record = record
        self._session: McpSession | None = None

    def list_tools(self, deadline: float, limit: int) -> list[dict[str, Any]]:
        """The server's tools, at most ``limit`` (counted and named on the access line: ``mcp.list_tools:ok``).

        Raises:
            McpError: the listing failed (or timed out).
        """
        began = time.monotonic()
        outcome = "error"
        try:
            tools: list[dict[str, Any]] = self._bounded(lambda session: session.list_tools(deadline, limit), deadline)
            outcome = "ok"
            return tools
        except McpError as exc:
            outcome = "timeout" if exc.kind == "timeout" else "error"
            raise
        finally:
            observe.note_gateway("mcp", "list_tools", outcome, time.monotonic() - began, self._record)

    def call(self, name: str, arguments: dict[str, Any], deadline: float) -> dict[str, Any]:
        """The result of calling the server's tool ``name`` (the caller counts it: a run the gateway loop abandons
        at its deadline never returns here).

        Raises:
            McpError: the call failed (a protocol or HTTP error, or it timed out).
        """
        result: dict[str, Any] = self._bounded(lambda session: session.call_tool(name, arguments, deadline), deadline)
        return result

    def close(self) -> None:
        """Let the session go (a shared process stays)."""
        if self._session is not None:
            self._session.close()
            self._session = None

    def _bounded(self, run: Any, deadline: float) -> Any:
        """``run`` on the session by ``deadline``; a failure below the protocol is a ``transport`` error."""
        try:
            return self._on_session(run, deadline)
        except (OSError, ValueError, http.client.HTTPException) as exc:
            raise McpError("transport", f"the exchange with the MCP server failed: {exc}") from None

    def _on_session(self, run: Any, deadline: float) -> Any:
        expired = McpError("timeout", "the MCP server did not answer in time")
        if self.address.transport != "stdio":
            if self._session is None:
                self._session = McpSession(self.address.open())
            with gevent.Timeout(max(deadline - time.monotonic(), 0.001), expired):
                return run(self._session)
        key = (self.address.command, tuple(sorted(self.address.env.items())))
        shared = _PROCESSES.get(key)
        if shared is None:
            shared = _PROCESSES[key] = _SharedProcess(self.address)
        with gevent.Timeout(max(deadline - time.monotonic(), 0.001), expired):
            with shared.lock:
                try:
                    return run(shared.ready())
                except (McpError, gevent.Timeout, gevent.GreenletExit):
                    shared.broken()
                    raise


def model_tool_name(label: str, name: str) -> str:
    """The name the model is taught for tool ``name`` of server ``label``: ``mcp__label__name``, the characters a
    Chat tool name may not hold made ``_``, at most 64."""
    return _UNSAFE_NAME.sub("_", f"mcp__{label}__{name}")[:64]


@dataclass(frozen=True)
class McpOrigin:
    """Where an :class:`McpTool` comes from: its server's label and its own name there."""

    server_label: str
    name: str


class McpTool(GatewayTool):
    """One tool of an MCP server, as the gateway runs it. A run's ``payload`` is the ``mcp_call`` item's
    ``error`` object when it failed (``mcp_tool_execution_error``, ``mcp_protocol_error`` or ``http_error``), else
    ``None``."""

    __slots__ = ("connection",)

    def __init__(self, connection: McpConnection, listed: Mapping[str, Any], *, needs_approval: bool):
        label = connection.address.label
        name = str(listed.get("name") or "")
        schema = listed.get("inputSchema") or listed.get("input_schema")
        super().__init__(model_tool_name(label, name), str(listed.get("description") or ""),
                         schema if isinstance(schema, dict) else {"type": "object", "properties": {}},
                         needs_approval=needs_approval, origin=McpOrigin(label, name), kind="mcp")
        self.connection = connection

    def close(self) -> None:
        self.connection.close()

    def run(self, arguments: dict[str, Any], deadline: float) -> ToolRun:
        try:
            result = self.connection.call(self.origin.name, arguments, deadline)
        except McpError as exc:
            message = str(exc)
            if exc.kind == "http":
                error = {"type": "http_error", "code": exc.code or 502, "message": message}
            else:
                code = exc.code if exc.kind == "protocol" and exc.code is not None else \
                    TIMEOUT_CODE if exc.kind == "timeout" else -32603
                error = {"type": "mcp_protocol_error", "code": code, "message": message}
            return ToolRun(f"Error: {message}", error=message, payload=error)
        text = result_text(result)
        if result.get("isError"):
            return ToolRun(text, error=text or "the tool failed",
                           payload={"type": "mcp_tool_execution_error", "content": result.get("content") or []})
        return ToolRun(text)


def result_text(result: Mapping[str, Any]) -> str:
    """A ``tools/call`` result as the text the model gets: its text parts, a resource's text, a placeholder for
    other media; its ``structuredContent`` as JSON when it has no content."""
    parts = []
    content = result.get("content")
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            parts.append(str(part.get("text") or ""))
        elif kind == "resource" and isinstance(part.get("resource"), dict) and "text" in part["resource"]:
            parts.append(str(part["resource"]["text"]))
        elif kind == "resource_link":
            parts.append(f"[resource {part.get('uri') or ''}]")
        else:
            parts.append(f"[{kind or 'content'}]")
    if not parts and result.get("structuredContent") is not None:
        return orjson.dumps(result["structuredContent"]).decode()
    return "\n".join(parts)
