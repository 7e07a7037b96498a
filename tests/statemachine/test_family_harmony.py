"""gpt-oss Harmony through the core, under every chunking: the peers' cases (``harmony_cases``) and ours.

Reasoning channels become reasoning, calls stream verbatim, and no Harmony
token reaches the content (the harness checks every chunking for them).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from harmony_cases import CASES, TOOL_NAMES
from harness import Call, Reasoning, tr
from statemachine import ParserConfig, ToolChoice, ToolSpec, get_format
from statemachine.formats.harmony import parse_header

OBJ = {"type": "object"}
HARMONY = replace(ParserConfig.for_tools([ToolSpec(n, "", OBJ) for n in TOOL_NAMES]), formats=("harmony", "tool_call"))
NOT_PARSED = replace(HARMONY, tool_choice=ToolChoice("none"))


@pytest.mark.parametrize(("source", "label", "text", "expected", "options"), CASES,
                         ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_peer_case(source, label, text, expected, options):
    options = dict(options)
    config = NOT_PARSED if options.pop("config", None) == "none" else HARMONY
    tr(config, text, expected, **options)


# ours -------------------------------------------------------------------------

def test_rendered_call_round_trips():
    fmt = get_format("harmony")
    rendered = fmt.render_call("get_weather", '{"city": "SF"}')
    tr(HARMONY, rendered, [Call("get_weather", '{"city": "SF"}')], finish="tool_calls", notes=[])
    assert "to=functions.get_weather" in fmt.instructions("get_weather", '{"city": "SF"}')


def test_tool_result_in_harmony_form():
    assert get_format("harmony").render_result("get_weather", "sunny") == (
        "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>sunny<|end|>")
    assert get_format("tool_call").render_result("get_weather", "sunny") is None


def test_no_tools_still_split_channels():
    text = "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hi.<|return|>"
    tr(replace(HARMONY, tools={}), text, [Reasoning("Think."), "Hi."], notes=[])


def test_unknown_function_is_text():
    text = '<|channel|>commentary to=functions.rm <|constrain|>json<|message|>{"path": "/"}<|call|>'
    tr(HARMONY, text, [text], notes=["unknown_tool"], leak_ok=True)


def test_header_that_never_ends_is_text():
    text = "<|start|>" + "x" * 300
    tr(HARMONY, text, [text], leak_ok=True, two_split_limit=0)


def test_header_cut_by_the_end_of_the_stream_is_dropped():
    tr(HARMONY, "Hi<|start|>assistant<|chan", ["Hi"], notes=[])


def test_arguments_cut_by_a_new_header():
    text = ('<|channel|>commentary to=functions.get_weather<|message|>{"city": '
            "<|start|>assistant<|channel|>final<|message|>ok")
    tr(HARMONY, text, [Call("get_weather", '{"city": ', valid=False), "ok"], notes=["invalid_json"])


def test_a_lone_end_token_in_prose_is_dropped():
    tr(HARMONY, "done<|end|> and <|return|>", ["done and "], notes=[])


def test_not_listed_it_is_text():
    text = "<|channel|>analysis<|message|>x<|end|>"
    tr(replace(HARMONY, formats=("tool_call",)), text, [text], leak_ok=True)


def test_think_tags_stay_reasoning_beside_harmony():
    tr(HARMONY, "<think>a</think>b", [Reasoning("a"), "b"])


@pytest.mark.parametrize(("header", "expected"), [
    ("<|start|>assistant<|channel|>analysis", ("analysis", None)),
    ("<|channel|>commentary to=functions.f <|constrain|>json", ("commentary", "functions.f")),
    ("<|start|>assistant to=functions.f<|channel|>commentary json", ("commentary", "functions.f")),
    ("to=functions.f<|channel|>commentary", ("commentary", "functions.f")),
    ("<|start|>user", (None, None)),
    ("<|channel|>final<|end|>", None),
    ("<|channel|>final <b>", None),
])
def test_parse_header(header, expected):
    assert parse_header(header) == expected


def test_marker_mode_needs_the_marker():
    marked = replace(HARMONY, marker="k3J9")
    text = '<|start marker="k3J9"|>assistant<|channel|>commentary to=functions.get_weather<|message|>{}<|call|>'
    tr(marked, text, [Call("get_weather", "{}")], finish="tool_calls")
    plain = '<|channel|>commentary to=functions.get_weather<|message|>{}<|call|>'
    tr(marked, plain, [plain[:-len("<|call|>")]], leak_ok=True)  # an unmarked call is text
    unmarked_channels = "<|channel|>analysis<|message|>Hm.<|end|><|start|>assistant<|channel|>final<|message|>Hi."
    tr(marked, unmarked_channels, [Reasoning("Hm."), "Hi."], notes=[])  # the model's own headers still work
