"""A gateway call of a web tool as Anthropic's content blocks: ``server_tool_use`` (its ``input``), then
``web_search_tool_result`` (``web_search_result`` items, or a ``web_search_tool_result_error``) or
``web_fetch_tool_result`` (a ``web_fetch_result`` holding the page's text as a plain-text ``document``, or a
``web_fetch_tool_result_error``).

A result's ``encrypted_content`` is Anthropic's opaque handle the client sends back in later turns; here it is
the snippet, base64url-encoded, so that a later turn shows the model what it read (:func:`result_text`). A call
the loop refused or timed out (no payload of a web tool) is ``unavailable``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson

from ..gateway_tools.base import GatewayCallFinished, GatewayCallStarted
from ..gateway_tools.fetch import FetchedPage
from ..gateway_tools.search import SearchResult
from ..gateway_tools.web import FetchRun, SearchRun, page_text, search_text

#: The ``usage.server_tool_use`` counter of each web tool kind.
USAGE_KEYS = {"web_search": "web_search_requests", "web_fetch": "web_fetch_requests"}


def server_tool_id(call_id: str) -> str:
    """The ``srvtoolu_…`` id of the core's call id ``call_…``."""
    return "srvtoolu_" + call_id.removeprefix("call_")


def server_tool_use(event: GatewayCallStarted) -> dict[str, Any]:
    """The ``server_tool_use`` block of a call (``input``: its arguments, an empty object if not one)."""
    try:
        arguments = orjson.loads(event.arguments or "{}")
    except orjson.JSONDecodeError:
        arguments = {}
    return {"type": "server_tool_use", "id": server_tool_id(event.call_id), "name": event.tool.name,
            "input": arguments if isinstance(arguments, dict) else {}}


def tool_result(event: GatewayCallFinished) -> dict[str, Any]:
    """The result block of a finished call: ``web_fetch_tool_result`` for a fetch, else ``web_search_tool_result``."""
    payload = event.run.payload
    tool_use_id = server_tool_id(event.call_id)
    if event.tool.kind == "web_fetch":
        return {"type": "web_fetch_tool_result", "tool_use_id": tool_use_id, "content": _fetch_content(payload)}
    return {"type": "web_search_tool_result", "tool_use_id": tool_use_id, "content": _search_content(payload)}


def ran(event: GatewayCallFinished) -> bool:
    """Whether the call reached its back end and answered (what ``usage.server_tool_use`` counts)."""
    return isinstance(event.run.payload, (SearchRun, FetchRun)) and event.run.payload.error_code is None


def _search_content(payload: Any) -> Any:
    if not isinstance(payload, SearchRun) or payload.error_code:
        code = payload.error_code if isinstance(payload, SearchRun) else "unavailable"
        return {"type": "web_search_tool_result_error", "error_code": code}
    return [{"type": "web_search_result", "url": result.url, "title": result.title,
             "encrypted_content": _sealed(result.snippet), "page_age": result.page_age}
            for result in payload.results]


def _fetch_content(payload: Any) -> dict[str, Any]:
    if not isinstance(payload, FetchRun) or payload.page is None:
        code = payload.error_code if isinstance(payload, FetchRun) and payload.error_code else "unavailable"
        return {"type": "web_fetch_tool_result_error", "error_code": code}
    page = payload.page
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": page.text},
                "title": page.title, "citations": None}
    return {"type": "web_fetch_result", "url": page.url, "retrieved_at": page.retrieved_at, "content": document}


def _sealed(snippet: str) -> str:
    return base64.urlsafe_b64encode(snippet.encode()).decode()


def result_text(block: dict[str, Any], query: str) -> str:
    """What the model reads of a ``web_search_tool_result`` or ``web_fetch_tool_result`` block a client sent back
    in an assistant turn (``query``: its ``server_tool_use``'s, if known), as it read it then."""
    content = block.get("content")
    if isinstance(content, dict) and str(content.get("type", "")).endswith("_error"):
        return f"Error: the {'fetch' if block.get('type') == 'web_fetch_tool_result' else 'search'} failed " \
               f"({content.get('error_code')})"
    if block.get("type") == "web_fetch_tool_result" and isinstance(content, dict):
        document = _object(content.get("content"))
        source = _object(document.get("source"))
        data = source.get("data") if source.get("type") == "text" else "[a document]"
        return page_text(FetchedPage(str(content.get("url", "")), document.get("title"), str(data or ""), False, ""))
    results = [SearchResult(str(item.get("title", "")), str(item.get("url", "")),
                            snippet_of(item.get("encrypted_content")), item.get("page_age"))
               for item in content or () if isinstance(item, dict)] if isinstance(content, list) else []
    return search_text(query, results)


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def snippet_of(encrypted_content: Any) -> str:
    """The snippet an ``encrypted_content`` of this gateway holds (empty for another's, which only Anthropic
    reads)."""
    if not isinstance(encrypted_content, str):
        return ""
    try:
        return base64.urlsafe_b64decode(encrypted_content.encode()).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return ""
