"""Responses ``mcp`` tools run by toolwire (issue 42), end to end: gunicorn + gevent in front of the scripted text
model (no tools of its own), a real MCP server (the ``mcp`` SDK's ``MCPServer`` over streamable HTTP, its own
process on 127.0.0.1; the reference ``@modelcontextprotocol/server-everything`` from npm over stdio), and real
clients: openai-python's ``responses.stream`` (every event parsed into its typed model, and checked against the
wire contract by the recorder) and ``responses.create``, and the OpenAI Agents SDK's ``HostedMCPTool`` with approval
``never`` and ``always``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import openai
import pytest
from openai.types.responses.response_output_item import McpCall, McpListTools

from support.agents import npm_tool
from support.mcp_server import mcp_server
from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text

pytestmark = pytest.mark.e2e

MODEL = "scripted-model"
DATA = Path(__file__).parent / "data"
EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with mcp_server() as url:
        yield url


def allowed(url: str) -> str:
    return url.rsplit("/", 1)[0] + "/*"


@pytest.fixture
def client(toolwire_factory, make_openai_client, server_url) -> openai.OpenAI:
    server = toolwire_factory(TOOLWIRE_MCP_ALLOWED_URLS=allowed(server_url), TOOLWIRE_GATEWAY_TIMEOUT_SECONDS="2")
    return make_openai_client(server)


def calc(url: str, approval: str = "never") -> dict:
    return {"type": "mcp", "server_label": "calc", "server_url": url, "require_approval": approval}


def test_responses_stream_lists_calls_and_answers_in_one_response(upstream: ScriptedUpstream, client: openai.OpenAI,
                                                                  server_url: str) -> None:
    upstream.enqueue(Script(text="Let me add.\n" + tool_call_text("mcp__calc__add", {"a": 2, "b": 3}), chunks=6),
                     Script(text="2 + 3 = 5.", chunks=3))
    with client.responses.stream(model=MODEL, input="What is 2 + 3?", tools=[calc(server_url)], store=False) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    for kind in ("response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed",
                 "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done",
                 "response.mcp_call.in_progress", "response.mcp_call.completed"):
        assert kinds.count(kind) == 1, (kind, kinds)
    assert type(events[kinds.index("response.mcp_call.completed")]).__name__ == "ResponseMcpCallCompletedEvent"
    listing, said, made, answer = final.output
    assert isinstance(listing, McpListTools) and "add" in {t.name for t in listing.tools}
    assert isinstance(made, McpCall) and (made.name, made.output, made.status) == ("add", "5", "completed")
    assert said.type == answer.type == "message" and final.output_text == "Let me add.\n2 + 3 = 5."
    first, second = upstream.chat_requests
    assert "mcp__calc__add" in first.body["messages"][0]["content"] and "tools" not in first.body
    assert any("5" in str(m.get("content")) for m in second.body["messages"][-2:])


def test_responses_create_the_same_and_a_failing_tool(upstream: ScriptedUpstream, client: openai.OpenAI,
                                                       server_url: str) -> None:
    upstream.enqueue(Script(text=tool_call_text("mcp__calc__fail", {"reason": "out of paper"})),
                     Script(text="The tool failed."))
    final = client.responses.create(model=MODEL, input="x", tools=[calc(server_url)], store=False)
    made = next(item for item in final.output if isinstance(item, McpCall))
    assert made.status == "failed" and made.error is not None and made.error.type == "mcp_tool_execution_error"
    assert final.output_text == "The tool failed."


def test_a_hung_tool_costs_the_response_no_more_than_the_timeout(upstream: ScriptedUpstream, client: openai.OpenAI,
                                                                 server_url: str) -> None:
    upstream.enqueue(Script(text=tool_call_text("mcp__calc__sleep", {"seconds": 60})), Script(text="Too slow."))
    began = time.monotonic()
    with client.responses.stream(model=MODEL, input="x", tools=[calc(server_url)], store=False) as stream:
        final = stream.get_final_response()
    took = time.monotonic() - began
    assert took < 8, took  # the timeout is 2 s
    made = next(item for item in final.output if isinstance(item, McpCall))
    assert made.status == "failed" and made.error.code == -32001 and final.output_text == "Too slow."


def test_a_loopback_server_url_not_allowed_is_refused_with_a_400(upstream: ScriptedUpstream, toolwire_server,
                                                                 make_openai_client, server_url: str) -> None:
    client = make_openai_client(toolwire_server)  # no TOOLWIRE_MCP_ALLOWED_URLS
    for url in (server_url, "http://169.254.169.254/latest/mcp"):
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model=MODEL, input="x", tools=[calc(url)])
        assert refused.value.body["param"] == "tools[0].server_url"
        assert refused.value.body["code"] == "mcp_server_url_refused"
    assert not upstream.chat_requests


def test_a_server_that_never_answers_its_listing_costs_no_more_than_the_timeout(
        upstream: ScriptedUpstream, toolwire_factory, make_openai_client) -> None:
    import socket
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts (the kernel does), never answers
    url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
    try:
        client = make_openai_client(toolwire_factory(TOOLWIRE_MCP_ALLOWED_URLS=allowed(url),
                                                     TOOLWIRE_GATEWAY_TIMEOUT_SECONDS="1.5"))
        upstream.enqueue(Script(text="No tools."))
        began = time.monotonic()
        final = client.responses.create(model=MODEL, input="x", tools=[calc(url)], store=False)
        assert time.monotonic() - began < 6
        listing = final.output[0]
        assert isinstance(listing, McpListTools) and listing.error and final.output_text == "No tools."
    finally:
        silent.close()


def test_the_everything_server_over_stdio_as_an_operator_server(upstream: ScriptedUpstream, toolwire_factory,
                                                                make_openai_client) -> None:
    command = f"{npm_tool(*EVERYTHING)} stdio"
    servers = json.dumps({"everything": {"command": command}})
    client = make_openai_client(toolwire_factory(TOOLWIRE_MCP_SERVERS=servers))
    tool = {"type": "mcp", "server_label": "everything", "require_approval": "never", "allowed_tools": ["echo",
                                                                                                      "get-sum"]}
    upstream.enqueue(Script(text=tool_call_text("mcp__everything__get-sum", {"a": 20, "b": 22})),
                     Script(text=tool_call_text("mcp__everything__echo", {"message": "hello"})),
                     Script(text="Done."))
    with client.responses.stream(model=MODEL, input="x", tools=[tool], store=False) as stream:
        final = stream.get_final_response()
    listing, summed, echoed, answer = final.output
    assert isinstance(listing, McpListTools) and {t.name for t in listing.tools} == {"echo", "get-sum"}
    assert summed.output and "42" in summed.output and echoed.output == "Echo: hello"
    assert final.output_text == "Done."
    # the worker keeps the process: a second request lists again from the same one
    upstream.enqueue(Script(text="Again."))
    again = client.responses.create(model=MODEL, input="y", tools=[tool], store=False)
    assert isinstance(again.output[0], McpListTools) and again.output_text == "Again."


@pytest.mark.parametrize("approval", ["never", "always"])
def test_the_agents_sdk_hosted_mcp_tool(upstream: ScriptedUpstream, toolwire_factory, server_url: str,
                                        approval: str) -> None:
    server = toolwire_factory(TOOLWIRE_MCP_ALLOWED_URLS=allowed(server_url))
    upstream.enqueue(Script(text=tool_call_text("mcp__calc__add", {"a": 2, "b": 3})),
                     Script(text="The answer is 5."))
    env = {**os.environ, "OPENAI_BASE_URL": server.v1_url, "OPENAI_API_KEY": "test", "MODEL": MODEL,
           "OPENAI_AGENTS_DISABLE_TRACING": "1", "MCP_URL": server_url, "MCP_APPROVAL": approval}
    done = subprocess.run([sys.executable, str(DATA / "agents_hosted_mcp.py")], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:] + server.log()[-3000:]
    assert "final: The answer is 5." in done.stdout, done.stdout
    assert "item mcp_list_tools_item" in done.stdout
    assert ("approval asked for add" in done.stdout) == (approval == "always")
    assert len(upstream.chat_requests) == 2
    result = [m for m in upstream.chat_requests[1].body["messages"] if "5" in str(m.get("content"))]
    assert result, "the call's result went back to the model"
