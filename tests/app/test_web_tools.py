"""The web gateway tools (search and fetch runs, their limits and options) and the blocks and items the Messages
and Responses encoders make of them, in process against the local SearXNG-compatible server."""

from __future__ import annotations

import json
import time

import pytest

from app.errors import InputError
from app.gateway_tools.base import GatewayCallFinished, GatewayCallStarted
from app.gateway_tools.search import DomainFilter
from app.gateway_tools.web import FetchRun, SearchRun, WebOptions, web_fetch_tool, web_options, web_search_tool
from app.messages.encoder import MessageBuilder
from app.messages.schemas import MessagesRequest
from app.messages.transcript import to_chat_messages
from app.messages.web_blocks import result_text, tool_result
from app.responses.web_search import call_finished, call_started, web_search_tools
from app.settings import Settings
from statemachine import ChoiceFinished, TextDelta
from support.search_server import SearchServer


@pytest.fixture(scope="module")
def searx():
    with SearchServer() as server:
        yield server


@pytest.fixture
def settings(searx):
    return Settings(search_url=searx.url, fetch_allowed_urls=f"{searx.url}/*", search_max_uses=3)


def soon() -> float:
    return time.monotonic() + 5


def test_without_a_search_url_there_are_no_web_tools():
    assert web_search_tool(Settings(), WebOptions()) is None and web_fetch_tool(Settings(), WebOptions()) is None
    assert web_fetch_tool(Settings(search_url="http://127.0.0.1:1", web_fetch=False), WebOptions()) is None


def test_a_search_run_gives_the_model_text_and_the_encoder_results(settings, searx):
    tool = web_search_tool(settings, WebOptions())
    run = tool.run({"query": "toolwire mascot"}, soon())
    assert run.error is None and isinstance(run.payload, SearchRun)
    assert run.payload.results[0].url == searx.page_url("toolwire")
    assert run.output.startswith('Web search results for "toolwire mascot":')
    assert f"URL: {searx.page_url('toolwire')}" in run.output and "Wirebird" in run.output


def test_max_uses_the_smaller_of_the_clients_and_the_operators(settings):
    tool = web_search_tool(settings, WebOptions(max_uses=1))
    assert tool.run({"query": "copper"}, soon()).error is None
    refused = tool.run({"query": "copper"}, soon())
    assert refused.payload.error_code == "max_uses_exceeded" and refused.output.startswith("Error:")
    assert web_search_tool(settings, WebOptions(max_uses=50)).max_uses == 3


def test_a_bad_query_or_a_failing_back_end_is_an_error_run(settings, searx):
    tool = web_search_tool(settings, WebOptions())
    assert tool.run({"query": ""}, soon()).payload.error_code == "invalid_tool_input"
    searx.status = 429
    try:
        assert tool.run({"query": "copper"}, soon()).payload.error_code == "too_many_requests"
    finally:
        searx.status = 200


def test_a_fetch_run_and_its_refusals(settings, searx):
    tool = web_fetch_tool(settings, WebOptions())
    run = tool.run({"url": searx.page_url("kingfisher")}, soon())
    assert run.error is None and run.payload.page.title == "Copper kingfisher facts"
    assert run.output.startswith("Page: Copper kingfisher facts\nURL: ") and "small fish" in run.output
    closed = web_fetch_tool(Settings(search_url=searx.url), WebOptions())  # loopback not allowed
    refused = closed.run({"url": searx.page_url("kingfisher")}, soon())
    assert refused.payload.error_code == "url_not_allowed" and "loopback" in refused.output
    kept = web_fetch_tool(settings, WebOptions(domains=DomainFilter(allowed=("example.org",))))
    assert kept.run({"url": searx.page_url("kingfisher")}, soon()).payload.error_code == "url_not_allowed"


def test_options_are_checked_and_named():
    options = web_options({"max_uses": 2, "blocked_domains": ["a.com"], "user_location": {
        "type": "approximate", "country": "DE", "city": "Berlin", "x": "y"}}, "tools[0]")
    assert options.max_uses == 2 and options.domains.blocked == ("a.com",)
    assert options.hints == {"country": "DE", "city": "Berlin"}
    for extra, param in (({"max_uses": 0}, "tools[1].max_uses"), ({"max_uses": True}, "tools[1].max_uses"),
                         ({"allowed_domains": "a.com"}, "tools[1].allowed_domains"),
                         ({"allowed_domains": ["a"], "blocked_domains": ["b"]}, "tools[1].blocked_domains"),
                         ({"user_location": "Berlin"}, "tools[1].user_location")):
        with pytest.raises(InputError) as caught:
            web_options(extra, "tools[1]")
        assert caught.value.param == param
    with pytest.raises(InputError) as caught:
        web_options({"filters": {"allowed_domains": [3]}}, "tools[2]", domains_at="filters.")
    assert caught.value.param == "tools[2].filters.allowed_domains"


def messages_run(settings, arguments):
    tool = web_search_tool(settings, WebOptions())
    started = GatewayCallStarted("call_abc", tool, json.dumps(arguments))
    return started, GatewayCallFinished("call_abc", tool, started.arguments, tool.run(arguments, soon()))


def test_the_message_stream_and_body_show_the_server_tool_blocks(settings, searx):
    started, finished = messages_run(settings, {"query": "toolwire"})
    builder = MessageBuilder("msg_1", "m")
    events = [event for item in (started, finished, TextDelta("Wirebird."), ChoiceFinished("stop"))
              for event in builder.feed(item)]
    events += builder.finish({"prompt_tokens": 3, "completion_tokens": 2})
    kinds = [(e["type"], e.get("content_block", e.get("delta", {})).get("type")) for e in events]
    assert kinds[:6] == [("content_block_start", "server_tool_use"), ("content_block_delta", "input_json_delta"),
                         ("content_block_stop", None), ("content_block_start", "web_search_tool_result"),
                         ("content_block_stop", None), ("content_block_start", "text")]
    assert events[0]["content_block"] == {"type": "server_tool_use", "id": "srvtoolu_abc", "name": "web_search",
                                          "input": {}}
    message = builder.message()
    use, result, text = message["content"]
    assert use["input"] == {"query": "toolwire"} and result["tool_use_id"] == "srvtoolu_abc"
    assert result["content"][0]["type"] == "web_search_result" and result["content"][0]["page_age"]
    assert message["usage"]["server_tool_use"] == {"web_search_requests": 1, "web_fetch_requests": 0}
    assert events[-2]["usage"]["server_tool_use"] == {"web_search_requests": 1, "web_fetch_requests": 0}


def test_a_call_the_loop_refused_is_unavailable(settings):
    from app.gateway_tools.base import ToolRun

    tool = web_search_tool(settings, WebOptions())
    block = tool_result(GatewayCallFinished("call_x", tool, "{}", ToolRun("Error: timeout", "timeout")))
    assert block["content"] == {"type": "web_search_tool_result_error", "error_code": "unavailable"}


def test_a_result_sent_back_reads_as_the_call_and_its_result(settings, searx):
    started, finished = messages_run(settings, {"query": "toolwire"})
    builder = MessageBuilder("msg_1", "m")
    for item in (started, finished, TextDelta("Wirebird."), ChoiceFinished("stop")):
        builder.feed(item)
    builder.finish({"prompt_tokens": 1, "completion_tokens": 1})
    request = MessagesRequest.model_validate({"model": "m", "max_tokens": 9, "messages": [
        {"role": "user", "content": "mascot?"}, {"role": "assistant", "content": builder.message()["content"]},
        {"role": "user", "content": "thanks"}]})
    user, call, result, answer, thanks = to_chat_messages(request)
    assert call["tool_calls"][0]["function"] == {"name": "web_search", "arguments": '{"query": "toolwire"}'}
    assert result == {"role": "tool", "tool_call_id": "srvtoolu_abc", "content": finished.run.output}
    assert answer == {"role": "assistant", "content": "Wirebird."}
    assert result_text({"type": "web_search_tool_result", "content": {
        "type": "web_search_tool_result_error", "error_code": "unavailable"}}, "q") == \
        "Error: the search failed (unavailable)"


def test_responses_web_search_items(settings, searx):
    tools = web_search_tools(type("Tool", (), {"type": "web_search", "model_extra": {}})(), 0, settings)
    assert [tool.name for tool in tools] == ["web_search", "open_page"]
    started, finished = messages_run(settings, {"query": "toolwire"})
    count = iter(range(100))

    def emit(type_, **fields):
        return {"type": type_, "sequence_number": next(count), **fields}

    item, opened = call_started(started, "ws_1", 0, emit)
    assert item["status"] == "in_progress" and [e["type"] for e in opened] == [
        "response.output_item.added", "response.web_search_call.in_progress", "response.web_search_call.searching"]
    done, closed = call_finished(finished, "ws_1", 0, emit)
    assert done["status"] == "completed" and done["action"]["query"] == "toolwire"
    assert done["action"]["sources"][0] == {"type": "url", "url": searx.page_url("toolwire")}
    assert [e["type"] for e in closed] == ["response.web_search_call.completed", "response.output_item.done"]
    assert isinstance(finished.run.payload, SearchRun) and not isinstance(finished.run.payload, FetchRun)
