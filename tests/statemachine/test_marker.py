"""Marker mode: only call blocks whose opener repeats the per-request marker are calls."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness import CFG, Call, Reasoning, tr
from statemachine import get_format

MARK = "k3J9-x_Q7pLm"
MCFG = replace(CFG, marker=MARK)
SF = {"city": "SF"}
PLAIN = '<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call>'
MARKED = f'<tool_call marker="{MARK}">{{"name": "get_weather", "arguments": {{"city": "SF"}}}}</tool_call>'


def test_quoted_unmarked_call_stays_text():
    text = f"The tool said: {PLAIN} and that is all."
    tr(MCFG, text, [text], leak_ok=True)


def test_marked_call_is_a_call():
    tr(MCFG, f"Checking. {MARKED}", ["Checking. ", Call("get_weather", SF)], finish="tool_calls")


def test_quoted_then_marked_call():
    text = f"You wrote {PLAIN}. So: {MARKED}"
    tr(MCFG, text, [f"You wrote {PLAIN}. So: ", Call("get_weather", SF)], finish="tool_calls", leak_ok=True)


def test_wrong_marker_stays_text():
    text = MARKED.replace(MARK, "guessed-1234")
    tr(MCFG, text, [text], leak_ok=True)


@pytest.mark.parametrize("text", [
    '{"name": "get_weather", "arguments": {"city": "SF"}}',
    '```json\n{"name": "get_weather", "arguments": {"city": "SF"}}\n```',
])
def test_bare_and_fenced_json_stay_text(text):
    tr(MCFG, text, [text], leak_ok=True)


def test_without_marker_mode_the_same_text_is_a_call():
    tr(CFG, f"The tool said: {PLAIN}", ["The tool said: ", Call("get_weather", SF)], finish="tool_calls")


@pytest.mark.parametrize("name", ["tool_call", "use_tool", "function"])
def test_every_format_renders_a_marked_call_that_parses(name):
    fmt = get_format(name).with_marker(MARK)
    rendered = fmt.render_call("get_weather", '{"city": "SF"}')
    assert f'marker="{MARK}"' in rendered
    tr(MCFG, rendered, [Call("get_weather", SF)], finish="tool_calls")
    plain = get_format(name).render_call("get_weather", '{"city": "SF"}')
    tr(MCFG, plain, [plain], leak_ok=True)


def test_marked_opener_inside_reasoning_is_held_like_a_plain_one():
    text = f"<think>let me call {MARKED}</think>ok"
    tr(MCFG, text, [Reasoning(f"let me call {MARKED}"), "ok"])
    # Held, not just passed through: reasoning that never closes makes the held draft a real call,
    # and only the marked opener was held (an unmarked one stays reasoning).
    tr(MCFG, f"<think>let me call {MARKED}", [Reasoning("let me call "), Call("get_weather", SF)], finish="tool_calls")
    tr(MCFG, f"<think>let me call {PLAIN}", [Reasoning(f"let me call {PLAIN}")])


def test_instructions_carry_the_marker_and_unmarked_format_is_unchanged():
    fmt = get_format("tool_call")
    assert fmt.with_marker(None) is fmt
    marked = fmt.with_marker(MARK)
    text = marked.instructions("get_weather", '{"city": "SF"}')
    assert f'<tool_call marker="{MARK}">' in text and "plain text" in text
    assert marked.with_marker(None) is fmt
    assert "marker" not in fmt.instructions("get_weather", "{}")


@pytest.mark.parametrize("bad", ["", 'a"b', "a b", "x" * 65])
def test_bad_markers_are_refused(bad):
    with pytest.raises(ValueError):
        get_format("tool_call").with_marker(bad)
