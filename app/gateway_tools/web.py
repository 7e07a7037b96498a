"""The web gateway tools: :class:`WebSearchTool` (Anthropic's ``web_search``, Responses' ``web_search``) and
:class:`WebFetchTool` (Anthropic's ``web_fetch``), made for one request by :func:`web_tools` from the operator's
search settings and the client's options (:class:`WebOptions`: ``max_uses``, domains, location).

Each run gives the model plain text and the surface a payload (:class:`SearchRun`, :class:`FetchRun`) it shows
as its own items; a failure is a run with ``error`` and an Anthropic error code in the payload (its
``web_search_tool_result_error`` / ``web_fetch_tool_result_error``). A tool counts its own runs: past
``max_uses`` a call is answered ``max_uses_exceeded`` without running.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from .base import GatewayTool, ToolRun
from .fetch import FetchedPage, FetchError, check_fetch_url, fetch_page
from .safety import Resolver, check_url
from .search import DomainFilter, SearchBackend, SearchError, SearchResult, check_query, filtered_search, \
    make_search_backend

if TYPE_CHECKING:
    from ..settings import Settings

SEARCH_DESCRIPTION = ("Search the web. Returns the most relevant pages (title, URL, age, snippet) for the query; "
                      "cite the URLs you use in your answer.")
FETCH_DESCRIPTION = ("Fetch one web page by its URL (one the user gave or a search returned) and read its text.")
SEARCH_SCHEMA = {"type": "object", "required": ["query"], "additionalProperties": False,
                 "properties": {"query": {"type": "string", "description": "What to search the web for."}}}
_LOCATION_KEYS = ("city", "region", "country", "timezone")
FETCH_SCHEMA = {"type": "object", "required": ["url"], "additionalProperties": False,
                "properties": {"url": {"type": "string", "description": "The page's http(s) URL."}}}


@dataclass(frozen=True, slots=True)
class WebOptions:
    """A client's options for one web tool: its ``max_uses`` (``None``: the operator's cap), the domains results
    and fetches keep to, and ``hints`` (``user_location``'s keys) the search back end may use."""

    max_uses: int | None = None
    domains: DomainFilter = field(default_factory=DomainFilter)
    hints: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SearchRun:
    """A search's payload: its query, results, and the error code when it failed."""

    query: str
    results: tuple[SearchResult, ...] = ()
    error_code: str | None = None


@dataclass(frozen=True, slots=True)
class FetchRun:
    """A fetch's payload: the URL asked for, the page, and the error code when it failed."""

    url: str
    page: FetchedPage | None = None
    error_code: str | None = None


class _Counted(GatewayTool):
    """A web tool that counts its runs against ``max_uses``."""

    def __init__(self, name: str, description: str, parameters: dict[str, Any], kind: str, max_uses: int):
        super().__init__(name, description, parameters, kind=kind)
        self.max_uses = max_uses
        self.uses = 0

    def _spent(self) -> bool:
        """Count one more use; whether it is past ``max_uses``."""
        self.uses += 1
        return self.uses > self.max_uses


class WebSearchTool(_Counted):
    """``web_search`` through ``backend``: at most ``max_results`` results that ``options.domains`` accepts."""

    def __init__(self, backend: SearchBackend, options: WebOptions, *, max_uses: int, max_results: int,
                 timeout: float, name: str = "web_search"):
        super().__init__(name, SEARCH_DESCRIPTION, SEARCH_SCHEMA, "web_search", max_uses)
        self._backend = backend
        self._options = options
        self._max_results = max_results
        self._timeout = timeout

    def run(self, arguments: dict[str, Any], deadline: float) -> ToolRun:
        query = arguments.get("query") if isinstance(arguments.get("query"), str) else ""
        try:
            if self._spent():
                raise SearchError("max_uses_exceeded", f"no more than {self.max_uses} searches in one response")
            query = check_query(arguments)
            timeout = min(self._timeout, max(deadline - time.monotonic(), 0.001))
            results = filtered_search(self._backend, query, self._options.domains, limit=self._max_results,
                                      timeout=timeout, hints=self._options.hints)
        except SearchError as exc:
            return ToolRun(f"Error: the search failed ({exc.code}): {exc.message}", exc.message,
                           SearchRun(str(query), (), exc.code))
        return ToolRun(search_text(query, results), None, SearchRun(query, tuple(results)))


class WebFetchTool(_Counted):
    """``web_fetch``: a page's text, its address checked (``allowed_urls`` may name private ones) and kept to
    ``options.domains``."""

    def __init__(self, options: WebOptions, *, max_uses: int, allowed_urls: list[str], timeout: float,
                 max_bytes: int, max_chars: int, name: str = "web_fetch"):
        super().__init__(name, FETCH_DESCRIPTION, FETCH_SCHEMA, "web_fetch", max_uses)
        self._options = options
        self._allowed_urls = allowed_urls
        self._timeout = timeout
        self._max_bytes = max_bytes
        self._max_chars = max_chars

    def run(self, arguments: dict[str, Any], deadline: float) -> ToolRun:
        url = arguments.get("url") if isinstance(arguments.get("url"), str) else ""
        try:
            if self._spent():
                raise FetchError("max_uses_exceeded", f"no more than {self.max_uses} fetches in one response")
            url = check_fetch_url(arguments)
            page = fetch_page(url, check=self._check, deadline=min(deadline, time.monotonic() + self._timeout),
                              max_bytes=self._max_bytes, max_chars=self._max_chars)
        except FetchError as exc:
            return ToolRun(f"Error: the fetch failed ({exc.code}): {exc.message}", exc.message,
                           FetchRun(str(url), None, exc.code))
        return ToolRun(page_text(page), None, FetchRun(url, page))

    def cap_chars(self, chars: int) -> None:
        """Give the model at most ``chars`` characters of a page (a client's smaller cap than the operator's)."""
        self._max_chars = min(self._max_chars, chars)

    def _check(self, url: str, resolve: Resolver) -> None:
        if not self._options.domains.accepts(url):
            raise ValueError(f"{url} is outside the request's allowed_domains or in its blocked_domains")
        check_url(url, self._allowed_urls, resolve=resolve)


def search_text(query: str, results: list[SearchResult]) -> str:
    """What the model reads of a search: each result's title, URL, age and snippet, numbered."""
    if not results:
        return f'The web search for "{query}" found nothing.'
    lines = [f'Web search results for "{query}":']
    for number, result in enumerate(results, 1):
        lines += ["", f"[{number}] {result.title}", f"URL: {result.url}"]
        if result.page_age:
            lines.append(f"Age: {result.page_age}")
        if result.snippet:
            lines.append(result.snippet)
    return "\n".join(lines)


def page_text(page: FetchedPage) -> str:
    """What the model reads of a fetched page: its title and URL, then its text."""
    head = f"Page: {page.title}\nURL: {page.url}" if page.title else f"URL: {page.url}"
    cut = "\n[… the rest of the page was cut]" if page.truncated else ""
    return f"{head}\n\n{page.text}{cut}"


def search_backend(settings: Settings) -> SearchBackend | None:
    """The operator's search back end (``None`` when ``search_url`` is unset): made once per settings."""
    url = settings.search_url
    if not url:
        return None
    key = settings.search_api_key
    headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else None
    return settings.derived(("search_backend",), lambda: make_search_backend(settings.search_kind, url, headers))


def web_search_tool(settings: Settings, options: WebOptions, *, name: str = "web_search") -> WebSearchTool | None:
    """The request's ``web_search`` tool, or ``None`` when no search back end is configured."""
    backend = search_backend(settings)
    if backend is None:
        return None
    return WebSearchTool(backend, options, max_uses=_uses(options, settings), max_results=settings.search_max_results,
                         timeout=settings.search_timeout, name=name)


def web_fetch_tool(settings: Settings, options: WebOptions, *, name: str = "web_fetch") -> WebFetchTool | None:
    """The request's ``web_fetch`` tool, or ``None`` when web fetch is not run here (no search back end, or
    ``web_fetch`` off)."""
    if not settings.search_url or not settings.web_fetch:
        return None
    return WebFetchTool(options, max_uses=_uses(options, settings), allowed_urls=settings.fetch_url_patterns,
                        timeout=settings.fetch_timeout, max_bytes=settings.fetch_max_bytes,
                        max_chars=settings.fetch_max_chars, name=name)


def _uses(options: WebOptions, settings: Settings) -> int:
    return min(options.max_uses, settings.search_max_uses) if options.max_uses else settings.search_max_uses


def web_options(extra: dict[str, Any], where: str, *, domains_at: str = "") -> WebOptions:
    """A web tool's ``max_uses``, ``allowed_domains`` / ``blocked_domains`` and ``user_location``, as a client
    sent them (``where``: the tool's path, for errors; ``domains_at``: where the domain lists are under it,
    ``filters.`` on Responses).

    Raises:
        InputError: a malformed option, or both domain lists.
    """
    max_uses = extra.get("max_uses")
    holder = f"{where}.{domains_at.rstrip('.')}"
    domains = extra.get(domains_at.rstrip(".")) or {} if domains_at else extra
    if not isinstance(domains, dict):
        raise InputError(f"{holder} must be an object.", holder, "invalid_request_error")
    allowed = _domains(domains.get("allowed_domains"), f"{where}.{domains_at}allowed_domains")
    blocked = _domains(domains.get("blocked_domains"), f"{where}.{domains_at}blocked_domains")
    if allowed and blocked:
        raise InputError("Only one of allowed_domains and blocked_domains can be given.",
                         f"{where}.{domains_at}blocked_domains", "invalid_request_error")
    return WebOptions(max_uses=None if max_uses is None else positive(max_uses, f"{where}.max_uses"),
                      domains=DomainFilter(allowed, blocked),
                      hints=_location(extra.get("user_location"), f"{where}.user_location"))


def positive(value: Any, param: str) -> int:
    """``value``, a positive integer a client sent at ``param``.

    Raises:
        InputError: it is not one.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{param} must be a positive integer.", param, "invalid_request_error")
    return value


def _domains(value: Any, param: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(domain, str) and domain.strip() for domain in value):
        raise InputError(f"{param} must be a list of domain names.", param, "invalid_request_error")
    return tuple(domain.strip() for domain in value)


def _location(value: Any, param: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{param} must be an object.", param, "invalid_request_error")
    return {key: value[key] for key in _LOCATION_KEYS if isinstance(value.get(key), str) and value[key]}
