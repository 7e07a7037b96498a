"""Gemma through the core, under every chunking: FunctionGemma ``<start_function_call>call:NAME{…}`` blocks and
Gemma 3 ```` ```tool_code ```` fences.

FunctionGemma cases name the peer test they were mined from (repository, file,
commit): texts theirs, structure ours. No peer tests Gemma 3's ``tool_code``
fence (vLLM, SGLang, llama.cpp and Ollama have no parser for it), so its cases
are ours.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import pytest

from harness import Call, Open, tr
from statemachine import ParserConfig, ToolSpec, get_format

OLLAMA = "ollama/ollama model/parsers/functiongemma_test.go @ fb30760996871fa9460115c753afd2c60d4ab0f7"
VLLM = "vllm-project/vllm tests/tool_parsers/test_functiongemma_tool_parser.py @ 26c3628ca8265f4f5007ed8e3e28ac66dd23c8ae"

OBJ = {"type": "object"}
STR = {"type": "string"}
NAMES = ("get_weather", "add", "set_flag", "process", "update", "get_time", "test", "greet", "create", "first",
         "second", "set_temp")
TYPED = ToolSpec("search", "", {"type": "object", "properties": {
    "query": STR, "limit": {"type": "integer"}, "sort": STR, "count": {"type": "integer"},
    "enabled": {"type": "boolean"}, "message": STR}})
TOOLS = [TYPED, *(ToolSpec(n, "", OBJ) for n in NAMES)]
FG = replace(ParserConfig.for_tools(TOOLS), formats=("functiongemma", "tool_call"))
G3 = replace(ParserConfig.for_tools(TOOLS), formats=("gemma", "tool_call"))
S, E = "<start_function_call>", "<end_function_call>"


class Case(NamedTuple):
    source: str
    text: str
    expected: list
    finish: str = "tool_calls"


FUNCTIONGEMMA = [
    Case(OLLAMA, "Hello, world!", ["Hello, world!"], "stop"),
    Case(OLLAMA, f"{S}call:get_weather{{city:<escape>Paris<escape>}}{E}", [Call("get_weather", {"city": "Paris"})]),
    Case(OLLAMA, f"Let me check.{S}call:get_weather{{city:<escape>Paris<escape>}}{E}",
         ["Let me check.", Call("get_weather", {"city": "Paris"})]),
    Case(OLLAMA, f"{S}call:add{{a:1,b:2}}{E}", [Call("add", '{"a": 1, "b": 2}')]),
    Case(OLLAMA, f"{S}call:set_flag{{enabled:true,verbose:false}}{E}",
         [Call("set_flag", '{"enabled": true, "verbose": false}')]),
    Case(OLLAMA, f"{S}call:get_weather{{city:<escape>Paris<escape>}}{E}{S}call:get_weather{{city:<escape>London"
                 f"<escape>}}{E}", [Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "London"})]),
    Case(OLLAMA, f"{S}call:process{{items:[<escape>a<escape>,<escape>b<escape>,<escape>c<escape>]}}{E}",
         [Call("process", '{"items": ["a", "b", "c"]}')]),
    Case(OLLAMA, f"{S}call:update{{data:{{name:<escape>test<escape>,value:42}}}}{E}",
         [Call("update", '{"data": {"name": "test", "value": 42}}')]),
    Case(OLLAMA, "", [], "stop"),
    Case(OLLAMA, f"{S}call:get_time{{}}{E}", [Call("get_time", "{}")]),
    Case(OLLAMA, "The result is a <value> tag", ["The result is a <value> tag"], "stop"),
    Case(OLLAMA, f"{S}call:set_temp{{value:3.14}}{E}", [Call("set_temp", '{"value": 3.14}')]),
    Case(OLLAMA, f"{S}call:test{{}}{E}Done!", [Call("test", "{}"), "Done!"]),
    Case(OLLAMA, f"こんにちは {S}call:greet{{name:<escape>日本語<escape>}}{E}",
         ["こんにちは ", Call("greet", '{"name": "日本語"}')]),
    Case(OLLAMA, f"{S}call:search{{query:<escape>test<escape>,limit:10,offset:0}}{E}",
         [Call("search", '{"query": "test", "limit": 10, "offset": 0}')]),
    Case(OLLAMA, f"{S}call:create{{config:{{settings:{{enabled:true,name:<escape>test<escape>}}}}}}{E}",
         [Call("create", {"config": {"settings": {"enabled": True, "name": "test"}}})]),
    Case(OLLAMA, "Hello <start world", ["Hello <start world"], "stop"),
    Case(OLLAMA, f"{S}call:get_weather{{city:<escape>Paris<escape>}}{E}{S}call:get_time{{timezone:<escape>UTC"
                 f"<escape>}}{E}", [Call("get_weather", {"city": "Paris"}), Call("get_time", {"timezone": "UTC"})]),
    Case(OLLAMA, f"{S}call:first{{}}{E}Some text here{S}call:second{{}}{E}",
         [Call("first", "{}"), "Some text here", Call("second", "{}")]),
    Case(VLLM, "Hello, how can I help you today?", ["Hello, how can I help you today?"], "stop"),
    Case(VLLM, f"{S}call:get_weather{{location:<escape>London<escape>}}{E}",
         [Call("get_weather", '{"location": "London"}')]),
    Case(VLLM, f"{S}call:get_weather{{location:<escape>San Francisco<escape>,unit:<escape>celsius<escape>}}{E}",
         [Call("get_weather", '{"location": "San Francisco", "unit": "celsius"}')]),
    Case(VLLM, f"Let me check the weather for you. {S}call:get_weather{{location:<escape>Paris<escape>}}{E}",
         ["Let me check the weather for you. ", Call("get_weather", {"location": "Paris"})]),
    Case(VLLM, f"{S}call:get_weather{{location:<escape>London<escape>}}{E}{S}call:get_time{{timezone:<escape>UTC"
               f"<escape>}}{E}", [Call("get_weather", {"location": "London"}), Call("get_time", {"timezone": "UTC"})]),
    # vLLM types an escaped "42" / "true" by its look; here the tool's schema types it
    Case(VLLM, f"{S}call:search{{count:<escape>42<escape>,enabled:<escape>true<escape>,message:<escape>Hello World"
               f"<escape>}}{E}", [Call("search", '{"count": 42, "enabled": true, "message": "Hello World"}')]),
    # pairs without commas between them
    Case(VLLM, f"{S}call:get_weather{{city:<escape>NYC<escape>unit:<escape>celsius<escape>}}{E}",
         [Call("get_weather", '{"city": "NYC", "unit": "celsius"}')]),
    Case(VLLM, f"{S}call:search{{query:<escape>python<escape>limit:<escape>10<escape>sort:<escape>relevance<escape>}}"
               f"{E}", [Call("search", '{"query": "python", "limit": 10, "sort": "relevance"}')]),
]


@pytest.mark.parametrize("case", FUNCTIONGEMMA, ids=lambda c: c.text[:50])
def test_functiongemma(case: Case):
    tr(FG, case.text, case.expected, finish=case.finish)


def test_functiongemma_string_text_is_verbatim():
    text = f'{S}call:search{{query:<escape>a "quoted" {{brace}}, [x]: y\\n<escape>}}{E}'
    tr(FG, text, [Call("search", {"query": 'a "quoted" {brace}, [x]: y\\n'})], finish="tool_calls")


def test_functiongemma_unclosed_call():
    tr(FG, f"{S}call:get_weather{{city:<escape>Par", [Open("get_weather", "{")], notes=["incomplete"])
    tr(FG, f"{S}call:get_weather{{city:<escape>Paris<escape>}}", [Call("get_weather", {"city": "Paris"})],
       finish="tool_calls", notes=["recovered_unclosed"])


def test_functiongemma_round_trip():
    args = '{"city": "SF", "days": 3, "tags": ["a", "b"], "opt": {"x": null}}'
    text = get_format("functiongemma").render_call("get_weather", args)
    assert text == f"{S}call:get_weather{{city:<escape>SF<escape>,days:3,tags:[<escape>a<escape>,<escape>b<escape>],"\
                   f"opt:{{x:null}}}}{E}"
    tr(FG, text, [Call("get_weather", args)], finish="tool_calls")


def test_gemma3_tool_code_fence():
    tr(G3, '```tool_code\nget_weather(city="SF")\n```', [Call("get_weather", {"city": "SF"})], finish="tool_calls")
    tr(G3, "Let me look.\n```tool_code\n[get_weather(city='SF'), get_time()]\n```\nDone.",
       ["Let me look.\n", Call("get_weather", {"city": "SF"}), Call("get_time", {}), "\nDone."],
       finish="tool_calls")
    tr(G3, get_format("gemma").render_call("get_weather", '{"city": "SF"}'), [Call("get_weather", {"city": "SF"})],
       finish="tool_calls")


def test_gemma3_other_fences_stay_text():
    text = "```python\nprint(1)\n```\nand ```tool_codex``` too"
    tr(G3, text, [text])


def test_gemma3_fence_after_a_call_is_tracked_again():
    text = '```tool_code\nget_weather(city="SF")\n```\n```\n<tool_call>{"name": "get_time"}</tool_call>\n```\n'
    tr(G3, text, [Call("get_weather", {"city": "SF"}), '\n```\n<tool_call>{"name": "get_time"}</tool_call>\n```\n'],
       finish="tool_calls", leak_ok=True)


def test_gemma3_stray_fence_line_before_tool_code_blocks():
    """Issue 31, fault 1 (Gemma 3 270M's text): a bare ``` line before four ```tool_code blocks. The first
    block closes the stray fence as its wrapper; the next block's opener is no closing fence line."""
    def block(n: int) -> str:
        return f'```tool_code\nget_weather(city="{n}")\n```\n'
    text = "```\n" + "".join(block(n) for n in range(1, 5))
    tr(G3, text, [Call("get_weather", {"city": str(n)}) for n in range(1, 5)], finish="tool_calls",
       two_split_limit=0)


def test_gemma3_wrapping_fence_closer_at_the_end_is_dropped():
    tr(G3, '```\n```tool_code\nget_weather(city="SF")\n```\n```', [Call("get_weather", {"city": "SF"})],
       finish="tool_calls")


def test_functiongemma_quoted_values_keys_and_an_open_string():
    """FunctionGemma's reader is Gemma 4's: a ``"`` value is one JSON string, a delimited key loses its
    ``<escape>`` tokens, a top-level string left open at the closer is closed there."""
    tr(FG, f'{S}call:get_weather{{city:"Paris, France",o:{{<escape>k:1<escape>:2}}}}{E}',
       [Call("get_weather", {"city": "Paris, France", "o": {"k:1": 2}})], finish="tool_calls", notes=[])
    tr(FG, f"{S}call:get_weather{{city:<escape>Paris}}{E}", [Call("get_weather", {"city": "Paris"})],
       finish="tool_calls", notes=["repaired"])
