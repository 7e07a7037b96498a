"""The gateway's small MCP client (app/gateway_tools/mcp_client.py) against servers that misbehave: what each
failure becomes (an ``McpError`` of its kind), within the deadline. The well-behaved servers are the real ones of
test_responses_mcp and the e2e tests."""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit

import pytest

from app.gateway_tools.mcp_client import LegacySse, McpError, McpSession, StreamableHttp
from support.loopback import Answer, LoopbackServer


def json_answer(message: dict, status: int = 200) -> Answer:
    return Answer(status=status, headers={"Content-Type": "application/json"}, body=json.dumps(message).encode())


def initialized(seen) -> Answer:
    request = json.loads(seen.body or b"{}")
    if request.get("method") == "initialize":
        return json_answer({"jsonrpc": "2.0", "id": request["id"], "result": {"protocolVersion": "2025-06-18",
                                                                          "serverInfo": {"name": "t"}}})
    if "id" not in request:
        return Answer(status=202)
    return json_answer({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no such"}})


def test_a_json_rpc_error_is_a_protocol_error_with_its_code() -> None:
    server = LoopbackServer(initialized)
    try:
        with pytest.raises(McpError) as failed:
            McpSession(StreamableHttp(server.url + "/mcp", {})).list_tools(time.monotonic() + 5, 10)
        assert (failed.value.kind, failed.value.code) == ("protocol", -32601)
    finally:
        server.close()


def test_an_http_error_is_an_http_error_with_its_status() -> None:
    server = LoopbackServer(lambda seen: Answer(status=401, body=b"no"))
    try:
        with pytest.raises(McpError) as failed:
            McpSession(StreamableHttp(server.url + "/mcp", {"Authorization": "Bearer x"})).list_tools(
                time.monotonic() + 5, 10)
        assert (failed.value.kind, failed.value.code) == ("http", 401)
    finally:
        server.close()


def test_a_silent_server_is_a_timeout_at_the_deadline() -> None:
    server = LoopbackServer(lambda seen: Answer(then="hang", hang_seconds=10))
    try:
        began = time.monotonic()
        with pytest.raises(McpError) as failed:
            McpSession(StreamableHttp(server.url + "/mcp", {})).list_tools(time.monotonic() + 0.5, 10)
        assert failed.value.kind in ("timeout", "transport") and time.monotonic() - began < 3
    finally:
        server.close()


def test_an_sse_endpoint_on_another_host_is_refused() -> None:
    stream = b"event: endpoint\ndata: http://169.254.169.254/messages\n\n"
    server = LoopbackServer(lambda seen: Answer(headers={"Content-Type": "text/event-stream"}, body=[stream],
                                         then="hang", hang_seconds=5))
    try:
        with pytest.raises(McpError, match="another host"):
            McpSession(LegacySse(server.url + "/sse", {})).list_tools(time.monotonic() + 3, 10)
    finally:
        server.close()


def test_an_answer_that_is_not_json_is_a_transport_error() -> None:
    server = LoopbackServer(lambda seen: Answer(headers={"Content-Type": "application/json"}, body=b"<html>"))
    try:
        with pytest.raises(McpError) as failed:
            McpSession(StreamableHttp(server.url + "/mcp", {})).list_tools(time.monotonic() + 5, 10)
        assert failed.value.kind == "transport"
    finally:
        server.close()


def test_a_pinned_address_is_what_the_connection_reaches_and_the_name_goes_as_the_host() -> None:
    """A client's URL is reached at the address its check resolved (never resolved again: a name that answers
    otherwise by the time of the connection, DNS rebinding, reaches nothing new)."""
    server = LoopbackServer(initialized)
    try:
        port = urlsplit(server.url).port
        url = f"http://mcp.example.invalid:{port}/mcp"  # a name that resolves nowhere
        with pytest.raises(McpError) as answered:
            McpSession(StreamableHttp(url, {}, pin="127.0.0.1")).request("ping", {}, time.monotonic() + 5)
        assert answered.value.kind == "protocol", "the server answered: the pinned address was reached"
    finally:
        server.close()
    assert len(server.seen) == 3 and {seen.headers.get("host") for seen in server.seen} == {
        f"mcp.example.invalid:{port}"}
