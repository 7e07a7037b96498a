"""The client-run Responses tool types ``shell`` and ``apply_patch`` (issue 40): offered to the model, its calls
answered as ``shell_call`` / ``apply_patch_call`` items that openai-python's own types parse, their outputs
given back to the model in words, ``tool_choice`` of either type; a hosted tool dropped is visible, and a request
whose tools were all dropped is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from app.responses.schemas import parse_responses_request
from app.responses.tools import offered_tools
from app.settings import Settings
from support.fakes import FakeUpstream, text_chunks
from support.responses_calls import post, stream

SHELL = {"type": "shell", "environment": {"type": "local"}}
PATCH_TOOL = {"type": "apply_patch"}
V4A = "@@ def greet():\n-    print('hi')\n+    print('hello')\n"
SHELL_CALL = '<tool_call>{"name": "shell", "arguments": {"commands": ["ls -la", "git status"], "timeout_ms": 900}}' \
             '</tool_call>'
PATCH_CALL = '<tool_call>' + json.dumps({"name": "apply_patch", "arguments": {
    "type": "update_file", "path": "app/greet.py", "diff": V4A}}) + '</tool_call>'
EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


def offered(body: dict[str, Any]) -> Any:
    return offered_tools(parse_responses_request({"model": "m", "input": "x", **body}), Settings())


def test_both_are_offered_to_the_model_and_a_container_shell_is_not() -> None:
    tools = offered({"tools": [SHELL, PATCH_TOOL]})
    shell, patch = tools.specs
    assert (shell.name, shell.parameters["required"]) == ("shell", ["commands"])
    assert (patch.name, patch.parameters["properties"]["type"]["enum"]) == \
        ("apply_patch", ["create_file", "update_file", "delete_file"])
    assert "V4A" in patch.description
    assert [tools.origins[n].type for n in ("shell", "apply_patch")] == ["shell", "apply_patch"]
    assert offered({"tools": [{"type": "shell"}]}).specs[0].name == "shell"  # no environment: the client's
    hosted = offered({"tools": [{"type": "shell", "environment": {"type": "container_auto"}}, PATCH_TOOL]})
    assert [s.name for s in hosted.specs] == ["apply_patch"] and hosted.dropped == ["shell"]


@pytest.mark.parametrize("choice", [{"type": "shell"}, {"type": "apply_patch"},
                                    {"type": "allowed_tools", "mode": "required", "tools": [{"type": "shell"}]}])
def test_tool_choice_of_either_type_forces_it(choice: dict[str, Any]) -> None:
    tools = offered({"tools": [SHELL, PATCH_TOOL], "tool_choice": choice})
    kind = choice.get("tools", [choice])[0]["type"]
    assert (tools.choice.choice.mode, tools.choice.choice.allowed) == ("required", frozenset({kind}))


@pytest.mark.parametrize("streamed", [False, True])
def test_calls_become_items_openai_python_parses(make_app: Any, streamed: bool) -> None:
    client = make_app(FakeUpstream(text_chunks(SHELL_CALL + PATCH_CALL, size=11))).test_client()
    if streamed:
        summary = stream(client, tools=[SHELL, PATCH_TOOL])
        for event in summary.events:
            EVENTS.validate_python(event)
        body = summary.response
    else:
        body = post(client, tools=[SHELL, PATCH_TOOL]).get_json()
    shell, patch = Response.model_validate(body).output
    assert shell.type == "shell_call" and shell.action.commands == ["ls -la", "git status"]
    assert (shell.action.timeout_ms, shell.status) == (900, "completed") and shell.call_id.startswith("call_")
    assert patch.type == "apply_patch_call" and patch.status == "completed"
    assert (patch.operation.type, patch.operation.path, patch.operation.diff) == ("update_file", "app/greet.py", V4A)


def test_a_deletion_carries_no_diff(make_app: Any) -> None:
    call = '<tool_call>{"name": "apply_patch", "arguments": {"type": "delete_file", "path": "old.py"}}</tool_call>'
    client = make_app(FakeUpstream(text_chunks(call))).test_client()
    (patch,) = Response.model_validate(post(client, tools=[PATCH_TOOL]).get_json()).output
    assert patch.operation.model_dump() == {"type": "delete_file", "path": "old.py"}


def test_their_outputs_go_back_to_the_model_in_words(make_app: Any) -> None:
    upstream = FakeUpstream(text_chunks("Done."))
    client = make_app(upstream).test_client()
    answer = post(client, tools=[SHELL, PATCH_TOOL], input=[
        {"type": "message", "role": "user", "content": "tidy up"},
        {"type": "shell_call", "call_id": "call_1", "status": "completed",
         "action": {"commands": ["ls"], "timeout_ms": None, "max_output_length": None}},
        {"type": "shell_call_output", "call_id": "call_1", "output": [
            {"stdout": "greet.py\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
            {"stdout": "", "stderr": "slow", "outcome": {"type": "timeout"}}]},
        {"type": "apply_patch_call", "call_id": "call_2", "status": "completed",
         "operation": {"type": "create_file", "path": "new.py", "diff": "+x = 1\n"}},
        {"type": "apply_patch_call_output", "call_id": "call_2", "status": "failed", "output": "new.py exists"}])
    assert answer.status_code == 200, answer.get_json()
    transcript = json.dumps(upstream.bodies[-1]["messages"])
    assert "stdout:\\ngreet.py\\n\\nexit code 0" in transcript and "stderr:\\nslow\\ntimed out" in transcript
    assert "failed: new.py exists" in transcript
    assert "new.py" in transcript and "+x = 1" in transcript  # the call itself, as the model wrote it


def test_a_request_whose_tools_were_all_dropped_is_refused(make_app: Any, json_log: Any) -> None:
    client = make_app(FakeUpstream(text_chunks("never"))).test_client()
    refused = client.post("/v1/responses", buffered=True, json={"model": "m", "input": "hi", "tools": [
        {"type": "web_search"}, {"type": "shell", "environment": {"type": "container_auto"}}]})
    assert refused.status_code == 400
    error = refused.get_json()["error"]
    assert (error["param"], error["code"]) == ("tools", "unsupported_tool_type")
    assert "web_search, shell" in error["message"]
    access = [json.loads(line) for line in json_log.getvalue().splitlines()
              if json.loads(line)["logger"] == "toolwire.access"]
    assert access[-1]["dropped_tools"] == ["web_search", "shell"]
    assert post(client, tools=[{"type": "web_search"}], tool_choice="none").status_code == 200


def test_a_dropped_tool_beside_runnable_ones_is_named_on_the_access_line(make_app: Any, json_log: Any) -> None:
    client = make_app(FakeUpstream(text_chunks("ok"))).test_client()
    assert client.post("/v1/responses", buffered=True, json={"model": "m", "input": "hi", "tools": [
        SHELL, {"type": "file_search", "vector_store_ids": []}]}).status_code == 200
    access = [json.loads(line) for line in json_log.getvalue().splitlines()
              if json.loads(line)["logger"] == "toolwire.access"]
    assert access[-1]["dropped_tools"] == ["file_search"]
