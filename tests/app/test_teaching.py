"""The teaching a small model gets (issue 31): the compact manifest and the example exchange."""

from __future__ import annotations

import json

import pytest

from app.pipeline.prompt import GUIDE_HEADING, HOW_TO_HEADING, MANIFEST_HEADING, build_upstream_messages
from app.pipeline.signatures import compact_example, signature_lines
from app.profile import model_profile
from app.settings import ExampleExchange, Settings
from statemachine import ParserConfig, ToolChoice, ToolSpec, get_format

WEATHER = ToolSpec("get_weather", "Current weather for a city.", {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "The city's name."},
        "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
        "days": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "hours": {"type": "array", "items": {"type": "integer"}},
        "place": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                  "required": ["lat"]},
    },
    "required": ["city"],
})
TIME = ToolSpec("get_time", "Current time in a time zone.",
                {"type": "object", "properties": {"tz": {"type": "string", "examples": ["Europe/Paris"]}},
                 "required": ["tz"]})
PATCH = ToolSpec("apply_patch", "Apply a patch.", kind="custom",
                 input_format={"type": "grammar", "syntax": "lark", "definition": "start: /.+/"})
ROME = ExampleExchange(user="What's the weather in Rome?", tool="get_weather", arguments={"city": "Rome"},
                       result='{"temperature_c": 18}', answer="It is 18 °C in Rome.")
QUESTION = {"role": "user", "content": "Weather in Paris?"}


def system_text(tools=(WEATHER, TIME), fmt="tool_call", **config) -> str:
    out = build_upstream_messages([QUESTION], ParserConfig.for_tools(list(tools), **config), get_format(fmt),
                                  manifest="compact")
    return out[0]["content"]


def test_a_signature_line_per_tool_with_types_enums_defaults_and_optional_marks():
    assert signature_lines(WEATHER) == [
        'get_weather(city: string, unit?: "c"|"f" = "c", days?: integer, hours?: integer[], '
        "place?: {lat: number, lon?: number}) - Current weather for a city.",
        "  city: The city's name.",
    ]
    assert signature_lines(ToolSpec("ping")) == ["ping()"]


def test_the_compact_block_lists_signatures_and_never_a_json_schema():
    text = system_text()
    manifest = text.split(f"\n{MANIFEST_HEADING}\n", 1)[1].split("\n\n", 1)[0]
    assert manifest.splitlines()[1:] == [*signature_lines(WEATHER), *signature_lines(TIME)]
    assert '"type"' not in text and '"properties"' not in text
    assert GUIDE_HEADING not in text  # the signatures say what the guide said


def test_the_worked_call_takes_values_from_the_schema_and_never_the_word_example():
    how_to = system_text(fmt="use_tool").split(f"\n{HOW_TO_HEADING}\n", 1)[1]
    assert '<use_tool name="get_weather">\n<city>&lt;city&gt;</city>' in how_to or '"<city>"' in how_to, how_to
    assert '"example"' not in how_to
    forced = system_text(fmt="function", tool_choice=ToolChoice("required", frozenset({"get_time"})))
    assert '<function=get_time>{"tz": "Europe/Paris"}</function>' in forced
    assert compact_example(WEATHER.parameters) == {"city": "<city>"}
    assert compact_example({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3},
                                                             "tags": {"type": "array", "items": {"type": "string"}},
                                                             "mode": {"enum": ["fast", "slow"]}}}) == {
        "n": 3, "tags": ["<tags>"], "mode": "fast"}


def test_the_worked_call_shows_the_optional_strings_the_request_may_give_as_hints():
    schema = {"type": "object", "required": ["building_id"],
              "properties": {"building_id": {"type": "string"}, "mode": {"type": "string"},
                             "floors": {"type": "integer"}, "scale": {"enum": ["high", "low"]},
                             "unit": {"type": "string", "default": "m"},
                             "where": {"type": "object", "required": ["city"],
                                       "properties": {"city": {"type": "string"}, "street": {"type": "string"}}}}}
    assert compact_example(schema) == {"building_id": "<building_id>"}  # what a copy is checked against
    # an optional number's placeholder and an enum's first value were copied into calls: not shown; nor deeper down
    assert compact_example(schema, hints=True) == {"building_id": "<building_id>", "mode": "<mode>"}
    assert '{"name": "analyze", "arguments": {"building_id": "<building_id>", "mode": "<mode>"}}' in system_text(
        tools=(ToolSpec("analyze", parameters=schema),), fmt="tool_call")


def test_the_compact_block_teaches_each_format_in_its_own_syntax():
    assert 'get_weather(city="<city>")' in system_text(fmt="gemma")


def test_a_custom_tool_keeps_its_grammar_in_the_compact_block():
    text = system_text(tools=(WEATHER, PATCH))
    assert "apply_patch (custom tool: text in the lark grammar below)" in text
    assert f"\n{GUIDE_HEADING}\n### apply_patch\n" in text and "start: /.+/" in text


def test_the_compact_block_is_shorter_than_the_json_one():
    config = ParserConfig.for_tools([WEATHER, TIME])
    json_block, compact_block = (build_upstream_messages([QUESTION], config, get_format("tool_call"),
                                                         manifest=manifest)[0]["content"]
                                 for manifest in ("json", "compact"))
    assert len(compact_block) < 0.85 * len(json_block)


def test_the_example_exchange_comes_before_the_conversation_in_the_taught_format():
    config = ParserConfig.for_tools([WEATHER, TIME])
    out = build_upstream_messages([QUESTION], config, get_format("gemma"), examples=[ROME])
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert out[1]["content"] == ROME.user
    assert out[2]["content"] == '```tool_code\nget_weather(city="Rome")\n```'
    assert out[3]["content"].startswith("Tool result for get_weather:\n{\"temperature_c\": 18}")
    assert out[4]["content"] == ROME.answer
    assert out[5] == QUESTION


@pytest.mark.parametrize("config", [
    ParserConfig.for_tools([TIME]),  # its tool is not offered: it would teach a call to a tool that is not there
    ParserConfig.for_tools([WEATHER], tool_choice=ToolChoice("none")),  # no calls are parsed
])
def test_no_example_exchange_without_its_tool_or_without_calls(config):
    out = build_upstream_messages([QUESTION], config, get_format("tool_call"), examples=[ROME])
    assert [m["role"] for m in out] == ["system", "user"]
    assert out[1] == QUESTION


def test_one_exchange_per_offered_tool_in_the_order_given():
    tokyo = ExampleExchange(user="Time in Tokyo?", tool="get_time", arguments={"tz": "Asia/Tokyo"}, result="09:00",
                            answer="It is 9 am in Tokyo.")
    out = build_upstream_messages([QUESTION], ParserConfig.for_tools([WEATHER, TIME]), get_format("tool_call"),
                                  examples=[tokyo, ROME])
    assert [m["content"] for m in out[1::4]] == [tokyo.user, ROME.user, QUESTION["content"]]
    assert [m["role"] for m in out] == ["system", *["user", "assistant"] * 4, "user"]


def test_the_settings_per_model_and_global():
    rome = json.loads(ROME.model_dump_json())
    settings = Settings(tool_manifest="compact", model_map={
        "small": {"model": "smollm2", "tool_manifest": "json", "example_exchange": rome},
        "several": {"example_exchange": [rome, rome]},
        "plain": "qwen3"})
    small, several, plain, other = (model_profile(settings, m) for m in ("small", "several", "plain", "other"))
    assert small.manifest == "json"
    assert plain.manifest == other.manifest == "compact"
    assert small.examples == (ROME,)
    assert several.examples == (ROME, ROME)
    assert plain.examples == ()
    assert model_profile(Settings(), "x").manifest == "json"


def test_with_system_in_first_user_the_tool_block_opens_the_example_request():
    out = build_upstream_messages([QUESTION], ParserConfig.for_tools([WEATHER]), get_format("gemma"),
                                  manifest="compact", examples=[ROME], system_in="first_user")
    assert [m["role"] for m in out] == ["user", "assistant", "user", "assistant", "user"]
    assert out[0]["content"].startswith("# Tools\n") and out[0]["content"].endswith(f"\n\n{ROME.user}")
    assert out[-1] == QUESTION
