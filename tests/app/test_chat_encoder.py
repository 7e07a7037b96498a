"""The Chat encoder's hot path writes the same bytes as the general path, event for event."""

from __future__ import annotations

import pytest

from app.chat.encoder import ChatChunker, ChatEncoder
from statemachine import ChoiceFinished, ReasoningDelta, TextDelta, ToolCallArgumentsDelta, ToolCallStarted

NASTY = 'wörld "quoted" \\ back\nslash <tag> \u2028 \x01 🎉'


def events() -> list[tuple[int, object]]:
    """Two choices interleaved (the second seen first), text, a call with argument fragments, reasoning."""
    return [
        (1, TextDelta("second choice first")),
        (0, ReasoningDelta("thinking")),
        (0, TextDelta(NASTY)),
        (1, TextDelta(NASTY)),
        (0, ToolCallStarted(0, "call_a", "write_file")),
        (0, ToolCallArgumentsDelta(0, '{"path": "a.txt", ')),
        (0, ToolCallArgumentsDelta(0, NASTY)),
        (0, ToolCallStarted(1, "call_b", "read_file")),
        (0, ToolCallArgumentsDelta(1, "{}")),
        (1, ToolCallStarted(0, "call_c", "read_file")),
        (1, ToolCallArgumentsDelta(0, "{}")),
        (0, ChoiceFinished("tool_calls")),
        (1, ChoiceFinished("tool_calls")),
    ]


class GeneralChunker(ChatChunker):
    """The chunker with its hot path switched off."""

    __slots__ = ()

    def delta_frame(self, index, event):
        return None


class GeneralOnly(ChatEncoder):
    """The encoder with its hot path switched off."""

    __slots__ = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._chunker.__class__ = GeneralChunker


@pytest.mark.parametrize("include_usage", [False, True])
@pytest.mark.parametrize("legacy_functions", [False, True])
def test_delta_frames_equal_the_general_path(include_usage, legacy_functions):
    args = ("chatcmpl-x\"y", 1700000000, "m/ö\"del")
    fast = ChatEncoder(*args, include_usage=include_usage, legacy_functions=legacy_functions)
    general = GeneralOnly(*args, include_usage=include_usage, legacy_functions=legacy_functions)
    hot = 0
    for index, event in events():
        expected = general.frames(index, event)
        hot += fast._chunker.delta_frame(index, event) is not None
        assert fast.frames(index, event) == expected, event
    assert hot >= (2 if legacy_functions else 6)  # the hot path did run


def test_a_choice_not_open_yet_goes_through_the_general_path():
    encoder = ChatEncoder("c", 1, "m")
    assert encoder._chunker.delta_frame(0, TextDelta("x")) is None  # its role is not out yet
    encoder.frames(0, TextDelta("x"))
    assert encoder._chunker.delta_frame(0, TextDelta("y")) is not None
    assert encoder._chunker.delta_frame(2, TextDelta("y")) is None  # choice 1 must open first
