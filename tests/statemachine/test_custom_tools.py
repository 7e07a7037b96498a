"""Custom (freeform) tool calls: ``<custom_tool_call name="NAME">`` + raw input, under every chunking."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness import TIME, WEATHER, Call, Custom, Open, Reasoning, counter_ids, run_chunks, tr, tr_raises
from statemachine import (
    ChoiceStream,
    ModelOutputError,
    ParserConfig,
    Policy,
    ToolCallArgumentsDelta,
    ToolCallEnded,
    ToolCallInputDelta,
    ToolCallStarted,
    ToolSpec,
    get_format,
)

APPLY_PATCH = ToolSpec("apply_patch", "Edit files with a patch", kind="custom")
CFG = ParserConfig.for_tools([WEATHER, TIME, APPLY_PATCH])

# A patch holding everything a body must not trip over: tags, a call opener and closers of other
# formats, braces, quotes, backticks, a fenced block, a '<think>' and a partial-closer look-alike.
PATCH = """*** Begin Patch
*** Update File: src/app.py
@@ def render():
-    return "<b>{name}</b>"
+    return f'<b class="x">{name!r}</b>'  # `code`
+    # <tool_call>{"name": "get_time", "arguments": {}}</tool_call> and </function> <think>
+    # ```python
+    # print("</custom_tool")
+    # ```
*** End Patch"""


def block(name: str, text: str) -> str:
    return f'<custom_tool_call name="{name}">\n{text}\n</custom_tool_call>'


def test_a_patch_is_taken_verbatim():
    text = f"Editing the file.\n{block('apply_patch', PATCH)}"
    tr(CFG, text, ["Editing the file.\n", Custom("apply_patch", PATCH)], finish="tool_calls", notes=[],
       two_split_limit=len(text))


def test_text_after_the_call_is_content():
    text = f"{block('apply_patch', 'x')}\nDone."
    tr(CFG, text, [Custom("apply_patch", "x"), "\nDone."], finish="tool_calls")


@pytest.mark.parametrize("text,expected", [
    ('<custom_tool_call name="apply_patch">abc</custom_tool_call>', "abc"),
    ('<custom_tool_call name="apply_patch"></custom_tool_call>', ""),
    ('<custom_tool_call name="apply_patch">\n</custom_tool_call>', ""),
    ('<custom_tool_call name="apply_patch">\n\n\n</custom_tool_call>', "\n"),
    ('<custom_tool_call name="apply_patch">\r\nline\r\n</custom_tool_call>', "\r\nline\r"),
    ("<custom_tool_call name='apply_patch' >\n  indented  \n</custom_tool_call>", "  indented  "),
])
def test_exactly_one_newline_is_trimmed_at_each_end(text, expected):
    tr(CFG, text, [Custom("apply_patch", expected)], finish="tool_calls")


@pytest.mark.parametrize("raw", [PATCH, PATCH + "\n", "\n" + PATCH, "one line", ""])
def test_render_call_round_trips(raw):
    rendered = get_format("custom_tool_call").render_call("apply_patch", raw)
    tr(CFG, rendered, [Custom("apply_patch", raw)], finish="tool_calls", two_split_limit=len(rendered))


def test_function_and_custom_calls_in_one_response():
    patch = "*** Begin Patch\n*** End Patch"
    text = ('Checking first. <tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call>\n'
            f"{block('apply_patch', patch)}\n"
            '<function=get_time>{}</function>')
    tr(CFG, text, ["Checking first. ", Call("get_weather", {"city": "SF"}),
                   Custom("apply_patch", patch), Call("get_time", {})],
       finish="tool_calls", notes=[])


def test_events_tell_a_custom_call_from_a_function_call():
    text = '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>' + block("apply_patch", "a\nb")
    events = run_chunks(CFG, [text[:60], text[60:]])
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [(e.name, e.kind) for e in started] == [("get_time", "function"), ("apply_patch", "custom")]
    assert all(e.index == 0 for e in events if isinstance(e, ToolCallArgumentsDelta))
    inputs = [e for e in events if isinstance(e, ToolCallInputDelta)]
    assert inputs and all(e.index == 1 for e in inputs)
    ended = [e for e in events if isinstance(e, ToolCallEnded)]
    assert [(e.kind, e.valid) for e in ended] == [("function", True), ("custom", True)]
    assert ended[1].input == ended[1].arguments == "a\nb"


def test_the_header_goes_out_before_any_input_arrives():
    s = ChoiceStream(CFG, id_factory=counter_ids())
    events = s.feed('<custom_tool_call name="apply_patch">')
    assert [type(e) for e in events] == [ToolCallStarted]
    assert s.feed("\n*** Begin") == [ToolCallInputDelta(0, "*** Begin")]
    assert s.feed(" Patch\n") == [ToolCallInputDelta(0, " Patch")]  # the newline may be the last: held
    assert s.feed("</custom_tool") == []  # maybe the closer
    assert s.feed("_callx") == [ToolCallInputDelta(0, "\n</custom_tool_callx")]


def test_an_unknown_name_is_text():
    text = block("rm_rf", "everything")
    tr(CFG, text, [text], notes=["unknown_tool"], leak_ok=True)


def test_kinds_must_match_the_tool():
    as_custom = block("get_time", "{}")
    tr(CFG, as_custom, [as_custom], notes=["unknown_tool"], leak_ok=True)
    as_function = '<tool_call>{"name": "apply_patch", "arguments": {"input": "x"}}</tool_call>'
    tr(CFG, as_function, [as_function], notes=["unknown_tool"], leak_ok=True)


@pytest.mark.parametrize("text", [
    "<custom_tool_call >x</custom_tool_call>",
    '<custom_tool_call tool="apply_patch">x</custom_tool_call>',
    '<custom_tool_call name="apply_patch" <b>x</custom_tool_call>',
])
def test_a_tag_without_a_name_is_text(text):
    tr(CFG, text, [text], notes=[], leak_ok=True)


def test_without_custom_tools_the_block_is_text_even_if_listed():
    config = ParserConfig.for_tools([WEATHER], formats=("tool_call", "custom_tool_call"))
    text = block("apply_patch", "x")
    tr(config, text, [text], notes=["unknown_tool"], leak_ok=True)
    plain = ParserConfig.for_tools([WEATHER])
    tr(plain, text, [text], notes=[], leak_ok=True)


def test_custom_tools_are_recognised_whatever_formats_lists():
    config = replace(CFG, formats=("use_tool",))
    tr(config, block("apply_patch", "x"), [Custom("apply_patch", "x")], finish="tool_calls")


def test_unclosed_call_after_stop_is_accepted():
    text = '<custom_tool_call name="apply_patch">\n*** Begin Patch\n*** End Patch\n'
    tr(CFG, text, [Custom("apply_patch", "*** Begin Patch\n*** End Patch")], finish="tool_calls",
       notes=["recovered_unclosed"])


def test_unclosed_call_after_length_is_incomplete():
    text = '<custom_tool_call name="apply_patch">\n*** Begin Patch\n*** Upd'
    tr(CFG, text, [Open("apply_patch", "*** Begin Patch\n*** Upd")], finish="length", upstream="length",
       notes=["incomplete"])


def test_unfinished_opening_tag_at_the_end_is_text():
    text = '<custom_tool_call name="apply_pa'
    tr(CFG, text, [text], notes=["incomplete"], leak_ok=True)


def test_parallel_tool_calls_false_drops_the_second_call():
    config = replace(CFG, parallel_tool_calls=False)
    text = f"{block('apply_patch', 'a')}{block('apply_patch', 'b')}"
    tr(config, text, [Custom("apply_patch", "a")], finish="tool_calls", notes=["suppressed"])


def test_a_draft_in_closed_reasoning_stays_reasoning():
    draft = block("apply_patch", "x")
    text = f"<think>maybe {draft}</think>ok"
    tr(CFG, text, [Reasoning(f"maybe {draft}"), "ok"])


def test_marked_custom_call():
    mark = "k3J9"
    config = replace(CFG, marker=mark)
    fmt = get_format("custom_tool_call").with_marker(mark)
    rendered = fmt.render_call("apply_patch", PATCH)
    assert rendered.startswith(f'<custom_tool_call marker="{mark}" name="apply_patch">\n')
    tr(config, rendered, [Custom("apply_patch", PATCH)], finish="tool_calls", two_split_limit=0)
    plain = block("apply_patch", "x")
    tr(config, plain, [plain], leak_ok=True)


REGEX_TOOL = ToolSpec("set_level", kind="custom",
                      input_format={"type": "grammar", "syntax": "regex", "definition": r"(low|high)"})


def test_a_regex_grammar_is_checked_at_the_end():
    config = ParserConfig.for_tools([REGEX_TOOL])
    tr(config, block("set_level", "high"), [Custom("set_level", "high")], finish="tool_calls", notes=[])
    tr(config, block("set_level", "medium"), [Custom("set_level", "medium")], finish="tool_calls",
       notes=["schema_mismatch"])
    text_policy = replace(config, policy=Policy(schema_mismatch="text"))
    tr(text_policy, block("set_level", "medium"), [Custom("set_level", "medium", valid=False)], finish="stop",
       notes=["schema_mismatch"])


def test_a_strict_regex_tool_fails_on_a_mismatch():
    config = ParserConfig.for_tools([replace(REGEX_TOOL, strict=True)])
    tr_raises(config, block("set_level", "medium"), ModelOutputError, code="tool_arguments_invalid")


def test_a_lark_grammar_is_not_checked():
    lark = ToolSpec("set_level", kind="custom",
                    input_format={"type": "grammar", "syntax": "lark", "definition": 'start: "low"'})
    config = ParserConfig.for_tools([lark])
    tr(config, block("set_level", "anything"), [Custom("set_level", "anything")], finish="tool_calls", notes=[])


def test_instructions_show_a_worked_example():
    fmt = get_format("custom_tool_call")
    text = fmt.instructions("apply_patch", "*** Begin Patch\n*** End Patch")
    assert fmt.render_call("apply_patch", "*** Begin Patch\n*** End Patch") in text
    assert "not JSON" in text and "</custom_tool_call>" in text
