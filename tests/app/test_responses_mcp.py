"""Responses ``mcp`` tools run by the gateway (issue 42), in process against a real MCP server (the ``mcp`` SDK's
``MCPServer`` over streamable HTTP and HTTP+SSE, its own process on 127.0.0.1) and a scripted text model: the
listing, the call run inside the response, the items and events as OpenAI sends them, approvals, allowed tools,
the listing reused on a continuation, the refusals of servers the request may not reach."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from support.fakes import Answers as Scripted
from support.mcp_server import mcp_server

USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}


def answers(*texts: str) -> Scripted:
    return Scripted(*texts, size=11, usage=USAGE)


def call(name: str, arguments: dict) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


@pytest.fixture(scope="module")
def server_url():
    with mcp_server() as url:
        yield url


@pytest.fixture(scope="module")
def sse_url():
    with mcp_server("sse") as url:
        yield url


def mcp_tool(url: str, **extra: Any) -> dict:
    return {"type": "mcp", "server_label": "calc", "server_url": url, "require_approval": "never", **extra}


def allowed(url: str) -> str:
    return url.rsplit("/", 1)[0] + "/*"


def post(app, body: dict) -> Any:
    return app.test_client().post("/v1/responses", json={"model": "m", "store": False, **body})


def events_of(response) -> list[dict]:
    return [json.loads(line[6:]) for line in response.get_data(as_text=True).splitlines()
            if line.startswith("data: {")]


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_a_call_runs_inside_the_response(make_app, request, transport) -> None:
    url = request.getfixturevalue("server_url" if transport == "streamable_http" else "sse_url")
    upstream = answers("Adding. " + call("mcp__calc__add", {"a": 2, "b": 3}), "The sum is 5.")
    app = make_app(upstream, mcp_allowed_urls=allowed(url))
    data = post(app, {"input": "What is 2+3?", "tools": [mcp_tool(url)]}).get_json()
    kinds = [item["type"] for item in data["output"]]
    assert kinds == ["mcp_list_tools", "message", "mcp_call", "message"], kinds
    listing, _, made, answer = data["output"]
    assert listing["server_label"] == "calc" and {"add", "echo", "sleep"} <= {t["name"] for t in listing["tools"]}
    add = next(t for t in listing["tools"] if t["name"] == "add")
    assert add["input_schema"]["required"] == ["a", "b"]
    assert made["name"] == "add" and made["server_label"] == "calc" and json.loads(made["arguments"]) == {
        "a": 2, "b": 3}
    assert made["output"] == "5" and made["error"] is None and made["status"] == "completed"
    assert made["id"].startswith("mcp_") and listing["id"].startswith("mcpl_")
    assert answer["content"][0]["text"] == "The sum is 5."
    assert data["usage"]["input_tokens"] == 200 and data["usage"]["output_tokens"] == 20, "both generations"
    taught = upstream.bodies[0]["messages"][0]["content"]
    assert "mcp__calc__add" in taught and "Add two numbers." in taught
    assert "5" in json.dumps(upstream.bodies[1]["messages"][-1])
    assert "headers" not in json.dumps(data["tools"])


def test_the_stream_carries_every_mcp_event_in_order(make_app, server_url) -> None:
    upstream = answers(call("mcp__calc__echo", {"text": "hi"}), "Done.")
    app = make_app(upstream, mcp_allowed_urls=allowed(server_url))
    events = events_of(post(app, {"input": "Echo hi", "stream": True, "tools": [mcp_tool(server_url)]}))
    kinds = [e["type"] for e in events]
    assert kinds[:7] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed",
                         "response.output_item.done", "response.output_item.added"]
    start = kinds.index("response.mcp_call_arguments.delta")
    assert kinds[start:start + 5] == ["response.mcp_call_arguments.delta", "response.mcp_call_arguments.done",
                                      "response.mcp_call.in_progress", "response.mcp_call.completed",
                                      "response.output_item.done"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    done = events[start + 4]["item"]
    assert done["type"] == "mcp_call" and done["output"] == "echo: hi"
    assert kinds[-1] == "response.completed"
    final = events[-1]["response"]["output"]
    assert [item["type"] for item in final] == ["mcp_list_tools", "mcp_call", "message"]


def test_a_tool_s_own_error_fails_its_call_and_the_model_hears_it(make_app, server_url) -> None:
    upstream = answers(call("mcp__calc__fail", {"reason": "no"}), "It failed.")
    app = make_app(upstream, mcp_allowed_urls=allowed(server_url))
    events = events_of(post(app, {"input": "x", "stream": True, "tools": [mcp_tool(server_url)]}))
    assert "response.mcp_call.failed" in [e["type"] for e in events]
    made = next(i for i in events[-1]["response"]["output"] if i["type"] == "mcp_call")
    assert made["status"] == "failed" and made["error"]["type"] == "mcp_tool_execution_error"
    assert "Error executing tool fail" in json.dumps(upstream.bodies[1]["messages"][-1])


def test_approval_always_asks_first_and_the_approval_runs_the_call(make_app, server_url) -> None:
    upstream = answers(call("mcp__calc__add", {"a": 1, "b": 2}), "The sum is 3.")
    app = make_app(upstream, mcp_allowed_urls=allowed(server_url))
    tools = [mcp_tool(server_url, require_approval="always")]
    first = post(app, {"input": "1+2?", "tools": tools, "store": True}).get_json()
    assert [i["type"] for i in first["output"]] == ["mcp_list_tools", "mcp_approval_request"]
    ask = first["output"][1]
    assert ask["name"] == "add" and ask["id"].startswith("mcpr_") and json.loads(ask["arguments"]) == {"a": 1, "b": 2}
    second = post(app, {"previous_response_id": first["id"], "tools": tools, "store": True, "input": [
        {"type": "mcp_approval_response", "approval_request_id": ask["id"], "approve": True}]}).get_json()
    assert [i["type"] for i in second["output"]] == ["mcp_call", "message"], "the listing was reused"
    assert second["output"][0]["approval_request_id"] == ask["id"] and second["output"][0]["output"] == "3"
    assert len(upstream.bodies) == 2
    sent = upstream.bodies[1]["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": ask["id"], "content": "3"} or "3" in json.dumps(sent[-2:])


def test_a_denied_call_is_not_run_and_the_model_is_told(make_app, server_url) -> None:
    upstream = answers(call("mcp__calc__add", {"a": 1, "b": 2}), "I may not.")
    app = make_app(upstream, mcp_allowed_urls=allowed(server_url))
    tools = [mcp_tool(server_url, require_approval="always")]
    first = post(app, {"input": "1+2?", "tools": tools}).get_json()
    ask = first["output"][1]
    # no store: the client sends the items back itself (as the Agents SDK does)
    second = post(app, {"tools": tools, "input": [{"role": "user", "content": "1+2?"}, *first["output"], {
        "type": "mcp_approval_response", "approval_request_id": ask["id"], "approve": False}]}).get_json()
    assert [i["type"] for i in second["output"]] == ["message"]
    assert "did not approve" in json.dumps(upstream.bodies[1]["messages"])


def test_per_tool_approval_and_allowed_tools(make_app, server_url) -> None:
    upstream = answers(call("mcp__calc__secret", {}) + call("mcp__calc__add", {"a": 1, "b": 1}), "ok")
    app = make_app(upstream, mcp_allowed_urls=allowed(server_url))
    tool = mcp_tool(server_url, allowed_tools=["secret", "add"],
                    require_approval={"never": {"read_only": True}})
    data = post(app, {"input": "x", "tools": [tool]}).get_json()
    taught = upstream.bodies[0]["messages"][0]["content"]
    assert "mcp__calc__secret" in taught and "mcp__calc__add" in taught and "mcp__calc__echo" not in taught
    kinds = [i["type"] for i in data["output"]]
    assert kinds == ["mcp_list_tools", "mcp_call", "mcp_approval_request"], kinds
    assert data["output"][1]["output"] == "the secret is 42"


@pytest.mark.parametrize(("url", "patterns"), [
    ("http://127.0.0.1:9/mcp", ""), ("http://127.0.0.1:9/mcp", "http://*"), ("http://169.254.169.254/mcp", "http://*"),
    ("http://localhost:9/mcp", "http://*"), ("file:///etc/passwd", "*"),
])
def test_a_client_server_url_not_allowed_is_a_400_naming_it(make_app, url, patterns) -> None:
    upstream = answers("never")
    app = make_app(upstream, mcp_allowed_urls=patterns)
    response = post(app, {"input": "x", "tools": [{"type": "function", "name": "f"}, mcp_tool(url)]})
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["param"] == "tools[1].server_url" and error["code"] == "mcp_server_url_refused"
    assert error["type"] == "invalid_request_error" and not upstream.bodies


def test_an_operator_server_by_label_with_its_headers_and_per_key_allow_list(make_app, server_url) -> None:
    upstream = answers(call("mcp__docs__whoami", {}), "ok")
    app = make_app(upstream, api_keys="sk-a,sk-b", mcp_servers={"docs": {
        "url": server_url, "headers": {"X-Team": "blue"}, "keys": ["sk-a"]}})
    tool = {"type": "mcp", "server_label": "docs", "require_approval": "never"}
    client = app.test_client()
    refused = client.post("/v1/responses", json={"model": "m", "input": "x", "tools": [tool]},
                          headers={"Authorization": "Bearer sk-b"})
    assert refused.status_code == 400 and refused.get_json()["error"]["param"] == "tools[0].server_label"
    data = client.post("/v1/responses", json={"model": "m", "input": "x", "tools": [tool], "store": False},
                       headers={"Authorization": "Bearer sk-a"}).get_json()
    assert "output" in data, data
    made = next(i for i in data["output"] if i["type"] == "mcp_call")
    assert made["output"] == "team blue", "the operator's headers reached the server"
    unknown = client.post("/v1/responses", json={"model": "m", "input": "x", "tools": [
        {"type": "mcp", "server_label": "nope"}]}, headers={"Authorization": "Bearer sk-a"})
    assert unknown.status_code == 400 and unknown.get_json()["error"]["param"] == "tools[0].server_label"


def test_a_hung_tool_costs_no_more_than_the_timeout(make_app, server_url) -> None:
    upstream = answers(call("mcp__calc__sleep", {"seconds": 30}), "It hung.")
    app = make_app(upstream, mcp_allowed_urls=allowed(server_url), gateway_timeout_seconds=1)
    began = time.monotonic()
    data = post(app, {"input": "x", "tools": [mcp_tool(server_url)]}).get_json()
    assert time.monotonic() - began < 6
    made = next(i for i in data["output"] if i["type"] == "mcp_call")
    assert made["status"] == "failed" and made["error"]["code"] == -32001
    assert data["output"][-1]["content"][0]["text"] == "It hung."


def test_a_server_that_does_not_answer_its_listing_fails_the_listing_only(make_app) -> None:
    upstream = answers("No tools today.")
    app = make_app(upstream, mcp_allowed_urls="http://127.0.0.1:9/*")
    data = post(app, {"input": "x", "tools": [mcp_tool("http://127.0.0.1:9/mcp")]}).get_json()
    listing = data["output"][0]
    assert listing["type"] == "mcp_list_tools" and listing["tools"] == [] and "could not be reached" in listing["error"]
    assert data["output"][1]["content"][0]["text"] == "No tools today."


def test_every_mcp_request_is_counted_and_on_the_access_line_and_headers_are_never_logged(
        make_app, server_url, json_log) -> None:
    from prometheus_client import REGISTRY

    def count(request: str, outcome: str) -> float:
        return REGISTRY.get_sample_value("toolwire_gateway_requests_total",
                                         {"kind": "mcp", "request": request, "outcome": outcome}) or 0.0

    listed, called = count("list_tools", "ok"), count("call", "ok")
    upstream = answers(call("mcp__calc__add", {"a": 1, "b": 2}), "ok")
    app = make_app(upstream, mcp_allowed_urls=allowed(server_url))
    tool = mcp_tool(server_url, headers={"X-Team": "sekrit-team-header"}, authorization="sekrit-token")
    data = app.test_client().post("/v1/responses", json={"model": "m", "input": "x", "tools": [tool]},
                                  headers={"X-Request-Id": "rid-mcp"}, buffered=True).get_json()
    assert next(i for i in data["output"] if i["type"] == "mcp_call")["output"] == "3"
    assert count("list_tools", "ok") == listed + 1 and count("call", "ok") == called + 1
    access = [json.loads(line) for line in json_log.getvalue().splitlines() if '"toolwire.access"' in line]
    assert [a["gateway"] for a in access if a["request_id"] == "rid-mcp"] == [["mcp.list_tools:ok", "mcp.call:ok"]]
    assert "sekrit" not in json_log.getvalue()
    stored = app.test_client().get(f"/v1/responses/{data['id']}").get_json()
    assert "sekrit" not in json.dumps(stored) and "sekrit" not in json.dumps(data)


def test_tool_choice_names_an_mcp_tool_or_allows_a_server(make_app, server_url) -> None:
    upstream = answers("I think it is 3.", call("mcp__calc__add", {"a": 1, "b": 2}), "It is 3.")
    app = make_app(upstream, mcp_allowed_urls=allowed(server_url))
    forced = {"type": "mcp", "server_label": "calc", "name": "add"}
    data = post(app, {"input": "1+2?", "tools": [mcp_tool(server_url)], "tool_choice": forced}).get_json()
    assert [i["type"] for i in data["output"]][-2:] == ["mcp_call", "message"] and len(upstream.bodies) == 3
    assert "You must call mcp__calc__add" in upstream.bodies[1]["messages"][-1]["content"], "the forced call re-asked"
    missing = post(app, {"input": "x", "tools": [mcp_tool(server_url)],
                         "tool_choice": {"type": "mcp", "server_label": "calc", "name": "nope"}})
    assert missing.status_code == 400 and missing.get_json()["error"]["param"] == "tool_choice"
    upstream = answers(call("mcp__calc__echo", {"text": "a"}), "ok")
    app = make_app(upstream, mcp_allowed_urls=allowed(server_url))
    only = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "mcp", "server_label": "calc"}]}
    data = post(app, {"input": "x", "tools": [mcp_tool(server_url)], "tool_choice": only}).get_json()
    assert next(i for i in data["output"] if i["type"] == "mcp_call")["output"] == "echo: a"


@pytest.mark.parametrize("spelling", ["{url}", "http://localhost:{port}/mcp", "http://127.1:{port}/mcp",
                                      "http://2130706433:{port}/mcp", "http://0x7f.0.0.1:{port}/mcp",
                                      "http://[::ffff:127.0.0.1]:{port}/mcp", "http://[::1]:{port}/mcp"])
def test_an_internal_service_is_never_reached_by_a_client_server_url(make_app, spelling) -> None:
    """The strict-schema ``$ref`` lesson (test_untrusted_tools): a client's URL on this host, however spelled, is
    refused before anything is sent to it, even with a pattern that opens every public server."""
    from support.loopback import internal_service
    internal = internal_service("SECRET-mcp-7f3a")
    try:
        url = spelling.format(url=internal.url + "/mcp", port=internal.url.rsplit(":", 1)[1])
        upstream = answers("never")
        app = make_app(upstream, mcp_allowed_urls="http://*, https://*")
        response = post(app, {"input": "x", "tools": [mcp_tool(url)]})
        assert response.status_code == 400, response.data
        assert response.get_json()["error"]["param"] == "tools[0].server_url"
        assert internal.seen == [] and upstream.bodies == []
    finally:
        internal.close()


def test_a_header_that_cannot_be_sent_is_a_400_naming_it(make_app, server_url) -> None:
    app = make_app(answers("never"), mcp_allowed_urls=allowed(server_url))
    for headers in ({"X-A": "one\r\nX-Injected: two"}, {"Bad Name": "x"}):
        response = post(app, {"input": "x", "tools": [mcp_tool(server_url, headers=headers)]})
        assert response.status_code == 400 and response.get_json()["error"]["param"].startswith("tools[0].headers")
