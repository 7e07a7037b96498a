"""The web search and web fetch settings (``TOOLWIRE_SEARCH_*``, ``TOOLWIRE_FETCH_*``): the search back end the
gateway runs Anthropic's ``web_search``/``web_fetch`` and Responses' ``web_search`` through, and their limits.

A section of :class:`~app.settings.Settings`, declared here as the back ends' are in
:mod:`app.upstream_settings`; :mod:`app.gateway_tools.search` reads it. A leaf, as the settings are.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator


class SearchSettings(BaseModel):
    """Web search and web fetch run by toolwire (gateway tools): unset ``search_url`` = they are dropped as the
    other hosted tools are."""

    search_url: str | None = Field(
        None, description="Base URL of the search back end the web search tools run through (SearXNG: its root, "
                          "which must answer /search?q=…&format=json); unset = web_search and web_fetch tools "
                          "are not run (dropped or refused as unsupported_tools says)")
    search_kind: str = Field("searxng", description="Kind of the search back end (searxng, or one registered "
                                                    "with app.gateway_tools.search.register_search_kind)")
    search_api_key: SecretStr | None = Field(None, description="Bearer key sent to the search back end")
    search_timeout: float = Field(10.0, gt=0, description="Longest wait for one search, seconds")
    search_max_results: int = Field(8, ge=1, le=50, description="Most results one search gives the model")
    search_max_uses: int = Field(
        5, ge=1, le=50, description="Most searches and fetches of one response (a client's smaller max_uses "
                                    "wins; past it the call is answered max_uses_exceeded)")
    web_fetch: bool = Field(True, description="Also run web_fetch tools (and open_page) when search_url is set")
    fetch_allowed_urls: str = Field(
        "", description="URL patterns (comma or newline list, * any run of characters, the whole URL) web_fetch may "
                        "reach on a private, loopback or link-local address, each naming its host (refused "
                        "otherwise)")
    fetch_timeout: float = Field(15.0, gt=0, description="Longest time one fetch may take, redirects included, "
                                                         "seconds")
    fetch_max_bytes: int = Field(2 * 1024 * 1024, ge=1024, description="Most bytes of a page web_fetch reads")
    fetch_max_chars: int = Field(50_000, ge=100, description="Most characters of a page's text given to the model")

    @field_validator("search_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value and (urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).hostname):
            raise ValueError(f"search_url must be an http(s) URL, not {value!r}")
        return value or None

    @property
    def fetch_url_patterns(self) -> list[str]:
        """``fetch_allowed_urls`` as a list."""
        return [p.strip() for line in self.fetch_allowed_urls.splitlines() for p in line.split(",") if p.strip()]
