"""The settings of the tools the gateway runs itself (docs/gateway-tools.md): the limits every gateway tool
keeps. A section of :class:`~app.settings.Settings`, declared here so the settings module stays a composition."""

from __future__ import annotations

from pydantic import BaseModel, Field


class GatewaySettings(BaseModel):
    """Gateway tools: the limits of the tools toolwire runs itself (MCP servers, web search)."""

    gateway_max_calls: int = Field(
        8, ge=0, description="Gateway tool calls run per response; past it a call is not run, the model is told so "
                             "and offered no gateway tool again")
    gateway_timeout_seconds: float = Field(
        30.0, gt=0, description="Most seconds one gateway tool call may take (never past the request's own limit)")
    gateway_max_result_chars: int = Field(
        20_000, gt=0, description="Most characters of a gateway tool's result the model is given (the rest is cut)")
