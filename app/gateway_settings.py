"""The settings of the tools the gateway runs itself (docs/gateway-tools.md): the limits every gateway tool
keeps, and the MCP servers Responses ``mcp`` tools may reach. A section of :class:`~app.settings.Settings`,
declared here so the settings module stays a composition."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

#: What an MCP server's label may be (OpenAI's ``server_label``: it prefixes the names the model is taught).
SERVER_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,39}")


class McpServer(BaseModel):
    """An MCP server the operator names: clients use it by its label (``server_label`` with no ``server_url``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = Field(None, description="Its URL (streamable HTTP; a path ending in /sse: HTTP+SSE)")
    headers: dict[str, SecretStr] = Field(default_factory=dict, description="Headers sent to it (never logged)")
    transport: Literal["streamable_http", "sse"] | None = Field(
        None, description="The URL's transport; unset = by its path")
    command: str | None = Field(None, description="A local command serving MCP over stdio (instead of url), "
                                                  "started once per worker")
    env: dict[str, SecretStr] = Field(default_factory=dict, description="Environment variables for command")
    description: str | None = Field(None, description="What it offers, told to the model")
    keys: list[SecretStr] = Field(default_factory=list, description="The client keys that may use it; empty = any "
                                                                    "client")

    @model_validator(mode="after")
    def _one_way(self) -> McpServer:
        if (self.url is None) == (self.command is None):
            raise ValueError("an MCP server has either url or command")
        return self


class GatewaySettings(BaseModel):
    """Gateway tools: the limits of the tools toolwire runs itself (MCP servers, web search), and the MCP servers
    Responses ``mcp`` tools may reach."""

    gateway_max_calls: int = Field(
        8, ge=0, description="Gateway tool calls run per response; past it a call is not run, the model is told so "
                             "and offered no gateway tool again")
    gateway_timeout_seconds: float = Field(
        30.0, gt=0, description="Most seconds one gateway tool call may take (never past the request's own limit), "
                                "and one MCP server's tool listing")
    gateway_max_result_chars: int = Field(
        20_000, gt=0, description="Most characters of a gateway tool's result the model is given (the rest is cut)")
    mcp_servers: dict[str, McpServer] = Field(
        default_factory=dict, description="MCP servers by label, offered to clients that name the label "
                                          "(JSON in the environment)")
    mcp_allowed_urls: str = Field(
        "", description="URL patterns (comma or newline list, * any run of characters, the whole URL) a client's "
                        "own MCP server_url must match; a private, loopback or link-local address also needs a "
                        "pattern naming its host; empty = no client-named MCP server")
    mcp_max_listed_tools: int = Field(64, gt=0, description="Most tools taken from one MCP server's listing")

    @field_validator("mcp_servers")
    @classmethod
    def _labels(cls, value: dict[str, McpServer]) -> dict[str, McpServer]:
        for label in value:
            if not SERVER_LABEL.fullmatch(label):
                raise ValueError(f"{label!r} is not a usable MCP server label (a letter, then letters, digits, _ "
                                 "or -; at most 40)")
        return value

    @property
    def mcp_url_patterns(self) -> list[str]:
        """``mcp_allowed_urls`` as a list."""
        return [p.strip() for line in self.mcp_allowed_urls.splitlines() for p in line.split(",") if p.strip()]
