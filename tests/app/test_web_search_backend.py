"""The search back end (SearXNG's JSON API) and web fetch, against a real local SearXNG-compatible server."""

from __future__ import annotations

import time

import pytest

from app.gateway_tools.fetch import FetchError, check_fetch_url, fetch_page, html_text
from app.gateway_tools.search import (DomainFilter, SearchError, SearxngBackend, check_query, filtered_search,
                                      make_search_backend)
from app.settings import Settings
from support.search_server import SearchServer


@pytest.fixture(scope="module")
def searx():
    with SearchServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _healthy(searx):
    searx.status, searx.delay, searx.raw = 200, 0.0, None


def test_searxng_results_are_title_url_snippet_and_page_age(searx):
    results = SearxngBackend(searx.url).search("toolwire mascot", limit=5, timeout=5, hints={})
    assert results[0].url == searx.page_url("toolwire")
    assert results[0].title.startswith("toolwire")
    assert "Wirebird" in results[0].snippet
    assert results[0].page_age == "2026-10-01T00:00:00"
    assert searx.queries[-1] == {"q": ["toolwire mascot"], "format": ["json"]}


def test_results_are_capped_and_the_location_hint_becomes_a_language(searx):
    assert len(SearxngBackend(searx.url).search("kingfisher copper", limit=1, timeout=5, hints={})) == 1
    SearxngBackend(searx.url).search("kingfisher", limit=3, timeout=5, hints={"country": "de"})
    assert searx.queries[-1]["language"] == ["en-DE"]


def test_domain_filters_take_subdomains_and_paths():
    allowed = DomainFilter(allowed=("example.org",))
    assert allowed.accepts("https://mirror.example.org/x") and allowed.accepts("https://example.org/")
    assert not allowed.accepts("https://badexample.org/") and not allowed.accepts("https://example.com/")
    assert DomainFilter(allowed=("example.org/blog",)).accepts("https://www.example.org/blog/post")
    assert not DomainFilter(allowed=("example.org/blog",)).accepts("https://example.org/shop")
    assert not DomainFilter(blocked=("example.org",)).accepts("https://a.example.org/")
    assert DomainFilter(blocked=("example.org",)).accepts("https://example.com/")


def test_filtered_search_drops_results_outside_the_domains(searx):
    backend = SearxngBackend(searx.url)
    blocked = filtered_search(backend, "kingfisher", DomainFilter(blocked=("example.org",)), limit=5, timeout=5)
    assert blocked and all("example.org" not in r.url for r in blocked)
    allowed = filtered_search(backend, "kingfisher", DomainFilter(allowed=("example.org",)), limit=5, timeout=5)
    assert [r.url for r in allowed] == ["https://mirror.example.org/kingfisher"]


@pytest.mark.parametrize(("status", "code"), [(429, "too_many_requests"), (500, "unavailable"),
                                               (403, "unavailable")])
def test_a_failing_back_end_is_an_error_code(searx, status, code):
    searx.status = status
    with pytest.raises(SearchError) as caught:
        SearxngBackend(searx.url).search("toolwire", limit=5, timeout=5, hints={})
    assert caught.value.code == code


def test_a_slow_back_end_costs_no_more_than_the_timeout(searx):
    searx.delay = 3.0
    started = time.monotonic()
    with pytest.raises(SearchError) as caught:
        SearxngBackend(searx.url).search("toolwire", limit=5, timeout=0.5, hints={})
    assert caught.value.code == "unavailable" and time.monotonic() - started < 2.5


def test_an_unreachable_or_non_json_back_end_is_unavailable(searx):
    with pytest.raises(SearchError, match="did not answer"):
        SearxngBackend("http://127.0.0.1:9").search("x", limit=1, timeout=2, hints={})
    searx.raw = b"<html>a search page</html>"
    with pytest.raises(SearchError, match="not SearXNG's JSON"):
        SearxngBackend(searx.url).search("x", limit=1, timeout=2, hints={})


def test_queries_are_checked():
    assert check_query({"query": "  copper  "}) == "copper"
    for arguments, code in (({}, "invalid_tool_input"), ({"query": 3}, "invalid_tool_input"),
                            ({"query": "x" * 401}, "query_too_long")):
        with pytest.raises(SearchError) as caught:
            check_query(arguments)
        assert caught.value.code == code


def test_kinds_and_settings():
    with pytest.raises(ValueError, match="search_kind 'bing'"):
        make_search_backend("bing", "http://127.0.0.1:1")
    with pytest.raises(ValueError, match="search_url must be an http"):
        Settings(search_url="ftp://x")
    assert Settings(search_url="").search_url is None


def test_fetch_gives_an_html_pages_visible_text(searx):
    seen: list[tuple[str, list]] = []
    page = fetch_page(searx.page_url("toolwire"), check=lambda url, resolve: seen.append((url, resolve("x", 1))),
                      deadline=time.monotonic() + 5, max_bytes=100_000, max_chars=10_000)
    assert page.title == "toolwire: tool calling for text-only models"
    assert "Wirebird" in page.text and "hidden" not in page.text and "color" not in page.text
    assert [url for url, _ in seen] == [searx.page_url("toolwire")] and not page.truncated
    assert seen[0][1][0][4][0] == "127.0.0.1"  # the check saw the address the fetch connected to


def test_fetch_refusals_and_failures(searx):
    def refuse(url: str, resolve) -> None:
        raise ValueError("loopback address 127.0.0.1 is not allowed")

    with pytest.raises(FetchError) as caught:
        fetch_page(searx.page_url("toolwire"), check=refuse, deadline=time.monotonic() + 5, max_bytes=1000,
                   max_chars=1000)
    assert caught.value.code == "url_not_allowed" and "loopback" in caught.value.message
    with pytest.raises(FetchError) as caught:
        fetch_page(f"{searx.url}/pages/nothing", check=lambda url, resolve: None, deadline=time.monotonic() + 5,
                   max_bytes=1000, max_chars=1000)
    assert caught.value.code == "url_not_accessible"
    with pytest.raises(FetchError) as caught:
        fetch_page(f"{searx.url}/search?q=x&format=json", check=lambda url, resolve: None,
                   deadline=time.monotonic() + 5, max_bytes=1000, max_chars=1000)
    assert caught.value.code == "unsupported_content_type"


def test_fetch_caps_what_it_reads(searx):
    page = fetch_page(searx.page_url("toolwire"), check=lambda url, resolve: None, deadline=time.monotonic() + 5,
                      max_bytes=200, max_chars=20)
    assert page.truncated and len(page.text) <= 20


def test_fetch_urls_are_checked():
    assert check_fetch_url({"url": " https://example.com/a "}) == "https://example.com/a"
    for arguments, code in (({}, "invalid_tool_input"), ({"url": "file:///etc/passwd"}, "invalid_tool_input"),
                            ({"url": "https://example.com/" + "a" * 300}, "url_too_long")):
        with pytest.raises(FetchError) as caught:
            check_fetch_url(arguments)
        assert caught.value.code == code


def test_html_text_keeps_blocks_as_lines():
    assert html_text("<title> T </title><p>a &amp; b</p><div>c</div>") == ("T", "a & b\nc")


def test_each_redirect_is_checked(searx):
    target = searx.page_url("toolwire")
    seen: list[str] = []
    page = fetch_page(f"{searx.url}/go?to={target}", check=lambda url, resolve: seen.append(url),
                      deadline=time.monotonic() + 5, max_bytes=100_000, max_chars=10_000)
    assert seen == [f"{searx.url}/go?to={target}", target] and page.url == target

    def no_pages(url: str, resolve) -> None:
        if "/pages/" in url:
            raise ValueError("not that one")

    with pytest.raises(FetchError) as caught:
        fetch_page(f"{searx.url}/go?to={target}", check=no_pages, deadline=time.monotonic() + 5, max_bytes=1000,
                   max_chars=1000)
    assert caught.value.code == "url_not_allowed"
