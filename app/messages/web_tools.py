"""Anthropic's ``web_search_…`` and ``web_fetch_…`` server tools, run by the gateway when the operator configured
a search back end (``search_url``; docs/gateway-tools.md): each becomes a gateway tool of the request
(:mod:`app.gateway_tools.web`) instead of a dropped one.

Their options: ``max_uses`` (the operator's ``search_max_uses`` caps it), ``allowed_domains`` or
``blocked_domains`` (not both, as Anthropic says: results and fetches outside them are left out),
``user_location`` (its ``city``, ``region``, ``country``, ``timezone`` passed to the back end as hints; SearXNG
uses the country as its language region). ``web_fetch``'s ``max_content_tokens`` caps the page's text at four
characters a token; ``citations`` and ``defer_loading`` are accepted and not acted on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..gateway_tools.base import GatewayTool
from ..gateway_tools.web import positive, web_fetch_tool, web_options, web_search_tool
from .schemas import ServerTool

if TYPE_CHECKING:
    from ..settings import Settings

#: The server-tool families the gateway can run.
WEB_FAMILIES = ("web_search", "web_fetch")


def web_gateway_tool(tool: ServerTool, family: str, index: int, settings: Settings) -> GatewayTool | None:
    """The gateway tool that runs ``tool`` (of ``family``, ``web_search`` of ``web_search_20250305``), or ``None``
    when this gateway does not run it (another family, or no search back end).

    Raises:
        InputError: a malformed option, named ``tools[index].<option>``.
    """
    if family not in WEB_FAMILIES or not settings.search_url:
        return None
    options = web_options(tool.model_extra or {}, f"tools[{index}]")
    if family == "web_search":
        return web_search_tool(settings, options, name=tool.name or family)
    made = web_fetch_tool(settings, options, name=tool.name or family)
    tokens = (tool.model_extra or {}).get("max_content_tokens")
    if made is not None and tokens is not None:
        made.cap_chars(positive(tokens, f"tools[{index}].max_content_tokens") * 4)
    return made
