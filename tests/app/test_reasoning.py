"""The model's reasoning reaches the client: Chat ``reasoning_content``, Responses ``reasoning`` items.

Every family whose reasoning the core recognises, split at every chunk size, through both APIs streamed and
not: the reasoning arrives in its own field, none of it (and no delimiter) in the content, the call it led to
intact, and the streamed answer equal to the non-streamed one. ``reasoning = hide | inline`` and native back
ends that send reasoning themselves are checked too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from app.upstreams.base import ChoiceDelta, UpstreamChunk
from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks
from support.invariants import check_chat_completion, check_chat_stream, check_responses_stream

WEATHER_CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
HARMONY_CALL = ('<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json'
                '<|message|>{"city": "Paris"}<|call|>')


@dataclass(frozen=True)
class Family:
    """One family's reasoning as its model writes it, and what the client must get."""

    name: str
    text: str
    reasoning: str
    content: str
    calls: tuple[str, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)


FAMILIES = [
    Family("think tags (Qwen3, DeepSeek R1, GLM, Kimi)",
           f"<think>The user wants Paris.\nI call the tool.</think>\n\nLet me check.<tool_call>{WEATHER_CALL}</tool_call>",
           "The user wants Paris.\nI call the tool.", "\n\nLet me check.", ("get_weather",)),
    Family("template-opened <think> (opens_reasoning)", "Paris, so a tool.</think>It is sunny.",
           "Paris, so a tool.", "It is sunny.",
           settings={"model_map": {"m": {"model": "m", "opens_reasoning": True}}}),
    Family("Magistral [THINK]", '[THINK]Paris weather.[/THINK]It is sunny.', "Paris weather.", "It is sunny.",
           settings={"tool_format": "mistral"}),
    Family("Seed-OSS <seed:think>", "<seed:think>Paris weather.</seed:think>It is sunny.", "Paris weather.",
           "It is sunny.", settings={"tool_format": "seed_oss"}),
    Family("gpt-oss Harmony analysis channel",
           "<|channel|>analysis<|message|>Need the weather for Paris.<|end|>" + HARMONY_CALL,
           "Need the weather for Paris.", "", ("get_weather",), settings={"tool_format": "harmony"}),
    Family("Gemma 4 thought channel", "<|channel>thought\nParis weather.<channel|>It is sunny.",
           "thought\nParis weather.", "It is sunny.", settings={"tool_format": "gemma4"}),
]
CHUNK_SIZES = [1, 2, 3, 7, 10_000]
REQUEST = {"model": "m", "tools": [WEATHER_TOOL]}
DELIMITERS = ("<think>", "</think>", "[THINK]", "[/THINK]", "seed:think", "<|channel", "<|message|>", "<channel|>")


def chat(app, *, stream: bool) -> tuple[str, str, list[str]]:
    """(reasoning, content, call names) of one Chat answer, its wire checked."""
    response = app.test_client().post("/v1/chat/completions", json={
        **REQUEST, "messages": [{"role": "user", "content": "Weather in Paris?"}], "stream": stream})
    assert response.status_code == 200, response.get_data(as_text=True)
    if stream:
        choice = check_chat_stream(response.get_data()).choice(0)
        return choice.reasoning, choice.content, [call.name for call in choice.tool_calls]
    message = check_chat_completion(response.get_data())["choices"][0]["message"]
    return (message.get("reasoning_content", ""), message["content"] or "",
            [call["function"]["name"] for call in message.get("tool_calls") or []])


def responses(app, *, stream: bool) -> tuple[str, str, list[str], list[str]]:
    """(reasoning, content, call names, item types) of one Responses answer, its wire checked."""
    tools = [{"type": "function", **WEATHER_TOOL["function"]}]
    response = app.test_client().post("/v1/responses", json={
        "model": "m", "tools": tools, "input": "Weather in Paris?", "stream": stream})
    assert response.status_code == 200, response.get_data(as_text=True)
    if stream:
        output = check_responses_stream(response.get_data()).response["output"]
    else:
        output = response.get_json()["output"]
    reasoning = "".join(part["text"] for item in output if item["type"] == "reasoning" for part in item["content"])
    content = "".join(part["text"] for item in output if item["type"] == "message" for part in item["content"])
    calls = [item["name"] for item in output if item["type"] == "function_call"]
    return reasoning, content, calls, [item["type"] for item in output]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda family: family.name)
def test_every_family_shows_its_reasoning_in_both_apis_under_every_chunking(make_app, family):
    for size in CHUNK_SIZES:
        app = make_app(FakeUpstream(text_chunks(family.text, size=size)), **family.settings)
        for stream in (False, True):
            reasoning, content, calls = chat(app, stream=stream)
            assert (reasoning, content, tuple(calls)) == (family.reasoning, family.content, family.calls), (size, stream)
            reasoning, content, calls, types = responses(app, stream=stream)
            assert (reasoning, content, tuple(calls)) == (family.reasoning, family.content, family.calls), (size, stream)
            assert types[0] == "reasoning"  # the reasoning comes before what it led to
            assert not any(mark in content for mark in DELIMITERS)


def test_a_reasoning_item_per_span_in_output_order(make_app):
    text = "<think>first</think>Hello.<think>second</think>" + f"<tool_call>{WEATHER_CALL}</tool_call>"
    app = make_app(FakeUpstream(text_chunks(text, size=4)))
    for stream in (False, True):
        *_, types = responses(app, stream=stream)
        assert types == ["reasoning", "message", "reasoning", "function_call"]


def test_the_chat_stream_sends_reasoning_first_in_the_role_chunk(make_app):
    app = make_app(FakeUpstream(text_chunks("<think>hmm</think>Hi.", size=3)))
    body = app.test_client().post("/v1/chat/completions", json={
        **REQUEST, "messages": [{"role": "user", "content": "hi"}], "stream": True}).get_data(as_text=True)
    deltas = [orjson.loads(line[6:])["choices"][0]["delta"] for line in body.splitlines()
              if line.startswith("data: {")]
    assert deltas[0] == {"role": "assistant", "reasoning_content": "hm"}  # chunks "<th", "ink", ">hm", …
    kinds = [key for delta in deltas for key in delta if key in ("reasoning_content", "content")]
    assert kinds == sorted(kinds, key=lambda kind: kind == "content")  # all the reasoning before the content
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "hmm"
    assert "".join(d.get("content", "") for d in deltas) == "Hi."


def test_a_message_without_reasoning_has_no_reasoning_field(make_app):
    app = make_app(FakeUpstream(text_chunks("Hello.")))
    body = app.test_client().post("/v1/chat/completions", json={
        **REQUEST, "messages": [{"role": "user", "content": "hi"}]}).get_json()
    assert "reasoning_content" not in body["choices"][0]["message"]


@pytest.mark.parametrize("family", [FAMILIES[0], FAMILIES[4]], ids=lambda family: family.name)
def test_hide_drops_the_reasoning(make_app, family):
    app = make_app(FakeUpstream(text_chunks(family.text, size=3)), reasoning="hide", **family.settings)
    for stream in (False, True):
        assert chat(app, stream=stream) == ("", family.content, list(family.calls))
        reasoning, content, calls, types = responses(app, stream=stream)
        assert "reasoning" not in types and reasoning == ""


@pytest.mark.parametrize("family", FAMILIES, ids=lambda family: family.name)
def test_inline_puts_each_span_in_the_content_between_think_tags(make_app, family):
    for size in (1, 5):
        app = make_app(FakeUpstream(text_chunks(family.text, size=size)), reasoning="inline", **family.settings)
        expected = f"<think>{family.reasoning}</think>{family.content}"
        for stream in (False, True):
            assert chat(app, stream=stream) == ("", expected, list(family.calls))


def test_inline_per_model_through_the_model_map(make_app):
    text = "<think>hmm</think>Hi."
    app = make_app(FakeUpstream(text_chunks(text)), model_map={"m": {"model": "m", "reasoning": "inline"}})
    assert chat(app, stream=False) == ("", "<think>hmm</think>Hi.", [])


@pytest.mark.parametrize("name", ["reasoning_content", "reasoning", "thinking"])
def test_native_reasoning_fields_pass_through_in_the_same_shape(make_app, name):
    """vLLM / SGLang / llama.cpp (``reasoning_content``), newer vLLM and OpenRouter (``reasoning``), Ollama."""
    from app.upstreams.openai_chat import parse_chunk

    raw = [{"choices": [{"index": 0, "delta": {name: piece}}]} for piece in ("Paris ", "weather.")]
    raw += [{"choices": [{"index": 0, "delta": {"content": "Sunny."}, "finish_reason": "stop"}]}]
    app = make_app(FakeUpstream([parse_chunk(chunk, None) for chunk in raw]))
    for stream in (False, True):
        assert chat(app, stream=stream) == ("Paris weather.", "Sunny.", [])
        reasoning, content, _, types = responses(app, stream=stream)
        assert (reasoning, content, types) == ("Paris weather.", "Sunny.", ["reasoning", "message"])


def test_reasoning_counts_towards_the_estimated_completion_tokens(make_app):
    plain = make_app(FakeUpstream(text_chunks("Hi."))).test_client()
    thinking = make_app(FakeUpstream([UpstreamChunk([ChoiceDelta(reasoning="x" * 400)]),
                                      *text_chunks("Hi.")])).test_client()
    request = {**REQUEST, "messages": [{"role": "user", "content": "hi"}]}
    base = plain.post("/v1/chat/completions", json=request).get_json()["usage"]["completion_tokens"]
    more = thinking.post("/v1/chat/completions", json=request).get_json()["usage"]["completion_tokens"]
    assert more >= base + 100


# -- what the client sends back -------------------------------------------------------------------------

CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}


def sent_text(upstream: FakeUpstream) -> str:
    """Everything the back end was shown, as one text."""
    return "\n".join(message["content"] for message in upstream.bodies[-1]["messages"])


@pytest.mark.parametrize("fmt, rendered", [
    ("tool_call", "<think>It is about Paris.</think>"),
    ("mistral", "[THINK]It is about Paris.[/THINK]"),
    ("harmony", "<|channel|>analysis<|message|>It is about Paris.<|end|>"),
])
def test_the_current_turns_reasoning_is_given_back_in_the_familys_delimiters(make_app, fmt, rendered):
    upstream = FakeUpstream(text_chunks("Sunny."))
    make_app(upstream, tool_format=fmt).test_client().post("/v1/chat/completions", json={**REQUEST, "messages": [
        {"role": "user", "content": "Weather in Rome?"},
        {"role": "assistant", "content": "Rome is sunny.", "reasoning_content": "An old thought about Rome."},
        {"role": "user", "content": "And Paris?"},
        {"role": "assistant", "content": None, "reasoning_content": "It is about Paris.", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}]})
    text = sent_text(upstream)
    assert rendered in text and text.index(rendered) < text.index("Paris\"}")  # before the call it led to
    assert "old thought" not in text  # an earlier turn's reasoning is dropped


def test_responses_reasoning_items_join_the_assistant_turn_they_led_to(make_app):
    upstream = FakeUpstream(text_chunks("Sunny."))
    tools = [{"type": "function", **WEATHER_TOOL["function"]}]
    make_app(upstream).test_client().post("/v1/responses", json={"model": "m", "tools": tools, "input": [
        {"role": "user", "content": "And Paris?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "a summary"}],
         "content": [{"type": "reasoning_text", "text": "It is about Paris."}], "encrypted_content": "opaque"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "18 C"}]})
    text = sent_text(upstream)
    assert "<think>It is about Paris.</think>" in text
    assert "a summary" not in text and "opaque" not in text


def test_native_mode_forwards_reasoning_content_as_sent(make_app):
    upstream = FakeUpstream(text_chunks("Sunny."))
    make_app(upstream, tool_mode="native").test_client().post("/v1/chat/completions", json={**REQUEST, "messages": [
        {"role": "user", "content": "And Paris?"},
        {"role": "assistant", "content": "", "reasoning_content": "It is about Paris.", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}]})
    assert upstream.bodies[-1]["messages"][1]["reasoning_content"] == "It is about Paris."
