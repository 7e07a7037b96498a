"""app.pipeline.prompt: the system tool block and history flattening (parsing.md section 3)."""

from __future__ import annotations

import json

import pytest

from app.pipeline import prompt as prompting
from app.pipeline.prompt import TOOL_BLOCK_TITLE, TOOL_RESULT_END, build_upstream_messages, example_value
from statemachine import ParserConfig, ToolChoice, ToolSpec, get_format

WEATHER = ToolSpec(
    "get_weather",
    "Get the current weather for a city.",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
            "days": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "Forecast days"},
        },
        "required": ["city"],
    },
)
WRITE = ToolSpec(
    "write_file",
    "Write text to a file.",
    {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}, "required": ["path", "text"]},
    strict=True,
)
NO_PARAMS = ToolSpec("get_time")
TOOL_CALL = get_format("tool_call")


def build(messages, tools=(WEATHER,), fmt=TOOL_CALL, **config):
    return build_upstream_messages(messages, ParserConfig.for_tools(list(tools), **config), fmt)


def assert_text_only(out):
    for message in out:
        assert set(message) == {"role", "content"}
        assert message["role"] in ("system", "user", "assistant")
        assert isinstance(message["content"], str)
    assert [m["role"] for m in out].count("system") <= 1
    assert all(m["role"] != "system" for m in out[1:])
    assert all(a["role"] != b["role"] for a, b in zip(out, out[1:]))


def test_tool_block_first_then_client_system_and_developer():
    out = build(
        [
            {"role": "system", "content": "You are terse."},
            {"role": "developer", "content": [{"type": "text", "text": "Answer in French."}]},
            {"role": "user", "content": "Weather in Paris?"},
        ]
    )
    assert_text_only(out)
    system = out[0]["content"]
    assert system.startswith(TOOL_BLOCK_TITLE + "\n")
    assert system.index("## How to call") < system.index("You are terse.") < system.index("Answer in French.")
    assert out[1:] == [{"role": "user", "content": "Weather in Paris?"}]


def test_manifest_entries_and_worked_example():
    """Each tool: its heading, what it does, its parameters' JSON Schema on a line of their own; no line is a
    call's shape (``NAME {schema}`` was copied as ``NAME {arguments}``, issue 38); the worked call's string is a
    hint, not a value to copy."""
    system = build([{"role": "user", "content": "hi"}], tools=(WEATHER, NO_PARAMS))[0]["content"]
    manifest = json.dumps(WEATHER.parameters, separators=(",", ":"))
    assert f"\n### get_weather\nGet the current weather for a city.\nParameters: {manifest}\n" in system
    assert '\n### get_time\nParameters: {"type":"object","properties":{}}\n' in system
    assert f"get_weather {manifest}" not in system and "Example arguments" not in system
    # one JSON list of two calls of the offered tools: parallel calls taught, not forbidden (issue 38)
    assert '[\n{"name": "get_weather", "arguments": {"city": "<city>"}},\n{"name": "get_time", "arguments": {}}\n]' in system
    assert "two values or two tasks are two calls, even of the same tool" in system
    assert "<tool_call>" not in system
    assert "## This turn" not in system  # auto: no tool_choice line


@pytest.mark.parametrize("fmt_name", ["use_tool", "function"])
def test_instructions_follow_the_format(fmt_name):
    fmt = get_format(fmt_name)
    system = build([{"role": "user", "content": "hi"}], fmt=fmt)[0]["content"]
    assert fmt.render_call("get_weather", '{"city": "<city>"}') in system
    assert "write every call the request needs" in system  # parallel calls are taught, not forbidden


@pytest.mark.parametrize("config", [{"bare_json": False}, {"marker": "k3J9"}])
def test_the_json_list_is_taught_only_where_a_bare_list_is_read(config):
    """A bare JSON list is content when the client asked for a JSON answer, and in marker mode: the tag form
    is taught there."""
    fmt = TOOL_CALL.with_marker(config.get("marker"))
    system = build([{"role": "user", "content": "hi"}], fmt=fmt, **config)[0]["content"]
    assert "reply with only a JSON list" not in system
    assert fmt.render_call("get_weather", '{"city": "<city>"}') in system


def test_the_worked_list_calls_the_one_tool_twice_with_other_values():
    """With one tool offered, the worked list calls it twice, with other values: several calls of the same tool are
    allowed, and the same call twice is not what is meant."""
    system = build([{"role": "user", "content": "hi"}])[0]["content"]
    first, second = ('{"name": "get_weather", "arguments": {"city": "<%s>"}}' % city for city in ("city",
                                                                                            "another city"))
    assert f"[\n{first},\n{second}\n]" in system


@pytest.mark.parametrize("offered, shown", [(2, 2), (3, 3), (5, 3)])
def test_the_worked_list_calls_up_to_three_of_the_offered_tools(offered, shown):
    """A small model shown two calls wrote three of four tasks' calls (issue 38): a third tool offered is shown too."""
    tools = [ToolSpec(f"tool_{i}", parameters={"type": "object", "properties": {"q": {"type": "string"}},
                                                 "required": ["q"]}) for i in range(offered)]
    system = build([{"role": "user", "content": "hi"}], tools=tools)[0]["content"]
    listed = ",\n".join('{"name": "tool_%d", "arguments": {"q": "<q>"}}' % i for i in range(shown))
    assert f"[\n{listed}\n]" in system


def test_example_values_from_schema():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "default": "d"},
            "b": {"type": "integer", "examples": [7, 8]},
            "c": {"const": "k"},
            "d": {"enum": ["x", "y"]},
            "e": {"type": "array", "items": {"type": "boolean"}},
            "f": {"type": "object", "properties": {"g": {"type": "number"}}},
            "h": {"oneOf": [{"type": "string", "example": "first"}, {"type": "integer"}]},
            "i": {"type": ["null", "string"]},
        },
    }
    assert example_value(schema) == {"a": "d", "b": 7, "c": "k", "d": "x", "e": [True], "f": {"g": 1.5}, "h": "first", "i": "example"}
    deep: dict = {"type": "object", "properties": {}}
    node = deep
    for _ in range(10):
        child: dict = {"type": "object", "properties": {}}
        node["properties"]["x"] = child
        node = child
    assert json.dumps(example_value(deep)).count("{") <= 5  # depth is capped


@pytest.mark.parametrize(
    ("config", "line"),
    [
        ({"tool_choice": ToolChoice("required")}, "You must call at least one tool in this reply"),
        ({"tool_choice": ToolChoice("required", frozenset({"write_file"}))}, "You must call `write_file` in this reply."),
        ({"tool_choice": ToolChoice("auto", frozenset({"write_file"}))}, "Only these tools may be called in this reply: `write_file`."),
        ({}, "Strict tools: write_file. Arguments MUST conform exactly."),
        ({"parallel_tool_calls": False}, "Call at most one tool in this reply."),
        ({"legacy_functions": True}, "Call at most one function in this reply."),
    ],
)
def test_tool_choice_lines(config, line):
    system = build([{"role": "user", "content": "hi"}], tools=(WEATHER, WRITE), **config)[0]["content"]
    assert "## This turn\n" in system
    assert f"- {line}" in system


def test_forced_tool_is_the_worked_example():
    system = build([{"role": "user", "content": "hi"}], tools=(WEATHER, WRITE), fmt=get_format("use_tool"),
                   tool_choice=ToolChoice("required", frozenset({"write_file"})))[0]["content"]
    assert get_format("use_tool").render_call("write_file", '{"path": "<path>", "text": "<text>"}') in system


def test_tool_choice_none_keeps_history_without_block():
    messages = [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "SF"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
        {"role": "user", "content": "Thanks, and tomorrow?"},
    ]
    out = build(messages, tool_choice=ToolChoice("none"))
    assert_text_only(out)
    system = out[0]["content"]
    assert "do not call any tool" in system and "Be kind." in system
    assert "## Manifest" not in system
    assert out[2]["content"] == TOOL_CALL.render_call("get_weather", '{"city": "SF"}')
    assert out[3]["content"].startswith("Tool result for get_weather (call_id call_1):\nSunny\n")


def test_no_tools_means_no_block_but_history_is_flattened():
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
    ]
    out = build(messages, tools=())
    assert_text_only(out)
    assert out[0] == {"role": "user", "content": "hi"}
    assert out[1] == {"role": "assistant", "content": TOOL_CALL.render_call("f", "{}")}
    assert build([{"role": "user", "content": "hi"}], tools=()) == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("fmt_name", ["tool_call", "use_tool", "function"])
def test_history_calls_and_results(fmt_name):
    fmt = get_format(fmt_name)
    messages = [
        {"role": "user", "content": "Weather in SF and LA?"},
        {
            "role": "assistant",
            "content": "Checking both.",
            "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "SF"}'}},
                {"id": "call_b", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "LA"}}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "Foggy, 15 C"},
        {"role": "tool", "tool_call_id": "call_b", "content": [{"type": "text", "text": "Sunny, 25 C"}]},
        {"role": "assistant", "content": "SF is foggy, LA sunny."},
    ]
    out = build(messages, fmt=fmt)
    assert_text_only(out)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "assistant"]
    assert out[2]["content"] == "\n".join(
        ["Checking both.", fmt.render_call("get_weather", '{"city": "SF"}'), fmt.render_call("get_weather", '{"city": "LA"}')]
    )
    assert out[3]["content"] == (
        f"Tool result for get_weather (call_id call_a):\nFoggy, 15 C\n{TOOL_RESULT_END}\n\n"
        f"Tool result for get_weather (call_id call_b):\nSunny, 25 C\n{TOOL_RESULT_END}"
    )
    for opener in fmt.openers:
        assert opener not in out[3]["content"]


def test_harmony_history_renders_calls_and_results_as_the_family_template_does():
    fmt = get_format("harmony")
    messages = [
        {"role": "user", "content": "Weather in SF?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "SF"}'}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "Foggy, 15 C"},
    ]
    out = build(messages, fmt=fmt)
    assert out[2]["content"] == ("<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
                                 '<|message|>{"city": "SF"}<|call|>')
    assert out[3] == {"role": "user", "content": "<|start|>functions.get_weather to=assistant<|channel|>commentary"
                                                 "<|message|>Foggy, 15 C<|end|>"}


def test_assistant_with_only_tool_calls_is_kept():
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "x", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"SF"}'}}]},
    ]
    out = build(messages)
    assert out[-1] == {"role": "assistant", "content": TOOL_CALL.render_call("get_weather", '{"city":"SF"}')}


def test_legacy_function_call_and_function_role():
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "function_call": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
        {"role": "function", "name": "get_weather", "content": "Snow"},
    ]
    out = build(messages, legacy_functions=True)
    assert_text_only(out)
    assert out[2]["content"] == TOOL_CALL.render_call("get_weather", '{"city": "Oslo"}')
    assert out[3] == {"role": "user", "content": f"Tool result for get_weather:\nSnow\n{TOOL_RESULT_END}"}


def test_unknown_call_id_and_empty_result():
    out = build([{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "call_zz", "content": ""}])
    assert out[1]["content"] == f"x\n\nTool result (call_id call_zz):\n(no output)\n{TOOL_RESULT_END}"


def test_content_parts_are_joined_with_placeholders():
    out = build(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
                ],
            }
        ],
        tools=(),
    )
    assert out == [{"role": "user", "content": "What is in this picture?\n[image]\n[audio]"}]


def test_consecutive_same_role_messages_merge():
    out = build(
        [
            {"role": "user", "content": "one"},
            {"role": "user", "content": "two"},
            {"role": "assistant", "content": "three"},
            {"role": "system", "content": "late system"},
            {"role": "assistant", "content": "four"},
            {"role": "assistant", "content": None},
        ],
        tools=(),
    )
    assert out == [
        {"role": "system", "content": "late system"},
        {"role": "user", "content": "one\n\ntwo"},
        {"role": "assistant", "content": "three\n\nfour"},
    ]


def test_multi_step_flow_offers_tools_every_turn():
    read = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
    messages = [
        {"role": "user", "content": "Copy notes.txt to out.txt"},
        {"role": "assistant", "tool_calls": [{"id": "r1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "notes.txt"}'}}]},
        {"role": "tool", "tool_call_id": "r1", "content": "hello"},
    ]
    out = build(messages, tools=(read, WRITE))
    assert_text_only(out)
    assert "write_file" in out[0]["content"] and "read_file" in out[0]["content"]
    assert out[-1]["role"] == "user" and out[-1]["content"].startswith("Tool result for read_file (call_id r1):")


# --- the tool block cache --------------------------------------------------------------------------


def system_text(tools=(WEATHER,), fmt=TOOL_CALL, **config):
    return build([{"role": "user", "content": "hi"}], tools, fmt, **config)[0]["content"]


def uncached_block(tools=(WEATHER,), fmt=TOOL_CALL, **config):
    return prompting._tool_block(ParserConfig.for_tools(list(tools), **config), fmt)


@pytest.fixture
def empty_cache():
    prompting._tool_blocks.clear()
    yield prompting._tool_blocks.entries
    prompting._tool_blocks.clear()


def test_a_repeated_tool_block_comes_from_the_cache_and_equals_a_fresh_render(empty_cache):
    first = system_text(tools=(WEATHER, WRITE))
    assert len(empty_cache) == 1
    assert system_text(tools=(WEATHER, WRITE)) == first == uncached_block(tools=(WEATHER, WRITE))
    assert len(empty_cache) == 1


@pytest.mark.parametrize("variant", [
    {"tools": (WRITE, WEATHER)},
    {"tools": (WEATHER, ToolSpec("get_weather_v2", WEATHER.description, WEATHER.parameters))},
    {"tools": (ToolSpec(WEATHER.name, "Another description.", WEATHER.parameters),)},
    {"tools": (ToolSpec(WEATHER.name, WEATHER.description, {**WEATHER.parameters, "required": []}),)},
    {"tools": (ToolSpec(WEATHER.name, WEATHER.description, WEATHER.parameters, strict=True),)},
    {"tool_choice": ToolChoice("required")},
    {"tool_choice": ToolChoice("required", frozenset({"get_weather"}))},
    {"parallel_tool_calls": False},
    {"legacy_functions": True},
    {"fmt": get_format("use_tool")},
])
def test_every_input_of_the_block_is_part_of_its_cache_key(empty_cache, variant):
    system_text()
    kwargs = {"tools": (WEATHER,), **variant}
    assert system_text(**kwargs) == uncached_block(**kwargs)
    assert len(empty_cache) == 2


def test_a_marked_block_is_never_cached_nor_shared(empty_cache):
    plain = system_text()
    marked = [system_text(fmt=TOOL_CALL.with_marker(m), marker=m) for m in ("k3J9", "Zz_1")]
    assert 'marker="k3J9"' in marked[0] and 'marker="Zz_1"' in marked[1]
    assert "marker=" not in plain
    assert list(empty_cache.values()) == [plain]


def test_the_cache_keeps_the_most_recently_used_blocks(empty_cache, monkeypatch):
    monkeypatch.setattr(prompting._tool_blocks, "max_entries", 2)
    tools = [ToolSpec(f"tool_{i}") for i in range(3)]
    system_text(tools=(tools[0],))
    system_text(tools=(tools[1],))
    system_text(tools=(tools[0],))  # used again: now the most recent
    system_text(tools=(tools[2],))  # evicts tool_1
    names = {json.loads(key[-1])[0][0] for key in empty_cache}
    assert names == {"tool_0", "tool_2"}


def test_the_cache_keeps_within_its_character_budget(empty_cache, monkeypatch):
    big = ToolSpec("big", "x" * 2500)
    small = [ToolSpec(f"tool_{i}") for i in range(3)]
    system_text(tools=(big,))
    big_size = prompting._tool_blocks.size
    system_text(tools=(small[0],))
    small_size = prompting._tool_blocks.size - big_size
    prompting._tool_blocks.clear()
    monkeypatch.setattr(prompting._tool_blocks, "max_size", big_size + small_size)
    system_text(tools=(small[0],))
    system_text(tools=(small[1],))
    system_text(tools=(big,))  # fits once the least recently used one is gone
    assert [json.loads(key[-1])[0][0] for key in empty_cache] == ["tool_1", "big"]
    assert prompting._tool_blocks.size == sum(len(k[-1]) + len(v) for k, v in empty_cache.items())
    monkeypatch.setattr(prompting._tool_blocks, "max_size", big_size - 1)
    prompting._tool_blocks.clear()
    assert system_text(tools=(big,)) == uncached_block(tools=(big,))  # too large to keep: rendered, not kept
    assert not empty_cache and prompting._tool_blocks.size == 0
