"""A SearXNG-compatible search server for tests, answering from a fixed corpus, and the pages it links to.

``SearchServer`` is a real HTTP/1.1 server on ``127.0.0.1`` (ephemeral port) in a background thread:
``GET /search?q=…&format=json`` answers SearXNG's JSON shape (``query``, ``number_of_results``,
``results`` with ``url``, ``title``, ``content``, ``publishedDate``, ``engine``, ``score``) with the corpus pages
sharing a word with the query, best first; any other ``format`` is SearXNG's 403. ``GET /pages/<slug>`` serves
a corpus page as HTML, so a search result's URL can be fetched; ``GET /go?to=<url>`` redirects there. Faults for tests: ``status`` (every search answers that
HTTP status), ``raw`` (every search answers these bytes) and ``delay`` (seconds before answering). Every query
is recorded in ``queries``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Page:
    """One corpus page: served at ``/pages/<slug>`` unless ``url`` names another site."""

    slug: str
    title: str
    text: str
    published: str | None = None
    url: str | None = None


CORPUS = (
    Page("toolwire", "toolwire: tool calling for text-only models",
         "toolwire is an HTTP gateway that gives tool calling to text-only language models. "
         "The toolwire mascot is a copper kingfisher named Wirebird.", "2026-10-01T00:00:00"),
    Page("kingfisher", "Copper kingfisher facts",
         "The copper kingfisher lives along quiet rivers and eats small fish. Its feathers shine like copper.",
         None),
    Page("searxng", "SearXNG metasearch engine",
         "SearXNG is a free metasearch engine that aggregates results from many search services.", None),
    Page("elsewhere", "Kingfisher mirror site", "A mirror of the copper kingfisher facts on another domain.",
         None, url="https://mirror.example.org/kingfisher"),
)


class SearchServer:
    """The server; ``url`` is its root (the ``search_url`` setting), ``page_url(slug)`` a page's address."""

    def __init__(self, corpus: tuple[Page, ...] = CORPUS):
        self.corpus = corpus
        self.queries: list[dict[str, list[str]]] = []
        self.status = 200
        self.delay = 0.0
        self.raw: bytes | None = None
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def page_url(self, slug: str) -> str:
        page = next(page for page in self.corpus if page.slug == slug)
        return page.url or f"{self.url}/pages/{slug}"

    def __enter__(self) -> "SearchServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def answer(self, query: str) -> dict[str, Any]:
        """SearXNG's JSON answer for ``query``."""
        words = set(re.findall(r"\w+", query.lower()))
        scored = [(len(words & set(re.findall(r"\w+", f"{p.title} {p.text}".lower()))), p) for p in self.corpus]
        hits = [page for score, page in sorted(scored, key=lambda pair: -pair[0]) if score]
        results = [{"url": self.page_url(page.slug), "title": page.title, "content": page.text[:160],
                    "publishedDate": page.published, "engine": "corpus", "engines": ["corpus"],
                    "score": 1.0 / (rank + 1), "category": "general"} for rank, page in enumerate(hits)]
        return {"query": query, "number_of_results": len(results), "results": results, "answers": [],
                "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": []}


def _handler(server: SearchServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def handle(self) -> None:
            try:
                super().handle()
            except (BrokenPipeError, ConnectionResetError):  # a client that stopped reading (caps, timeouts)
                pass

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            if server.delay:
                time.sleep(server.delay)
            if parts.path == "/search":
                params = parse_qs(parts.query)
                server.queries.append(params)
                if params.get("format") != ["json"]:
                    return self._send(403, "text/html", b"<h1>403 Forbidden</h1>")
                if server.raw is not None:
                    return self._send(200, "text/html", server.raw)
                if server.status != 200:
                    return self._send(server.status, "application/json", b'{"error": "scripted"}')
                body = json.dumps(server.answer(params.get("q", [""])[0])).encode()
                return self._send(200, "application/json", body)
            if parts.path == "/go":  # a redirect, to check each hop is checked
                self.send_response(302)
                self.send_header("Location", parse_qs(parts.query)["to"][0])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            slug = parts.path.removeprefix("/pages/")
            page = next((page for page in server.corpus if page.slug == slug and not page.url), None)
            if page is None:
                return self._send(404, "text/plain", b"not found")
            html = (f"<html><head><title>{page.title}</title><style>p {{color: red}}</style></head>"
                    f"<body><h1>{page.title}</h1><script>var hidden = 1;</script><p>{page.text}</p></body></html>")
            self._send(200, "text/html; charset=utf-8", html.encode())

        def _send(self, status: int, media_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", media_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
