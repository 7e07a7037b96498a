"""MiniMax ``<minimax:tool_call><invoke name=…><parameter name=…>`` calls through the core, under every chunking.

Cases mined from vLLM ``tests/tool_parsers/test_minimax_m2_tool_parser.py``
(commit d822f4e500382b90f980a5935222b77e08097c17): texts theirs, structure ours
(their chunkings are among the harness's).
"""

from __future__ import annotations

from dataclasses import replace

from harness import Call, tr
from statemachine import ParserConfig, ToolSpec, get_format

OBJ = {"type": "object"}  # no properties: every value stays the text it is, as in vLLM
NAMES = ("search_web", "fn_a", "fn_b", "get_stock", "fn")
WEATHER = ToolSpec("get_weather", "", {"type": "object", "properties": {"city": {"type": "string"},
                                                                       "days": {"type": "integer"}}})
MM = replace(ParserConfig.for_tools([WEATHER, *(ToolSpec(n, "", OBJ) for n in NAMES)]),
             formats=("minimax", "tool_call"))
B, E = "<minimax:tool_call>", "</minimax:tool_call>"


def invoke(name: str, **params: str) -> str:
    body = "".join(f'<parameter name="{k}">{v}</parameter>' for k, v in params.items())
    return f'<invoke name="{name}">{body}</invoke>'


def test_plain_content():
    tr(MM, "Hello world", ["Hello world"], notes=[])


def test_content_before_the_call():
    text = "Let me check. " + B + invoke("get_weather", city="Seattle") + E
    tr(MM, text, ["Let me check. ", Call("get_weather", '{"city": "Seattle"}')], finish="tool_calls", notes=[])


def test_multiple_params_typed_by_the_schema():
    text = B + invoke("get_weather", city="Seattle", days="5") + E
    tr(MM, text, [Call("get_weather", {"city": "Seattle", "days": 5})], finish="tool_calls")


def test_two_invokes():
    text = B + invoke("search_web", query="OpenAI") + invoke("search_web", query="Gemini") + E
    tr(MM, text, [Call("search_web", {"query": "OpenAI"}), Call("search_web", {"query": "Gemini"})],
       finish="tool_calls")


def test_two_functions():
    text = B + invoke("fn_a", x="1") + invoke("fn_b", y="2") + E
    tr(MM, text, [Call("fn_a", {"x": "1"}), Call("fn_b", {"y": "2"})], finish="tool_calls")


def test_newlines_between_tags():
    text = f'{B}\n<invoke name="get_stock">\n<parameter name="ticker">AAPL</parameter>\n</invoke>\n{E}'
    tr(MM, text, [Call("get_stock", {"ticker": "AAPL"})], finish="tool_calls")


def test_missing_block_closer_at_stop():
    tr(MM, B + invoke("fn", k="v"), [Call("fn", {"k": "v"})], finish="tool_calls")


def test_cut_inside_the_first_value_is_incomplete_text():
    text = B + '<invoke name="fn"><parameter name="k">v'
    tr(MM, text, [text], notes=["incomplete"])  # no argument went out: the block is released


def test_rendered_call_round_trips():
    rendered = get_format("minimax").render_call("get_weather", '{"city": "Paris", "days": 2}')
    tr(MM, rendered, [Call("get_weather", '{"city": "Paris", "days": 2}')], finish="tool_calls")
