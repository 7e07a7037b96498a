"""Web fetch: one page's text for the model (Anthropic's ``web_fetch`` tool, Responses' ``open_page`` action).

:func:`fetch_page` GETs an http(s) URL after the caller's address check (the seam's ``safety.check_url``: no
private, loopback or link-local address unless the operator allowed it), again for each redirect it follows. The
host is resolved once: the check sees those addresses and the connection goes to the first of them (TLS still
checks the host's name), so a name that resolves differently a moment later cannot slip past the check. It
reads at most ``max_bytes``, within one deadline, and gives plain text (``text/plain``, and HTML with its
scripts, styles and markup removed; the title kept). Another content type (PDF, images…) is
``unsupported_content_type``. Errors are :class:`FetchError` with Anthropic's ``web_fetch_tool_result_error``
codes.
"""

from __future__ import annotations

import codecs
import os
import re
import socket
import ssl
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from html.parser import HTMLParser
from http.client import HTTPConnection, HTTPException, HTTPSConnection, HTTPResponse
from typing import Any, Callable
from urllib.parse import urljoin, urlsplit

import certifi

from .safety import Resolver

#: Longest URL fetched (Anthropic answers a longer one ``url_too_long``).
MAX_URL_CHARS = 250
#: Redirects followed before a fetch gives up (``url_not_accessible``).
MAX_REDIRECTS = 5
_TEXT_TYPES = ("text/plain", "text/markdown", "text/csv")
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_SKIPPED = frozenset({"script", "style", "noscript", "template", "svg", "head"})
_BLOCKS = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "section",
                     "article", "header", "footer", "blockquote", "table", "ul", "ol", "dt", "dd"})


class FetchError(Exception):
    """A fetch that gave no page: ``code`` is one of Anthropic's ``web_fetch`` error codes
    (``invalid_tool_input``, ``url_too_long``, ``url_not_allowed``, ``url_not_accessible``,
    ``unsupported_content_type``, ``too_many_requests``, ``unavailable``); ``message`` says why."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class FetchedPage:
    """A fetched page: the URL it was read from (after redirects), its title (``None`` when it has none), its
    text, whether that text was cut at the size cap, and when it was retrieved (ISO 8601, UTC)."""

    url: str
    title: str | None
    text: str
    truncated: bool
    retrieved_at: str


def check_fetch_url(arguments: dict[str, Any]) -> str:
    """The ``url`` of a model's ``web_fetch`` call.

    Raises:
        FetchError: no http(s) URL string (``invalid_tool_input``), or one past :data:`MAX_URL_CHARS`
            (``url_too_long``).
    """
    url = arguments.get("url")
    if not isinstance(url, str) or urlsplit(url.strip()).scheme not in ("http", "https") \
            or not urlsplit(url.strip()).hostname:
        raise FetchError("invalid_tool_input", "web_fetch needs an http(s) 'url'")
    if len(url) > MAX_URL_CHARS:
        raise FetchError("url_too_long", f"the URL is longer than {MAX_URL_CHARS} characters")
    return url.strip()


def fetch_page(url: str, *, check: Callable[[str, Resolver], None], deadline: float, max_bytes: int,
               max_chars: int) -> FetchedPage:
    """The text of the page at ``url``.

    Args:
        check: ``check(url, resolve)`` raises (any exception) when ``url`` may not be fetched, its host resolved
            by ``resolve`` (a ``socket.getaddrinfo`` answering the addresses the fetch connects to); asked for
            ``url`` and every redirect's target.
        deadline: ``time.monotonic()`` by which the whole fetch ends (``unavailable`` past it).
        max_bytes: most body bytes read; max_chars: most characters of text kept (``truncated`` says a cut).

    Raises:
        FetchError: see its codes.
    """
    for _ in range(MAX_REDIRECTS + 1):
        address = _checked_address(url, check)
        status, headers, body = _get(url, address, deadline, max_bytes)
        if status in (301, 302, 303, 307, 308) and headers.get("location"):
            url = urljoin(url, headers["location"])
            continue
        return _page(url, status, headers, body, max_bytes, max_chars)
    raise FetchError("url_not_accessible", f"more than {MAX_REDIRECTS} redirects")


def _page(url: str, status: int, headers: dict[str, str], body: bytes, max_bytes: int,
          max_chars: int) -> FetchedPage:
    if status == 429:
        raise FetchError("too_many_requests", "the site is rate limiting")
    if status != 200:
        raise FetchError("url_not_accessible", f"the site answered HTTP {status}")
    media_type, _, params = headers.get("content-type", "text/plain").partition(";")
    media_type = media_type.strip().lower()
    decoded = _decode(body, params)
    if media_type in _HTML_TYPES:
        title, text = html_text(decoded)
    elif media_type in _TEXT_TYPES or media_type.startswith("text/"):
        title, text = None, decoded
    else:
        raise FetchError("unsupported_content_type", f"content type {media_type!r} is not text")
    truncated = len(body) >= max_bytes or len(text) > max_chars
    return FetchedPage(url=url, title=title, text=text[:max_chars], truncated=truncated,
                       retrieved_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))


def _decode(body: bytes, params: str) -> str:
    """``body`` decoded by the ``charset`` of the content type's ``params`` (UTF-8 when absent or unknown)."""
    named = re.search(r"charset=\"?([\w.:-]+)", params, re.IGNORECASE)
    try:
        codec = codecs.lookup(named.group(1)).name if named else "utf-8"
    except LookupError:
        codec = "utf-8"
    return body.decode(codec, errors="replace")


def _checked_address(url: str, check: Callable[[str, Resolver], None]) -> str:
    """The address ``url``'s host resolves to first, once ``check`` allowed the URL on those addresses."""
    parts = urlsplit(url)
    try:
        infos = socket.getaddrinfo(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80),
                                   type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        raise FetchError("url_not_accessible", f"{parts.hostname} does not resolve") from None
    try:
        check(url, lambda *args, **kwargs: infos)
    except Exception as exc:  # the checker's own refusal, whatever its class
        raise FetchError("url_not_allowed", str(exc) or "the URL is not allowed") from None
    return str(infos[0][4][0])


class _PinnedHTTP(HTTPConnection):
    """An HTTP connection to ``host`` made at the checked ``address``."""

    def __init__(self, host: str, port: int | None, address: str, timeout: float):
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPS(HTTPSConnection):
    """An HTTPS connection to ``host`` made at the checked ``address``, its certificate checked for ``host``."""

    def __init__(self, host: str, port: int | None, address: str, timeout: float):
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        raw = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = _tls().wrap_socket(raw, server_hostname=self.host)


def _tls() -> ssl.SSLContext:
    """Certificates checked against ``SSL_CERT_FILE`` when set, else certifi's bundle (as the back ends are)."""
    return ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE") or certifi.where())


def _get(url: str, address: str, deadline: float, max_bytes: int) -> tuple[int, dict[str, str], bytes]:
    """One GET of ``url`` at ``address``: its status, lower-cased headers and at most ``max_bytes`` of its body."""
    parts = urlsplit(url)
    left = deadline - time.monotonic()
    if left <= 0:
        raise FetchError("unavailable", "the fetch ran out of time")
    kind = _PinnedHTTPS if parts.scheme == "https" else _PinnedHTTP
    conn = kind(parts.hostname or "", parts.port, address, left)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request("GET", target, headers={"User-Agent": "toolwire", "Accept": "text/html, text/plain;q=0.9"})
        answer = conn.getresponse()
        headers = {key.lower(): value for key, value in answer.getheaders()}
        return answer.status, headers, _read(answer, deadline, max_bytes)
    except (OSError, HTTPException, socket.timeout) as exc:
        raise FetchError("url_not_accessible", f"the page could not be read ({type(exc).__name__})") from None
    finally:
        conn.close()


def _read(answer: HTTPResponse, deadline: float, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of the body, stopping at the deadline (a slow page's trickle is not waited out)."""
    chunks: list[bytes] = []
    size = 0
    while size < max_bytes:
        if time.monotonic() > deadline:
            raise FetchError("unavailable", "the fetch ran out of time")
        chunk = answer.read1(min(65536, max_bytes - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


class _TextOf(HTMLParser):
    """An HTML page's visible text, one line per block element, and its ``<title>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self._skipping = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in _SKIPPED:
            self._skipping += 1
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in _SKIPPED:
            self._skipping = max(0, self._skipping - 1)
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        elif not self._skipping:
            self.parts.append(data)


def html_text(html: str) -> tuple[str | None, str]:
    """The title (``None`` when absent) and the visible text of ``html``, blank runs squeezed."""
    reader = _TextOf()
    reader.feed(html)
    reader.close()
    lines = (" ".join(line.split()) for line in "".join(reader.parts).splitlines())
    text = "\n".join(line for line in lines if line)
    title = " ".join("".join(reader.title).split())
    return title or None, text
