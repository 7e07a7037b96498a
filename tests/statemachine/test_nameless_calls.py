"""A call object without a name becomes the call of the one offered tool its argument keys fit (issue 31),
under every chunking (parsing.md 4.4).

SmolLM2-135M, taught ``tool_call`` with an example exchange, filled its call block with the manifest's JSON
Schema shape instead of a name (``/work/shared/docs/real-model.md`` section 4, the prompt "What's the
weather in Paris?"); small models also drop the name and keep the ``arguments`` key, or write the
arguments alone.
"""

from __future__ import annotations

import pytest

from harness import Call, tr
from statemachine import ParserConfig, ToolChoice, ToolSpec
from support import real_model

WEATHER, TIME = (ToolSpec(tool["name"], tool["description"], tool["parameters"]) for tool in real_model.TOOLS)
FORECAST = ToolSpec("get_forecast", "The forecast for a city.",
                    {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                     "required": ["city"]})
TOOLS = ParserConfig.for_tools([WEATHER, TIME])  # tests/support/real_model.py's tools
PARIS = Call("get_weather", {"city": "Paris"})

#: SmolLM2-135M's answer, word for word (real-model.md section 4).
SMOLLM2_SCHEMA_SHAPE = '<tool_call>{"type":"json","properties":{"city": "Paris"}}</tool_call>'


@pytest.mark.parametrize("text", [
    SMOLLM2_SCHEMA_SHAPE,
    '<tool_call>{"arguments": {"city": "Paris"}}</tool_call>',
    '<tool_call>\n{"city": "Paris"}\n</tool_call>',
    '<tool_call>{"parameters": {"city": "Paris"}}</tool_call>',  # an alias of "arguments"
    "<tool_call>{'arguments': {'city': 'Paris'}}</tool_call>",  # relaxed JSON
    '<tool_call>{"arguments": "{\\"city\\": \\"Paris\\"}"}</tool_call>',  # arguments as a string
], ids=["schema-shape", "arguments-key", "arguments-alone", "alias", "relaxed", "string-arguments"])
def test_a_call_without_a_name_is_the_one_tool_its_keys_fit(text: str) -> None:
    tr(TOOLS, text, [PARIS], finish="tool_calls", notes=["repaired"])


def test_text_around_a_named_by_arguments_call_stays_text() -> None:
    # SmolLM2 invents the result after its call in the same turn (real-model.md section 4)
    text = 'Let me check.\n<tool_call>{"city": "Madrid"}</tool_call>\nThe weather in Madrid is 20 °C and cloudy.'
    tr(TOOLS, text, ["Let me check.\n", Call("get_weather", {"city": "Madrid"}),
                     "\nThe weather in Madrid is 20 °C and cloudy."], finish="tool_calls", notes=["repaired"])


def test_each_call_of_a_block_is_named_by_its_own_keys() -> None:
    tr(TOOLS, '<tool_call>{"city": "Paris"}\n{"tz": "Asia/Tokyo"}</tool_call>',
       [PARIS, Call("get_time", {"tz": "Asia/Tokyo"})], finish="tool_calls", notes=["repaired", "repaired"])


@pytest.mark.parametrize("config, text", [
    (ParserConfig.for_tools([WEATHER, FORECAST]), '<tool_call>{"city": "Paris"}</tool_call>'),  # two fit
    (TOOLS, '<tool_call>{"city": "Paris", "unit": "C"}</tool_call>'),  # a key no tool names
    (ParserConfig.for_tools([FORECAST]), '<tool_call>{"days": 3}</tool_call>'),  # the required city missing
    (TOOLS, '<tool_call>{"arguments": {}}</tool_call>'),  # nothing to fit
    (TOOLS, '<tool_call>{"type":"string","subject":"Lunch"}</tool_call>'),  # SmolLM2's other shape: no tool fits
    # SmolLM2 asked "What time is it in Tokyo?" after an example exchange (this branch's run, 2026-11-26)
    (TOOLS, '<tool_call>{"time": "2018-04-30T09:57:56.98Z", "temperature_c": 25}\n</tool_call>'),
], ids=["two-fit", "unknown-key", "required-missing", "empty", "no-fit", "smollm2-invented-result"])
def test_no_call_unless_exactly_one_tool_fits(config: ParserConfig, text: str) -> None:
    tr(config, text, [text], notes=["invalid_json"], leak_ok=True)


def test_only_a_tool_the_choice_allows_is_fitted() -> None:
    config = ParserConfig.for_tools([WEATHER, FORECAST], tool_choice=ToolChoice("required", frozenset({"get_forecast"})))
    tr(config, '<tool_call>{"city": "Paris"}</tool_call>', [Call("get_forecast", {"city": "Paris"})],
       finish="tool_calls", notes=["repaired"])


@pytest.mark.parametrize("text", ['{"city": "Paris"}', '```json\n{"city": "Paris"}\n```'])
def test_bare_or_fenced_json_without_a_name_stays_text_when_no_call_is_forced(text: str) -> None:
    # a JSON answer is the model's content unless the client demanded a call
    tr(TOOLS, text, [text], notes=[])


def test_a_named_call_is_unchanged() -> None:
    tr(TOOLS, '<tool_call>{"arguments": {"city": "Paris"}, "name": "get_weather"}</tool_call>', [PARIS],
       finish="tool_calls", notes=[])


@pytest.mark.parametrize("text", [
    "{}{", "{} {", "{}{}", '{"a": 1}{"b": 2}', '{"a": 1}\n{"b": 2}\nok', '[{"a": 1}, {"b": 2}] done', "{}\n{",
], ids=["empty-then-brace", "empty-space-brace", "two-empty", "two-objects", "json-lines", "array", "empty-line-brace"])
def test_bare_json_objects_that_are_no_calls_stay_text_in_full(text: str) -> None:
    # the first object at the message start is no call: the block ends with it, and the next object is prose
    # (it was read as the block's next call, and the text of both was lost)
    tr(TOOLS, text, [text], notes=[])
