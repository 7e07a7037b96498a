"""Opt-in CORS in a real browser (issue 40): a page in headless Chromium at another origin (as Obsidian's renderer
at ``app://obsidian.md`` is) streams a Chat completion from toolwire under gunicorn through ``fetch``, token by
token, with a client key (so the browser sends a real preflight first), and reads the exposed ``X-Request-Id``;
the same page at an origin toolwire does not list is refused by the browser."""

from __future__ import annotations

import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import pytest

from support.browser import chromium_unavailable, headless_chromium
from support.scripted_upstream import Script, ScriptedUpstream
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

KEY = "sk-page"
WORDS = ["Streaming ", "one ", "token ", "at ", "a ", "time."]
#: The page's script: a streamed chat completion through fetch, each read's text and time.
STREAM = """
const [url, key, finish] = arguments;
(async () => {
  const response = await fetch(url, {method: "POST", headers: {"Authorization": "Bearer " + key,
      "Content-Type": "application/json"}, body: JSON.stringify({model: "m", stream: true,
      messages: [{role: "user", content: "hi"}]})});
  const reader = response.body.getReader(), decoder = new TextDecoder(), reads = [];
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    reads.push([performance.now(), decoder.decode(value, {stream: true})]);
  }
  finish({status: response.status, requestId: response.headers.get("X-Request-Id"), reads});
})().catch(error => finish({error: String(error)}));
"""


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>page</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


@pytest.fixture(scope="module")
def page_origin() -> Iterator[str]:
    """A plain page on a port of its own: an origin other than toolwire's."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    reason = chromium_unavailable()
    if reason:
        warnings.warn(f"CORS was NOT tested in a browser: {reason}", pytest.PytestWarning)
        pytest.skip(f"NO BROWSER TEST: {reason}")
    with headless_chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        driver.set_script_timeout(30)
        yield driver


def stream_from(browser: Any, page: str, server: ToolwireServer) -> dict[str, Any]:
    browser.get(page)
    return browser.execute_async_script(STREAM, server.v1_url + "/chat/completions", KEY)


def test_a_listed_origin_streams_token_by_token(browser: Any, page_origin: str, upstream: ScriptedUpstream,
                                                toolwire_factory: Callable[..., ToolwireServer]) -> None:
    server = toolwire_factory(TOOLWIRE_CORS_ORIGINS=f"app://obsidian.md, {page_origin}", TOOLWIRE_API_KEYS=KEY)
    upstream.enqueue(Script(text="".join(WORDS), chunks=WORDS, delay_between_chunks=0.25))
    got = stream_from(browser, page_origin, server)
    assert got.get("status") == 200, got
    assert got["requestId"]  # exposed to the page
    texts = [text for _, text in got["reads"]]
    contents = "".join(texts)
    assert all(f'"content":"{word}"' in contents for word in WORDS) and "data: [DONE]" in contents
    with_words = [at for at, text in got["reads"] if any(f'"content":"{w}"' in text for w in WORDS)]
    assert len(with_words) >= len(WORDS) - 1  # read as they came, not as one buffered body
    assert with_words[-1] - with_words[0] > 0.8 * 1000 * 0.25 * (len(WORDS) - 2)


def test_an_origin_not_listed_is_refused_by_the_browser(browser: Any, page_origin: str, upstream: ScriptedUpstream,
                                                        toolwire_factory: Callable[..., ToolwireServer]) -> None:
    server = toolwire_factory(TOOLWIRE_CORS_ORIGINS="app://obsidian.md", TOOLWIRE_API_KEYS=KEY)
    upstream.enqueue(Script(text="unseen"))
    got = stream_from(browser, page_origin, server)
    assert "Failed to fetch" in got.get("error", ""), got
