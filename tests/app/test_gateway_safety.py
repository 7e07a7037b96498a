"""Which URLs a gateway tool may open on a client's word (app/gateway_tools/safety.py): non-public addresses are
refused after resolution unless a pattern naming the host allows them."""

from __future__ import annotations

import socket

import pytest

from app.gateway_tools.safety import UnsafeURL, check_url, matches


def resolver(*addresses: str):
    def resolve(host, port, type=0):
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in addresses]
    return resolve


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8080/mcp", "http://[::1]/mcp", "http://10.1.2.3/", "http://192.168.0.1/",
    "http://169.254.169.254/latest/meta-data", "http://0.0.0.0:80/", "http://224.0.0.1/", "http://[fe80::1]/",
    "http://[::ffff:127.0.0.1]/", "http://100.64.0.1/",
])
def test_non_public_addresses_are_refused(url) -> None:
    with pytest.raises(UnsafeURL, match="refused unless the operator lists"):
        check_url(url, ["https://*", "http://*"])


def test_a_name_is_checked_by_every_address_it_resolves_to() -> None:
    assert check_url("https://mcp.example.com/mcp", resolve=resolver("93.184.216.34")) == ["93.184.216.34"]
    with pytest.raises(UnsafeURL, match="loopback"):
        check_url("https://mcp.example.com/mcp", resolve=resolver("93.184.216.34", "127.0.0.1"))
    with pytest.raises(UnsafeURL, match="private"):
        check_url("https://intranet.example/mcp", resolve=resolver("10.0.0.7"))


def test_a_pattern_naming_the_host_allows_it_and_a_wildcard_host_does_not() -> None:
    assert check_url("http://127.0.0.1:8931/mcp", ["http://127.0.0.1:8931/*"]) == [], "listed: nothing to pin"
    check_url("http://localhost:9000/sse", ["http://localhost:*"], resolve=resolver("127.0.0.1"))
    for pattern in ("http://*", "http://127.0.0.*:8931/*", "*"):
        with pytest.raises(UnsafeURL):
            check_url("http://127.0.0.1:8931/mcp", [pattern])
    with pytest.raises(UnsafeURL):  # the pattern's host is another
        check_url("http://127.0.0.1:8931/mcp", ["http://127.0.0.2:8931/*"])


@pytest.mark.parametrize(("url", "why"), [
    ("ftp://example.com/x", "not an http"), ("file:///etc/passwd", "not an http"), ("http:///x", "not an http"),
    ("http://user:pw@example.com/", "credentials"), ("http://example.com:99999/", "not a URL"),
])
def test_malformed_urls_are_refused(url, why) -> None:
    with pytest.raises(UnsafeURL, match=why):
        check_url(url, ["*"], resolve=resolver("93.184.216.34"))


def test_a_name_that_does_not_resolve_is_refused() -> None:
    def fails(host, port, type=0):
        raise socket.gaierror("Name or service not known")
    with pytest.raises(UnsafeURL, match="does not resolve"):
        check_url("https://nowhere.invalid/", resolve=fails)


def test_matches_names_the_first_pattern() -> None:
    assert matches("https://a.example/mcp", ["http://*", "https://*.example/*"]) == "https://*.example/*"
    assert matches("https://a.example/mcp", []) is None
