"""Web search through a back end the operator configures: the :class:`SearchBackend` interface, SearXNG's JSON API
(:class:`SearxngBackend`, the first kind) and the domain filters of Anthropic's ``allowed_domains`` /
``blocked_domains`` and Responses' ``filters.allowed_domains``.

A search answers at most ``limit`` :class:`SearchResult` (title, url, snippet, page age) within its timeout, or
raises :class:`SearchError` with one of Anthropic's ``web_search_tool_result_error`` codes, which both APIs'
encoders can show. Another back end is one class with a ``search`` method, registered by name with
:func:`register_search_kind`.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from http.client import HTTPConnection, HTTPException, HTTPSConnection
from typing import Any, Callable, Protocol
from urllib.parse import urlencode, urlsplit

#: Longest query sent to a back end (Anthropic answers a longer one ``query_too_long``).
MAX_QUERY_CHARS = 400
#: Most bytes of a back end's answer read; a larger answer is cut there and reads as ``unavailable``.
MAX_ANSWER_BYTES = 2 * 1024 * 1024
#: Most characters of a result's title and snippet kept.
MAX_TITLE_CHARS = 300
MAX_SNIPPET_CHARS = 1000


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One result: its page's title and address, the back end's snippet of it, and its age as the back end
    gave it (``None`` when unknown)."""

    title: str
    url: str
    snippet: str
    page_age: str | None = None


class SearchError(Exception):
    """A search that gave no results: ``code`` is one of Anthropic's error codes (``invalid_tool_input``,
    ``query_too_long``, ``too_many_requests``, ``unavailable``, ``max_uses_exceeded``); ``message`` says why
    (for logs and the model, never the back end's address)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class SearchBackend(Protocol):
    """What runs a search: ``search`` answers at most ``limit`` results within ``timeout`` seconds, or raises
    :class:`SearchError`. ``hints`` carries the client's optional context (``user_location``'s keys), which a
    back end may use or ignore."""

    def search(self, query: str, *, limit: int, timeout: float, hints: dict[str, str]) -> list[SearchResult]:
        ...


@dataclass(frozen=True, slots=True)
class DomainFilter:
    """Which result addresses a request accepts: with ``allowed``, only those whose host is one of them or under
    one (``example.com`` takes ``docs.example.com``; ``example.com/blog`` also needs that path prefix); never one
    ``blocked`` names the same way."""

    allowed: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()

    def accepts(self, url: str) -> bool:
        """Whether ``url`` passes the filter (an address with no host never does)."""
        parts = urlsplit(url)
        host = (parts.hostname or "").rstrip(".")
        if not host:
            return False
        target = host + (parts.path or "/")
        if any(_covers(rule, host, target) for rule in self.blocked):
            return False
        return not self.allowed or any(_covers(rule, host, target) for rule in self.allowed)


def _covers(rule: str, host: str, target: str) -> bool:
    """Whether domain ``rule`` (``example.com`` or ``example.com/path``) covers ``host``/``target``."""
    rule = rule.strip().lower().removeprefix("https://").removeprefix("http://")
    domain, slash, path = rule.partition("/")
    domain = domain.removeprefix("www.")
    if host != domain and not host.endswith("." + domain):
        return False
    return not slash or target.split("/", 1)[1].startswith(path)


def check_query(arguments: dict[str, Any]) -> str:
    """The ``query`` of a model's ``web_search`` call.

    Raises:
        SearchError: no non-empty string ``query`` (``invalid_tool_input``), or one past :data:`MAX_QUERY_CHARS`
            (``query_too_long``).
    """
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise SearchError("invalid_tool_input", "web_search needs a non-empty string 'query'")
    if len(query) > MAX_QUERY_CHARS:
        raise SearchError("query_too_long", f"the query is longer than {MAX_QUERY_CHARS} characters")
    return query.strip()


def filtered_search(backend: SearchBackend, query: str, domains: DomainFilter, *, limit: int, timeout: float,
                    hints: dict[str, str] | None = None) -> list[SearchResult]:
    """``backend``'s results for ``query`` that ``domains`` accepts, at most ``limit`` of them (the back end is
    asked for more when a filter is set, since it filters nothing itself)."""
    asked = limit * 3 if domains.allowed or domains.blocked else limit
    results = backend.search(query, limit=asked, timeout=timeout, hints=hints or {})
    return [result for result in results if domains.accepts(result.url)][:limit]


class SearxngBackend:
    """SearXNG's JSON API: ``GET {base_url}/search?q=…&format=json`` (the instance must list ``json`` in its
    ``search.formats``). Its ``results`` give ``title``, ``url``, ``content`` (the snippet) and
    ``publishedDate``; ``user_location``'s ``country`` becomes its ``language`` hint (``en-US`` style) when the
    client gave one."""

    def __init__(self, base_url: str, *, headers: dict[str, str] | None = None):
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"search_url must be an http(s) URL, not {base_url!r}")
        self._parts = parts
        self._headers = {"Accept": "application/json", "User-Agent": "toolwire", **(headers or {})}

    def search(self, query: str, *, limit: int, timeout: float, hints: dict[str, str]) -> list[SearchResult]:
        params = {"q": query, "format": "json"}
        if len(hints.get("country", "")) == 2:
            params["language"] = f"{hints.get('language', 'en')}-{hints['country'].upper()}"
        status, body = self._get(f"{self._parts.path}/search?{urlencode(params)}", timeout)
        if status == 429:
            raise SearchError("too_many_requests", "the search back end is rate limiting")
        if status != 200:
            raise SearchError("unavailable", f"the search back end answered HTTP {status}")
        try:
            rows = json.loads(body)["results"]
        except (ValueError, KeyError, TypeError):
            raise SearchError("unavailable", "the search back end's answer is not SearXNG's JSON") from None
        return [result for row in rows if (result := _searxng_result(row)) is not None][:limit]

    def _get(self, target: str, timeout: float) -> tuple[int, bytes]:
        kind = HTTPSConnection if self._parts.scheme == "https" else HTTPConnection
        conn = kind(self._parts.hostname or "", self._parts.port, timeout=max(timeout, 0.001))
        try:
            conn.request("GET", target, headers=self._headers)
            answer = conn.getresponse()
            return answer.status, answer.read(MAX_ANSWER_BYTES)
        except (OSError, HTTPException, socket.timeout) as exc:
            raise SearchError("unavailable", f"the search back end did not answer ({type(exc).__name__})") from None
        finally:
            conn.close()


def _searxng_result(row: Any) -> SearchResult | None:
    """One SearXNG result row, or ``None`` when it has no http(s) URL."""
    if not isinstance(row, dict) or not isinstance(url := row.get("url"), str):
        return None
    if urlsplit(url).scheme not in ("http", "https"):
        return None
    title, snippet, published = row.get("title"), row.get("content"), row.get("publishedDate")
    title = title if isinstance(title, str) else url
    snippet = snippet if isinstance(snippet, str) else ""
    return SearchResult(title=title[:MAX_TITLE_CHARS], url=url, snippet=snippet[:MAX_SNIPPET_CHARS],
                        page_age=published if isinstance(published, str) and published else None)


#: Search back-end kinds by name: each makes a back end from the operator's ``search_url`` and headers.
_KINDS: dict[str, Callable[..., SearchBackend]] = {"searxng": SearxngBackend}


def register_search_kind(name: str, factory: Callable[..., SearchBackend]) -> None:
    """Make ``search_kind = name`` build back ends with ``factory(search_url, headers=…)``."""
    _KINDS[name] = factory


def search_kinds() -> list[str]:
    """The registered kinds' names."""
    return sorted(_KINDS)


def make_search_backend(kind: str, url: str, headers: dict[str, str] | None = None) -> SearchBackend:
    """The back end of ``kind`` at ``url``.

    Raises:
        ValueError: an unknown kind, or a URL its kind refuses.
    """
    try:
        factory = _KINDS[kind]
    except KeyError:
        raise ValueError(f"search_kind {kind!r} is not one of {', '.join(search_kinds())}") from None
    return factory(url, headers=headers)
