"""app.upstreams.demo: the rule-based demo model reads toolwire's prompt and follows its protocol."""

from __future__ import annotations

import json
import math
import tracemalloc

import pytest

from app.upstreams.demo import EXCERPT_CHARS, DemoUpstream
from app.pipeline.prompt import build_upstream_messages
from app.upstreams.base import UpstreamChunk
from statemachine import ParserConfig, ToolChoice, ToolSpec, get_format

WEATHER = ToolSpec(
    "get_weather",
    "Get the current weather for a city.",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
)
READ = ToolSpec("read_file", "Read a file from disk.", {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
SEARCH = ToolSpec(
    "search_docs",
    "Search the documentation.",
    {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}},
        "required": ["query", "limit"],
    },
)
TOOLS = (WEATHER, READ, SEARCH)
FORMATS = ["tool_call", "use_tool", "function"]


def run(messages, *, tools=TOOLS, fmt_name="tool_call", upstream=None, config=None, manifest="json", **body):
    """Prompt the demo like the endpoints do; return (texts per choice, finish per choice, chunks)."""
    config = config or ParserConfig.for_tools(list(tools))
    prompt = build_upstream_messages(messages, config, get_format(fmt_name), manifest=manifest)
    chunks = list((upstream or DemoUpstream()).open({"messages": prompt, "stream": True, **body}))
    texts: dict[int, str] = {}
    finishes: dict[int, str] = {}
    for chunk in chunks:
        assert isinstance(chunk, UpstreamChunk)
        for delta in chunk.choices:
            texts[delta.index] = texts.get(delta.index, "") + (delta.content or "")
            if delta.finish_reason:
                finishes[delta.index] = delta.finish_reason
    return texts, finishes, chunks


@pytest.mark.parametrize("manifest", ["json", "compact"])
@pytest.mark.parametrize("fmt_name", FORMATS)
@pytest.mark.parametrize(
    ("prompt", "name", "arguments"),
    [
        ("What's the weather in San Francisco?", "get_weather", {"city": "San Francisco"}),
        ("weather in Oslo in fahrenheit please", "get_weather", {"city": "Oslo", "unit": "fahrenheit"}),
        ("Please read notes.txt", "read_file", {"path": "notes.txt"}),
        ("Search the docs for 'vitest config', top 3", "search_docs", {"query": "vitest config", "limit": 3}),
    ],
)
def test_calls_the_matching_tool_in_the_prompted_format(fmt_name, prompt, name, arguments, manifest):
    texts, finishes, _ = run([{"role": "user", "content": prompt}], fmt_name=fmt_name, manifest=manifest)
    expected = get_format(fmt_name).render_call(name, json.dumps(arguments))
    assert expected in texts[0]
    assert texts[0].endswith(expected)
    assert finishes == {0: "stop"}


@pytest.mark.parametrize("fmt_name", FORMATS)
def test_marker_mode_calls_repeat_the_prompted_marker(fmt_name):
    config = ParserConfig.for_tools(list(TOOLS), marker="demo-Mark_1")
    prompt = build_upstream_messages([{"role": "user", "content": "Please read notes.txt"}], config,
                                     get_format(fmt_name).with_marker("demo-Mark_1"))
    text = "".join(d.content or "" for c in DemoUpstream().open({"messages": prompt}) for d in c.choices)
    assert text.endswith(get_format(fmt_name).with_marker("demo-Mark_1").render_call("read_file", '{"path": "notes.txt"}'))


@pytest.mark.parametrize("fmt_name", FORMATS)
def test_forced_tool_wins_over_word_overlap(fmt_name):
    config = ParserConfig.for_tools(list(TOOLS), tool_choice=ToolChoice("required", frozenset({"read_file"})))
    texts, _, _ = run([{"role": "user", "content": "weather in Paris, file 'a.md'"}], config=config, fmt_name=fmt_name)
    assert get_format(fmt_name).render_call("read_file", '{"path": "a.md"}') in texts[0]


def test_allowed_subset_is_respected():
    config = ParserConfig.for_tools(list(TOOLS), tool_choice=ToolChoice("auto", frozenset({"search_docs"})))
    texts, _, _ = run([{"role": "user", "content": "weather docs for Paris"}], config=config)
    assert '<tool_call>{"name": "search_docs"' in texts[0]


def test_required_calls_a_tool_even_without_overlap():
    config = ParserConfig.for_tools([WEATHER], tool_choice=ToolChoice("required"))
    texts, _, _ = run([{"role": "user", "content": "hello"}], config=config)
    assert '<tool_call>{"name": "get_weather", "arguments": {"city": "hello"}}</tool_call>' in texts[0]


def test_unrelated_request_under_auto_gets_prose():
    texts, _, _ = run([{"role": "user", "content": "hello there"}])
    assert "<tool_call>" not in texts[0] and "hello there" in texts[0]


def test_prose_after_a_tool_result():
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Rain, 12 C"},
    ]
    texts, finishes, _ = run(messages)
    assert "<tool_call>" not in texts[0]
    assert "get_weather returned: Rain, 12 C" in texts[0]
    assert finishes == {0: "stop"}


def test_prose_without_tools():
    texts, finishes, _ = run([{"role": "user", "content": "Tell me a joke"}], tools=())
    assert texts[0] == 'Hello! You said: "Tell me a joke". I am the toolwire demo model, so this is a canned reply.'
    assert finishes == {0: "stop"}


def test_tool_choice_none_gets_prose():
    config = ParserConfig.for_tools([WEATHER], tool_choice=ToolChoice("none"))
    texts, _, _ = run([{"role": "user", "content": "weather in Paris"}], config=config)
    assert "<tool_call>" not in texts[0]


def test_chunks_usage_and_models():
    upstream = DemoUpstream(model="m1", chunk_chars=3)
    texts, _, chunks = run([{"role": "user", "content": "hi"}], tools=(), upstream=upstream)
    pieces = [c.choices[0].content for c in chunks if c.choices and c.choices[0].content]
    assert all(len(p) <= 3 for p in pieces) and "".join(pieces) == texts[0]
    assert chunks[-1].choices == [] and chunks[-1].usage == {
        "prompt_tokens": 1,
        "completion_tokens": len(pieces),
        "total_tokens": 1 + len(pieces),
    }
    assert upstream.models() == [{"id": "m1", "object": "model", "created": 1_700_000_000, "owned_by": "toolwire"}]
    assert upstream.ready() is True


def test_n_choices():
    texts, finishes, chunks = run([{"role": "user", "content": "Please read notes.txt"}], n=2)
    assert set(texts) == {0, 1} and texts[0] == texts[1]
    assert finishes == {0: "stop", 1: "stop"}
    assert chunks[-1].usage["completion_tokens"] == 2 * math.ceil(len(texts[0]) / 4)


def test_length_limit():
    texts, finishes, chunks = run([{"role": "user", "content": "Tell me a joke"}], tools=(), max_tokens=3)
    assert texts[0] == "Hello! You s"  # 3 chunks of 4 characters
    assert finishes == {0: "length"}
    assert chunks[-1].usage["completion_tokens"] == 3
    texts, finishes, _ = run([{"role": "user", "content": "hi"}], tools=(), max_completion_tokens=1000)
    assert finishes == {0: "stop"}


def test_stop_sequences_cut_prose():
    texts, finishes, _ = run([{"role": "user", "content": "Tell me a joke"}], tools=(), stop=["demo", "zzz"])
    assert texts[0] == 'Hello! You said: "Tell me a joke". I am the toolwire '
    assert finishes == {0: "stop"}


def test_close_stops_iteration():
    prompt = build_upstream_messages([{"role": "user", "content": "hello"}], ParserConfig(), get_format("tool_call"))
    stream = DemoUpstream(chunk_chars=1).open({"messages": prompt})
    it = iter(stream)
    next(it)
    stream.close()
    assert list(it) == []


def test_a_huge_message_costs_a_bounded_context_not_gigabytes():
    """The demo reads the end of the last message and quotes an excerpt: a 4 MiB message once became a
    4 MiB echo in a million chunk objects (16 MiB: 81 s of CPU, 1.9 GB)."""
    message = "tell me about " + "x" * (4 << 20) + " please"
    tracemalloc.start()
    try:
        texts, _, chunks = run([{"role": "user", "content": message}], tools=())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert texts[0].startswith('Hello! You said: "') and len(texts[0]) < EXCERPT_CHARS + 200
    assert len(chunks) < 1000 and peak < 2 * len(message)
