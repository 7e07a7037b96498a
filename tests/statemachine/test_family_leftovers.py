"""Fidelity leftovers of the model-family formats (issue 18), each pinned under every chunking.

Special tokens that arrive as text stay out of the content, a family's
reasoning delimiters make reasoning, an opener two formats share is read by
the body that follows it, and one bad call in a block does not take the
valid calls after it with it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness import Call, Reasoning, tr
from statemachine import ParserConfig, ToolSpec

STR = {"type": "string"}
WEATHER = ToolSpec("get_weather", "", {"type": "object", "properties": {"city": STR}})
TIME = ToolSpec("get_time", "", {"type": "object"})
WRITE = ToolSpec("write", "", {"type": "object", "properties": {"code": STR}})
TOOLS = ParserConfig.for_tools([WEATHER, TIME, WRITE])
SF = {"city": "SF"}


def formats(*names: str) -> ParserConfig:
    return replace(TOOLS, formats=names)


# MiniMax: a value keeps its leading whitespace ----------------------------------------------------------

def test_minimax_value_keeps_its_indentation():
    text = ('<minimax:tool_call><invoke name="write"><parameter name="code">    return 1\n</parameter>'
            "</invoke></minimax:tool_call>")
    tr(formats("minimax"), text, [Call("write", {"code": "    return 1"})], finish="tool_calls", notes=[])


# one bad call in a block, then a valid one ---------------------------------------------------------------

KIMI = formats("kimi_k2", "tool_call")
SB, SE, CB, CE, AB = ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                      "<|tool_call_end|>", "<|tool_call_argument_begin|>")
DSB, DSE, DCB, DCE, DSEP = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                            "<｜tool▁call▁end｜>", "<｜tool▁sep｜>")


@pytest.mark.parametrize("bad", ["functions.get_weather:0 junk", "functions.bad name:0", "!!!", ""])
def test_kimi_a_malformed_header_is_dropped_and_the_next_call_recovered(bad):
    text = f'Sure. {SB}{CB}{bad}{AB}{{"city": "x"}}{CE}{CB}functions.get_weather:1{AB}{{"city": "SF"}}{CE}{SE}'
    tr(KIMI, text, ["Sure. ", Call("get_weather", SF)], finish="tool_calls", notes=["invalid_json"])


def test_kimi_a_malformed_header_between_two_calls():
    text = (f"{SB}{CB}functions.get_time:0{AB}{{}}{CE}{CB}functions.get weather:1{AB}{{}}{CE}"
            f'{CB}functions.get_weather:2{AB}{{"city": "SF"}}{CE}{SE} Done.')
    tr(KIMI, text, [Call("get_time", {}), Call("get_weather", SF), " Done."], finish="tool_calls",
       notes=["invalid_json"])


def test_deepseek_a_malformed_fenced_header_is_dropped_and_the_next_call_recovered():
    text = (f"{DSB}{DCB}function{DSEP}bad name\n```json\n{{}}\n```{DCE}"
            f'{DCB}function{DSEP}get_weather\n```json\n{{"city": "SF"}}\n```{DCE}{DSE}')
    tr(formats("deepseek", "tool_call"), text, [Call("get_weather", SF)], finish="tool_calls",
       notes=["invalid_json"])


def test_a_section_of_malformed_calls_alone_goes_back_to_text_without_its_tokens():
    text = f"Sure. {SB}{CB}functions.bad name:0{AB}{{}}{CE}{SE}"
    tr(KIMI, text, ["Sure. functions.bad name:0{}"], notes=["invalid_json"])


def test_a_mistral_block_that_is_no_call_goes_back_to_text_without_its_token():
    tr(formats("mistral", "tool_call"), "See [TOOL_CALLS] for details.", ["See  for details."], notes=[])


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "nope", "arguments": {}}\n{"name": "get_time", "arguments": {}}</tool_call>',
    '<tool_call>[{"name": "nope", "arguments": {}}, {"name": "get_time", "arguments": {}}]</tool_call>',
    '<minimax:tool_call><invoke name="nope"><parameter name="a">b</parameter></invoke><invoke name="get_time">'
    "</invoke></minimax:tool_call>",
    f"{SB}{CB}functions.nope:0{AB}{{}}{CE}{CB}functions.get_time:1{AB}{{}}{CE}{SE}",
])
def test_an_unknown_tool_before_a_valid_call_in_one_block_leaks_no_opener(text):
    tr(formats("tool_call", "minimax", "kimi_k2"), text, [Call("get_time", {})], finish="tool_calls",
       notes=["unknown_tool"])


# <tool_call> shared by format A and GLM: the body decides ---------------------------------------------------

GLM_CALL = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>SF</arg_value>\n</tool_call>"
A_CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call>'


@pytest.mark.parametrize("names", [("tool_call", "glm"), ("glm", "tool_call"), ("use_tool", "tool_call", "glm")])
@pytest.mark.parametrize("text", [GLM_CALL, A_CALL, "<tool_call>\n<function=get_weather>\n<parameter=city>\nSF\n"
                                  "</parameter>\n</function>\n</tool_call>"])
def test_glm_accepted_after_format_a_reads_both_bodies(names, text):
    tr(formats(*names), f"Checking. {text}", ["Checking. ", Call("get_weather", SF)], finish="tool_calls", notes=[])


def test_glm_syntax_is_text_when_glm_is_not_requested():
    tr(formats("tool_call"), GLM_CALL, [GLM_CALL], leak_ok=True)


# end-of-turn tokens arriving as text are dropped; a family's reasoning delimiters make reasoning -----------

LLAMA_CALL = '<|python_tag|>{"name": "get_weather", "parameters": {"city": "SF"}}'


@pytest.mark.parametrize(("names", "text", "expected"), [
    (("llama3", "tool_call"), "Hello.<|eot_id|>", ["Hello."]),
    (("llama3", "tool_call"), "Hello.<|eom_id|> Bye.<|eot_id|>", ["Hello. Bye."]),
    (("llama3", "tool_call"), f"{LLAMA_CALL}<|eom_id|><|eot_id|>", [Call("get_weather", SF)]),
    (("llama3", "tool_call"), f"Sure.<|eot_id|>{LLAMA_CALL}<|eom_id|>", ["Sure.", Call("get_weather", SF)]),
    (("deepseek", "tool_call"), "Hello.<｜end▁of▁sentence｜>", ["Hello."]),
    (("kimi_k2", "tool_call"), "Hello.<|im_end|>", ["Hello."]),
    (("glm", "tool_call"), f"{GLM_CALL}<|observation|>", [Call("get_weather", SF)]),
    (("glm", "tool_call"), "Hello.<|user|>", ["Hello."]),
    (("seed_oss", "tool_call"), "Hello.<seed:eos>", ["Hello."]),
    (("pythonic", "tool_call"), "Hello.<|eot|>", ["Hello."]),
    (("pythonic", "tool_call"), '[get_weather(city="SF")]<|eom|>', [Call("get_weather", SF)]),
    (("olmo3", "tool_call"), "Hello.<|im_end|>", ["Hello."]),
    (("gemma", "tool_call"), "Hello.<end_of_turn>", ["Hello."]),
    (("functiongemma", "tool_call"), "Hello.<end_of_turn>", ["Hello."]),
    (("functionary", "tool_call"), "Hello.<|eot_id|>", ["Hello."]),
    (("functionary_v3_2", "tool_call"), "Hello.<|eot_id|>", ["Hello."]),
])
def test_a_family_end_of_turn_token_never_reaches_the_content(names, text, expected):
    finish = "tool_calls" if any(isinstance(item, Call) for item in expected) else "stop"
    tr(formats(*names), text, expected, finish=finish, notes=[])


def test_end_of_turn_tokens_stay_text_when_their_family_is_not_requested():
    tr(formats("tool_call"), "Hello.<|eot_id|>", ["Hello.<|eot_id|>"], notes=[])


@pytest.mark.parametrize("text", [
    "Llama 3 ends a turn with <|eot_id|> and Gemma with <end_of_turn>.",
    "Magistral thinks in [THINK] … [/THINK] and Seed-OSS in <seed:think> … </seed:think>; the rest stays.",
    "Mistral's calls start with [TOOL_CALLS] and DeepSeek's with <｜tool▁calls▁begin｜>, as quoted here.",
])
def test_a_family_accepted_only_for_its_calls_leaves_quoted_special_tokens_in_the_prose(text):
    """Every family accepted (``accept_formats=all``) with ``tool_call`` taught: another family's reasoning
    delimiters, end tokens and call tokens quoted in prose are the prose; its calls are still read."""
    accept_all = formats("tool_call", "llama3", "gemma", "mistral", "seed_oss", "deepseek")
    tr(accept_all, text, [text], notes=None, leak_ok=True)
    tr(accept_all, f"Sure.<|eot_id|>{LLAMA_CALL}", ["Sure.<|eot_id|>", Call("get_weather", SF)], finish="tool_calls",
       notes=["recovered_unclosed"])


@pytest.mark.parametrize(("names", "opener", "closer"), [
    (("seed_oss", "tool_call"), "<seed:think>", "</seed:think>"),
    (("mistral", "tool_call"), "[THINK]", "[/THINK]"),
])
def test_a_family_reasoning_block_is_reasoning(names, opener, closer):
    config = formats(*names)
    tr(config, f"{opener}Let me think.{closer}The answer.", [Reasoning("Let me think."), "The answer."], notes=[])
    tr(config, f"The answer.{closer}", ["The answer."], notes=[])  # a stray closer is absorbed
    tr(replace(config, starts_in_reasoning=True), f"Let me think.{closer}The answer.",
       [Reasoning("Let me think."), "The answer."], notes=[])


@pytest.mark.parametrize(("names", "text"), [
    (("mistral", "tool_call"), "[THINK]Let me think.[/THINK]The answer."),
    (("harmony", "tool_call"),
     "<|channel|>analysis<|message|>Let me think.<|end|><|channel|>final<|message|>The answer."),
])
def test_a_family_reasoning_syntax_is_read_with_think_tags_off(names, text):
    """``ParserConfig.reasoning`` is about ``<think>``; a family's own delimiters are part of its syntax."""
    config = replace(formats(*names), reasoning=False)
    tr(config, text, [Reasoning("Let me think."), "The answer."], notes=[])
    tr(config, "<think>x</think>Hi.", ["<think>x</think>Hi."], notes=[], leak_ok=True)


def test_seed_think_keeps_a_drafted_call_in_reasoning():
    text = ("<seed:think>Maybe <seed:tool_call><function=get_weather><parameter=city>SF</parameter></function>"
            "</seed:tool_call></seed:think>Done.")
    tr(formats("seed_oss", "tool_call"), text, [Reasoning(text[len("<seed:think>"):-len("</seed:think>Done.")]),
                                                 "Done."], notes=[])
