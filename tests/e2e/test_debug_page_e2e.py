"""The debug page in headless Chromium, against toolwire under gunicorn (gevent) with debug on.

A few real requests go through the scripted upstream (a clean call, a rejected block, a repaired
call, plain text); then ``/debug/`` is opened in a real browser and the DOM is checked against what
was sent: the four states, every edge's count, the rejected request's path and its text span, the
filters, a live update, and that model text holding markup stays text.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path
from typing import Callable, Iterator

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from support.browser import chromium_unavailable, headless_chromium
from support.scripted_upstream import Script

pytestmark = pytest.mark.e2e

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CLEAN = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
REJECTED = 'Let me try. <tool_call>{"name": "launch_rocket", "arguments": {"target": "moon"}}</tool_call>'
REPAIRED = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool>'
PLAIN = "It is sunny in Oslo today."
# Every edge of the table with the count the four requests above make it fire.
EXPECTED_COUNTS = {
    ("text", "tool_open_seen", "in_tool_call"): 3,
    ("in_tool_call", "name_completed", "args_streaming"): 2,
    ("in_tool_call", "tool_open_disproved", "text"): 1,
    ("args_streaming", "tool_close_seen", "text"): 2,
    ("text", "tool_open_refuted", "text"): 0,  # every edge of the table is listed, taken or not
    ("text", "upstream_finished", "done"): 4,
    ("in_tool_call", "upstream_finished", "done"): 0,
    ("args_streaming", "upstream_finished", "done"): 0,
}
WAIT = 8.0


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """One headless Chromium for the module (installed with apt on first use)."""
    reason = chromium_unavailable()
    if reason:  # loud: a warning in the run's summary as well as the skip
        warnings.warn(f"the debug page was NOT tested in a browser: {reason}", pytest.PytestWarning)
        pytest.skip(f"NO BROWSER TEST: {reason}")
    with headless_chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver


@pytest.fixture
def debug_server(toolwire_factory, tmp_path):
    """A toolwire of its own (an empty debug directory, so counts are this test's alone)."""
    return toolwire_factory(TOOLWIRE_DEBUG="true", TOOLWIRE_DEBUG_DIR=str(tmp_path / "debug"))


def chat(server, upstream, request_id: str, text: str, *, chunks: int | None = 7) -> httpx.Response:
    """One streamed chat completion whose model output is ``text`` (cut into ``chunks``-sized pieces)."""
    upstream.enqueue(Script(text=text, chunks=chunks))
    body = {"model": "m", "stream": True, "tools": [WEATHER], "messages": [{"role": "user", "content": "weather?"}]}
    response = httpx.post(server.v1_url + "/chat/completions", json=body, headers={"X-Request-Id": request_id},
                          timeout=10)
    assert response.status_code == 200, response.text
    return response


def wait_for(driver, condition: Callable[[], object], what: str):
    """Poll ``condition`` in the page until it is truthy; fail naming ``what``."""
    return WebDriverWait(driver, WAIT, poll_frequency=0.1).until(lambda _: condition(), message=what)


def css(driver, selector: str) -> list:
    """The elements ``selector`` matches."""
    return driver.find_elements(By.CSS_SELECTOR, selector)


def edge_counts(driver) -> dict[tuple[str, str, str], int]:
    """Every drawn edge's count, as the page shows it in the edge's label."""
    return {tuple(key): int(count) for *key, count in driver.execute_script("""
        const labels = [...document.querySelectorAll('#diagram .edge-label')];
        return [...document.querySelectorAll('#diagram g.edge')].map((edge, i) => [
            edge.dataset.source, edge.dataset.trigger, edge.dataset.dest, labels[i].querySelector('.count').textContent]);
    """)}


def save_screenshot(driver, path: Path) -> None:
    """Save the page as a test artifact; also to ``$TOOLWIRE_SCREENSHOT`` when set (how docs/debug-page.png is made)."""
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 10_000
    if os.environ.get("TOOLWIRE_SCREENSHOT"):
        shutil.copyfile(path, os.environ["TOOLWIRE_SCREENSHOT"])


def step_triggers(driver) -> list[str]:
    """The triggers of the steps the page lists for the shown choice."""
    return [item.find_element(By.CSS_SELECTOR, ".trigger").text for item in css(driver, "#steps li")]


def test_the_page_draws_the_machine_counts_and_walks_the_rejected_path(browser, debug_server, upstream, tmp_path):
    chat(debug_server, upstream, "page-clean", CLEAN)
    chat(debug_server, upstream, "page-rejected", REJECTED, chunks=None)  # one piece: the span is the whole block
    chat(debug_server, upstream, "page-repaired", REPAIRED)
    chat(debug_server, upstream, "page-plain", PLAIN)
    machine = httpx.get(debug_server.url + "/debug/machine").json()
    assert {(e["source"], e["trigger"], e["dest"]): e["count"] for e in machine["edges"]} == EXPECTED_COUNTS

    browser.get(debug_server.url + "/debug/")
    wait_for(browser, lambda: len(css(browser, "#requests tbody tr")) == 4, "four request rows")

    states = sorted(node.text for node in css(browser, "#diagram g.state text"))
    assert states == ["args_streaming", "done", "in_tool_call", "text"]
    assert edge_counts(browser) == EXPECTED_COUNTS
    rows = [row.get_attribute("data-request-id") for row in css(browser, "#requests tbody tr")]
    assert rows == ["page-plain", "page-repaired", "page-rejected", "page-clean"]  # newest first

    css(browser, 'tr[data-request-id="page-rejected"]')[0].click()
    wait_for(browser, lambda: css(browser, "#detail-caption")[0].text == "page-rejected", "the rejected request shown")
    taken = {(e.get_attribute("data-source"), e.get_attribute("data-dest")) for e in css(browser, "g.edge.taken")}
    assert taken == {("text", "in_tool_call"), ("in_tool_call", "text"), ("text", "done")}
    # Step by step: the second step is the disproof, drawn as the current edge, its span beside it.
    css(browser, "body")[0].send_keys(Keys.ARROW_RIGHT)
    current = css(browser, "g.edge.current")
    assert [(e.get_attribute("data-source"), e.get_attribute("data-trigger"), e.get_attribute("data-dest"))
            for e in current] == [("in_tool_call", "tool_open_disproved", "text")]
    view = httpx.get(debug_server.url + "/debug/requests/page-rejected").json()
    step = view["choices"][0]["path"][1]
    assert step["trigger"] == "tool_open_disproved" and "launch_rocket" in step["text"]
    current_step = css(browser, "#steps li.current")[0]
    assert current_step.find_element(By.CSS_SELECTOR, "pre.span").text == step["text"]
    shown_ms = current_step.find_element(By.CSS_SELECTOR, ".at").text
    assert shown_ms.endswith(" ms") and abs(float(shown_ms[:-3]) - step["at_ms"]) <= 0.051  # one decimal shown
    assert css(browser, "#finish-reason")[0].text == "stop"
    notes = [note.text for note in css(browser, "#notes li")]
    assert len(notes) == 1 and notes[0].startswith("unknown_tool") and "launch_rocket" in notes[0]
    assert [call.text for call in css(browser, "#calls li")] == ["none"]

    save_screenshot(browser, tmp_path / "debug-page.png")

    # The clean call lists its call with the arguments.
    css(browser, 'tr[data-request-id="page-clean"]')[0].click()
    wait_for(browser, lambda: css(browser, "#detail-caption")[0].text == "page-clean", "the clean request shown")
    call = css(browser, "#calls li")[0]
    assert call.find_element(By.CSS_SELECTOR, "strong").text == "get_weather"
    assert call.find_element(By.CSS_SELECTOR, "pre.arguments").text == '{"city": "Oslo"}'
    assert css(browser, "#finish-reason")[0].text == "tool_calls"

    # Filters: the troubled ones, then by route and status once other requests arrive.
    css(browser, "#filter-troubled")[0].click()
    shown = {row.get_attribute("data-request-id") for row in css(browser, "#requests tbody tr")}
    assert shown == {"page-rejected", "page-repaired"}
    css(browser, "#filter-troubled")[0].click()

    # Live: a new request appears, and the counts move, without reloading the page.
    upstream.enqueue(Script(text="Plain again."))
    created = httpx.post(debug_server.v1_url + "/responses", json={"model": "m", "input": "hi"},
                         headers={"X-Request-Id": "page-live"}, timeout=10)
    assert created.status_code == 200, created.text
    bad = httpx.post(debug_server.v1_url + "/chat/completions", json={"model": "m"}, headers={"X-Request-Id": "page-bad"})
    assert bad.status_code == 400
    wait_for(browser, lambda: len(css(browser, "#requests tbody tr")) == 6, "the new requests listed")
    assert edge_counts(browser)[("text", "upstream_finished", "done")] == 5
    Select(css(browser, "#filter-route")[0]).select_by_value("/v1/responses")
    assert [r.get_attribute("data-request-id") for r in css(browser, "#requests tbody tr")] == ["page-live"]
    Select(css(browser, "#filter-route")[0]).select_by_value("")
    Select(css(browser, "#filter-status")[0]).select_by_value("4")
    assert [r.get_attribute("data-request-id") for r in css(browser, "#requests tbody tr")] == ["page-bad"]
    # No script error and nothing the Content-Security-Policy had to refuse.
    assert [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"] == []


def test_the_reasoning_spans_are_listed_where_they_fell(browser, debug_server, upstream, tmp_path):
    chat(debug_server, upstream, "page-thinking", "<think>Oslo, so <b>the</b> weather tool.</think>"
         '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>')
    browser.get(debug_server.url + "/debug/")
    wait_for(browser, lambda: css(browser, 'tr[data-request-id="page-thinking"]'), "the request listed")
    css(browser, 'tr[data-request-id="page-thinking"]')[0].click()
    wait_for(browser, lambda: css(browser, "#detail-caption")[0].text == "page-thinking", "the request shown")
    spans = wait_for(browser, lambda: browser.execute_script(  # read at once: the list is redrawn as it polls
        "return [...document.querySelectorAll('#reasoning li')].map((li) => [li.firstChild.textContent,"
        " li.querySelector('pre')?.textContent])"), "the reasoning listed")
    [(where, text)] = spans
    assert text == "Oslo, so <b>the</b> weather tool." and where.startswith("before step 1")  # as text
    save_screenshot(browser, tmp_path / "debug-page-reasoning.png")


def test_model_text_with_markup_is_shown_as_text_never_run(browser, debug_server, upstream):
    script = "<script>window.__pwned = 1</script><img src=x onerror=window.__pwned=2>"
    chat(debug_server, upstream, "page-xss", f'<tool_call>{{"name": "{script}", "arguments": {{}}}}</tool_call>',
         chunks=None)
    chat(debug_server, upstream, "page-xss-args",
         f'<tool_call>{{"name": "get_weather", "arguments": {{"city": "{script}"}}}}</tool_call>', chunks=None)
    browser.get(debug_server.url + "/debug/")
    wait_for(browser, lambda: len(css(browser, "#requests tbody tr")) == 2, "two request rows")

    css(browser, 'tr[data-request-id="page-xss"]')[0].click()
    wait_for(browser, lambda: css(browser, "#detail-caption")[0].text == "page-xss", "the request shown")
    spans = [span.text for span in css(browser, "#steps pre.span")]
    assert any(script in span for span in spans)  # the markup, character for character, as text
    assert any("<script>" in note.text for note in css(browser, "#notes li"))

    css(browser, 'tr[data-request-id="page-xss-args"]')[0].click()
    wait_for(browser, lambda: css(browser, "#detail-caption")[0].text == "page-xss-args", "the request shown")
    assert script in css(browser, "#calls pre.arguments")[0].text

    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.execute_script("return document.querySelectorAll('main script, main img').length") == 0


def test_each_choice_of_a_request_has_its_own_path(browser, debug_server, upstream):
    upstream.enqueue(Script(text=[CLEAN, PLAIN], chunks=9))
    body = {"model": "m", "n": 2, "stream": True, "tools": [WEATHER], "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(debug_server.v1_url + "/chat/completions", json=body, headers={"X-Request-Id": "page-two"},
                      timeout=10).status_code == 200
    browser.get(debug_server.url + "/debug/")
    wait_for(browser, lambda: css(browser, "#detail-caption")[0].text == "page-two", "the request shown")
    assert step_triggers(browser) == ["tool_open_seen", "name_completed", "tool_close_seen", "upstream_finished"]
    css(browser, "#step-next")[0].click()
    css(browser, "#step-next")[0].click()
    assert css(browser, "g.edge.current")[0].get_attribute("data-trigger") == "tool_close_seen"
    assert [tab.text for tab in css(browser, "#choice-tabs button")] == ["choice 0", "choice 1"]
    css(browser, "#choice-tabs button")[1].click()
    assert step_triggers(browser) == ["upstream_finished"]
    assert css(browser, "#finish-reason")[0].text == "stop" and css(browser, "#calls li")[0].text == "none"
    assert {e.get_attribute("data-trigger") for e in css(browser, "g.edge.taken")} == {"upstream_finished"}


def test_with_client_keys_the_browser_opens_the_page_with_the_key_as_password(browser, toolwire_factory, upstream,
                                                                              tmp_path):
    server = toolwire_factory(TOOLWIRE_DEBUG="true", TOOLWIRE_DEBUG_DIR=str(tmp_path / "debug"),
                              TOOLWIRE_API_KEYS="sk-page-key")
    upstream.enqueue(Script(text=PLAIN))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(server.v1_url + "/chat/completions", json=body, headers={
        "Authorization": "Bearer sk-page-key", "X-Request-Id": "page-keyed"}, timeout=10).status_code == 200
    assert httpx.get(server.url + "/debug/").status_code == 401

    host = server.url.removeprefix("http://")
    browser.get(f"http://operator:sk-page-key@{host}/debug/")  # as typed into the address bar
    wait_for(browser, lambda: len(css(browser, "#requests tbody tr")) == 1, "the request listed")
    # The newest request is shown without a click (its details come from one more keyed fetch).
    wait_for(browser, lambda: css(browser, "#detail-caption")[0].text == "page-keyed", "the request's details")
    assert css(browser, "#finish-reason")[0].text == "stop"
