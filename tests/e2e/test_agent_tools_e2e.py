"""The agent tool catalogue end to end: openai SDK typed helpers → gunicorn/gevent toolwire → scripted upstream.

``client.responses.stream(...)`` / ``get_final_response()`` and ``responses.create`` must parse a
custom tool call, a namespaced function call, a tool search call and a local shell call into the
SDK's typed models; the follow-up turn echoes them back as agents do (``store: false``, full
history). The Chat custom tool goes through ``chat.completions.create``.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
from openai.types.responses import ResponseCustomToolCall, ResponseFunctionToolCall, ResponseToolSearchCall
from openai.types.responses.response_output_item import LocalShellCall

from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text

pytestmark = pytest.mark.e2e

MODEL = "scripted-model"
PATCH = "*** Begin Patch\n*** Update File: app.py\n@@\n-print('hi')\n+print(\"hello\")  # {not json}\n*** End Patch"
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files. FREEFORM, not JSON.",
               "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}}
AGENTS = {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.",
          "tools": [{"type": "function", "name": "spawn_agent", "description": "Start a sub-agent.",
                     "parameters": {"type": "object", "properties": {"task": {"type": "string"}},
                                    "required": ["task"]}, "strict": False}]}
TOOL_SEARCH = {"type": "tool_search", "execution": "client", "description": "Find deferred tools.",
               "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}
CODEX_TOOLS = [APPLY_PATCH, AGENTS, TOOL_SEARCH, {"type": "local_shell"},
               {"type": "web_search", "external_web_access": True}]


def custom_call_text(name: str, text: str) -> str:
    return f'<custom_tool_call name="{name}">\n{text}\n</custom_tool_call>'


def stream_final(client: openai.OpenAI, **kwargs: Any) -> tuple[Any, list[Any]]:
    with client.responses.stream(model=MODEL, **kwargs) as stream:
        events = list(stream)
        return stream.get_final_response(), events


def test_stream_helpers_parse_every_call_item_into_typed_models(upstream: ScriptedUpstream,
                                                                openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text="On it.\n" + custom_call_text("apply_patch", PATCH)
                            + tool_call_text("multi_agent_v1__spawn_agent", {"task": "review"})
                            + tool_call_text("tool_search", {"query": "calendar"})
                            + tool_call_text("local_shell", {"command": ["ls", "-la"]}), chunks=5,
                            delay_between_chunks=0.002))  # apart, so the patch arrives in several deltas
    final, events = stream_final(openai_client, input="fix app.py", tools=CODEX_TOOLS, store=False,
                                 reasoning={"effort": "medium"}, include=["reasoning.encrypted_content"],
                                 prompt_cache_key="thread-1", text={"verbosity": "low"})
    assert final.status == "completed"
    message, patch, spawn, search, shell = final.output
    assert message.type == "message" and final.output_text == "On it.\n"
    assert isinstance(patch, ResponseCustomToolCall) and (patch.name, patch.input) == ("apply_patch", PATCH)
    assert isinstance(spawn, ResponseFunctionToolCall)
    assert (spawn.name, spawn.namespace, spawn.arguments) == ("spawn_agent", "multi_agent_v1", '{"task": "review"}')
    assert isinstance(search, ResponseToolSearchCall)
    assert (search.execution, search.arguments, search.status) == ("client", {"query": "calendar"}, "completed")
    assert isinstance(shell, LocalShellCall) and shell.action.command == ["ls", "-la"]
    assert len({patch.call_id, spawn.call_id, search.call_id, shell.call_id}) == 4
    deltas = [e.delta for e in events if e.type == "response.custom_tool_call_input.delta"]
    assert len(deltas) > 2 and "".join(deltas) == PATCH
    (done,) = [e for e in events if e.type == "response.custom_tool_call_input.done"]
    assert done.input == PATCH and done.item_id == patch.id
    (exchange,) = upstream.chat_requests
    assert exchange.body["reasoning_effort"] == "medium" and exchange.body["prompt_cache_key"] == "thread-1"
    assert "web_search" not in exchange.body["messages"][0]["content"]


def test_follow_up_turn_echoes_every_item_back(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text=custom_call_text("apply_patch", PATCH)
                            + tool_call_text("tool_search", {"query": "agents"})),
                     Script(text=tool_call_text("multi_agent_v1__spawn_agent", {"task": "test it"}), chunks=3),
                     Script(text="Patched and delegated.", chunks=4))
    first = openai_client.responses.create(model=MODEL, input="fix app.py", tools=[APPLY_PATCH, TOOL_SEARCH],
                                           store=False)
    patch, search = first.output
    assert isinstance(patch, ResponseCustomToolCall) and isinstance(search, ResponseToolSearchCall)
    history: list[Any] = [{"role": "user", "content": "fix app.py"},
                          *(item.model_dump(exclude_none=True) for item in first.output),
                          {"type": "custom_tool_call_output", "call_id": patch.call_id, "output": "Success."},
                          {"type": "tool_search_output", "call_id": search.call_id, "execution": "client",
                           "status": "completed", "tools": [AGENTS]},
                          {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-secret"}]
    second, _ = stream_final(openai_client, input=history, tools=[APPLY_PATCH, TOOL_SEARCH], store=False)
    (spawn,) = second.output
    # the namespace the tool search loaded is callable now
    assert isinstance(spawn, ResponseFunctionToolCall) and (spawn.namespace, spawn.name) == ("multi_agent_v1",
                                                                                             "spawn_agent")
    history += [item.model_dump(exclude_none=True) for item in second.output]
    history.append({"type": "function_call_output", "call_id": spawn.call_id, "output": "agent started"})
    third = openai_client.responses.create(model=MODEL, input=history, tools=[APPLY_PATCH, TOOL_SEARCH], store=False)
    assert third.output_text == "Patched and delegated."
    transcript = "\n".join(m["content"] for m in upstream.chat_requests[-1].body["messages"])
    assert custom_call_text("apply_patch", PATCH) in transcript
    assert "Tools loaded (callable from now on): multi_agent_v1__spawn_agent." in transcript
    assert "agent started" in transcript and "gAAAA" not in transcript


def test_hosted_tool_choice_and_unknown_paths_are_clear_errors(openai_client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.responses.create(model=MODEL, input="x", tools=CODEX_TOOLS,
                                       tool_choice={"type": "web_search_preview"})
    assert info.value.body["param"] == "tool_choice"
    with pytest.raises(openai.NotFoundError) as missing:
        openai_client.post("/responses/resp_1/outputs", body={"model": MODEL, "input": []}, cast_to=object)
    assert missing.value.body["code"] == "not_supported"


def test_hosted_tools_fail_when_the_operator_says_so(toolwire_factory, make_openai_client) -> None:
    client = make_openai_client(toolwire_factory(TOOLWIRE_UNSUPPORTED_TOOLS="fail"))
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model=MODEL, input="x", tools=CODEX_TOOLS)
    assert (info.value.body["param"], info.value.body["code"]) == ("tools[4].type", "unsupported_tool_type")


def test_chat_custom_tool_call_parses_into_the_sdk_model(upstream: ScriptedUpstream,
                                                         openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text=custom_call_text("apply_patch", PATCH), chunks=6))
    tool = {"type": "custom", "custom": {"name": "apply_patch", "description": "Edit files.",
                                         "format": {"type": "text"}}}
    completion = openai_client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "fix app.py"}], tools=[tool])
    (call,) = completion.choices[0].message.tool_calls
    assert call.type == "custom" and (call.custom.name, call.custom.input) == ("apply_patch", PATCH)
    assert completion.choices[0].finish_reason == "tool_calls"


def test_chat_custom_tool_call_streams_input_fragments(upstream: ScriptedUpstream,
                                                       openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text=custom_call_text("apply_patch", PATCH), chunks=4, delay_between_chunks=0.002))
    tool = {"type": "custom", "custom": {"name": "apply_patch", "format": {"type": "text"}}}
    fragments = []
    with openai_client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "fix"}],
                                               tools=[tool], stream=True) as chunks:
        for chunk in chunks:
            for delta in chunk.choices[0].delta.tool_calls or () if chunk.choices else ():
                fragments.append(delta.model_dump(exclude_none=True))
            finish = chunk.choices[0].finish_reason if chunk.choices else None
    assert fragments[0]["type"] == "custom" and fragments[0]["custom"] == {"name": "apply_patch", "input": ""}
    assert len(fragments) > 3 and "".join(f["custom"]["input"] for f in fragments) == PATCH
    assert finish == "tool_calls"
