"""The Responses ``web_search`` tool, run by the gateway when the operator configured a search back end
(``search_url``; docs/gateway-tools.md), and its ``web_search_call`` items.

The tool (``web_search``, ``web_search_2025_08_26``, ``web_search_preview``…) gives the model two gateway tools:
``web_search`` (the ``search`` action) and, unless the operator turned web fetch off, ``open_page`` (the
``open_page`` action: a page's text). ``filters.allowed_domains`` keeps both to those domains;
``user_location`` is passed to the back end as hints; ``search_context_size`` and ``external_web_access`` are
accepted and not acted on. A ``tool_choice`` of ``{"type": "web_search"}`` forces the first call to be a search.

Each call is one ``web_search_call`` item, streamed as OpenAI does: ``response.output_item.added`` (``status:
in_progress``), ``response.web_search_call.in_progress``, ``response.web_search_call.searching``, then, once it
ran, ``response.web_search_call.completed`` and ``response.output_item.done`` with its ``action`` (``search``:
``query`` and the result URLs as ``sources``; ``open_page``: ``url``) and ``status`` (``completed``, or
``failed`` when it gave nothing).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Collection

import orjson

from statemachine import ParserConfig, ToolChoice

from ..errors import InputError
from ..gateway_tools.base import GatewayCallFinished, GatewayCallStarted, GatewayTool
from ..gateway_tools.web import FetchRun, SearchRun, web_fetch_tool, web_options, web_search_tool

if TYPE_CHECKING:
    from ..settings import Settings

#: The Responses tool types the gateway runs as web search.
WEB_SEARCH_TYPES = frozenset({"web_search", "web_search_2025_08_26", "web_search_preview",
                              "web_search_preview_2025_03_11"})
#: The gateway tool kinds a ``web_search_call`` item shows.
WEB_KINDS = frozenset({"web_search", "web_fetch"})
#: An event maker: ``(type, fields) -> event`` (the encoder's, numbering the sequence).
Emit = Callable[..., dict[str, Any]]


def runs_here(tool: Any, settings: Settings) -> bool:
    """Whether the gateway runs ``tool`` (a web search tool, with a search back end configured)."""
    return getattr(tool, "type", None) in WEB_SEARCH_TYPES and bool(settings.search_url)


def web_search_gateway(tools: list[Any], settings: Settings, *, client_names: Collection[str] = ()
                       ) -> list[GatewayTool]:
    """The gateway tools of a request's web search tools (the first one's options hold: the model is taught
    one ``web_search``).

    Raises:
        InputError: one of the client's tools (``client_names``) is named like them (``tools[i]``).
    """
    for index, tool in enumerate(tools):
        if runs_here(tool, settings):
            made = web_search_tools(tool, index, settings)
            for clash in sorted({gateway.name for gateway in made} & set(client_names)):
                raise InputError(f"A tool named {clash!r} clashes with the web_search tool's own {clash}: rename "
                                 "it.", f"tools[{index}]", "invalid_request_error")
            return made
    return []


def web_choice(choice: Any, config: ParserConfig, web: list[GatewayTool]) -> ParserConfig:
    """``config`` with a ``tool_choice`` of ``{"type": "web_search"}`` (planned as ``auto``: the gateway's tools are
    offered beside the client's later) as a required call of the gateway's ``web_search`` (``web``: the request's
    web tools; without them that choice was refused when planned)."""
    if getattr(choice, "type", None) not in WEB_SEARCH_TYPES or not web:
        return config
    return dataclasses.replace(config, tool_choice=ToolChoice("required", frozenset({web[0].name})))


def web_search_tools(tool: Any, index: int, settings: Settings) -> list[GatewayTool]:
    """The gateway tools of a Responses web search tool (``[]`` when this gateway does not run it: another type,
    or no search back end).

    Raises:
        InputError: malformed ``filters`` or ``user_location`` (``tools[index]…``).
    """
    if not runs_here(tool, settings):
        return []
    options = web_options(tool.model_extra or {}, f"tools[{index}]", domains_at="filters.")
    made = [web_search_tool(settings, options), web_fetch_tool(settings, options, name="open_page")]
    return [gateway for gateway in made if gateway is not None]


def call_started(event: GatewayCallStarted, item_id: str, index: int, emit: Emit) -> tuple[dict[str, Any], list]:
    """The item (in progress) and the events that open a ``web_search_call``."""
    item = {"id": item_id, "type": "web_search_call", "status": "in_progress", "action": _action(event, None)}
    return item, [emit("response.output_item.added", output_index=index, item=item),
                  emit("response.web_search_call.in_progress", item_id=item_id, output_index=index),
                  emit("response.web_search_call.searching", item_id=item_id, output_index=index)]


def call_finished(event: GatewayCallFinished, item_id: str, index: int, emit: Emit) -> tuple[dict[str, Any], list]:
    """The finished item and the events that close its ``web_search_call``."""
    failed = event.run.error is not None
    item = {"id": item_id, "type": "web_search_call", "status": "failed" if failed else "completed",
            "action": _action(event, event.run.payload)}
    return item, [emit("response.web_search_call.completed", item_id=item_id, output_index=index),
                  emit("response.output_item.done", output_index=index, item=item)]


def _action(event: GatewayCallStarted | GatewayCallFinished, payload: Any) -> dict[str, Any]:
    """The call's ``action``: ``search`` (``query``, and the results' ``sources`` once known) or ``open_page``."""
    try:
        arguments = orjson.loads(event.arguments or "{}")
    except orjson.JSONDecodeError:
        arguments = {}
    arguments = arguments if isinstance(arguments, dict) else {}
    if event.tool.kind == "web_fetch":
        url = payload.url if isinstance(payload, FetchRun) else arguments.get("url")
        return {"type": "open_page", "url": url if isinstance(url, str) else None}
    query = arguments.get("query") if isinstance(arguments.get("query"), str) else ""
    action: dict[str, Any] = {"type": "search", "query": query}
    if isinstance(payload, SearchRun) and payload.results:
        action["sources"] = [{"type": "url", "url": result.url} for result in payload.results]
    return action
