"""Mistral ``[TOOL_CALLS]`` calls through the core, under every chunking: the peers' own cases.

Each case names the repository, file, commit and test it was transcribed
from; the texts are theirs, the structure and expectations ours. Where
toolwire answers differently on purpose, ``differs`` says how (the reasons
are in docs/model-families.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from harness import Call, Open, Reasoning, tr
from statemachine import ParserConfig, ToolSpec, get_format

VLLM = ("vllm-project/vllm", "tests/tool_parsers/test_mistral_tool_parser.py",
        "002d5731d3ee99b92d80b103be81c212245f1acf")
SGL = ("sgl-project/sglang", "test/registered/unit/function_call/test_mistral_detector.py",
       "008b79d2358b08adf9b6c879625030f890c8c4e2")
SGL_STREAM = ("sgl-project/sglang", "test/registered/unit/function_call/test_mistral_detector_streaming.py",
              "82eeae5e32c5258269fcc6bf9e4cd60b8ed32e7e")
SGL_FINISH = ("sgl-project/sglang", "test/registered/unit/function_call/test_mistral_detector_finish.py",
              "8d153a6877d7bb8bc0e2b25a9a24b44fe090fb01")
LLAMA = ("ggml-org/llama.cpp", "tests/test-chat.cpp", "0042e2079d3428ba7af410df553202aa7fdf8d7a")
LLAMA_OLD = ("ggml-org/llama.cpp", "tests/test-chat.cpp", "e7e21164bdf5434e3453777fd27e68cdc0ebfe94")

OBJ = {"type": "object"}
NAMES = ("add", "get_current_weather", "get_age", "multiply", "add_this_and_that", "bash", "add_two_strings",
         "get_weather", "search", "special_function", "special_function_with_opt")
MISTRAL = replace(ParserConfig.for_tools([ToolSpec(n, "", OBJ) for n in NAMES]), formats=("mistral", "tool_call"))

SF_CA = {"city": "San Francisco", "state": "CA", "unit": "celsius"}
WEATHER_SF = Call("get_current_weather", SF_CA)
SPECIAL = Call("special_function", {"arg1": 1})
BASH = {"command": "print(\"hello world!\")\nre.compile(r'{}')"}


@dataclass(frozen=True)
class Case:
    """One peer case: where it comes from, the model's text, and what the core makes of it."""

    source: tuple[str, str, str]  # repository, file, commit
    test: str  # the peer's test (and parameter id)
    text: str
    expected: list
    notes: list | None = field(default=None)
    differs: str = ""  # how toolwire answers differently on purpose

    @property
    def finish(self) -> str:
        return "tool_calls" if any(isinstance(x, Call) and x.valid for x in self.expected) else "stop"


CASES = [
    # vLLM: extraction with the pre-v11 tokenizer (the v0.3 JSON array)
    Case(VLLM, "test_extract_tool_calls_no_tools", "This is a test", ["This is a test"], []),
    Case(VLLM, "test_extract_tool_calls_pre_v11_tokenizer[single_tool_add]",
         '[TOOL_CALLS][{"name": "add", "arguments":{"a": 3.5, "b": 4}}]', [Call("add", {"a": 3.5, "b": 4})]),
    Case(VLLM, "test_extract_tool_calls_pre_v11_tokenizer[single_tool_weather]",
         '[TOOL_CALLS] [{"name": "get_current_weather", "arguments":{"city": "San Francisco", "state": "CA", '
         '"unit": "celsius"}}]', [WEATHER_SF]),
    Case(VLLM, "test_extract_tool_calls_pre_v11_tokenizer[argument_before_name]",
         '[TOOL_CALLS] [{"arguments":{"city": "San Francisco", "state": "CA", "unit": "celsius"}, '
         '"name": "get_current_weather"}]', [WEATHER_SF]),
    Case(VLLM, "test_extract_tool_calls_pre_v11_tokenizer[argument_before_name_and_name_in_argument]",
         '[TOOL_CALLS] [{"arguments":{"name": "John Doe"}, "name": "get_age"}]',
         [Call("get_age", {"name": "John Doe"})]),
    Case(VLLM, "test_extract_tool_calls_pre_v11_tokenizer[multiple_tools]",
         '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 3.5, "b": 4}}, {"name": "get_current_weather", '
         '"arguments":{"city": "San Francisco", "state": "CA", "unit": "celsius"}}]',
         [Call("add", {"a": 3.5, "b": 4}), WEATHER_SF]),
    Case(VLLM, "test_extract_tool_calls_pre_v11_tokenizer[content_before_tool]",
         'Hello[TOOL_CALLS] [{"name": "add", "arguments":{"a": 1, "b": 2}}]', ["Hello", Call("add", {"a": 1, "b": 2})]),
    Case(VLLM, "test_extract_tool_calls_pre_v11_tokenizer[trailing_data_after_json]",
         '[TOOL_CALLS] [{"name": "get_current_weather", "arguments":{"city": "Dallas", "state": "TX", '
         '"unit": "fahrenheit"}}]\nextra trailing data',
         [Call("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}),
          "extra trailing data"], differs="the trailing text is content, as in vLLM's streaming case, without "
                                           "the whitespace that parted it from the call"),
    Case(VLLM, "test_extract_tool_calls_pre_v11_multiple_bot_tokens_raises",
         '[TOOL_CALLS] [{"name": "add", "arguments":{"a": 1}}][TOOL_CALLS] [{"name": "sub", "arguments":{"b": 2}}]',
         [Call("add", {"a": 1}), " [{\"name\": \"sub\", \"arguments\":{\"b\": 2}}]"], ["unknown_tool"],
         differs="vLLM raises; here each [TOOL_CALLS] block stands alone (sub is not offered: its block is text)"),
    Case(VLLM, "test_extract_tool_calls_pre_v11_regex_fallback",
         '[TOOL_CALLS]  junk [{"name": "add", "arguments":{"a": 1, "b": 2}}] trail',
         ['  junk [{"name": "add", "arguments":{"a": 1, "b": 2}}] trail'], [],
         differs="vLLM finds the array after the junk; here text that is neither a name nor JSON is no call"),
    Case(VLLM, "test_extract_tool_calls_pre_v11_regex_fallback_fails", "[TOOL_CALLS] not json at all",
         [" not json at all"], []),
    # vLLM: extraction with the v11 tokenizer (NAME{…})
    Case(VLLM, "test_extract_tool_calls[single_tool_add]", '[TOOL_CALLS]add_this_and_that{"a": 3.5, "b": 4}',
         [Call("add_this_and_that", '{"a": 3.5, "b": 4}')]),
    Case(VLLM, "test_extract_tool_calls[single_tool_weather]",
         '[TOOL_CALLS]get_current_weather{"city": "San Francisco", "state": "CA", "unit": "celsius"}',
         [Call("get_current_weather", '{"city": "San Francisco", "state": "CA", "unit": "celsius"}')]),
    Case(VLLM, "test_extract_tool_calls[multiple_tool_calls]",
         '[TOOL_CALLS]add{"a": 3.5, "b": 4}[TOOL_CALLS]multiply{"a": 3, "b": 6}',
         [Call("add", '{"a": 3.5, "b": 4}'), Call("multiply", '{"a": 3, "b": 6}')]),
    Case(VLLM, "test_extract_tool_calls[complex]",
         'hi{hi[TOOL_CALLS]bash{"command": "print(\\"hello world!\\")\\nre.compile(r\'{}\')"',
         ["hi{hi", Open("bash", '{"command": "print(\\"hello world!\\")\\nre.compile(r\'{}\')"')], ["incomplete"],
         differs="the object never closes: an incomplete call, not a call with cut arguments"),
    Case(VLLM, "test_extract_tool_calls[wrong_json]",
         'hi{hi[TOOL_CALLS]bash{"command": "print(\\"hello world!\\")\\nre.compile(r\'{}\')"}',
         ["hi{hi", Call("bash", BASH)]),
    Case(VLLM, "test_extract_tool_calls_v11_without_args_skipped", "[TOOL_CALLS]toolname_no_args",
         ["toolname_no_args"], [], differs="a name without arguments is no call; vLLM drops the text"),
    # vLLM: streaming
    Case(VLLM, "test_extract_tool_calls_streaming_pre_v11_tokenizer[single_tool_add]",
         '[TOOL_CALLS]  [ {"name":"add" , "arguments" : {"a": 3, "b": 4} } ]', [Call("add", '{"a": 3, "b": 4}')]),
    Case(VLLM, "test_extract_tool_calls_streaming_pre_v11_tokenizer[single_tool_add_strings]",
         '[TOOL_CALLS] [{"name": "add", "arguments":{"a": "3", "b": "4"}}]', [Call("add", '{"a": "3", "b": "4"}')]),
    Case(VLLM, "test_extract_tool_calls_streaming[single_tool_add_strings]",
         '[TOOL_CALLS]add_two_strings{"a": "3", "b": "4"}', [Call("add_two_strings", '{"a": "3", "b": "4"}')]),
    Case(VLLM, "test_extract_tool_calls_streaming_one_chunk[pre_v11-multiple_tools]",
         '[TOOL_CALLS] [{"arguments": {"a": 3.5, "b": 4}, "name": "add"}, {"arguments":{"city": "San Francisco", '
         '"state": "CA", "unit": "celsius"}, "name": "get_current_weather"}]', [Call("add", {"a": 3.5, "b": 4}),
                                                                              WEATHER_SF]),
    Case(VLLM, "test_extract_tool_calls_streaming_one_chunk[pre_v11-content_before_tool]",
         'Some text[TOOL_CALLS] [{"name": "add", "arguments":{"a": 1, "b": 2}}]',
         ["Some text", Call("add", {"a": 1, "b": 2})]),
    Case(VLLM, "test_extract_tool_calls_streaming_one_chunk[v11-content_before_tool]",
         'bla[TOOL_CALLS]add_this_and_that{"a": 3.5, "b": 4}', ["bla", Call("add_this_and_that", {"a": 3.5, "b": 4})]),
    Case(VLLM, "test_fast_detokenization_text_detection[v11]", 'Hello[TOOL_CALLS]add{"a": 1, "b": 2}',
         ["Hello", Call("add", '{"a": 1, "b": 2}')]),
    # SGLang
    Case(SGL, "test_json_array_single_tool_call",
         '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Beijing"}}]',
         [Call("get_weather", {"city": "Beijing"})], []),
    Case(SGL, "test_json_array_multiple_tool_calls",
         '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Beijing"}}, {"name": "search", '
         '"arguments": {"query": "restaurants"}}]',
         [Call("get_weather", {"city": "Beijing"}), Call("search", {"query": "restaurants"})]),
    Case(SGL, "test_json_array_with_leading_text",
         'I will check. [TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Tokyo"}}]',
         ["I will check. ", Call("get_weather", {"city": "Tokyo"})], differs="the text keeps its space"),
    Case(SGL, "test_compact_format_single_tool_call", '[TOOL_CALLS]get_weather[ARGS]{"city": "Beijing"}',
         [Call("get_weather", '{"city": "Beijing"}')]),
    Case(SGL, "test_compact_format_with_leading_text", 'Let me help. [TOOL_CALLS]get_weather[ARGS]{"city": "Tokyo"}',
         ["Let me help. ", Call("get_weather", '{"city": "Tokyo"}')], differs="the text keeps its space"),
    Case(SGL, "test_tool_call_with_nested_json",
         '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Beijing", "options": {"detailed": true}}}]',
         [Call("get_weather", {"city": "Beijing", "options": {"detailed": True}})]),
    Case(SGL, "test_json_array_with_invalid_json", "[TOOL_CALLS] [not valid json]", [" [not valid json]"], [],
         differs="SGLang drops the text; here only the token goes"),
    Case(SGL, "test_streaming_text_then_tool_call", 'Sure! [TOOL_CALLS]get_weather[ARGS]{"city": "Tokyo"}',
         ["Sure! ", Call("get_weather", '{"city": "Tokyo"}')]),
    Case(SGL_STREAM, "test_two_calls_empty_arguments",
         '[TOOL_CALLS] [{"name": "get_weather", "arguments": {}}, {"name": "get_weather", "arguments": {}}]',
         [Call("get_weather", {}), Call("get_weather", {})]),
    Case(SGL_STREAM, "test_three_calls",
         '[TOOL_CALLS] [{"name": "get_weather", "arguments": {}}, {"name": "search", "arguments": {"q": "a"}}, '
         '{"name": "get_weather", "arguments": {"days": 3}}]',
         [Call("get_weather", {}), Call("search", {"q": "a"}), Call("get_weather", {"days": 3})]),
    Case(SGL_STREAM, "test_unicode_argument",
         '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "北京"}}]',
         [Call("get_weather", {"city": "北京"})]),
    Case(SGL_STREAM, "test_normal_text_before_tool_call",
         'Sure. [TOOL_CALLS] [{"name": "get_weather", "arguments": {}}]', ["Sure. ", Call("get_weather", {})]),
    Case(SGL_FINISH, "test_partial_tool_call_at_end_is_flushed",
         'hi [TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "P',
         ["hi ", Open("get_weather", '{"city": "P')], ["incomplete"],
         differs="SGLang flushes the cut call as text; here it is an incomplete call"),
    # llama.cpp
    Case(LLAMA_OLD, "Mistral-Nemo-Instruct-2407 (message_assist_call_id)",
         '[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]', [SPECIAL], [],
         differs="the model's id is not reused: toolwire issues its own call ids"),
    Case(LLAMA_OLD, "COMMON_CHAT_FORMAT_MAGISTRAL (message_assist_thoughts_unparsed_magistral)",
         "[THINK]raisonnement[/THINK]Réponse", [Reasoning("raisonnement"), "Réponse"], []),
    Case(LLAMA, "Ministral-3-14B-Reasoning-2512: content", "Hello, world!\nWhat's up?", ["Hello, world!\nWhat's up?"]),
    Case(LLAMA, "Ministral-3-14B-Reasoning-2512: reasoning", "[THINK]I'm\nthinking[/THINK]Hello, world!\nWhat's up?",
         [Reasoning("I'm\nthinking"), "Hello, world!\nWhat's up?"]),
    Case(LLAMA, "Ministral-3-14B-Reasoning-2512: call", '[TOOL_CALLS]special_function[ARGS]{"arg1":1}', [SPECIAL]),
    Case(LLAMA, "Ministral-3-14B-Reasoning-2512: reasoning and call",
         '[THINK]I\'m\nthinking[/THINK][TOOL_CALLS]special_function[ARGS]{"arg1":1}',
         [Reasoning("I'm\nthinking"), SPECIAL]),
    Case(LLAMA, "Ministral-3-14B-Reasoning-2512: parallel calls",
         '[TOOL_CALLS]special_function[ARGS]{"arg1": 1}'
         '[TOOL_CALLS]special_function_with_opt[ARGS]{"arg1": 1, "arg2": 2}',
         [SPECIAL, Call("special_function_with_opt", {"arg1": 1, "arg2": 2})]),
    Case(LLAMA, "Ministral-3-14B-Reasoning-2512: fake tool call marker in reasoning",
         '[THINK]Let me think about [TOOL_CALLS]special_function[ARGS]{"arg1":1} and more[/THINK]'
         '[TOOL_CALLS]special_function[ARGS]{"arg1": 1}',
         [Reasoning('Let me think about [TOOL_CALLS]special_function[ARGS]{"arg1":1} and more'), SPECIAL]),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.source[0].split('/')[0]}:{c.test}" for c in CASES])
def test_peer_case(case):
    tr(MISTRAL, case.text, case.expected, finish=case.finish, notes=case.notes)


# ours: forms the peers' cases do not cover -----------------------------------------------------------------

def test_v11_args_token_after_text():
    tr(MISTRAL, 'Sure.[TOOL_CALLS]add[ARGS]{"a": 3.5, "b": 4}[TOOL_CALLS]get_weather[ARGS]{"city": "SF"} done',
       ["Sure.", Call("add", '{"a": 3.5, "b": 4}'), Call("get_weather", {"city": "SF"}), " done"],
       finish="tool_calls", notes=[])


def test_call_id_is_skipped():
    tr(MISTRAL, '[TOOL_CALLS]add[CALL_ID]abc123XYZ[ARGS]{"a": 1}', [Call("add", {"a": 1})], finish="tool_calls")


def test_prose_brackets_stay_text():
    text = "a [TOOL] list [x] and [THINK about it] for nothing"
    tr(MISTRAL, text, [text], notes=[])


def test_rendered_call_round_trips():
    rendered = get_format("mistral").render_call("add", '{"a": 1}')
    assert rendered == '[TOOL_CALLS]add[ARGS]{"a": 1}'
    tr(MISTRAL, rendered, [Call("add", '{"a": 1}')], finish="tool_calls")


def test_every_case_names_its_source():
    assert all(len(c.source) == 3 and len(c.source[2]) == 40 and c.test for c in CASES)
    assert len({(c.source, c.test) for c in CASES}) == len(CASES)
