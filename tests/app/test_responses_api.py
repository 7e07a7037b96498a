"""POST/GET/DELETE /v1/responses through Flask's test client on a scripted upstream."""

from __future__ import annotations

import dataclasses

import pytest

from app.observability.metrics import STORE_WRITE_FAILURES
from app.store import SQLiteResponseStore, StoreUnavailable
from app.upstreams.base import UpstreamChunk, UpstreamError
from support.fakes import EchoUpstream, FakeUpstream, assert_envelope, text_chunks
from support.responses_calls import post, stream
from support.injection import QUOTED
from support.tools import STRICT_WEATHER, WEATHER

CALL_TEXT = 'Let me check.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


# -- one turn ---------------------------------------------------------------------------------


def test_text_answer_non_streaming(make_app):
    client = make_app(FakeUpstream(text_chunks("Sunny in Paris.", usage=USAGE))).test_client()
    body = post(client, instructions="Be brief.", metadata={"k": "v"}).get_json()
    assert body["object"] == "response" and body["id"].startswith("resp_")
    assert body["status"] == "completed" and body["error"] is None
    (message,) = body["output"]
    assert message["type"] == "message" and message["id"].startswith("msg_")
    assert message["content"][0]["text"] == "Sunny in Paris."
    assert body["usage"]["input_tokens"] == 11 and body["usage"]["output_tokens"] == 7
    assert body["instructions"] == "Be brief." and body["metadata"] == {"k": "v"}


def test_call_streams_as_a_function_call_item(make_app):
    client = make_app(FakeUpstream(text_chunks(CALL_TEXT, size=4, usage=USAGE))).test_client()
    summary = stream(client, tools=[WEATHER])
    message, call = summary.items
    assert message["content"][0]["text"] == "Let me check."
    assert call["type"] == "function_call" and call["name"] == "get_weather"
    assert call["call_id"].startswith("call_") and call["id"].startswith("fc_")
    assert call["arguments"] == '{"city": "Paris"}' and call["status"] == "completed"
    deltas = [e["delta"] for e in summary.events if e["type"] == "response.function_call_arguments.delta"]
    assert len(deltas) > 1 and "".join(deltas) == call["arguments"]
    assert summary.response["status"] == "completed"
    assert summary.response["output"] == summary.items


def test_stream_and_non_stream_agree(make_app):
    upstream = FakeUpstream(text_chunks(CALL_TEXT, size=3, usage=USAGE))
    client = make_app(upstream).test_client()
    streamed = stream(client, tools=[WEATHER]).response
    whole = post(client, tools=[WEATHER]).get_json()

    def shape(response):
        return [{k: v for k, v in item.items() if k not in ("id", "call_id")} for item in response["output"]]

    assert shape(streamed) == shape(whole)
    assert streamed["usage"] == whole["usage"] and streamed["status"] == whole["status"]


def test_upstream_request_carries_the_translated_parameters(make_app):
    upstream = FakeUpstream(text_chunks("ok"))
    client = make_app(upstream).test_client()
    post(client, instructions="Be brief.", tools=[WEATHER], max_output_tokens=50, temperature=0.2, top_p=0.9,
         user="u-1", metadata={"k": "v"}, store=False)
    (sent,) = upstream.bodies
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True} and sent["max_tokens"] == 50
    assert (sent["temperature"], sent["top_p"], sent["user"]) == (0.2, 0.9, "u-1")
    for key in ("tools", "tool_choice", "input", "instructions", "metadata", "store", "max_output_tokens"):
        assert key not in sent
    system = sent["messages"][0]
    assert system["role"] == "system" and "Be brief." in system["content"] and "get_weather" in system["content"]
    assert sent["messages"][-1] == {"role": "user", "content": "Weather in Paris?"}


def test_length_ends_incomplete(make_app):
    client = make_app(FakeUpstream(text_chunks("Sunny in", finish="length"))).test_client()
    summary = stream(client)
    assert summary.response["status"] == "incomplete"
    assert summary.response["incomplete_details"] == {"reason": "max_output_tokens"}


def test_max_tool_calls_caps_the_calls(make_app):
    two = CALL_TEXT + CALL_TEXT.replace("Paris", "Rome").replace("Let me check.", "")
    client = make_app(FakeUpstream(text_chunks(two, size=8))).test_client()
    calls = [i for i in post(client, tools=[WEATHER], max_tool_calls=1).get_json()["output"]
             if i["type"] == "function_call"]
    assert [c["arguments"] for c in calls] == ['{"city": "Paris"}']


# -- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize("body, param", [
    ({"model": "m", "messages": []}, "messages"),
    ({"input": "hi"}, "model"),
    ({"model": "m", "input": 3}, "input"),
    ({"model": "m", "input": "hi", "tools": [{"type": "web_search"}], "tool_choice": {"type": "web_search"}},
     "tool_choice"),
    ({"model": "m", "input": "hi", "tools": [WEATHER], "tool_choice": {"type": "function", "name": "x"}},
     "tool_choice.name"),
    ({"model": "m", "input": [{"type": "function_call_output", "call_id": "call_nope", "output": "1"}]},
     "input[0].call_id"),
])
def test_bad_requests_are_400_before_the_upstream(make_app, body, param):
    upstream = FakeUpstream(text_chunks("never"))
    client = make_app(upstream).test_client()
    assert_envelope(client.post("/v1/responses", json=body), 400, param)
    assert upstream.bodies == []


@pytest.mark.parametrize("body, param", [
    ({"model": "m", "input": "hi", "previous_response_id": "resp_unknown"}, "previous_response_id"),
    ({"model": "m", "input": [{"type": "item_reference", "id": "msg_unknown"}]}, "input[0].id"),
])
def test_unknown_stored_responses_and_items_are_404_before_the_upstream(make_app, body, param):
    upstream = FakeUpstream(text_chunks("never"))
    client = make_app(upstream).test_client()
    assert_envelope(client.post("/v1/responses", json=body), 404, param)
    assert upstream.bodies == []


def test_upstream_refusal_is_an_http_error(make_app):
    upstream = FakeUpstream(open_error=UpstreamError("rate_limited", "slow down", status=429, retry_after="3"))
    response = post(make_app(upstream).test_client(), stream=True)
    assert_envelope(response, 429, None)
    assert response.headers["Retry-After"] == "3"


def test_upstream_failure_mid_stream_is_response_failed(make_app):
    script = [*text_chunks("Partial ans", finish=None), UpstreamError("protocol", "upstream closed the stream")]
    summary = stream(make_app(FakeUpstream(script)).test_client())
    assert summary.response["status"] == "failed"
    assert summary.response["error"]["code"] == "server_error"
    (message,) = summary.items
    assert message["status"] == "incomplete" and message["content"][0]["text"] == "Partial ans"


def test_strict_mismatch_mid_stream_is_response_failed(make_app):
    bad = 'On it.<tool_call>{"name": "get_weather", "arguments": {"town": "Paris"}}</tool_call>'
    summary = stream(make_app(FakeUpstream(text_chunks(bad, size=5))).test_client(), tools=[STRICT_WEATHER])
    assert summary.response["status"] == "failed"
    assert summary.events[-1]["type"] == "response.failed"
    assert not [i for i in summary.items if i["type"] == "function_call" and i["status"] == "completed"]


def test_strict_mismatch_non_streaming_is_an_error_envelope(make_app):
    bad = '<tool_call>{"name": "get_weather", "arguments": {"town": "Paris"}}</tool_call>'
    response = post(make_app(FakeUpstream(text_chunks(bad))).test_client(), tools=[STRICT_WEATHER])
    assert response.status_code >= 400
    assert set(response.get_json()["error"]) == {"message", "type", "param", "code"}


# -- stored responses -------------------------------------------------------------------------


def test_previous_response_id_replays_the_earlier_turn(make_app):
    upstream = FakeUpstream(text_chunks(CALL_TEXT))
    client = make_app(upstream).test_client()
    first = post(client, tools=[WEATHER], instructions="Only the first turn.").get_json()
    call = first["output"][-1]

    upstream.script = text_chunks("18 °C in Paris.")
    second = post(client, tools=[WEATHER], previous_response_id=first["id"],
                  input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "18 °C"}])
    assert second.status_code == 200, second.data
    assert second.get_json()["previous_response_id"] == first["id"]
    messages = upstream.bodies[-1]["messages"]
    text = "\n".join(m["content"] for m in messages)
    assert "Only the first turn." not in text  # instructions do not carry over
    assert "Weather in Paris?" in text and "<tool_call>" in text and "18 °C" in text
    assert [m["role"] for m in messages][-3:] == ["user", "assistant", "user"]


@pytest.mark.parametrize("limits", [{"max_messages": 5}, {"max_body_bytes": 3000}])
def test_a_previous_response_chain_past_the_request_limits_is_refused(make_app, limits):
    """A short request naming a long chain (a 145-byte request once rebuilt 120 MiB of history): the resolved
    history is held to the item and size limits of a request that sent it inline."""
    upstream = FakeUpstream(text_chunks("ok " * 100))
    client = make_app(upstream, **limits).test_client()
    previous, turns = None, 4  # each stored turn: an input and an output item, ~1.1 KB of JSON
    for _ in range(turns - 1):
        upstream.script = text_chunks("ok " * 100)
        answer = post(client, input="x" * 600, **({"previous_response_id": previous} if previous else {}))
        assert answer.status_code == 200, answer.data
        previous = answer.get_json()["id"]
    upstream.script = text_chunks("ok")
    refused = post(client, input="next", previous_response_id=previous)
    error = assert_envelope(refused, 400, "previous_response_id", "history_too_long")
    assert "longer than a request may be" in error["message"]
    assert len(upstream.bodies) == turns - 1  # refused before any upstream call


def test_item_reference_resolves_a_stored_output_item(make_app):
    upstream = FakeUpstream(text_chunks(CALL_TEXT))
    client = make_app(upstream).test_client()
    first = post(client, tools=[WEATHER]).get_json()
    call = first["output"][-1]
    upstream.script = text_chunks("Done.")
    response = post(client, tools=[WEATHER], input=[
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "item_reference", "id": call["id"]},
        {"type": "function_call_output", "call_id": call["call_id"], "output": "18 °C"},
    ])
    assert response.status_code == 200, response.data
    assert '"Paris"' in "\n".join(m["content"] for m in upstream.bodies[-1]["messages"])


def test_get_and_delete_a_stored_response(make_app):
    client = make_app(FakeUpstream(text_chunks("Hello."))).test_client()
    summary = stream(client)
    response_id = summary.response["id"]
    assert client.get(f"/v1/responses/{response_id}").get_json() == summary.response
    deleted = client.delete(f"/v1/responses/{response_id}")
    assert deleted.get_json() == {"id": response_id, "object": "response.deleted", "deleted": True}
    assert_envelope(client.get(f"/v1/responses/{response_id}"), 404, "response_id", "not_found")
    assert_envelope(client.delete(f"/v1/responses/{response_id}"), 404, "response_id", "not_found")


def test_store_false_is_not_kept(make_app):
    client = make_app(FakeUpstream(text_chunks("Hello."))).test_client()
    body = post(client, store=False).get_json()
    assert body["store"] is False
    assert_envelope(client.get(f"/v1/responses/{body['id']}"), 404, "response_id")
    assert_envelope(post(client, previous_response_id=body["id"]), 404, "previous_response_id")


def test_without_a_store_lookups_are_clear_errors(make_app):
    client = make_app(FakeUpstream(text_chunks("Hello.")), response_store_path="").test_client()
    body = post(client).get_json()
    assert body["status"] == "completed"
    assert_envelope(client.get(f"/v1/responses/{body['id']}"), 404, None, "not_found")
    assert_envelope(post(client, previous_response_id=body["id"]), 404, "previous_response_id")


def test_a_failing_store_does_not_break_the_answer(make_app, caplog, tmp_path):
    class BrokenStore(SQLiteResponseStore):
        def put(self, response, input_items, *, owner=None):
            raise StoreUnavailable("disk full")

    app = make_app(FakeUpstream([UpstreamChunk([])] + text_chunks("Hello.")))
    from app.http.state import current_state

    with app.app_context():
        state = current_state()
        app.extensions["toolwire"]["toolwire"]._states[app] = dataclasses.replace(state, store=BrokenStore(tmp_path / "b.db"))
    before = STORE_WRITE_FAILURES._value.get()
    summary = stream(app.test_client())
    assert summary.response["status"] == "completed"
    assert "was answered but not stored: disk full" in caplog.text
    assert STORE_WRITE_FAILURES._value.get() == before + 1


def test_tool_choice_none_leaves_call_text_as_text(make_app):
    upstream = FakeUpstream(text_chunks(CALL_TEXT))
    body = post(make_app(upstream).test_client(), tools=[WEATHER], tool_choice="none").get_json()
    assert [item["type"] for item in body["output"]] == ["message"]
    assert body["tool_choice"] == "none"


def test_allowed_tools_only_emits_the_allowed_calls(make_app):
    other = {**WEATHER, "name": "get_time"}
    choice = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "get_time"}]}
    upstream = FakeUpstream(text_chunks(CALL_TEXT))
    body = post(make_app(upstream).test_client(), tools=[WEATHER, other], tool_choice=choice).get_json()
    assert not [item for item in body["output"] if item["type"] == "function_call"]
    assert body["tool_choice"] == choice


def test_limits_and_keys_cover_the_responses_routes(make_app):
    upstream = FakeUpstream(text_chunks("never"))
    client = make_app(upstream, max_messages=2, max_tool_schema_bytes=64, api_keys="sk-right").test_client()
    auth = {"Authorization": "Bearer sk-right"}
    assert client.post("/v1/responses", json={"model": "m", "input": "hi"}).status_code == 401
    assert client.get("/v1/responses/resp_x").status_code == 401
    too_many = client.post("/v1/responses", headers=auth, json={"model": "m", "input": ["a", "b", "c"]})
    assert_envelope(too_many, 400, "input")
    big = {**WEATHER, "parameters": {**WEATHER["parameters"], "description": "x" * 100}}
    assert_envelope(client.post("/v1/responses", headers=auth, json={"model": "m", "input": "hi", "tools": [big]}),
                    400, "tools[0].parameters")
    assert upstream.bodies == []


def test_marker_mode_covers_the_responses_endpoint(make_app):
    client = make_app(EchoUpstream(marked_call=True), marker_mode=True).test_client()
    body = post(client, tools=[WEATHER]).get_json()
    message, call = body["output"]
    assert QUOTED in message["content"][0]["text"]  # the quoted, unmarked sentinel stays text
    assert (call["name"], call["arguments"]) == ("get_weather", '{"city": "Rome"}')


def test_json_text_format_keeps_a_bare_json_answer_as_content(make_app):
    answer = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    upstream = FakeUpstream(text_chunks(answer))
    client = make_app(upstream).test_client()
    fmt = {"type": "json_schema", "name": "w", "schema": {"type": "object"}, "strict": True}
    body = post(client, tools=[WEATHER], text={"format": fmt}).get_json()
    assert [item["type"] for item in body["output"]] == ["message"]
    assert body["output"][0]["content"][0]["text"] == answer
    assert body["text"] == {"format": fmt}
    assert "response_format" not in upstream.bodies[0]  # taught in the prompt while a call may come
    post(client, text={"format": fmt})
    assert upstream.bodies[1]["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}, "strict": True}}
    post(client, text={"format": {"type": "json_object"}})
    post(client, text={"format": {"type": "text"}})
    assert upstream.bodies[2]["response_format"] == {"type": "json_object"}
    assert "response_format" not in upstream.bodies[3]
