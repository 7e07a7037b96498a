"""Web search and web fetch run by toolwire (gateway tools) end to end: gunicorn/gevent toolwire whose search back
end is a real local SearXNG-compatible server (``support.search_server``), in front of the scripted text model
that calls ``web_search`` / ``web_fetch`` in toolwire's taught format.

Anthropic's Messages API through the ``anthropic`` SDK (non-stream and stream, every exchange checked against
Anthropic's grammar): ``server_tool_use`` and ``web_search_tool_result`` / ``web_fetch_tool_result`` blocks,
``usage.server_tool_use``, ``max_uses``, ``blocked_domains``; the Responses API through openai-python's
``responses.stream``: ``web_search_call`` items and their events; Claude Code's WebSearch (its side request with
the ``web_search`` tool forced).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator

import anthropic
import openai
import pytest
from anthropic.types import ServerToolUseBlock, TextBlock, WebFetchToolResultBlock, WebSearchToolResultBlock
from openai.types.responses import ResponseFunctionWebSearch

from support.agents import CLAUDE_CODE, claude_code_env, npm_tool, run_agent
from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text
from support.search_server import SearchServer
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

MODEL = "claude-opus-5-5"
ASK = [{"role": "user", "content": "What is toolwire's mascot?"}]
SEARCH = {"type": "web_search_20250305", "name": "web_search"}
FETCH = {"type": "web_fetch_20250910", "name": "web_fetch"}
ANSWER = "toolwire's mascot is a copper kingfisher named Wirebird."


@pytest.fixture(scope="module")
def searx() -> Iterator[SearchServer]:
    with SearchServer() as server:
        yield server


@pytest.fixture
def server(toolwire_factory: Callable[..., ToolwireServer], searx: SearchServer) -> ToolwireServer:
    return toolwire_factory(TOOLWIRE_SEARCH_URL=searx.url,
                            TOOLWIRE_FETCH_ALLOWED_URLS=f"{searx.url}/*")


@pytest.fixture
def client(make_anthropic_client: Callable[..., anthropic.Anthropic], server: ToolwireServer) -> anthropic.Anthropic:
    return make_anthropic_client(server)


def create(client: anthropic.Anthropic, streamed: bool, **kwargs: Any) -> anthropic.types.Message:
    kwargs = {"model": MODEL, "max_tokens": 1024, "messages": ASK, **kwargs}
    if not streamed:
        return client.messages.create(**kwargs)
    with client.messages.stream(**kwargs) as stream:
        return stream.get_final_message()


@pytest.mark.parametrize("streamed", [False, True], ids=["create", "stream"])
def test_web_search_gives_result_blocks_and_an_answer_that_quotes_them(
        client: anthropic.Anthropic, upstream: ScriptedUpstream, searx: SearchServer, streamed: bool) -> None:
    upstream.enqueue(Script(text="Let me look.\n" + tool_call_text("web_search", {"query": "toolwire mascot"}),
                            chunks=6),
                     Script(text=ANSWER, chunks=5))
    message = create(client, streamed, tools=[SEARCH])
    text, use, result, answer = message.content
    assert isinstance(text, TextBlock) and text.text.strip() == "Let me look."
    assert isinstance(use, ServerToolUseBlock) and use.name == "web_search"
    assert use.input == {"query": "toolwire mascot"} and use.id.startswith("srvtoolu_")
    assert isinstance(result, WebSearchToolResultBlock) and result.tool_use_id == use.id
    assert isinstance(result.content, list) and result.content[0].url == searx.page_url("toolwire")
    assert result.content[0].title.startswith("toolwire") and result.content[0].page_age == "2026-10-01T00:00:00"
    assert result.content[0].encrypted_content
    assert isinstance(answer, TextBlock) and answer.text == ANSWER
    assert message.stop_reason == "end_turn"
    assert message.usage.server_tool_use is not None
    used = message.usage.server_tool_use
    assert (used.web_search_requests, used.web_fetch_requests) == (1, 0)
    assert searx.queries[-1]["q"] == ["toolwire mascot"]
    first, second = (exchange.body for exchange in upstream.chat_requests)
    assert "web_search" in first["messages"][0]["content"]  # the gateway's tool, taught to the text model
    assert "Wirebird" in json.dumps(second["messages"])  # the results reached the model's next generation


def test_web_fetch_reads_a_page_into_a_document_block(client: anthropic.Anthropic, upstream: ScriptedUpstream,
                                                      searx: SearchServer) -> None:
    url = searx.page_url("kingfisher")
    upstream.enqueue(Script(text=tool_call_text("web_fetch", {"url": url})),
                     Script(text="It eats small fish."))
    message = create(client, True, tools=[SEARCH, FETCH])
    use, result, answer = message.content
    assert isinstance(use, ServerToolUseBlock) and use.name == "web_fetch" and use.input == {"url": url}
    assert isinstance(result, WebFetchToolResultBlock) and result.content.type == "web_fetch_result"
    assert result.content.url == url and result.content.content.title == "Copper kingfisher facts"
    assert "small fish" in result.content.content.source.data
    assert message.usage.server_tool_use is not None and message.usage.server_tool_use.web_fetch_requests == 1
    assert answer.type == "text" and answer.text == "It eats small fish."


def test_a_fetch_of_a_private_address_not_allowed_is_url_not_allowed(
        make_anthropic_client: Callable[..., anthropic.Anthropic], toolwire_factory: Callable[..., ToolwireServer],
        upstream: ScriptedUpstream, searx: SearchServer) -> None:
    client = make_anthropic_client(toolwire_factory(TOOLWIRE_SEARCH_URL=searx.url))  # no fetch_allowed_urls
    upstream.enqueue(Script(text=tool_call_text("web_fetch", {"url": searx.page_url("kingfisher")})),
                     Script(text="I could not read it."))
    message = create(client, False, tools=[FETCH])
    result = message.content[1]
    assert isinstance(result, WebFetchToolResultBlock) and result.content.type == "web_fetch_tool_result_error"
    assert result.content.error_code == "url_not_allowed"
    assert "loopback" in json.dumps(upstream.chat_requests[1].body["messages"])  # the model heard why


def test_max_uses_and_blocked_domains(client: anthropic.Anthropic, upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text=tool_call_text("web_search", {"query": "copper kingfisher"})),
                     Script(text=tool_call_text("web_search", {"query": "kingfisher mirror"})),
                     Script(text="Done."))
    tool = {**SEARCH, "max_uses": 1, "blocked_domains": ["example.org"]}
    message = create(client, True, tools=[tool])
    kinds = [block.type for block in message.content]
    assert kinds == ["server_tool_use", "web_search_tool_result", "server_tool_use", "web_search_tool_result", "text"]
    first, second = message.content[1], message.content[3]
    assert isinstance(first, WebSearchToolResultBlock) and isinstance(first.content, list) and first.content
    assert all("example.org" not in item.url for item in first.content)
    assert isinstance(second, WebSearchToolResultBlock) and not isinstance(second.content, list)
    assert second.content.error_code == "max_uses_exceeded"
    assert message.usage.server_tool_use is not None and message.usage.server_tool_use.web_search_requests == 1


def test_malformed_options_are_a_400_naming_them(client: anthropic.Anthropic, upstream: ScriptedUpstream) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        create(client, False, tools=[{**SEARCH, "allowed_domains": ["a.com"], "blocked_domains": ["b.com"]}])
    assert "allowed_domains" in caught.value.message and upstream.chat_requests == []
    with pytest.raises(anthropic.BadRequestError) as caught:
        create(client, False, tools=[{**SEARCH, "max_uses": 0}])
    assert "tools[0].max_uses" in caught.value.message


def test_without_a_search_back_end_web_search_is_still_dropped(
        make_anthropic_client: Callable[..., anthropic.Anthropic], toolwire_server: ToolwireServer,
        upstream: ScriptedUpstream) -> None:
    client = make_anthropic_client(toolwire_server)
    with pytest.raises(anthropic.BadRequestError) as caught:
        create(client, False, tools=[SEARCH])
    assert "None of the request's tools can be called here" in caught.value.message


def test_responses_stream_web_search_call_items(make_openai_client: Callable[[ToolwireServer], openai.OpenAI],
                                                server: ToolwireServer, upstream: ScriptedUpstream,
                                                searx: SearchServer) -> None:
    upstream.enqueue(Script(text=tool_call_text("web_search", {"query": "toolwire mascot"}), chunks=4),
                     Script(text=ANSWER, chunks=4))
    client = make_openai_client(server)
    with client.responses.stream(model="scripted-model", input="What is toolwire's mascot?",
                                 tools=[{"type": "web_search"}]) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_response()
    search, message = final.output
    assert isinstance(search, ResponseFunctionWebSearch) and search.status == "completed"
    assert search.id.startswith("ws_") and search.action.type == "search"
    assert search.action.query == "toolwire mascot"
    assert [source.url for source in search.action.sources or []][0] == searx.page_url("toolwire")
    assert message.type == "message" and final.output_text == ANSWER
    calls = [name for name in events if name.startswith("response.web_search_call.")]
    assert calls == ["response.web_search_call.in_progress", "response.web_search_call.searching",
                     "response.web_search_call.completed"]
    assert events.index("response.web_search_call.completed") < events.index("response.output_text.delta")


@pytest.mark.time_limit(240)
def test_claude_code_websearch_finds_and_quotes_results(
        project: Any, toolwire_factory: Callable[..., ToolwireServer], upstream: ScriptedUpstream,
        searx: SearchServer) -> None:
    """Claude Code's WebSearch: its model calls WebSearch; Claude Code asks ``/v1/messages`` for a search with
    the ``web_search_20250305`` tool forced (a side request); toolwire's model calls ``web_search``, toolwire runs
    it against the local search server and the model sums the results up; Claude Code hands the result blocks'
    links and that summary to its model, whose answer quotes them."""
    claude = npm_tool(*CLAUDE_CODE)
    server = toolwire_factory(TOOLWIRE_API_KEYS="sk-claude-code", TOOLWIRE_SEARCH_URL=searx.url,
                              TOOLWIRE_MAX_OUTPUT_TOKENS="8192")
    final = f"The search says: {ANSWER} (source: {searx.page_url('toolwire')})"
    upstream.enqueue(Script(text=tool_call_text("WebSearch", {"query": "toolwire mascot"}), chunks=7),
                     Script(text=tool_call_text("web_search", {"query": "toolwire mascot"}), chunks=5),
                     Script(text="Wirebird, a copper kingfisher, is toolwire's mascot.", chunks=5),
                     Script(text=final, chunks=9))
    env = {**claude_code_env(project.parent / "home", server.url, "sk-claude-code"), "ENABLE_TOOL_SEARCH": "false"}
    result = run_agent([str(claude), "-p", "What is toolwire's mascot? Search the web.", "--output-format",
                        "stream-json", "--verbose", "--dangerously-skip-permissions"], project, env)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}\n{server.log()[-3000:]}"
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    [outcome] = [e for e in events if e.get("type") == "result"]
    assert outcome["is_error"] is False and outcome["result"] == final
    uses = [block for e in events if e.get("type") == "assistant" for block in e["message"]["content"]
            if block["type"] == "tool_use"]
    assert [use["name"] for use in uses] == ["WebSearch"]
    assert searx.queries and searx.queries[-1]["q"] == ["toolwire mascot"]
    main, side, summary, last = (exchange.body for exchange in upstream.chat_requests)
    assert "### WebSearch" in main["messages"][0]["content"]
    assert "web_search" in side["messages"][0]["content"] and "Perform a web search" in json.dumps(side["messages"])
    assert "Wirebird" in json.dumps(summary["messages"])  # the results, given to the side request's model
    told = json.dumps(last["messages"])  # Claude Code's WebSearch result, given to its model
    assert searx.page_url("toolwire") in told and "Wirebird, a copper kingfisher" in told


def test_responses_create_forced_open_page_and_allowed_domains(
        make_openai_client: Callable[[ToolwireServer], openai.OpenAI], server: ToolwireServer,
        upstream: ScriptedUpstream, searx: SearchServer) -> None:
    url = searx.page_url("kingfisher")
    upstream.enqueue(Script(text=tool_call_text("web_search", {"query": "copper kingfisher"})),
                     Script(text=tool_call_text("open_page", {"url": url})),
                     Script(text="It eats small fish."))
    response = make_openai_client(server).responses.create(
        model="scripted-model", input="What does the copper kingfisher eat?",
        tools=[{"type": "web_search", "filters": {"allowed_domains": ["127.0.0.1"]}}],
        tool_choice={"type": "web_search"})
    search, page, message = response.output
    assert isinstance(search, ResponseFunctionWebSearch) and search.action.type == "search"
    sources = [source.url for source in search.action.sources or []]
    assert url in sources and not any("example.org" in source for source in sources)  # the mirror left out
    assert isinstance(page, ResponseFunctionWebSearch) and page.action.type == "open_page"
    assert page.action.url == url and page.status == "completed"
    assert response.output_text == "It eats small fish."
    assert "small fish" in json.dumps(upstream.chat_requests[2].body["messages"])  # the page, read by the model


def test_responses_without_a_search_back_end(make_openai_client: Callable[[ToolwireServer], openai.OpenAI],
                                            toolwire_server: ToolwireServer, upstream: ScriptedUpstream) -> None:
    client = make_openai_client(toolwire_server)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="scripted-model", input="hi", tool_choice={"type": "web_search"}, tools=[
            {"type": "web_search"}, {"type": "function", "name": "f", "parameters": {"type": "object"}}])
    assert caught.value.body["param"] == "tool_choice" and upstream.chat_requests == []
