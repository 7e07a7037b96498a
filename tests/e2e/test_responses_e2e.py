"""The Responses API end to end: openai SDK → gunicorn/gevent toolwire → scripted upstream.

Every stream the SDK sees is checked against the wire contract (Responses invariants) by the
recording transport; raw httpx streams are checked explicitly.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from support.invariants import SESSION_CALL_IDS, StreamRecorder, check_error_envelope, check_responses_stream
from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text
from support.server import ToolwireServer
from support.tools import STRICT_TIME as TIME, STRICT_WEATHER as WEATHER

pytestmark = pytest.mark.e2e

MODEL = "scripted-model"
QUESTION = "What's the weather in SF?"
SF_CALL = tool_call_text("get_weather", {"city": "SF"})


def stream_final(client: openai.OpenAI, **kwargs: Any) -> tuple[Any, list[Any]]:
    """Drive ``responses.stream()`` to ``get_final_response()``; also return the events."""
    with client.responses.stream(model=MODEL, **kwargs) as stream:
        events = list(stream)
        return stream.get_final_response(), events


def calls_of(response: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(item.name, json.loads(item.arguments)) for item in response.output if item.type == "function_call"]


def shape(response: dict[str, Any]) -> dict[str, Any]:
    """A Response object without the values that differ between two runs (ids, times)."""
    output = [{k: v for k, v in item.items() if k not in ("id", "call_id")} for item in response["output"]]
    return {**{k: v for k, v in response.items() if k not in ("id", "created_at", "output")}, "output": output}


def test_a_call_streams_as_a_function_call_item(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    # paced, so each piece arrives on its own (pieces that arrive together go on as one)
    upstream.enqueue(Script(text="Checking.\n" + SF_CALL, chunks=5, delay_between_chunks=0.005))
    final, events = stream_final(openai_client, input=QUESTION, tools=[WEATHER])
    assert final.status == "completed"
    assert calls_of(final) == [("get_weather", {"city": "SF"})]
    call = final.output[-1]
    assert call.call_id.startswith("call_") and call.id.startswith("fc_")
    assert final.output[0].type == "message" and final.output[0].content[0].text.strip() == "Checking."
    done = [(e.name, json.loads(e.arguments)) for e in events if e.type == "response.function_call_arguments.done"]
    assert done == [("get_weather", {"city": "SF"})]
    deltas = [e for e in events if e.type == "response.function_call_arguments.delta"]
    assert len(deltas) > 1, "arguments should stream as they arrive"
    (exchange,) = upstream.chat_requests
    assert "tools" not in exchange.body and exchange.body["stream"] is True
    assert "get_weather" in exchange.body["messages"][0]["content"]


def test_two_parallel_calls_in_one_character_chunks(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text=SF_CALL + tool_call_text("get_time", {"tz": "Asia/Tokyo"}), chunks=1))
    final, _ = stream_final(openai_client, input=QUESTION, tools=[WEATHER, TIME])
    assert calls_of(final) == [("get_weather", {"city": "SF"}), ("get_time", {"tz": "Asia/Tokyo"})]
    assert len({item.call_id for item in final.output}) == 2


def test_follow_up_with_function_call_output(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text=SF_CALL, chunks=6), Script(text="It is 18 °C in SF.", chunks=4))
    first, _ = stream_final(openai_client, input=QUESTION, tools=[WEATHER], store=False)
    call = first.output[-1]
    echoed = [item.model_dump(exclude_none=True) for item in first.output]
    second, _ = stream_final(openai_client, tools=[WEATHER], store=False, input=[
        {"role": "user", "content": QUESTION},
        *echoed,
        {"type": "function_call_output", "call_id": call.call_id, "output": '{"temp_c": 18}'},
    ])
    assert second.output_text == "It is 18 °C in SF."
    messages = upstream.chat_requests[-1].body["messages"]
    assert any(m["role"] == "assistant" and "<tool_call>" in m["content"] for m in messages)
    assert '{"temp_c": 18}' in messages[-1]["content"]


def test_previous_response_id_continues_the_conversation(upstream: ScriptedUpstream,
                                                         openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text=SF_CALL, chunks=6), Script(text="18 °C and sunny.", chunks=4))
    first, _ = stream_final(openai_client, input=QUESTION, tools=[WEATHER], instructions="First turn only.")
    call = first.output[-1]
    second, _ = stream_final(openai_client, tools=[WEATHER], previous_response_id=first.id,
                             input=[{"type": "function_call_output", "call_id": call.call_id, "output": "18 °C"}])
    assert second.output_text == "18 °C and sunny." and second.previous_response_id == first.id
    messages = upstream.chat_requests[-1].body["messages"]
    text = "\n".join(m["content"] for m in messages)
    assert QUESTION in text and '"SF"' in text and "18 °C" in text
    assert "First turn only." not in text


def test_item_reference_resolves(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text=SF_CALL, chunks=6), Script(text="Sunny.", chunks=3))
    first, _ = stream_final(openai_client, input=QUESTION, tools=[WEATHER])
    call = first.output[-1]
    second, _ = stream_final(openai_client, tools=[WEATHER], input=[
        {"role": "user", "content": [{"type": "input_text", "text": QUESTION}]},
        {"type": "item_reference", "id": call.id},
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
    ])
    assert second.output_text == "Sunny."
    assert '"SF"' in "\n".join(m["content"] for m in upstream.chat_requests[-1].body["messages"])


def test_stream_equals_non_stream_and_the_stored_copy(upstream: ScriptedUpstream, openai_client: openai.OpenAI,
                                                      stream_recorder: StreamRecorder) -> None:
    text = "Let me look.\n" + SF_CALL
    upstream.enqueue(Script(text=text, chunks=3), Script(text=text, chunks=11))
    streamed, _ = stream_final(openai_client, input=QUESTION, tools=[WEATHER], temperature=0.3)
    (record,) = stream_recorder.streams("/responses")
    terminal = check_responses_stream(bytes(record.body)).response
    whole = openai_client.responses.with_raw_response.create(model=MODEL, input=QUESTION, tools=[WEATHER],
                                                             temperature=0.3).http_response.json()
    assert shape(terminal) == shape(whole)
    assert terminal["id"] == streamed.id
    stored = openai_client.responses.with_raw_response.retrieve(streamed.id).http_response.json()
    assert stored == terminal
    openai_client.responses.delete(streamed.id)
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(streamed.id)


def test_unknown_previous_response_is_a_404(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        openai_client.responses.create(model=MODEL, input="hi", previous_response_id="resp_missing")
    assert caught.value.body["param"] == "previous_response_id"
    assert upstream.chat_requests == []


def test_upstream_429_before_the_stream(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(status=429, headers={"Retry-After": "7"}))
    with pytest.raises(openai.RateLimitError) as caught:
        stream_final(openai_client, input=QUESTION, tools=[WEATHER])
    assert caught.value.response.headers["Retry-After"] == "7"


def test_cut_mid_stream_fails_and_keeps_the_complete_call(upstream: ScriptedUpstream,
                                                          toolwire_server: ToolwireServer) -> None:
    text = SF_CALL + "\nAnd now the time " + tool_call_text("get_time", {"tz": "Europe/Paris"})
    upstream.enqueue(Script(text=text, chunks=10, close_after_chunks=8))
    body = {"model": MODEL, "input": QUESTION, "tools": [WEATHER, TIME], "stream": True}
    with httpx.stream("POST", toolwire_server.v1_url + "/responses", json=body, timeout=15) as response:
        raw = response.read()
    summary = check_responses_stream(raw, status=response.status_code,
                                     content_type=response.headers.get("content-type"), seen_call_ids=SESSION_CALL_IDS)
    assert summary.response["status"] == "failed" and summary.events[-1]["type"] == "response.failed"
    completed = [i for i in summary.items if i["type"] == "function_call" and i["status"] == "completed"]
    assert [(c["name"], json.loads(c["arguments"])) for c in completed] == [("get_weather", {"city": "SF"})]


def test_bad_input_is_an_envelope_naming_the_param(upstream: ScriptedUpstream,
                                                   toolwire_server: ToolwireServer) -> None:
    body = {"model": MODEL, "input": [{"type": "function_call_output", "call_id": "call_x", "output": "1"}]}
    response = httpx.post(toolwire_server.v1_url + "/responses", json=body, timeout=10)
    error = check_error_envelope(response.status_code, response.content)
    assert response.status_code == 400 and error["param"] == "input[0].call_id"
