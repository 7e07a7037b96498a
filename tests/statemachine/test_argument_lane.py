"""An argument chunk inside a JSON string goes out without feeding the block's readers (``argument_lane``),
and what goes out is exactly what the readers would have sent, chunk by chunk."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings, strategies as st

from statemachine import ChoiceStream, ParserConfig, Policy, ToolSpec, registered_formats
from statemachine._jsoncall import JsonCallParser
from statemachine.formats.glm import GlmBody

WRITE_FILE = ToolSpec("write_file", parameters={"type": "object", "properties": {
    "path": {"type": "string"}, "content": {"type": "string"}}})
EVERY = tuple(f for f in registered_formats() if f != "custom_tool_call")
CONFIGS = {
    "tool_call": ParserConfig.for_tools([WRITE_FILE], formats=("tool_call",)),
    "all": ParserConfig.for_tools([WRITE_FILE], formats=("tool_call", *(f for f in EVERY if f != "tool_call"))),
    "one call": ParserConfig.for_tools([WRITE_FILE], policy=Policy(max_tool_calls=1)),
}
#: Argument text with everything a string's run stops at: quotes, escapes (valid, invalid, unicode, cut), raw
#: control characters, and text that looks like tags or openers.
PIECES = ['"', '\\"', "\\\\", "\\n", "\\t", "\\u00e9", "\\u00", "\\x", "\n", "\t", "<", "</tool_call>", "<tool_call>",
          "{", "}", "a < b", "line", " ", "é", ",", ":"]


def events_by_feed(config: ParserConfig, pieces: list[str]) -> list[list]:
    ids = itertools.count()
    stream = ChoiceStream(config, id_factory=lambda: f"call_{next(ids)}")
    return [stream.feed(piece) for piece in pieces] + [stream.finish("stop")]


def without_lane(config: ParserConfig, pieces: list[str]) -> list[list]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(JsonCallParser, "argument_lane", lambda self: None)
        return events_by_feed(config, pieces)


def cuts(text: str, sizes: list[int]) -> list[str]:
    out, pos = [], 0
    for size in itertools.cycle(sizes):
        if pos >= len(text):
            return out
        out.append(text[pos:pos + size])
        pos += size
    return out


@settings(max_examples=300, deadline=None)
@given(content=st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
       raw=st.booleans(), sizes=st.lists(st.integers(1, 12), min_size=1, max_size=5),
       name=st.sampled_from(["write_file", "other"]), wrapper=st.sampled_from(["tool_call", "bare", "mistral", "two"]),
       config=st.sampled_from(sorted(CONFIGS)))
def test_the_lane_sends_what_the_readers_send(content, raw, sizes, name, wrapper, config):
    # ``raw``: the content written into the JSON as it is (invalid escapes, raw controls, a quote that ends it)
    value = '"' + content + '"' if raw else json.dumps(content)
    call = '{"name": "%s", "arguments": {"path": "a.txt", "content": %s}}' % (name, value)
    text = {"tool_call": f"Sure. <tool_call>{call}</tool_call> done", "bare": call,
            "mistral": f"[TOOL_CALLS][{call}]", "two": f"<tool_call>{call}\n{call}</tool_call>"}[wrapper]
    pieces = cuts(text, sizes)
    assert events_by_feed(CONFIGS[config], pieces) == without_lane(CONFIGS[config], pieces)


def test_a_string_argument_mostly_skips_the_readers(monkeypatch):
    """bench-short's call in 8-character chunks: a chunk inside the string that holds no cut escape is sent by
    the scanner itself (before, every chunk went through the GLM reader, the JSON block, the call parser and
    the lexer)."""
    content = "".join(f'line {i}: "quoted" text, a < b && c > d\tend\n' for i in range(13))
    text = '<tool_call>{"name": "write_file", "arguments": ' + json.dumps({"path": "a.txt", "content": content})
    pieces = cuts(text + "}</tool_call>", [8])
    fed = []
    feed = GlmBody.feed
    monkeypatch.setattr(GlmBody, "feed", lambda self, buf, pos: fed.append(buf) or feed(self, buf, pos))
    events = events_by_feed(CONFIGS["all"], pieces)
    arguments = "".join(e.fragment for batch in events for e in batch if hasattr(e, "fragment"))
    assert json.loads(arguments)["content"] == content
    assert len(pieces) > 80 and len(fed) < 25, (len(pieces), len(fed))
