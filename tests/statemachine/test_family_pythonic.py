"""Pythonic calls (bare ``[…]`` at a message's start, Llama 4 ``<|python_start|>``, Olmo 3 ``<function_calls>``,
Granite bare lines) through the core, under every chunking.

Each case names the peer test it was mined from (repository, file, commit): texts
theirs, structure ours. Where toolwire answers differently on purpose, the case
says so and ``docs/model-families.md`` explains why.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import pytest

from harness import Call, Open, tr
from statemachine import ParserConfig, ToolSpec, get_format
from statemachine.formats._python import MAX_DEPTH, literal

VLLM_PY = "vllm-project/vllm tests/tool_parsers/test_pythonic_tool_parser.py @ 0716d268c7d81e445bd9ae30205f7bf4cfacd7d5"
VLLM_L4 = ("vllm-project/vllm tests/tool_parsers/test_llama4_pythonic_tool_parser.py"
           " @ 0716d268c7d81e445bd9ae30205f7bf4cfacd7d5")
VLLM_OLMO = "vllm-project/vllm tests/tool_parsers/test_olmo3_tool_parser.py @ 2aac44dc3f7b41fca0273ff024fa557c4c7ab1ee"
VLLM_GRANITE = ("vllm-project/vllm tests/tool_parsers/test_granite_pythonic_tool_parser.py"
                " @ 0054014259d3518f6c91ba52121f4bfef759b380")
SGL = ("sgl-project/sglang test/registered/unit/function_call/test_pythonic_detector.py"
       " @ 00769caebd82b35bfb6f99ea634bc6de3f1c7a6f")
OLLAMA = "ollama/ollama model/parsers/olmo3_test.go @ fb30760996871fa9460115c753afd2c60d4ab0f7"

OBJ = {"type": "object"}
STR = {"type": "string"}
NAMES = ("register_user", "do_something_cool", "bad", "calc", "search", "book_flight", "set_temperature",
         "set_price", "toggle_setting", "clear_value", "process_items", "update_config", "create_request",
         "get_current_time", "create_user", "search_web", "list_files", "func")
WEATHER = ToolSpec("get_weather", "", {"type": "object", "properties": {
    "city": STR, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}, "location": STR, "metric": STR}})
TOOLS = [WEATHER, *(ToolSpec(n, "", OBJ) for n in NAMES)]
PY = replace(ParserConfig.for_tools(TOOLS), formats=("pythonic", "tool_call"))
OLMO = replace(ParserConfig.for_tools(TOOLS), formats=("olmo3", "tool_call"))


class Case(NamedTuple):
    source: str
    text: str
    expected: list
    finish: str = "tool_calls"


SIMPLE = "get_weather(city='San Francisco', metric='celsius')"
SIMPLE_CALL = Call("get_weather", '{"city": "San Francisco", "metric": "celsius"}')
MORE = ("register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, role=None, "
        "passed_test=True, aliases=['John', 'Johnny'])")
MORE_CALL = Call("register_user", '{"name": "John Doe", "age": 37, "address": {"city": "San Francisco", '
                                  '"state": "CA"}, "role": null, "passed_test": true, "aliases": ["John", "Johnny"]}')
ESCAPED = r"get_weather(city='Martha\'s Vineyard', metric='\"cool units\"')"
ESCAPED_CALL = Call("get_weather", '{"city": "Martha\'s Vineyard", "metric": "\\"cool units\\""}')
NO_ARGS_CALL = Call("get_weather", "{}")
EMPTY_DICT_CALL = Call("do_something_cool", '{"additional_data": {}}')
EMPTY_LIST_CALL = Call("do_something_cool", '{"steps": []}')
LA_CALL = Call("get_weather", '{"city": "LA", "metric": "C"}')
DOE_CALL = Call("register_user", '{"name": "Doe", "age": 9}')

PYTHONIC = [
    Case(VLLM_PY, "How can I help you today?", ["How can I help you today?"], "stop"),
    Case(VLLM_PY, f"[{SIMPLE}]", [SIMPLE_CALL]),
    Case(VLLM_PY, f"[{MORE}]", [MORE_CALL]),
    Case(VLLM_PY, "[get_weather()]", [NO_ARGS_CALL]),
    Case(VLLM_PY, "[do_something_cool(additional_data={})]", [EMPTY_DICT_CALL]),
    Case(VLLM_PY, "[do_something_cool(steps=[])]", [EMPTY_LIST_CALL]),
    Case(VLLM_PY, f"[{ESCAPED}]", [ESCAPED_CALL]),
    Case(VLLM_PY, f"[{SIMPLE}, {MORE}]", [SIMPLE_CALL, MORE_CALL]),
    Case(VLLM_PY, f"[{SIMPLE}, get_weather(), do_something_cool(steps=[])]",
         [SIMPLE_CALL, NO_ARGS_CALL, EMPTY_LIST_CALL]),
    # vLLM drops the call whose argument is bytes (or overflows to inf); so does a bare list here (a bare call is
    # sent only once all its arguments were literals, issue 43 item 6), and its sibling stands
    Case(VLLM_PY, f"[bad(x=b'z'), {SIMPLE}]", [SIMPLE_CALL]),
    Case(VLLM_PY, f"[calc(x=1e999), {SIMPLE}]", [SIMPLE_CALL]),
    # the broken sibling names no offered tool: in a bare list that ends the calls, and the rest is text
    Case(VLLM_PY, f"[{SIMPLE}, f(a='x 'y', b='z')]", [SIMPLE_CALL, "f(a='x 'y', b='z')]"]),
    Case(VLLM_PY, "[f(a='x 'y' 'z), g(b='p 'q' 'r)]", ["[f(a='x 'y' 'z), g(b='p 'q' 'r)]"], "stop"),
    Case(VLLM_PY, "[foo(x=1])]", ["[foo(x=1])]"], "stop"),
    Case(VLLM_L4, "[get_weather(city='LA', metric='C')]", [LA_CALL]),
    Case(VLLM_L4, "[register_user(name='Doe', age=9, address={'city': 'LA', 'state': 'CA'}, role=None, "
                  "passed_test=True, aliases=['John', 'Johnny'])]",
         [Call("register_user", '{"name": "Doe", "age": 9, "address": {"city": "LA", "state": "CA"}, "role": null, '
                                '"passed_test": true, "aliases": ["John", "Johnny"]}')]),
    Case(VLLM_L4, "[get_weather(city='LA',metric='C'),register_user(name='Doe',age=9)]", [LA_CALL, DOE_CALL]),
    Case(VLLM_L4, "<|python_start|>[get_weather(city='LA', metric='C')]<|python_end|>", [LA_CALL]),
    Case(VLLM_L4, "<|python_start|>[get_weather(city='LA', metric='C'),register_user(name='Doe', age=9)]",
         [LA_CALL, DOE_CALL]),
    Case(VLLM_L4, "<|python_start|>[get_weather(city='LA', metric='C'), get_weather(), "
                  "do_something_cool(steps=[])]<|python_end|>", [LA_CALL, NO_ARGS_CALL, EMPTY_LIST_CALL]),
    Case(VLLM_L4, "<|python_start|>[bad(x=b'z'), get_weather(city='LA', metric='C')]<|python_end|>",
         [Call("bad", "{", valid=False), LA_CALL], "stop"),
    Case(SGL, "[get_weather(city='Tokyo')]", [Call("get_weather", '{"city": "Tokyo"}')]),
    Case(SGL, "[get_weather(city='Tokyo'), search(query='restaurants')]",
         [Call("get_weather", '{"city": "Tokyo"}'), Call("search", '{"query": "restaurants"}')]),
    Case(SGL, "[search(query={'key': 'value', 'nested': {'a': 1}})]",
         [Call("search", '{"query": {"key": "value", "nested": {"a": 1}}}')]),
    Case(SGL, "[search(query=['a', 'b', 'c'])]", [Call("search", '{"query": ["a", "b", "c"]}')]),
    Case(SGL, '[func(arg="]")]', [Call("func", '{"arg": "]"}')]),
    Case(SGL, "<|python_start|>[get_weather(city='Tokyo')]<|python_end|>", [Call("get_weather", '{"city": "Tokyo"}')]),
    Case(SGL, "The weather in Tokyo is sunny today.", ["The weather in Tokyo is sunny today."], "stop"),
    # SGLang: a call after prose, and an unknown tool's call is skipped; here bare calls count only at the start
    Case(SGL, "I will check the weather for you. [get_weather(city='Tokyo')]",
         ["I will check the weather for you. [get_weather(city='Tokyo')]"], "stop"),
    Case(SGL, "[unknown_func(arg=1)]", ["[unknown_func(arg=1)]"], "stop"),
    # SGLang ignores a positional argument ({}); here it takes the schema's first parameter's name
    Case(SGL, "[get_weather('Tokyo')]", [Call("get_weather", '{"city": "Tokyo"}')]),
    # SGLang: no call; here the header went out at '(' so the call ends as invalid
    Case(SGL, "[get_weather(city=)]", ["[get_weather(city=)]"], "stop"),  # a bare call is sent once its arguments are read
    # SGLang needs the brackets; Granite's bare lines are read here too (vLLM granite_pythonic)
    Case(SGL, "get_weather(city='Tokyo')", [Call("get_weather", '{"city": "Tokyo"}')]),
    Case(VLLM_GRANITE, 'get_weather(location="San Francisco", unit="celsius")',
         [Call("get_weather", '{"location": "San Francisco", "unit": "celsius"}')]),
    Case(VLLM_GRANITE, 'get_weather(location="Paris")\nsearch_web(query="vLLM release notes")',
         [Call("get_weather", '{"location": "Paris"}'), Call("search_web", '{"query": "vLLM release notes"}')]),
    Case(VLLM_GRANITE, "list_files()", [Call("list_files", "{}")]),
    Case(VLLM_GRANITE, 'get_weather(location="Berlin")\n', [Call("get_weather", '{"location": "Berlin"}')]),
    Case(VLLM_GRANITE, "I don't need to call any tools to answer this.",
         ["I don't need to call any tools to answer this."], "stop"),
    # vLLM granite_pythonic reads a call line after prose; here bare calls count only at a message's start
    Case(VLLM_GRANITE, 'Sure, let me check the weather.\nget_weather(location="London")',
         ['Sure, let me check the weather.\nget_weather(location="London")'], "stop"),
]

OLMO3 = [
    Case(VLLM_OLMO, "How can I help you today?", ["How can I help you today?"], "stop"),
    Case(VLLM_OLMO, f"<function_calls>{SIMPLE}</function_calls>", [SIMPLE_CALL]),
    Case(VLLM_OLMO, f"<function_calls>{MORE}</function_calls>", [MORE_CALL]),
    Case(VLLM_OLMO, "<function_calls>" + MORE.replace("None", "null").replace("True", "true") + "</function_calls>",
         [MORE_CALL]),
    Case(VLLM_OLMO, "<function_calls>get_weather()</function_calls>", [NO_ARGS_CALL]),
    Case(VLLM_OLMO, "<function_calls>do_something_cool(additional_data={})</function_calls>", [EMPTY_DICT_CALL]),
    Case(VLLM_OLMO, "<function_calls>do_something_cool(steps=[])</function_calls>", [EMPTY_LIST_CALL]),
    Case(VLLM_OLMO, f"<function_calls>{ESCAPED}</function_calls>", [ESCAPED_CALL]),
    Case(VLLM_OLMO, f"<function_calls>{SIMPLE}\n{MORE}</function_calls>", [SIMPLE_CALL, MORE_CALL]),
    Case(VLLM_OLMO, f"<function_calls>{SIMPLE}\nget_weather()\ndo_something_cool(steps=[])</function_calls>",
         [SIMPLE_CALL, NO_ARGS_CALL, EMPTY_LIST_CALL]),
    Case(VLLM_OLMO, f"<function_calls>bad(x=b'z')\n{SIMPLE}</function_calls>",
         [Call("bad", "{", valid=False), SIMPLE_CALL], "stop"),
    Case(VLLM_OLMO, f"<function_calls>calc(x=1e999)\n{SIMPLE}</function_calls>",
         [Call("calc", "{", valid=False), SIMPLE_CALL], "stop"),
    Case(OLLAMA, "Hello, how can I help you?", ["Hello, how can I help you?"], "stop"),
    Case(OLLAMA, '<function_calls>get_weather(location="San Francisco")</function_calls>',
         [Call("get_weather", {"location": "San Francisco"})]),
    Case(OLLAMA, 'Let me check the weather.<function_calls>get_weather(location="NYC")</function_calls>',
         ["Let me check the weather.", Call("get_weather", {"location": "NYC"})]),
    Case(OLLAMA, '<function_calls>book_flight(from="SFO", to="NYC", date="2024-01-15")</function_calls>',
         [Call("book_flight", {"from": "SFO", "to": "NYC", "date": "2024-01-15"})]),
    Case(OLLAMA, '<function_calls>get_weather(location="San Francisco")\nget_weather(location="New York")'
                 "</function_calls>",
         [Call("get_weather", {"location": "San Francisco"}), Call("get_weather", {"location": "New York"})]),
    Case(OLLAMA, "<function_calls>set_temperature(value=72)</function_calls>", [Call("set_temperature", '{"value": 72}')]),
    Case(OLLAMA, "<function_calls>set_price(amount=19.99)</function_calls>", [Call("set_price", '{"amount": 19.99}')]),
    Case(OLLAMA, "<function_calls>toggle_setting(enabled=true)</function_calls>",
         [Call("toggle_setting", '{"enabled": true}')]),
    Case(OLLAMA, "<function_calls>clear_value(field=null)</function_calls>", [Call("clear_value", '{"field": null}')]),
    Case(OLLAMA, '<function_calls>process_items(items=["apple", "banana", "cherry"])</function_calls>',
         [Call("process_items", {"items": ["apple", "banana", "cherry"]})]),
    Case(OLLAMA, '<function_calls>update_config(settings={"theme": "dark", "fontSize": 14})</function_calls>',
         [Call("update_config", {"settings": {"theme": "dark", "fontSize": 14}})]),
    Case(OLLAMA, '<function_calls>create_request(data={"user": {"name": "John", "age": 30}, "active": true})'
                 "</function_calls>",
         [Call("create_request", {"data": {"user": {"name": "John", "age": 30}, "active": True}})]),
    Case(OLLAMA, "<function_calls>get_current_time()</function_calls>", [Call("get_current_time", "{}")]),
    Case(OLLAMA, "<function_calls>search(query='hello world')</function_calls>",
         [Call("search", {"query": "hello world"})]),
    Case(OLLAMA, '<function_calls>search(query="say \\"hello\\"")</function_calls>',
         [Call("search", {"query": 'say "hello"'})]),
    Case(OLLAMA, '<function_calls>create_user(name="John", age=30, active=true)</function_calls>',
         [Call("create_user", {"name": "John", "age": 30, "active": True})]),
]


@pytest.mark.parametrize("case", PYTHONIC, ids=lambda c: c.text[:40])
def test_pythonic(case: Case):
    tr(PY, case.text, case.expected, finish=case.finish)


@pytest.mark.parametrize("case", OLMO3, ids=lambda c: c.text[:40])
def test_olmo3(case: Case):
    tr(OLMO, case.text, case.expected, finish=case.finish)


# ours ----------------------------------------------------------------------------


def test_an_unclosed_string_leaves_the_call_incomplete():
    tr(PY, "<|python_start|>[get_weather(city='SF", [Open("get_weather", "{")], notes=["incomplete"])


def test_a_bare_call_cut_in_its_arguments_is_text():
    # a bare call is named at its ')': one the stream ends inside was never sent
    tr(PY, "[get_weather(city='SF", ["[get_weather(city='SF"], notes=[])


def test_the_list_may_be_cut_after_a_complete_call():
    tr(PY, "[get_weather(city='SF')", [Call("get_weather", {"city": "SF"})], finish="tool_calls",
       notes=["recovered_unclosed"])
    tr(PY, "[get_weather(city='SF')", [Open("get_weather", '{"city": "SF"}')], upstream="length", finish="length",
       notes=["incomplete"])


def test_text_after_the_calls_is_content():
    tr(PY, "[get_weather(city='SF')]\nDone.", [Call("get_weather", {"city": "SF"}), "\nDone."], finish="tool_calls")
    tr(OLMO, "<function_calls>get_weather(city='SF')</function_calls> Done.",
       [Call("get_weather", {"city": "SF"}), " Done."], finish="tool_calls")


def test_a_word_that_only_starts_like_a_tool_is_text():
    tr(PY, "get_weathered rocks", ["get_weathered rocks"])
    tr(PY, "[Note] see above", ["[Note] see above"])
    tr(PY, "get_weather is a tool", ["get_weather is a tool"])


def test_python_strings_become_json_strings():
    text = """[search(query='''multi\nline''', tag=r'C:\\dir', q2="tab\\tand \\u00e9 \\x41", joined='a' "b")]"""
    tr(PY, text, [Call("search", {"query": "multi\nline", "tag": "C:\\dir", "q2": "tab\tand é A", "joined": "ab"})],
       finish="tool_calls")


def test_tuples_trailing_commas_and_numbers():
    tr(PY, "[calc(xs=(1, 2,), n=-0x1F, f=1_000.5, e=2e3, t=(3),)]",
       [Call("calc", {"xs": [1, 2], "n": -31, "f": 1000.5, "e": 2000.0, "t": 3})], finish="tool_calls")


def test_a_duplicate_keyword_makes_the_call_invalid():
    tr(PY, "<|python_start|>[calc(n=1, n=2)]<|python_end|>", [Call("calc", '{"n": 1', valid=False)], finish="stop")
    tr(PY, "[calc(n=1, n=2)]", ["[calc(n=1, n=2)]"])  # bare: never sent, so it stays text


def test_literal_refuses_what_is_no_literal():
    for text in ("name", "{1, 2}", "b'x'", "f'x'", "1 + 2", "'open", "[1, 2", "{'a'}", "float('inf')", "1e999",
                 "[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2), "'line\nbreak'"):
        with pytest.raises(ValueError):
            literal(text)


def test_literal_is_linear_in_deep_and_long_values():
    assert literal("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    assert literal("'" + "\\n" * 100_000 + "'") == "\n" * 100_000


def test_rendered_calls_round_trip():
    args = '{"city": "SF", "days": 3, "flags": [true, null], "opts": {"a": "x\\"y"}}'
    expected = [Call("get_weather", {"city": "SF", "days": 3, "flags": [True, None], "opts": {"a": 'x"y'}})]
    tr(PY, get_format("pythonic").render_call("get_weather", args), expected, finish="tool_calls")
    tr(OLMO, get_format("olmo3").render_call("get_weather", args), expected, finish="tool_calls")
    assert get_format("olmo3").render_call("get_time", "{}") == "<function_calls>get_time()</function_calls>"


def test_bare_calls_need_the_format():
    default = ParserConfig.for_tools(TOOLS)
    tr(default, "[get_weather(city='SF')]", ["[get_weather(city='SF')]"])
