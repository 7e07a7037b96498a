"""The Responses tool and item catalogue real agents send (Codex CLI, OpenCode), through Flask's test client.

Request tools: namespace, custom (freeform), client tool_search, local_shell,
hosted tools (dropped or a 400); every input item type flattened for the text
model; the output items and events each call becomes; Chat custom tools.
"""

from __future__ import annotations

import json
import math
import re

import pytest
from prometheus_client import REGISTRY

from app.responses.schemas import parse_responses_request
from app.responses import tools as tools_module
from app.responses.tools import offered_tools
from app.settings import Settings
from support.tools import WEATHER
from support.fakes import FakeUpstream, text_chunks
from support.responses_calls import post, stream

PATCH = "*** Begin Patch\n*** Add File: a.txt\n+{\"not\": json}\n+<b>\n*** End Patch"
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files with a patch.",
               "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}}
NAMESPACE = {"type": "namespace", "name": "crm", "description": "Customer records.\nMore lines.",
             "tools": [{"type": "function", "name": "lookup", "description": "Find a customer.",
                        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}},
                       {"type": "custom", "name": "note", "description": "Free-text note."}]}
TOOL_SEARCH = {"type": "tool_search", "execution": "client", "description": "Find deferred tools.",
               "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                               "limit": {"type": "integer"}}}}
HOSTED = [{"type": "web_search", "external_web_access": True}, {"type": "file_search", "vector_store_ids": []},
          {"type": "image_generation"}, {"type": "brand_new_hosted_tool"}]  # (mcp is the gateway's: test_responses_mcp)


def offered(body, **settings):
    return offered_tools(parse_responses_request({"model": "m", "input": "x", **body}), Settings(**settings))


def custom_call_text(name, text):
    return f'<custom_tool_call name="{name}">\n{text}\n</custom_tool_call>'


# -- which tools the model is offered ------------------------------------------------------------

def test_namespace_tools_are_offered_by_qualified_name_and_keep_their_namespace():
    tools = offered({"tools": [WEATHER, NAMESPACE]})
    assert [s.name for s in tools.specs] == ["get_weather", "crm__lookup", "crm__note"]
    lookup, note = tools.specs[1:]
    assert lookup.kind == "function" and lookup.parameters == NAMESPACE["tools"][0]["parameters"]
    assert lookup.description == "Find a customer.\n(In namespace `crm`: Customer records.)"
    assert note.kind == "custom"
    assert (tools.origins["crm__lookup"].name, tools.origins["crm__lookup"].namespace) == ("lookup", "crm")


def test_custom_client_tool_search_and_local_shell_are_offered():
    tools = offered({"tools": [APPLY_PATCH, TOOL_SEARCH, {"type": "local_shell"}]})
    patch, search, shell = tools.specs
    assert (patch.name, patch.kind, patch.input_format) == ("apply_patch", "custom", APPLY_PATCH["format"])
    assert (search.name, search.parameters, search.description) == ("tool_search", TOOL_SEARCH["parameters"],
                                                                    "Find deferred tools.")
    assert shell.name == "local_shell" and shell.parameters["required"] == ["command"]
    assert [tools.origins[n].type for n in ("apply_patch", "tool_search", "local_shell")] == \
        ["custom", "tool_search", "local_shell"]


def test_hosted_tools_are_dropped_counted_and_logged_once(caplog, monkeypatch):
    monkeypatch.setattr(tools_module._DROPPED, "warned", set())  # a fresh worker
    before = REGISTRY.get_sample_value("toolwire_dropped_tools_total", {"type": "web_search"}) or 0
    other = REGISTRY.get_sample_value("toolwire_dropped_tools_total", {"type": "other"}) or 0
    with caplog.at_level("DEBUG", logger="toolwire.responses.tools"):
        tools = offered({"tools": [*HOSTED, {"type": "tool_search"}, WEATHER]})
        offered({"tools": [HOSTED[0], {"type": "another_new_one"}, WEATHER]})
    assert [s.name for s in tools.specs] == ["get_weather"]
    assert tools.dropped == ["web_search", "file_search", "image_generation", "brand_new_hosted_tool",
                             "tool_search"]
    assert REGISTRY.get_sample_value("toolwire_dropped_tools_total", {"type": "web_search"}) == before + 2
    # a client-invented type cannot grow the label set
    assert REGISTRY.get_sample_value("toolwire_dropped_tools_total", {"type": "other"}) == other + 2
    records = [r for r in caplog.records if r.name == "toolwire.responses.tools"]
    debug = [r.getMessage() for r in records if r.levelname == "DEBUG"]
    assert len(debug) == 2 and "web_search, file_search, image_generation" in debug[0]  # each request, at debug
    warned = [r.getMessage() for r in records if r.levelname == "WARNING"]  # each type once per worker
    assert [w.split("'")[1] for w in warned] == ["web_search", "file_search", "image_generation", "other",
                                                        "tool_search"]


@pytest.mark.parametrize("index", range(len(HOSTED)))
def test_fail_setting_makes_a_hosted_tool_a_400_naming_it(index):
    from app.responses.schemas import InputError
    with pytest.raises(InputError) as info:
        offered({"tools": [WEATHER, HOSTED[index]]}, unsupported_tools="fail")
    assert (info.value.param, info.value.code) == ("tools[1].type", "unsupported_tool_type")
    assert repr(HOSTED[index]["type"]) in info.value.message


@pytest.mark.parametrize(("choice", "allowed", "mode"), [
    ({"type": "function", "name": "lookup"}, {"crm__lookup"}, "required"),
    ({"type": "function", "name": "crm__lookup"}, {"crm__lookup"}, "required"),
    ({"type": "custom", "name": "apply_patch"}, {"apply_patch"}, "required"),
    ({"type": "tool_search"}, {"tool_search"}, "required"),
    ({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "custom", "name": "note"},
                                                         {"type": "web_search"}]}, {"crm__note"}, "auto"),
])
def test_tool_choice_names_namespaced_custom_and_built_in_tools(choice, allowed, mode):
    tools = offered({"tools": [NAMESPACE, APPLY_PATCH, TOOL_SEARCH, *HOSTED], "tool_choice": choice})
    assert (tools.choice.choice.mode, tools.choice.choice.allowed) == (mode, frozenset(allowed))


@pytest.mark.parametrize(("choice", "param"), [
    ({"type": "web_search_preview"}, "tool_choice"),
    ({"type": "file_search"}, "tool_choice"),
    ({"type": "function", "name": "apply_patch"}, "tool_choice.name"),  # a custom tool, not a function
    ({"type": "allowed_tools", "mode": "required", "tools": [{"type": "web_search"}]}, "tool_choice.tools"),
])
def test_tool_choice_forcing_a_tool_that_is_not_offered_is_a_400(make_app, choice, param):
    client = make_app(FakeUpstream(text_chunks("never"))).test_client()
    response = post(client, tools=[APPLY_PATCH, *HOSTED], tool_choice=choice)
    assert response.status_code == 400 and response.get_json()["error"]["param"] == param


def test_tools_a_tool_search_loaded_are_offered():
    tools = offered({"tools": [TOOL_SEARCH], "input": [
        {"type": "tool_search_call", "call_id": "ts_1", "execution": "client", "arguments": {"query": "crm"}},
        {"type": "tool_search_output", "call_id": "ts_1", "execution": "client", "tools": [NAMESPACE, {"bad": 1}]},
    ]})
    assert [s.name for s in tools.specs] == ["tool_search", "crm__lookup", "crm__note"]


# -- what each call becomes ----------------------------------------------------------------------

def test_custom_tool_call_streams_input_events_verbatim(make_app):
    text = "Patching.\n" + custom_call_text("apply_patch", PATCH)
    client = make_app(FakeUpstream(text_chunks(text, size=3))).test_client()
    summary = stream(client, tools=[APPLY_PATCH])
    message, call = summary.response["output"]
    assert message["content"][0]["text"] == "Patching.\n"
    assert call["type"] == "custom_tool_call" and call["id"].startswith("ctc_")
    assert (call["name"], call["input"], call["status"]) == ("apply_patch", PATCH, "completed")
    kinds = [e["type"] for e in summary.events]
    assert "response.custom_tool_call_input.delta" in kinds and "response.function_call_arguments.delta" not in kinds
    deltas = [e["delta"] for e in summary.events if e["type"] == "response.custom_tool_call_input.delta"]
    assert len(deltas) > 3 and "".join(deltas) == PATCH
    (done,) = [e for e in summary.events if e["type"] == "response.custom_tool_call_input.done"]
    assert (done["input"], done["item_id"], done["output_index"]) == (PATCH, call["id"], 1)


def test_custom_tool_call_non_streaming(make_app):
    client = make_app(FakeUpstream(text_chunks(custom_call_text("apply_patch", PATCH)))).test_client()
    (call,) = post(client, tools=[APPLY_PATCH]).get_json()["output"]
    assert (call["type"], call["name"], call["input"]) == ("custom_tool_call", "apply_patch", PATCH)


def test_a_custom_call_s_input_counts_towards_the_estimated_output_tokens(make_app):
    """With no usage from the back end, the estimate (four characters a token) counts a custom call's raw input as
    it counts a function call's arguments: its name and every character of its input."""
    client = make_app(FakeUpstream(text_chunks(custom_call_text("apply_patch", PATCH)))).test_client()
    usage = post(client, tools=[APPLY_PATCH]).get_json()["usage"]
    assert usage["output_tokens"] == math.ceil((len("apply_patch") + len(PATCH)) / 4)


def test_namespaced_calls_carry_the_namespace(make_app):
    text = ('<tool_call>{"name": "crm__lookup", "arguments": {"id": "7"}}</tool_call>'
            + custom_call_text("crm__note", "call back"))
    client = make_app(FakeUpstream(text_chunks(text, size=7))).test_client()
    lookup, note = stream(client, tools=[NAMESPACE]).response["output"]
    assert (lookup["type"], lookup["name"], lookup["namespace"], lookup["arguments"]) == \
        ("function_call", "lookup", "crm", '{"id": "7"}')
    assert (note["type"], note["name"], note["namespace"], note["input"]) == ("custom_tool_call", "note", "crm",
                                                                              "call back")


def test_tool_search_and_local_shell_calls_become_their_items(make_app):
    text = ('<tool_call>{"name": "tool_search", "arguments": {"query": "calendar", "limit": 2}}</tool_call>'
            '<tool_call>{"name": "local_shell", "arguments": {"command": ["ls", "-la"], "timeout_ms": 500}}'
            '</tool_call>')
    client = make_app(FakeUpstream(text_chunks(text, size=9))).test_client()
    summary = stream(client, tools=[TOOL_SEARCH, {"type": "local_shell"}])
    search, shell = summary.response["output"]
    assert search["type"] == "tool_search_call" and search["id"].startswith("tsc_")
    assert (search["execution"], search["arguments"], search["status"]) == ("client", {"query": "calendar",
                                                                                       "limit": 2}, "completed")
    assert shell["type"] == "local_shell_call" and shell["call_id"].startswith("call_")
    assert shell["action"] == {"type": "exec", "command": ["ls", "-la"], "env": {}, "timeout_ms": 500}
    added = [e["item"] for e in summary.events if e["type"] == "response.output_item.added"]
    assert added[0]["arguments"] == {} and added[1]["action"]["command"] == []


def test_response_echoes_every_request_tool(make_app):
    client = make_app(FakeUpstream(text_chunks("ok"))).test_client()
    body = post(client, tools=[WEATHER, NAMESPACE, APPLY_PATCH, HOSTED[0]]).get_json()
    assert [t["type"] for t in body["tools"]] == ["function", "namespace", "custom", "web_search"]
    assert body["tools"][1]["tools"][1]["name"] == "note"


# -- what the model is told ----------------------------------------------------------------------

def test_prompt_teaches_custom_tools_with_their_grammar_and_the_custom_format(make_app):
    upstream = FakeUpstream(text_chunks("ok"))
    post(make_app(upstream).test_client(), tools=[WEATHER, APPLY_PATCH, NAMESPACE, *HOSTED])
    system = upstream.bodies[0]["messages"][0]["content"]
    manifest = system.split("## Manifest\n")[1].split("\n## ")[0]
    assert [line for line in manifest.splitlines() if line.startswith(("### ", "Parameters", "Input"))][2:] == [
        "### apply_patch", "Input: text in the lark grammar below, written raw (not JSON) in a custom tool call block.",
        "### crm__lookup", 'Parameters: {"type":"object","properties":{"id":{"type":"string"}}}',
        "### crm__note", "Input: free text, written raw (not JSON) in a custom tool call block."]
    assert "Grammar (lark):\nstart: begin_patch hunk+ end_patch" in system
    how_to = system.split("## How to call\n")[1]
    assert "reply with only a JSON list" in how_to and '<custom_tool_call name="apply_patch">' in how_to
    assert "web_search" not in system and "mcp" not in system


def test_only_custom_tools_get_only_the_custom_instructions(make_app):
    upstream = FakeUpstream(text_chunks("ok"))
    post(make_app(upstream).test_client(), tools=[APPLY_PATCH])
    how_to = upstream.bodies[0]["messages"][0]["content"].split("## How to call\n")[1]
    assert "<tool_call>" not in how_to and "<custom_tool_call" in how_to


# -- every input item flattened ------------------------------------------------------------------

CODEX_HISTORY = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "SECRET PLAN"}],
     "encrypted_content": "gAAAA-opaque"},
    {"type": "function_call", "id": "fc_1", "status": "completed", "call_id": "c1", "name": "lookup",
     "namespace": "crm", "arguments": '{"id": "7"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "Ann"},
    {"type": "custom_tool_call", "id": "ctc_1", "status": "completed", "call_id": "c2", "name": "apply_patch",
     "input": PATCH},
    {"type": "custom_tool_call_output", "call_id": "c2", "output": "Success."},
    {"type": "tool_search_call", "id": "tsc_1", "call_id": "c3", "execution": "client", "status": "completed",
     "arguments": {"query": "crm"}},
    {"type": "tool_search_output", "call_id": "c3", "execution": "client", "status": "completed",
     "tools": [NAMESPACE]},
    {"type": "local_shell_call", "id": "lsc_1", "call_id": "c4", "status": "completed",
     "action": {"type": "exec", "command": ["ls"], "env": {}}},
    {"type": "local_shell_call_output", "id": "c4", "output": "a.txt"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}},
    {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "deepwiki", "tools": []},
    {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-compacted"},
    {"type": "hologram_call_v9", "id": "h_1", "status": "completed", "payload": "x" * 5000},
    {"type": "message", "role": "user", "content": "and now?"},
]


def test_every_item_type_is_flattened_for_the_model(make_app):
    upstream = FakeUpstream(text_chunks("ok"))
    tools = [NAMESPACE, APPLY_PATCH, TOOL_SEARCH, {"type": "local_shell"}]
    response = post(make_app(upstream).test_client(), tools=tools, input=CODEX_HISTORY, store=False)
    assert response.status_code == 200, response.data
    transcript = "\n".join(m["content"] for m in upstream.bodies[0]["messages"][1:])
    assert "SECRET PLAN" not in transcript and "gAAAA" not in transcript  # reasoning and compaction: not shown
    assert '<tool_call>{"name": "crm__lookup", "arguments": {"id": "7"}}</tool_call>' in transcript
    assert "Tool result for crm__lookup (call_id c1):\nAnn" in transcript
    assert custom_call_text("apply_patch", PATCH) in transcript
    assert "Tool result for apply_patch (call_id c2):\nSuccess." in transcript
    assert '<tool_call>{"name": "tool_search", "arguments": {"query":"crm"}}</tool_call>' in transcript
    assert "Tools loaded (callable from now on): crm__lookup, crm__note." in transcript
    assert '<tool_call>{"name": "local_shell", "arguments": {"command":["ls"],"env":{}}}</tool_call>' in transcript
    assert "Tool result for local_shell (call_id c4):\na.txt" in transcript
    assert '[web_search_call ws_1: action={"type":"search","query":"x"}, status=completed]' in transcript
    assert "[mcp_list_tools mcpl_1: server_label=deepwiki]" in transcript
    note = next(line for line in transcript.splitlines() if line.startswith("[hologram_call_v9"))
    assert len(note) <= 240 and note == "[hologram_call_v9 h_1: status=completed]"
    assert transcript.endswith("and now?")


def test_a_custom_tool_output_without_its_call_is_a_400(make_app):
    client = make_app(FakeUpstream(text_chunks("never"))).test_client()
    response = post(client, input=[{"type": "custom_tool_call_output", "call_id": "nope", "output": "x"}])
    assert response.status_code == 400 and response.get_json()["error"]["param"] == "input[0].call_id"


def test_stored_custom_tool_call_is_found_by_item_reference(make_app):
    upstream = FakeUpstream(text_chunks(custom_call_text("apply_patch", PATCH)))
    client = make_app(upstream).test_client()
    (call,) = post(client, tools=[APPLY_PATCH]).get_json()["output"]
    upstream.script = text_chunks("done")
    follow_up = [{"type": "item_reference", "id": call["id"]},
                 {"type": "custom_tool_call_output", "call_id": call["call_id"], "output": "Applied."}]
    assert post(client, tools=[APPLY_PATCH], input=follow_up).status_code == 200
    transcript = "\n".join(m["content"] for m in upstream.bodies[1]["messages"])
    assert custom_call_text("apply_patch", PATCH) in transcript and "Applied." in transcript


# -- around it -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("method", "path"), [("POST", "/v1/responses/resp_1"), ("GET", "/v1/responses/resp_1/outputs"),
                                              ("POST", "/v1/conversations/conv_1/items/msg_1/x")])
def test_unknown_responses_sub_paths_are_404_not_supported(make_app, method, path):
    response = make_app(FakeUpstream()).test_client().open(path, method=method, json={"model": "m"})
    assert response.status_code == 404
    error = response.get_json()["error"]
    assert error["code"] == "not_supported" and path in error["message"]


def test_agent_request_fields_are_accepted_and_chat_ones_passed_on(make_app):
    upstream = FakeUpstream(text_chunks("ok"))
    body = {"reasoning": {"effort": "medium", "summary": "auto"}, "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "thread-1", "client_metadata": {"thread_id": "t"}, "text": {"verbosity": "low"},
            "store": False, "service_tier": "auto", "safety_identifier": "u-1", "truncation": "auto",
            "stream_options": {"include_obfuscation": False}, "parallel_tool_calls": True}
    response = post(make_app(upstream).test_client(), **body)
    assert response.status_code == 200, response.data
    sent = upstream.bodies[0]
    assert {k: sent.get(k) for k in ("reasoning_effort", "verbosity", "prompt_cache_key", "service_tier",
                                     "safety_identifier")} == \
        {"reasoning_effort": "medium", "verbosity": "low", "prompt_cache_key": "thread-1", "service_tier": "auto",
         "safety_identifier": "u-1"}
    assert not {"include", "client_metadata", "truncation", "reasoning", "text"} & set(sent)


# -- Chat Completions custom tools ---------------------------------------------------------------

CHAT_CUSTOM = {"type": "custom", "custom": {"name": "apply_patch", "description": "Edit files.",
                                            "format": {"type": "grammar", "grammar": {"syntax": "regex",
                                                                                      "definition": r"(?s)\*\*\*.*"}}}}


def test_chat_custom_tool_streams_and_round_trips(make_app):
    upstream = FakeUpstream(text_chunks(custom_call_text("apply_patch", PATCH), size=4))
    client = make_app(upstream).test_client()
    body = {"model": "m", "messages": [{"role": "user", "content": "patch"}], "tools": [CHAT_CUSTOM], "stream": True}
    response = client.post("/v1/chat/completions", json=body)
    assert "Grammar (regex):" in upstream.bodies[0]["messages"][0]["content"]
    chunks = [json.loads(line[6:]) for line in response.get_data(as_text=True).splitlines()
              if line.startswith("data: {")]
    calls = [c for ch in chunks for c in ch["choices"][0]["delta"].get("tool_calls", [])] if chunks else []
    assert calls[0]["type"] == "custom" and calls[0]["custom"] == {"name": "apply_patch", "input": ""}
    assert "".join(c["custom"]["input"] for c in calls[1:]) == PATCH
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    upstream.script = text_chunks(custom_call_text("apply_patch", PATCH))
    plain = client.post("/v1/chat/completions", json={**body, "stream": False}).get_json()
    (call,) = plain["choices"][0]["message"]["tool_calls"]
    assert call["type"] == "custom" and call["custom"] == {"name": "apply_patch", "input": PATCH}
    # the call and its result go back to the model as the block it wrote and a labelled result
    upstream.script = text_chunks("done")
    history = [*body["messages"], {"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": call["id"], "content": "Applied."}]
    assert client.post("/v1/chat/completions", json={**body, "messages": history}).status_code == 200
    transcript = "\n".join(m["content"] for m in upstream.bodies[2]["messages"])
    assert custom_call_text("apply_patch", PATCH) in transcript
    assert f"Tool result for apply_patch (call_id {call['id']}):\nApplied." in transcript


def test_chat_custom_tool_choice_forces_it(make_app):
    upstream = FakeUpstream(text_chunks("ok"))
    body = {"model": "m", "messages": [{"role": "user", "content": "patch"}], "tools": [CHAT_CUSTOM],
            "tool_choice": {"type": "custom", "custom": {"name": "apply_patch"}}}
    assert make_app(upstream).test_client().post("/v1/chat/completions", json=body).status_code == 200
    assert "You must call `apply_patch`" in upstream.bodies[0]["messages"][0]["content"]


def test_marker_mode_marks_custom_calls_too(make_app):
    class MarkedPatch(FakeUpstream):
        def open(self, body, *, request_id=None):
            system = body["messages"][0]["content"]
            marker = re.search(r'<custom_tool_call marker="([A-Za-z0-9_-]+)" name="apply_patch">', system).group(1)
            self.script = text_chunks(custom_call_text("apply_patch", "unmarked: text")
                                      + f'<custom_tool_call marker="{marker}" name="apply_patch">\n{PATCH}\n'
                                        "</custom_tool_call>", size=6)
            return super().open(body, request_id=request_id)

    body = post(make_app(MarkedPatch(), marker_mode=True).test_client(), tools=[APPLY_PATCH]).get_json()
    message, call = body["output"]
    assert custom_call_text("apply_patch", "unmarked: text") in message["content"][0]["text"]
    assert (call["type"], call["input"]) == ("custom_tool_call", PATCH)


@pytest.mark.parametrize(("tools", "param"), [
    ([{**APPLY_PATCH, "format": {"type": "grammar", "syntax": "lark", "definition": "x" * 2000}}], "tools[0].format"),
    ([WEATHER, {**NAMESPACE, "tools": [{"type": "function", "name": "big", "parameters": {"description": "y" * 2000}}]}],
     "tools[1].tools[0].parameters"),
    ([{**NAMESPACE, "tools": [{"type": "function", "name": f"f{i}"} for i in range(5)]}], "tools[0].tools"),
])
def test_limits_reach_grammars_and_namespaced_tools(make_app, tools, param):
    client = make_app(FakeUpstream(text_chunks("never")), max_tool_schema_bytes=1000, max_tools=4).test_client()
    response = post(client, tools=tools)
    assert response.status_code == 400 and response.get_json()["error"]["param"] == param


@pytest.mark.parametrize(("policy", "status", "terminal"), [
    ("emit", "completed", "response.completed"),  # sent as written (a note says it does not match)
    ("text", "incomplete", "response.completed"),  # its header was out already: it ends invalid
    ("fail", "incomplete", "response.failed"),
])
def test_a_regex_grammar_is_checked_like_a_schema(make_app, policy, status, terminal):
    tool = {"type": "custom", "name": "set_version", "format": {"type": "grammar", "syntax": "regex",
                                                               "definition": r"\d+\.\d+\.\d+"}}
    text = custom_call_text("set_version", "1.2.3") + custom_call_text("set_version", "one point two")
    client = make_app(FakeUpstream(text_chunks(text, size=5)), schema_mismatch=policy).test_client()
    summary = stream(client, tools=[tool])
    good, bad = summary.response["output"]
    assert (good["input"], good["status"]) == ("1.2.3", "completed")
    assert (bad["type"], bad["input"], bad["status"]) == ("custom_tool_call", "one point two", status)
    assert summary.events[-1]["type"] == terminal
