"""Responses request parsing and conversion to chat messages (wire-contract 4.7, 9 item 33)."""

from __future__ import annotations

import pytest

from app.responses.input import InputError, resolve_input_items, to_chat_messages
from app.responses.schemas import parse_responses_request
from app.responses.tools import offered_tools
from app.settings import Settings
from app.responses.encoder import ResponsesEncoder
from app.store import SQLiteResponseStore
from statemachine import ChoiceFinished, TextDelta, ToolCallArgumentsDelta, ToolCallEnded, ToolCallStarted
from statemachine import ToolChoice, ToolSpec

WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": True}
CALL = {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"SF"}'}


def chat(body, store=None):
    return to_chat_messages(parse_responses_request({"model": "m", **body}), store)


def offered(body, **settings):
    return offered_tools(parse_responses_request({"model": "m", **body}), Settings(**settings))


def rejected(body, store=None, **settings):
    """The 400 of ``body``: from parsing, flattening the input, or choosing the tools."""
    with pytest.raises(InputError) as info:
        chat(body, store)
        offered(body, **settings)
    return info.value


def tool_call(call_id="call_1", name="get_weather", arguments='{"city":"SF"}'):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.fixture
def store(tmp_path):
    return SQLiteResponseStore(tmp_path / "responses.db", retention_seconds=3600)


def stored_turn(store, request_body, core_events, response_id="resp_1"):
    """Run one turn through the encoder and store it as the endpoint will."""
    request = parse_responses_request({"model": "m", **request_body})
    encoder = ResponsesEncoder(response_id, "m", request.response_echo())
    encoder.start()
    for event in core_events:
        encoder.feed(event)
    encoder.finish()
    store.put(encoder.response(), resolve_input_items(request, store))
    return encoder.response()


# -- input shapes ------------------------------------------------------------------------------

def test_string_input_and_instructions():
    assert chat({"input": "hi", "instructions": "Be brief."}) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]


def test_message_items_with_and_without_type():
    messages = chat({"input": [
        {"role": "developer", "content": "dev rules"},
        {"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
        {"type": "message", "role": "user", "content": "typed string content"},
        {"role": "assistant", "content": "easy form"},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "output form", "annotations": []}]},
        {"role": "system", "content": "sys"},
    ]})
    assert messages == [
        {"role": "developer", "content": "dev rules"},
        {"role": "user", "content": "a\nb"},
        {"role": "user", "content": "typed string content"},
        {"role": "assistant", "content": "easy form"},
        {"role": "assistant", "content": "output form"},
        {"role": "system", "content": "sys"},
    ]


def test_refusal_part_is_kept_as_text():
    messages = chat({"input": [{"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]}]})
    assert messages == [{"role": "assistant", "content": "I can't."}]


@pytest.mark.parametrize("extra", [{}, {"id": "fc_1", "status": "completed"}])
def test_function_call_with_or_without_id_and_status(extra):
    messages = chat({"input": [
        {"role": "user", "content": "weather?"},
        {**CALL, **extra},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    ]})
    assert messages == [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call()]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]


def test_consecutive_calls_merge_into_one_assistant_message_after_its_text():
    messages = chat({"input": [
        {"role": "user", "content": "two cities"},
        {"role": "assistant", "content": "Checking both."},
        CALL,
        {**CALL, "call_id": "call_2", "arguments": '{"city":"LA"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_2", "output": "rain"},
        {"role": "assistant", "content": "SF sunny, LA rain."},
    ]})
    assert messages[1] == {"role": "assistant", "content": "Checking both.",
                           "tool_calls": [tool_call(), tool_call("call_2", arguments='{"city":"LA"}')]}
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]


def test_a_call_after_a_tool_result_starts_a_new_assistant_message():
    messages = chat({"input": [
        CALL,
        {"type": "function_call_output", "call_id": "call_1", "output": "x"},
        {**CALL, "call_id": "call_2"},
    ]})
    assert [m["role"] for m in messages] == ["assistant", "tool", "assistant"]
    assert messages[2]["tool_calls"][0]["id"] == "call_2"


@pytest.mark.parametrize(("output", "content"), [
    ("plain", "plain"),
    ([{"type": "input_text", "text": "line 1"}, {"type": "input_text", "text": "line 2"}], "line 1\nline 2"),
    ({"temp": 21}, '{"temp":21}'),
    (21, "21"),
    ([{"type": "input_image", "image_url": "data:x"}], "[image]"),
    ([{"type": "input_text", "text": "see"}, {"type": "input_file", "file_id": "f"}], "see\n[file]"),
])
def test_function_call_output_shapes(output, content):
    messages = chat({"input": [CALL, {"type": "function_call_output", "call_id": "call_1", "output": output}]})
    assert messages[-1] == {"role": "tool", "tool_call_id": "call_1", "content": content}


def test_reasoning_items_are_dropped():
    messages = chat({"input": [{"type": "reasoning", "id": "rs_1", "summary": []}, {"role": "user", "content": "x"}]})
    assert messages == [{"role": "user", "content": "x"}]


# -- 400s ---------------------------------------------------------------------------------------

def test_unknown_call_id_is_400():
    error = rejected({"input": [CALL, {"type": "function_call_output", "call_id": "call_zzz", "output": "x"}]})
    assert error.param == "input[1].call_id" and "call_zzz" in error.message


def test_output_before_its_call_is_400():
    error = rejected({"input": [{"type": "function_call_output", "call_id": "call_1", "output": "x"}, CALL]})
    assert error.param == "input[0].call_id"


def test_function_call_output_without_call_id_is_400():
    error = rejected({"input": [CALL, {"type": "function_call_output", "output": "x"}]})
    assert (error.param, error.code) == ("input[1].call_id", "missing_required_parameter")


def test_media_parts_become_placeholders():
    messages = chat({"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": "https://x/y.png"}]}]})
    assert messages == [{"role": "user", "content": "look\n[image]"}]


@pytest.mark.parametrize(("body", "param"), [
    ({"input": "x", "messages": [{"role": "user", "content": "x"}]}, "messages"),
    ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "n"}]}, "input[0].arguments"),
    ({"input": [{"role": "user", "content": [{"type": "input_txt", "text": "x"}]}]}, "input[0].content[0].type"),
    ({"input": "x", "tool_choice": "sometimes"}, "tool_choice"),
    ({"input": "x", "temperature": 3}, "temperature"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": 5}, "input"),
])
def test_invalid_requests_name_the_param(body, param):
    assert rejected(body).param == param


def test_hosted_tool_is_a_400_naming_the_type_only_when_told_to_fail():
    body = {"input": "x", "tools": [WEATHER, {"type": "file_search", "vector_store_ids": []}]}
    error = rejected(body, unsupported_tools="fail")
    assert "'file_search'" in error.message and error.code == "unsupported_tool_type"
    assert error.param == "tools[1].type"
    assert [s.name for s in offered(body).specs] == ["get_weather"]


def test_missing_model_and_non_object_body():
    with pytest.raises(InputError) as info:
        parse_responses_request({"input": "x"})
    assert info.value.param == "model"
    with pytest.raises(InputError) as info:
        parse_responses_request(["not", "an", "object"])
    assert info.value.param is None


def test_unknown_fields_are_kept():
    request = parse_responses_request({"model": "m", "input": "x", "include": ["reasoning.encrypted_content"],
                                       "safety_identifier": "abc"})
    assert request.model_extra == {"include": ["reasoning.encrypted_content"], "safety_identifier": "abc"}


# -- stored responses --------------------------------------------------------------------------

def call_events(call_id="call_A"):
    return [ToolCallStarted(0, call_id, "get_weather"), ToolCallArgumentsDelta(0, '{"city":"SF"}'),
            ToolCallEnded(0, call_id, "get_weather", '{"city":"SF"}'), ChoiceFinished("tool_calls")]


def test_previous_response_id_replays_input_and_output_without_old_instructions(store):
    stored_turn(store, {"input": "weather in SF?", "instructions": "old rules", "tools": [WEATHER]},
                [TextDelta("Checking."), *call_events()])
    messages = chat({"previous_response_id": "resp_1", "instructions": "new rules",
                     "input": [{"type": "function_call_output", "call_id": "call_A", "output": "sunny"}]}, store)
    assert messages == [
        {"role": "system", "content": "new rules"},
        {"role": "user", "content": "weather in SF?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [tool_call("call_A")]},
        {"role": "tool", "tool_call_id": "call_A", "content": "sunny"},
    ]


def test_previous_response_chain_is_followed_oldest_first(store):
    stored_turn(store, {"input": "one"}, [TextDelta("1"), ChoiceFinished("stop")], "resp_1")
    stored_turn(store, {"input": "two", "previous_response_id": "resp_1"},
                [TextDelta("2"), ChoiceFinished("stop")], "resp_2")
    messages = chat({"previous_response_id": "resp_2", "input": "three"}, store)
    assert [m["content"] for m in messages] == ["one", "1", "two", "2", "three"]


def test_unknown_previous_response_id_is_400(store):
    for lookup in (store, None):
        error = rejected({"previous_response_id": "resp_missing", "input": "x"}, lookup)
        assert (error.param, error.code) == ("previous_response_id", "previous_response_not_found")


def test_item_reference_resolves_output_items(store):
    response = stored_turn(store, {"input": "weather?", "tools": [WEATHER]},
                           [TextDelta("Checking."), *call_events()])
    msg_id, fc_id = (item["id"] for item in response["output"])
    messages = chat({"input": [
        {"role": "user", "content": "weather?"},
        {"type": "item_reference", "id": msg_id},
        {"type": "item_reference", "id": fc_id},
        {"type": "function_call_output", "call_id": "call_A", "output": "sunny"},
    ]}, store)
    assert messages[1:] == [
        {"role": "assistant", "content": "Checking.", "tool_calls": [tool_call("call_A")]},
        {"role": "tool", "tool_call_id": "call_A", "content": "sunny"},
    ]


def test_item_reference_resolves_input_items_with_ids(store):
    stored_turn(store, {"input": [{"type": "message", "id": "msg_in", "role": "user", "content": "remember me"}]},
                [TextDelta("ok"), ChoiceFinished("stop")])
    assert chat({"input": [{"type": "item_reference", "id": "msg_in"}]}, store) == [
        {"role": "user", "content": "remember me"}]


def test_resolved_input_items_replace_references(store):
    response = stored_turn(store, {"input": "q"}, [TextDelta("a"), ChoiceFinished("stop")])
    request = parse_responses_request({"model": "m", "input": [
        {"type": "item_reference", "id": response["output"][0]["id"]}, {"role": "user", "content": "next"}]})
    assert resolve_input_items(request, store) == [
        response["output"][0], {"type": "message", "role": "user", "content": "next"}]


def test_already_resolved_input_items_are_not_looked_up_again(store):
    response = stored_turn(store, {"input": "q"}, [TextDelta("a"), ChoiceFinished("stop")])
    request = parse_responses_request({"model": "m", "input": [
        {"type": "item_reference", "id": response["output"][0]["id"]}, {"role": "user", "content": "next"}]})

    class NoLookups:
        def get_item(self, item_id):
            raise AssertionError(f"{item_id} looked up again")

    expected = [{"role": "assistant", "content": "a"}, {"role": "user", "content": "next"}]
    assert to_chat_messages(request, NoLookups(), resolve_input_items(request, store)) == expected
    assert to_chat_messages(request, store) == expected


def test_references_are_resolved_before_any_item_is_read(store):
    error = rejected({"input": [{"type": "function_call_output", "call_id": "call_none", "output": "x"},
                                {"type": "item_reference", "id": "msg_gone"}]}, store)
    assert (error.param, error.code) == ("input[1].id", "item_not_found")


def test_unresolvable_item_reference_is_400(store):
    for lookup in (store, None):
        error = rejected({"input": [{"type": "item_reference", "id": "msg_gone"}]}, lookup)
        assert (error.param, error.code) == ("input[0].id", "item_not_found")
        assert "store = false" in error.message


# -- tools and tool_choice ------------------------------------------------------------------------

def test_tool_specs_from_responses_tools():
    assert offered({"tools": [
        WEATHER, {"type": "function", "name": "ping", "description": "Ping.", "strict": False},
        {"type": "function", "name": "bare"}]}).specs == [
        ToolSpec("get_weather", "", {"type": "object"}, True),
        ToolSpec("ping", "Ping.", None, False),
        ToolSpec("bare", "", None, False),
    ]


@pytest.mark.parametrize(("choice", "expected"), [
    (None, ToolChoice("auto")),
    ("auto", ToolChoice("auto")),
    ("none", ToolChoice("none")),
    ("required", ToolChoice("required")),
    ({"type": "function", "name": "get_weather"}, ToolChoice("required", frozenset({"get_weather"}))),
    ({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "get_weather"}]},
     ToolChoice("auto", frozenset({"get_weather"}))),
    ({"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "get_weather"},
                                                             {"type": "function", "name": "ping"}]},
     ToolChoice("required", frozenset({"get_weather", "ping"}))),
])
def test_to_tool_choice(choice, expected):
    body = {"model": "m", "tools": [WEATHER, {"type": "function", "name": "ping"}]}
    if choice is not None:
        body["tool_choice"] = choice
    assert offered_tools(parse_responses_request(body), Settings()).choice.choice == expected
