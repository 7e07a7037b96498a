"""Which URLs the gateway may open on a client's word (an MCP ``server_url``, a ``web_fetch`` URL).

A URL is refused when its host resolves to an address that is not public (private, loopback, link-local,
unspecified, multicast, reserved: the host's own services, the cloud's metadata address, the LAN) unless the
operator's patterns allow it, and a pattern allows such an address only when it names the host itself: a host
wildcard (``https://*``) opens the public internet, never the gateway's own network. Every address a name
resolves to is checked, so a name with one public and one private address is refused; the caller connects to
an address the check returned (the name is not resolved again: a DNS answer that changes in between is not
followed).
"""

from __future__ import annotations

import ipaddress
import socket
from fnmatch import fnmatchcase
from typing import Callable, Iterable
from urllib.parse import urlsplit

#: The schemes a gateway tool may open.
SCHEMES = ("http", "https")

Resolver = Callable[..., list[tuple]]


class UnsafeURL(ValueError):
    """A URL the gateway refuses to open; the message says why (for the client's 400)."""


def matches(url: str, patterns: Iterable[str]) -> str | None:
    """The first of ``patterns`` (shell-style, ``*`` any run of characters, whole URL) that ``url`` matches."""
    for pattern in patterns:
        if fnmatchcase(url, pattern):
            return pattern
    return None


def check_url(url: str, allowed_patterns: Iterable[str] = (), *, resolve: Resolver = socket.getaddrinfo) -> list[str]:
    """Refuse ``url`` unless it is an http(s) URL whose host resolves only to public addresses, or a pattern
    naming its host literally allows it.

    Returns:
        The public addresses the host resolved to, for the caller to connect to (so a name that resolves
        elsewhere by the time it connects cannot reach what the check refused); none when a pattern allowed it.

    Raises:
        UnsafeURL: the URL is malformed, of another scheme, does not resolve, or reaches a non-public address
            no pattern allows.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeURL(f"{url!r} is not a URL: {exc}") from None
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise UnsafeURL(f"{url!r} is not an http or https URL with a host")
    if parts.username is not None or parts.password is not None:
        raise UnsafeURL("a URL with credentials in it is refused (send them as headers)")
    host = parts.hostname
    listed = [pattern for pattern in allowed_patterns if fnmatchcase(url, pattern) and _names_host(pattern, host)]
    if listed:
        return []
    addresses = _addresses(host, port or (443 if parts.scheme == "https" else 80), resolve)
    for address in addresses:
        if not address.is_global or address.is_multicast:
            raise UnsafeURL(f"{host} is a {_kind(address)} address ({address}), which is refused unless the "
                            "operator lists the URL")
    return [str(address) for address in addresses]


def _names_host(pattern: str, host: str) -> bool:
    """Whether ``pattern`` names ``host`` literally (its host part has no wildcard)."""
    try:
        named = urlsplit(pattern.replace("*", "WILDCARD")).hostname or ""
    except ValueError:
        return False
    return "wildcard" not in named and named == host.lower()


def _addresses(host: str, port: int, resolve: Resolver) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """Every address ``host`` resolves to (a literal address is itself)."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = resolve(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise UnsafeURL(f"{host} does not resolve: {exc}") from None
    addresses = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        addresses.append(address)
    if not addresses:
        raise UnsafeURL(f"{host} does not resolve")
    return addresses


def _kind(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """What kind of non-public address ``address`` is, for the message."""
    for kind in ("loopback", "link_local", "private", "unspecified", "multicast", "reserved"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    return "non-public"
