"""Under a forced ``tool_choice`` (``required`` or a named function) the answer must be a call: a call the model
writes as fenced or bare JSON on a line of its own, after text too, is read as the call (a ``repaired``
note), under every chunking (issue 31, parsing.md 4.13).

SmolLM2-135M, asked with a named ``tool_choice``, wrote prose and then the call in a ``json`` fence, with the
manifest's placeholder value (``/work/shared/docs/real-model.md`` section 4, named_choice); asked under
``required`` it wrote the arguments alone. Without a forced choice the same texts stay text.
"""

from __future__ import annotations

import pytest

from harness import Call, tr
from statemachine import ParserConfig, ToolChoice, ToolSpec
from support import real_model

TOOLS = [ToolSpec(tool["name"], tool["description"], tool["parameters"]) for tool in real_model.TOOLS]
REQUIRED = ParserConfig.for_tools(TOOLS, tool_choice=ToolChoice("required"))
NAMED = ParserConfig.for_tools(TOOLS, tool_choice=ToolChoice("required", frozenset({"get_time"})))
AUTO = ParserConfig.for_tools(TOOLS)

#: SmolLM2's named_choice answer (real-model.md section 4 gives the fence; the sentence before it is ours).
FENCED_AFTER_PROSE = ('To get the current time, call the tool:\n'
                      '```json\n{"name": "get_time", "arguments": {"location": "example"}}\n```')
EXAMPLE_CALL = Call("get_time", {"location": "example"})


def test_a_fenced_call_after_prose_is_the_forced_call() -> None:
    tr(NAMED, FENCED_AFTER_PROSE, ["To get the current time, call the tool:\n", EXAMPLE_CALL],
       finish="tool_calls", notes=["repaired"])


def test_a_bare_call_after_prose_is_the_forced_call_and_the_text_after_it_stays() -> None:
    text = 'Checking Oslo.\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\nOne moment.'
    tr(REQUIRED, text, ["Checking Oslo.\n", Call("get_weather", {"city": "Oslo"}), "One moment."],
       finish="tool_calls", notes=["repaired"])


@pytest.mark.parametrize("text", ['{"city": "Oslo"}', '```json\n{"city": "Oslo"}\n```', '\n\n{"city": "Oslo"}\n'])
def test_the_forced_tools_arguments_alone_are_its_call(text: str) -> None:
    tr(REQUIRED, text, [Call("get_weather", {"city": "Oslo"})], finish="tool_calls", notes=["repaired"])


def test_arguments_alone_after_prose_are_repaired_twice() -> None:
    # named by its keys, and read after text: two repairs, each noted
    tr(REQUIRED, 'Sure.\n{"city": "Oslo"}', ["Sure.\n", Call("get_weather", {"city": "Oslo"})],
       finish="tool_calls", notes=["repaired", "repaired"])


def test_a_named_choice_fits_only_its_own_tool() -> None:
    text = 'Sure.\n{"city": "Oslo"}'  # get_weather's arguments: not the forced get_time's
    tr(NAMED, text, [text], notes=[])


@pytest.mark.parametrize("text", [
    "It is ten past nine.",
    "Lines:\n  indented\n\n[a link](https://example.com)\n{not json}\n",
    'Here is data:\n{"x": 1}\nand more.',  # JSON that fits no tool
    "Code:\n```python\nprint({1: 2})\n```\ndone",
    'An example in a fence:\n```\n{"note": "a"}\n```\n',
])
def test_text_that_is_no_call_stays_text_under_a_forced_choice(text: str) -> None:
    tr(REQUIRED, text, [text], notes=[])


def test_json_inside_an_open_fence_is_no_line_start() -> None:
    text = 'See:\n```python\nx = 1\n{"city": "Oslo"}\n```\n'
    tr(REQUIRED, text, [text], notes=[])


@pytest.mark.parametrize("text", [FENCED_AFTER_PROSE, 'Checking Oslo.\n{"name": "get_weather", "arguments": {"city": "Oslo"}}'])
def test_without_a_forced_choice_json_after_prose_stays_text(text: str) -> None:
    tr(AUTO, text, [text], notes=[])
