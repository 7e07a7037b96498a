"""ResponsesEncoder: event order and fields (wire-contract 9, items 21-32), checked by openai-python too."""

from __future__ import annotations

import itertools
import json

import httpx
import openai
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.lib.streaming.responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from app.responses.schemas import parse_responses_request
from app.responses.encoder import ResponsesEncoder, encode_sse, new_item_id, new_response_id, responses_usage
from statemachine import (
    ChoiceFinished,
    ChoiceStream,
    ParserConfig,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnded,
    ToolCallNote,
    ToolCallStarted,
    ToolSpec,
)

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
TIME = {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}, "strict": False}
REQUEST = {"model": "demo", "input": "What's the weather?", "tools": [WEATHER, TIME]}
USAGE = {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}

RESPONSE_KEYS = {
    "id", "object", "created_at", "status", "error", "incomplete_details", "model", "output", "usage",
    "instructions", "max_output_tokens", "metadata", "parallel_tool_calls", "previous_response_id",
    "reasoning", "store", "background", "conversation", "temperature", "text", "tool_choice", "tools", "top_p",
    "truncation", "user",
}
CATALOGUE = {
    "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
    "response.output_text.delta", "response.output_text.done", "response.content_part.done",
    "response.output_item.done", "response.function_call_arguments.delta",
    "response.function_call_arguments.done", "response.completed", "response.incomplete", "response.failed",
    "response.reasoning_text.delta", "response.reasoning_text.done",
}
TERMINALS = {"response.completed", "response.incomplete", "response.failed"}
EVENT_ADAPTER = TypeAdapter(ResponseStreamEvent)


def call(index, name, *fragments, valid=True, call_id=None):
    """Core events of one call: Started, one delta per fragment, Ended."""
    call_id = call_id or f"call_{name}_{index}"
    return [
        ToolCallStarted(index, call_id, name),
        *(ToolCallArgumentsDelta(index, f) for f in fragments),
        ToolCallEnded(index, call_id, name, "".join(fragments), valid),
    ]


def run(core_events, *, usage=USAGE, fail=None, request=REQUEST):
    """Encode a core event sequence; returns (events, final Response dict)."""
    req = parse_responses_request(request)
    encoder = ResponsesEncoder(new_response_id(), req.model, req.response_echo(), created_at=1_700_000_000)
    events = encoder.start()
    for event in core_events:
        events += encoder.feed(event)
    events += encoder.fail(*fail) if fail else encoder.finish(usage)
    assert encoder.ended
    return events, encoder.response()


def check_stream(events):
    """Assert wire-contract 9 items 21-32 on one encoded stream; returns the terminal event."""
    # 21: type and consecutive sequence numbers from 0
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    # 32: only catalogue types, and each validates strictly against the SDK's model
    for e in events:
        assert e["type"] in CATALOGUE
        parsed = EVENT_ADAPTER.validate_python(e, strict=True)
        extra = set(parsed.model_extra or {})
        assert extra == ({"name"} if e["type"] == "response.function_call_arguments.done" else set())
    # 22: created first (in_progress, empty output), one terminal last
    first, last = events[0], events[-1]
    assert first["type"] == "response.created"
    assert first["response"]["status"] == "in_progress" and first["response"]["output"] == []
    assert events[1]["type"] == "response.in_progress"
    assert [e["type"] for e in events].count(last["type"]) == 1 and last["type"] in TERMINALS
    assert not any(e["type"] in TERMINALS for e in events[:-1])
    # 23: same id everywhere, every documented key present
    lifecycle = [first, events[1], last]
    assert len({e["response"]["id"] for e in lifecycle}) == 1
    for e in lifecycle:
        assert set(e["response"]) == RESPONSE_KEYS
        assert e["response"]["id"].startswith("resp_")
    assert first["response"]["usage"] is None
    # 24-28: items
    added, done = {}, {}
    open_index = None
    text_deltas, arg_deltas = {}, {}
    content_started = set()
    for e in events[2:-1]:
        kind = e["type"]
        if kind == "response.output_item.added":
            assert open_index is None, "items must not overlap"
            assert e["output_index"] == len(added)
            added[e["output_index"]] = e["item"]
            open_index = e["output_index"]
            item = e["item"]
            assert item["status"] == "in_progress"
            if item["type"] == "function_call":
                assert item["arguments"] == ""
                arg_deltas[open_index] = []
            else:
                assert item["content"] == []
            continue
        assert e["output_index"] == open_index, f"{kind} for an item that is not open"
        item = added[open_index]
        if kind == "response.output_item.done":
            done[open_index] = e["item"]
            open_index = None
            continue
        assert e["item_id"] == item["id"]
        if kind.startswith(("response.content_part", "response.output_text", "response.reasoning_text")):
            text_kind = "reasoning_text" if item["type"] == "reasoning" else "output_text"
            assert item["type"] in ("message", "reasoning") and e["content_index"] == 0
            assert not kind.startswith(("response.output_text", "response.reasoning_text")) or text_kind in kind
            if kind == "response.content_part.added":
                content_started.add(open_index)
            else:
                assert open_index in content_started
            if kind.endswith("_text.delta"):
                text_deltas.setdefault(open_index, []).append(e["delta"])
            if kind.endswith("_text.done"):
                assert e["text"] == "".join(text_deltas.get(open_index, []))
        else:
            assert item["type"] == "function_call"
            if kind == "response.function_call_arguments.delta":
                arg_deltas[open_index].append(e["delta"])
            else:
                assert e["arguments"] == "".join(arg_deltas[open_index])
                assert e["name"] == item["name"]  # 29
                assert arg_deltas[open_index], "at least one arguments delta"
    assert open_index is None and set(added) == set(done)
    call_ids = []
    for index, item in added.items():
        final = done[index]
        prefix = {"function_call": "fc_", "reasoning": "rs_"}.get(item["type"], "msg_")
        assert item["id"].startswith(prefix)
        for key in ("id", "type", "call_id", "name"):
            assert final.get(key) == item.get(key)
        if item["type"] == "function_call":
            assert final["arguments"] == "".join(arg_deltas[index])
            assert item["call_id"].startswith("call_")
            call_ids.append(item["call_id"])
            if final["status"] == "completed":
                json.loads(final["arguments"])
        else:
            assert final["content"][0]["text"] == "".join(text_deltas.get(index, []))
    assert len(call_ids) == len(set(call_ids))
    # 30, 31: terminal object
    response = last["response"]
    assert response["output"] == [done[i] for i in range(len(done))]
    assert response["usage"] is not None and set(response["usage"]) == {
        "input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details", "total_tokens"}
    Response.model_validate(response, strict=True)
    if last["type"] == "response.completed":
        assert response["status"] == "completed"
    elif last["type"] == "response.incomplete":
        assert response["status"] == "incomplete" and response["incomplete_details"]["reason"]
    else:
        assert response["status"] == "failed"
        assert set(response["error"]) == {"code", "message"}
    return last


def sdk_state(events, tools=(WEATHER, TIME)):
    """Feed the events to openai-python's own accumulator."""
    state = ResponseStreamState(input_tools=list(tools), text_format=openai.omit)
    for e in events:
        state.handle_event(EVENT_ADAPTER.validate_python(e))
    return state


def types_of(events):
    return [e["type"].removeprefix("response.") for e in events]


def test_text_only():
    events, response = run([TextDelta("Hello"), TextDelta(", world"), ChoiceFinished("stop")])
    assert check_stream(events)["type"] == "response.completed"
    assert types_of(events) == [
        "created", "in_progress", "output_item.added", "content_part.added", "output_text.delta",
        "output_text.delta", "output_text.done", "content_part.done", "output_item.done", "completed",
    ]
    [message] = response["output"]
    assert message["role"] == "assistant" and message["status"] == "completed"
    assert message["content"] == [{"type": "output_text", "text": "Hello, world", "annotations": [], "logprobs": []}]
    final = sdk_state(events)._completed_response
    assert final.output_text == "Hello, world"


def test_text_then_call():
    core = [TextDelta("Let me check."), *call(0, "get_weather", '{"city":', ' "SF"}'), ChoiceFinished("tool_calls")]
    events, response = run(core)
    check_stream(events)
    assert types_of(events)[7:] == [
        "output_item.done", "output_item.added", "function_call_arguments.delta",
        "function_call_arguments.delta", "function_call_arguments.done", "output_item.done", "completed",
    ]
    assert [item["type"] for item in response["output"]] == ["message", "function_call"]
    fc = response["output"][1]
    assert fc == {"id": fc["id"], "type": "function_call", "status": "completed",
                  "arguments": '{"city": "SF"}', "call_id": "call_get_weather_0", "name": "get_weather"}
    final = sdk_state(events)._completed_response
    [sdk_call] = [item for item in final.output if item.type == "function_call"]
    assert sdk_call.parsed_arguments == {"city": "SF"}  # strict tool: loaded as JSON by the SDK


def test_text_after_a_call_opens_a_new_message():
    core = [*call(0, "get_weather", '{"city":"Oslo"}'), TextDelta("Checking."), ChoiceFinished("tool_calls")]
    events, response = run(core)
    check_stream(events)
    assert [(i["type"], i["status"]) for i in response["output"]] == [
        ("function_call", "completed"), ("message", "completed")]
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [e["output_index"] for e in added] == [0, 1]


def test_two_calls():
    core = [*call(0, "get_weather", '{"city":"Rome"}'), *call(1, "get_time", "{}"), ChoiceFinished("tool_calls")]
    events, response = run(core)
    check_stream(events)
    assert [i["name"] for i in response["output"]] == ["get_weather", "get_time"]
    assert len({i["id"] for i in response["output"]}) == 2


def test_a_call_without_fragments_still_gets_one_delta():
    events, response = run([*call(0, "get_time"), ChoiceFinished("tool_calls")])
    check_stream(events)
    deltas = [e for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert [d["delta"] for d in deltas] == ["{}"]
    assert response["output"][0]["arguments"] == "{}"


def test_length_is_incomplete_and_closes_the_open_message():
    events, response = run([TextDelta("It is sun"), ChoiceFinished("length")])
    last = check_stream(events)
    assert last["type"] == "response.incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["output"][0]["status"] == "incomplete"
    assert sdk_state(events)._completed_response is None  # get_final_response() would raise


def test_length_inside_a_call_ends_the_call_incomplete():
    core = [*call(0, "get_weather", '{"ci', valid=False), ChoiceFinished("length")]
    events, response = run(core)
    assert check_stream(events)["type"] == "response.incomplete"
    assert response["output"][0]["status"] == "incomplete"
    assert response["output"][0]["arguments"] == '{"ci'


def test_content_filter_is_incomplete():
    events, response = run([TextDelta("x"), ChoiceFinished("content_filter")])
    assert check_stream(events)["type"] == "response.incomplete"
    assert response["incomplete_details"] == {"reason": "content_filter"}


def test_failure_mid_call():
    core = [TextDelta("Sure."), ToolCallStarted(0, "call_X", "get_weather"), ToolCallArgumentsDelta(0, '{"c')]
    events, response = run(core, fail=("schema_mismatch", "arguments do not match the strict schema"))
    last = check_stream(events)
    assert last["type"] == "response.failed"
    assert types_of(events)[-3:] == ["function_call_arguments.done", "output_item.done", "failed"]
    assert [i["status"] for i in response["output"]] == ["completed", "incomplete"]
    assert response["error"] == {
        "code": "server_error", "message": "arguments do not match the strict schema (schema_mismatch)"}
    sdk_state(events)  # the SDK accumulator accepts the failed stream


def test_openai_error_codes_pass_through():
    _, response = run([], fail=("rate_limit_exceeded", "slow down"))
    assert response["error"] == {"code": "rate_limit_exceeded", "message": "slow down"}


def test_empty_output_completes_with_empty_output():
    events, response = run([ChoiceFinished("stop")])
    check_stream(events)
    assert response["output"] == []


def test_notes_produce_nothing():
    req = parse_responses_request(REQUEST)
    encoder = ResponsesEncoder("resp_1", "demo", req.response_echo())
    encoder.start()
    assert encoder.feed(ToolCallNote("repaired", "fixed a quote", 0, "get_weather")) == []


def test_reasoning_is_an_item_before_what_it_led_to_and_the_sdk_reads_it():
    events, response = run([ReasoningDelta("Paris, "), ReasoningDelta("so a tool."), TextDelta("Checking."),
                            *call(0, "get_weather", '{"city": "Paris"}'), ChoiceFinished("tool_calls")])
    check_stream(events)
    assert types_of(events)[2:9] == [
        "output_item.added", "content_part.added", "reasoning_text.delta", "reasoning_text.delta",
        "reasoning_text.done", "content_part.done", "output_item.done"]
    reasoning = response["output"][0]
    assert reasoning["id"].startswith("rs_") and [item["type"] for item in response["output"]] == [
        "reasoning", "message", "function_call"]
    client = _client(b"".join(encode_sse(e) for e in events), "text/event-stream")
    with client.responses.stream(model="demo", input="hi", tools=[WEATHER]) as stream:
        final = stream.get_final_response()
    assert final.output[0].type == "reasoning"
    assert [part.text for part in final.output[0].content] == ["Paris, so a tool."]
    assert final.output_text == "Checking."


def test_nothing_after_the_terminal_event():
    encoder = ResponsesEncoder("resp_1", "demo", {})
    encoder.start()
    encoder.finish()
    with pytest.raises(RuntimeError):
        encoder.feed(TextDelta("late"))
    with pytest.raises(RuntimeError):
        encoder.fail("server_error", "late")


def test_response_echoes_the_request():
    request = {**REQUEST, "instructions": "Be brief.", "tool_choice": {"type": "function", "name": "get_time"},
               "parallel_tool_calls": False, "metadata": {"k": "v"}, "temperature": 0.2, "top_p": 0.9,
               "max_output_tokens": 50, "store": False, "user": "u1", "previous_response_id": "resp_prev"}
    _, response = run([TextDelta("ok"), ChoiceFinished("stop")], request=request)
    assert response["instructions"] == "Be brief."
    assert response["tool_choice"] == {"type": "function", "name": "get_time"}
    assert response["parallel_tool_calls"] is False
    assert (response["metadata"], response["temperature"], response["top_p"]) == ({"k": "v"}, 0.2, 0.9)
    assert (response["max_output_tokens"], response["store"], response["user"]) == (50, False, "u1")
    assert response["previous_response_id"] == "resp_prev"
    assert response["tools"][0] == WEATHER
    assert response["tools"][1] == {**TIME, "description": None}
    assert (response["text"], response["truncation"]) == ({"format": {"type": "text"}}, "disabled")


def test_defaults_for_a_bare_echo():
    encoder = ResponsesEncoder("resp_1", "demo", {}, created_at=5)
    [created, _] = encoder.start()
    response = created["response"]
    assert set(response) == RESPONSE_KEYS
    assert (response["tools"], response["tool_choice"], response["parallel_tool_calls"]) == ([], "auto", True)
    assert (response["metadata"], response["store"], response["usage"]) == ({}, True, None)
    assert response["created_at"] == 5


def test_usage_mapping():
    assert responses_usage({
        "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
        "prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 2},
    }) == {
        "input_tokens": 10, "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0},
        "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 15,
    }
    assert responses_usage(None)["total_tokens"] == 0


def test_ids_are_random_and_unique_across_responses():
    ids = set()
    for _ in range(2):
        _, response = run([TextDelta("a"), *call(0, "get_time", "{}"), ChoiceFinished("tool_calls")])
        ids.update(item["id"] for item in response["output"])
    assert len(ids) == 4
    assert len({new_item_id("fc") for _ in range(100)}) == 100


def test_id_factory_is_used():
    counter = itertools.count()
    encoder = ResponsesEncoder("resp_1", "demo", {}, id_factory=lambda prefix: f"{prefix}_{next(counter)}")
    encoder.start()
    added = encoder.feed(TextDelta("x"))[0]
    assert added["item"]["id"] == "msg_0"


def test_encode_sse():
    frame = encode_sse({"type": "response.output_text.delta", "sequence_number": 4, "delta": "é\n"})
    assert frame == b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",' \
        b'"sequence_number":4,"delta":"\xc3\xa9\\n"}\n\n'


def test_core_stream_end_to_end():
    """Real ChoiceStream events from sentinel text, encoded and accepted by the SDK accumulator."""
    stream = ChoiceStream(ParserConfig.for_tools([ToolSpec("get_weather", parameters=WEATHER["parameters"])]))
    text = 'Checking. <tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call>'
    core = [e for i in range(0, len(text), 7) for e in stream.feed(text[i:i + 7])] + stream.finish("stop")
    events, response = run(core)
    check_stream(events)
    assert [i["type"] for i in response["output"]] == ["message", "function_call"]
    assert json.loads(response["output"][1]["arguments"]) == {"city": "SF"}


def _client(body: bytes, content_type: str) -> openai.OpenAI:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, headers={"content-type": content_type},
                                                                   content=body))
    return openai.OpenAI(api_key="x", base_url="http://toolwire.test/v1", max_retries=0,
                         http_client=httpx.Client(transport=transport), _strict_response_validation=True)


def test_openai_stream_helper_get_final_response():
    events, response = run([TextDelta("Let me check."), *call(0, "get_weather", '{"city":', '"SF"}'),
                            ChoiceFinished("tool_calls")])
    client = _client(b"".join(encode_sse(e) for e in events), "text/event-stream")
    with client.responses.stream(model="demo", input="hi", tools=[WEATHER]) as stream:
        seen = [event.type for event in stream]
        final = stream.get_final_response()
    assert seen == [e["type"] for e in events]
    assert final.id == response["id"] and final.output_text == "Let me check."
    [fc] = [item for item in final.output if item.type == "function_call"]
    assert (fc.name, fc.call_id, fc.parsed_arguments) == ("get_weather", "call_get_weather_0", {"city": "SF"})


def test_openai_stream_helper_after_failure_has_no_final_response():
    events, _ = run([TextDelta("x")], fail=("server_error", "upstream exploded"))
    client = _client(b"".join(encode_sse(e) for e in events), "text/event-stream")
    with client.responses.stream(model="demo", input="hi") as stream:
        assert [event.type for event in stream][-1] == "response.failed"
        with pytest.raises(RuntimeError, match="response.completed"):
            stream.get_final_response()


def test_non_streaming_body_is_the_completed_response():
    events, response = run([*call(0, "get_weather", '{"city":"SF"}'), ChoiceFinished("tool_calls")])
    assert events[-1]["response"] == response
    client = _client(orjson.dumps(response), "application/json")
    result = client.responses.create(model="demo", input="hi", tools=[WEATHER])
    assert result.output[0].type == "function_call" and result.status == "completed"
    assert result.usage.total_tokens == 19


def _fragments(value):
    """A call's arguments as 3-character fragments (none for a parameterless call)."""
    if value is None:
        return []
    arguments = json.dumps({"k": value})
    return [arguments[i:i + 3] for i in range(0, len(arguments), 3)]


_segment = st.one_of(
    st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=3).map(lambda texts: ("text", texts)),
    st.one_of(st.none(), st.text(max_size=8)).map(lambda value: ("call", _fragments(value))),
)


@settings(max_examples=150, deadline=None)
@given(segments=st.lists(_segment, max_size=5),
       reason=st.sampled_from(["stop", "tool_calls", "length", "content_filter", "function_call"]),
       fails=st.booleans())
def test_any_event_sequence_satisfies_the_contract(segments, reason, fails):
    core, index = [], 0
    for kind, parts in segments:
        if kind == "text":
            core += [TextDelta(t) for t in parts]
        else:
            core += call(index, "get_time", *parts)
            index += 1
    if fails:
        events, _ = run(core, fail=("server_error", "boom"))
    else:
        events, _ = run([*core, ChoiceFinished(reason)])
    check_stream(events)
    assert len(sdk_state(events)._output_items) == sum(e["type"] == "response.output_item.added" for e in events)
