"""parsing.md rules closed after the first core pass: format C ``</parameter>`` disambiguation
(2.1 C, case 40), fences in the reasoning channel (4.13), and ``<use_tool>`` bodies that stop at
a new call's opener (case 14). Every fixture goes through ``harness.tr`` (whole, per character,
every two-chunk split, fixed sizes, seeded random splits).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from harness import CFG, Call, Open, Reasoning, tr
from statemachine import ChoiceStream, ToolCallArgumentsDelta

SF = '{"city": "SF"}'
WX = f'{{"name": "get_weather", "arguments": {SF}}}'
TM = '{"name": "get_time", "arguments": {}}'
FENCE = "```"
PRE = replace(CFG, starts_in_reasoning=True)  # the template pre-opened <think>


def tc(body: str) -> str:
    return f"<tool_call>{body}</tool_call>"


def fn(*params: str, close: str = "</function>") -> str:
    return "<function=get_weather>" + "".join(params) + close


# --- 2.1 C / case 40: '</parameter>' closes a parameter only before a body tag or the end ----------

@pytest.mark.parametrize("text,city", [
    # followed by text: the '</parameter>' is part of the value
    (fn("<parameter=city>a</parameter>b</parameter>"), "a</parameter>b"),
    (fn("<parameter=city>\nx</parameter>\nmore\n</parameter>"), "x</parameter>\nmore"),
    (fn("<parameter=city>x</parameter> </parameter>\t</parameter>\n</parameter>"),
     "x</parameter> </parameter>\t</parameter>"),
    # code fences, '<', newlines and closer-like text in one value
    (fn("<parameter=city>\n```python\nif a < b:\n    print('</parameter>')\n```\n</parameter>\n"),
     "```python\nif a < b:\n    print('</parameter>')\n```"),
    # a partial closer-like tag inside the value
    (fn("<parameter=city></param </parameter>x</parameter>"), "</param </parameter>x"),
])
def test_c40_parameter_value_may_contain_closer_text(text, city):
    tr(CFG, text, [Call("get_weather", {"city": city})], finish="tool_calls")


@pytest.mark.parametrize("text", [
    fn("<parameter=city>SF</parameter>  \n <parameter=days>3</parameter>"),
    fn("<parameter=city>SF</parameter>\n", "<parameter=days>\n3\n</parameter>\n"),
    "<tool_call>\n" + fn("<parameter=city>\nSF\n</parameter>\n<parameter=days>\n3\n</parameter>\n") + "\n</tool_call>",
])
def test_c40_parameter_closes_before_the_next_tag(text):
    tr(CFG, text, [Call("get_weather", {"city": "SF", "days": 3})], finish="tool_calls")


def test_c40_block_closer_after_parameter_implies_function_close():
    """2.1 C / 4.9: ``</parameter>`` then the enclosing ``</tool_call>`` (no ``</function>``): the
    parameter and the function are closed, the call is accepted as a repair."""
    text = "<tool_call><function=get_weather><parameter=city>SF</parameter>\n</tool_call> ok"
    tr(CFG, text, [Call("get_weather", SF), " ok"], finish="tool_calls", notes=["repaired"])


def test_c40_parameter_closer_at_the_end_of_the_stream():
    """'</parameter>' followed only by whitespace and the end: it closed; the call has no closer (4.11)."""
    text = fn("<parameter=city>SF</parameter>\n  ", close="")
    tr(CFG, text, [Call("get_weather", SF)], finish="tool_calls", notes=["recovered_unclosed"])


def test_c40_parameter_closer_cut_before_a_tag_at_the_end():
    """'</parameter>' followed by the start of a tag that never completes: not known to be the closer,
    so the value never closed and the call is incomplete (4.11)."""
    text = fn("<parameter=city>SF</parameter>\n</func", close="")
    tr(CFG, text, [Open("get_weather", '{"city": "SF')], finish="stop", notes=["incomplete"])


def test_c40_non_string_value_with_closer_text_is_coerced_at_its_real_close():
    text = fn("<parameter=days>[1, \"</parameter>\"]</parameter><parameter=city>x</parameter>")
    tr(CFG, text, [Call("get_weather", {"days": [1, "</parameter>"], "city": "x"})], finish="tool_calls")


def test_c40_whitespace_hold_after_a_closer_is_bounded():
    """10.2: the hold after ``</parameter>`` is bounded; past it the text is value text, the same
    under every chunking."""
    ws = " " * 3000
    text = fn("<parameter=city>a</parameter>" + ws + "</parameter>")
    tr(CFG, text, [Call("get_weather", {"city": "a</parameter>" + ws})], finish="tool_calls", two_split_limit=0)


def test_c40_string_values_stream_while_closer_text_is_held():
    """2.1 C streaming: value text goes out as it arrives; only ``</parameter>`` and the whitespace
    after it wait for the next tag (a ``<parameter=K>`` tag's name decides: a key already sent is no
    new parameter)."""
    s = ChoiceStream(CFG)
    sent = ""
    for piece in ["<function=get_weather><parameter=city>ab", "c</parameter>", "  ", "d", "e</parameter>", "\n",
                  "<parameter=", "days>3</parameter></function>"]:
        sent += "".join(e.fragment for e in s.feed(piece) if isinstance(e, ToolCallArgumentsDelta))
        if piece == "<function=get_weather><parameter=city>ab":
            assert sent == '{"city": "ab'
        elif piece in ("c</parameter>", "  "):
            assert sent == '{"city": "abc'  # the possible closer and its whitespace are held
        elif piece == "d":
            assert sent == '{"city": "abc</parameter>  d'  # text followed: it was value text
        elif piece in ("e</parameter>", "\n", "<parameter="):
            assert sent == '{"city": "abc</parameter>  de'
        elif piece == "days>3</parameter></function>":
            assert sent == '{"city": "abc</parameter>  de", "days": 3}'
    s.finish()
    assert sent == '{"city": "abc</parameter>  de", "days": 3}'


# --- 4.13: fences in the reasoning channel are tracked ------------------------------------------

EXAMPLE = "Example:\n" + FENCE + "\n" + tc(WX) + "\n" + FENCE + "\n"


@pytest.mark.parametrize("text,expected,finish", [
    # a fenced example in reasoning that never closes: never promoted to a call (4.12 / 4.13)
    ("<think>" + EXAMPLE, [Reasoning(EXAMPLE)], "stop"),
    ("<think>" + EXAMPLE + "so</think>Answer.", [Reasoning(EXAMPLE + "so"), "Answer."], "stop"),
    # '</think>' inside a fence in reasoning is reasoning text
    ("<think>The end tag:\n~~~\n</think>\n~~~\ndone</think>Answer.",
     [Reasoning("The end tag:\n~~~\n</think>\n~~~\ndone"), "Answer."], "stop"),
    # a real draft after the fence closes still counts, and is promoted when reasoning never ends
    ("<think>" + EXAMPLE + "calling:" + tc(TM), [Reasoning(EXAMPLE + "calling:"), Call("get_time", "{}")],
     "tool_calls"),
    # after reasoning, a fence opened there is closed: a call in the content counts
    ("<think>" + EXAMPLE + "</think>" + tc(TM), [Reasoning(EXAMPLE), Call("get_time", "{}")], "tool_calls"),
    # a promoted draft is scanned again with the fence state where it began, not where reasoning stopped
    ("<think>go:" + tc('{"name": "get_weather", "arguments": {"city": "a\n```\nb"}}') + tc(TM),
     [Reasoning("go:"), Call("get_weather", '{"city": "a\\n```\\nb"}'), Call("get_time", "{}")], "tool_calls"),
])
def test_413_fences_in_reasoning(text, expected, finish):
    tr(CFG, text, expected, finish=finish, leak_ok=True)


def test_413_fence_in_pre_opened_reasoning():
    """4.12 / 4.13: with a template-opened ``<think>`` a fenced example is still reasoning."""
    text = "Format:\n```\n" + tc(TM) + "\n</think>\n```\nok</think>" + tc(TM)
    tr(PRE, text, [Reasoning("Format:\n```\n" + tc(TM) + "\n</think>\n```\nok"), Call("get_time", "{}")],
       finish="tool_calls")


# --- case 14 / 4.9: a new opener ends an unfinished <use_tool> body -------------------------------

UT_ARGS = '<use_tool><name>get_weather</name><args>{"city": "SF"'


@pytest.mark.parametrize("text,expected,finish,notes", [
    # arguments interrupted after the header went out: that call ends invalid, the next one starts
    (UT_ARGS + tc(TM), [Call("get_weather", '{"city": "SF"', valid=False), Call("get_time", "{}")], "stop",
     ["invalid_json"]),
    # a complete body (name and arguments) without its closer: accepted, the next call starts
    (UT_ARGS + "}</args>" + tc(TM), [Call("get_weather", SF), Call("get_time", "{}")], "tool_calls", []),
    (UT_ARGS + "}</args>\n<use_tool name='get_time'></use_tool>", [Call("get_weather", SF), Call("get_time", "{}")],
     "tool_calls", []),
    ("<use_tool><name>localSearch</name><query>q</query>" + tc(TM),
     [Call("localSearch", {"query": "q"}), Call("get_time", "{}")], "tool_calls", []),
    # nothing of the call was sent: its text goes back to content
    ("<use_tool><name>get_weather</name>" + tc(TM), ["<use_tool><name>get_weather</name>", Call("get_time", "{}")],
     "tool_calls", ["invalid_json"]),
    ("<use_tool><name>get_wea" + tc(TM), ["<use_tool><name>get_wea", Call("get_time", "{}")], "tool_calls",
     ["invalid_json"]),
    ('<use_tool>{"name": "get_weather", "city": "SF"' + tc(TM),
     ['<use_tool>{"name": "get_weather", "city": "SF"', Call("get_time", "{}")], "tool_calls", ["invalid_json"]),
    ('<use_tool name="get_weather"' + tc(TM), ['<use_tool name="get_weather"', Call("get_time", "{}")],
     "tool_calls", ["invalid_json"]),
    ("<use_tool><name>get_weather</name>oops " + tc(TM),
     ["<use_tool><name>get_weather</name>oops ", Call("get_time", "{}")], "tool_calls", ["invalid_json"]),
    ("<use_tool><name>get_weather</name>" + "<function=get_time></function>",
     ["<use_tool><name>get_weather</name>", Call("get_time", "{}")], "tool_calls", ["invalid_json"]),
    # an opener inside a JSON string or a child's value is part of the value
    ('<use_tool><name>get_weather</name><args>{"city": "<tool_call>"}</args></use_tool>',
     [Call("get_weather", '{"city": "<tool_call>"}')], "tool_calls", []),
    ("<use_tool><name>localSearch</name><query>use <tool_call> tags</query></use_tool>",
     [Call("localSearch", {"query": "use <tool_call> tags"})], "tool_calls", []),
])
def test_c14_opener_ends_an_unfinished_use_tool_body(text, expected, finish, notes):
    tr(CFG, text, expected, finish=finish, notes=notes, leak_ok=True)


def test_c14_opener_ends_a_skipped_tool_call_body():
    """4.9: a ``<tool_call>`` body that broke its JSON is skipped to its closer, but a new call's
    opener before that closer ends it: the broken block is text, the next call counts."""
    text = '<tool_call>{"name": "get_weather", oops}' + tc(TM)
    tr(CFG, text, ['<tool_call>{"name": "get_weather", oops}', Call("get_time", "{}")], finish="tool_calls",
       notes=["invalid_json"], leak_ok=True)


def test_c30_use_tool_opener_in_prose_is_text():
    """4.2 / case 30: an opener followed by prose is text at once; a real block after it still counts."""
    text = "Use <use_tool> blocks to call tools. <use_tool><name>get_time</name></use_tool>"
    tr(CFG, text, ["Use <use_tool> blocks to call tools. ", Call("get_time", "{}")], finish="tool_calls",
       notes=[], leak_ok=True)


@pytest.mark.parametrize("text", [
    '<use_tool name="' + "x" * 300 + "</use_tool> after",
    "<use_tool><name>get_weather</name><" + "a" * 300 + "</use_tool> after",
])
def test_c47_use_tool_tags_are_bounded(text):
    """10.1 / 4.1: a tag (or the opener's attributes) without its '>' is given up after a bounded
    look-ahead: the block is malformed and goes back to text, the same under every chunking."""
    tr(CFG, text, [text], finish="stop", notes=["invalid_json"], leak_ok=True, two_split_limit=0)


@pytest.mark.parametrize("upstream,expected,finish,notes", [
    ("stop", [Call("localSearch", {"query": "q"})], "tool_calls", ["recovered_unclosed"]),
    ("length", ["<use_tool><name>localSearch</name><query>q</query>"], "length", ["incomplete"]),
])
def test_c16_use_tool_parameter_children_without_closer(upstream, expected, finish, notes):
    """4.11: parameter children complete but no ``</use_tool>``: accepted after ``stop``; after
    ``length`` nothing was sent, so the block goes back to text."""
    text = "<use_tool><name>localSearch</name><query>q</query>"
    tr(CFG, text, expected, finish=finish, upstream=upstream, notes=notes, leak_ok=True)


GEMMA3 = replace(CFG, formats=("gemma", "tool_call"))


@pytest.mark.parametrize("cfg,cut", [
    (CFG, "\n<tool_call>"),
    (CFG, '<tool_call>{"name": "'),
    (CFG, '<tool_call>{"name": "get_w'),
    (GEMMA3, "\n```tool_code\nget"),
])
def test_a_call_cut_by_length_before_its_name_leaks_no_opener(cfg, cut):
    """Issue 31, fault 2 (SmolLM2 and Gemma 3 at max_tokens): a call cut before its name is complete is no
    text; the calls before it stand and the finish stays ``length`` (4.11). A cut after the name still goes
    back to text (case 16 above); after ``stop`` the block is text too."""
    first = get_time_call(cfg)
    tr(cfg, first + cut, [Call("get_time", "{}")], finish="length", upstream="length")
    tr(cfg, first + cut, [Call("get_time", "{}"), cut], finish="tool_calls", leak_ok=True)


def get_time_call(cfg) -> str:
    return "```tool_code\nget_time()\n```" if cfg is GEMMA3 else tc(TM)


# --- case 28: template pre-opened <think> ---------------------------------------------------------

@pytest.mark.parametrize("cfg,text,expected,finish", [
    (PRE, "thinking</think>Answer", [Reasoning("thinking"), "Answer"], "stop"),
    # a redundant <think> at the start of reasoning is tolerated (absorbed)
    (PRE, "<think>thinking</think>Answer", [Reasoning("thinking"), "Answer"], "stop"),
    (PRE, "\n<think>\nthinking</think>" + tc(TM), [Reasoning("\n\nthinking"), Call("get_time", "{}")], "tool_calls"),
    (CFG, "<think><think>a</think>Answer", [Reasoning("a"), "Answer"], "stop"),
    # … but not later in the reasoning, where it is reasoning text
    (PRE, "use <think> tags</think>Answer", [Reasoning("use <think> tags"), "Answer"], "stop"),
    # a duplicate </think> is absorbed
    (PRE, "a</think></think>Answer", [Reasoning("a"), "Answer"], "stop"),
    (CFG, "<think>a</think>\n</think>" + tc(TM), [Reasoning("a"), Call("get_time", "{}")], "tool_calls"),
])
def test_c28_pre_opened_think(cfg, text, expected, finish):
    tr(cfg, text, expected, finish=finish)


# --- case 39: non-object arguments are flagged, never sent as non-JSON ------------------------------

@pytest.mark.parametrize("text,expected,finish", [
    # the header went out with an array: the call ends invalid (flagged), the finish is not tool_calls
    (tc('{"name": "get_weather", "arguments": [1, 2]}'), [Call("get_weather", "[1, 2]", valid=False)], "stop"),
    # a scalar or a string that holds no object: nothing was sent, the block is text
    (tc('{"name": "get_weather", "arguments": 5}'), [tc('{"name": "get_weather", "arguments": 5}')], "stop"),
    (tc('{"name": "get_weather", "arguments": "x"}'), [tc('{"name": "get_weather", "arguments": "x"}')], "stop"),
    ("<function=get_weather>[1]</function>", ["<function=get_weather>[1]</function>"], "stop"),
    ("<use_tool><name>get_weather</name><args>5</args></use_tool>",
     ["<use_tool><name>get_weather</name><args>5</args></use_tool>"], "stop"),
])
def test_c39_non_object_arguments(text, expected, finish):
    tr(CFG, text, expected, finish=finish, notes=["invalid_json"], leak_ok=True)


# --- 2.1 C: string parameter values are escaped exactly as json.dumps would, however they are cut ------

@pytest.mark.parametrize("value", [
    'a\t"b" \\ c <b> <param x\x01',
    "caf\u00e9 \u2603 < <parameter <function",
    "plain text with no escapes at all",
])
def test_format_c_string_value_escaping(value):
    text = fn(f"<parameter=city>\n{value}\n</parameter>")
    tr(CFG, text, [Call("get_weather", json.dumps({"city": value}, ensure_ascii=False))], finish="tool_calls")
