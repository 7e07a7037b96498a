"""The core's shape: small modules, a small public surface, and every boundary event sent by the table."""

from __future__ import annotations

import gc
import pathlib
import weakref

import pytest

from harness import CFG, chunkings
from statemachine import (TRANSITIONS, ChoiceFinished, ChoiceStream, ParserConfig, Policy, ToolCallEnded,
                          ToolCallNote, ToolCallStarted, ToolChoice, ToolSpec)
from statemachine._calls import CallMachine
from statemachine._table import ON_ENTER

CORE = pathlib.Path(__file__).resolve().parents[2] / "statemachine"


def test_no_module_of_the_core_is_over_500_lines():
    sizes = {str(p.relative_to(CORE)): len(p.read_text().splitlines()) for p in CORE.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 500} == {}


def test_choice_streams_public_names_are_its_api_and_the_call_books_port():
    public = {name for name in dir(ChoiceStream) if not name.startswith("_")}
    port = {name for name in dir(CallMachine) if not name.startswith("_")}
    assert port == {"begin_call", "complete_name"}
    assert public - port == {"config", "feed", "feed_tool_call", "finish", "inside_call", "path", "spans", "state", "wants_more"}


@pytest.mark.parametrize("finished", [False, True])
def test_a_stream_is_freed_by_its_last_reference(finished):
    """The call book holds its machine (the stream that owns it) weakly: no reference cycle keeps a stream, open
    inside a call or finished, for the cycle collector."""
    gc.disable()
    try:
        stream = ChoiceStream(CFG)
        stream.feed('Hi <tool_call>{"name": "get_time", "arguments": {"a": "x')
        if finished:
            stream.finish()
        gone = weakref.ref(stream)
        del stream
        assert gone() is None
    finally:
        gc.enable()


# Every call-started and call-ended event, every rejection note and the finish go out inside a callback the
# table names: readers only report, the edges do the work.

CALLBACKS = sorted({t.after for t in TRANSITIONS if t.after} | set(ON_ENTER.values()))
TABLE_EVENTS = (ToolCallStarted, ToolCallEnded, ChoiceFinished)
REJECTIONS = frozenset({"unknown_tool", "suppressed", "invalid_json", "schema_mismatch"})


class WatchedStream(ChoiceStream):
    """A stream that records which of its events its table callbacks emitted."""

    def __init__(self, config: ParserConfig):
        super().__init__(config)
        self.in_callbacks: set[int] = set()  # ids of the events emitted inside a table callback


def _watching(name: str):
    base = getattr(ChoiceStream, name)

    def callback(self: WatchedStream, *args, **kwargs):
        out = self._out
        before = len(out)
        try:
            return base(self, *args, **kwargs)
        finally:
            self.in_callbacks.update(id(event) for event in out[before:])

    return callback


for _name in CALLBACKS:
    setattr(WatchedStream, _name, _watching(_name))

STRICT = ToolSpec("get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}},
                                             "required": ["city"]}, strict=True)
CASES = [
    (CFG, 'Hi <tool_call>{"name": "get_time", "arguments": {}}</tool_call> bye'),
    (CFG, '<tool_call>{"name": "nope", "arguments": {}}</tool_call>'),  # unknown tool: back to text, noted
    (CFG, '<tool_call>{"name": "get_time", "arguments": {"a": </tool_call>'),  # invalid JSON
    (CFG, '<tool_call>{"arguments": {}}</tool_call>'),  # no name
    (CFG, '<tool_call>[{"name": "get_time", "arguments": {}}, {"name": "nope", "arguments": {}}]</tool_call>'),
    (CFG, '<use_tool><name>get_time</name><args>{}</args></use_tool><function=get_time>{}</function>'),
    (CFG, '<function=get_weather><parameter=city>\nParis\n</parameter></function> and <tool_call>{"name"'),
    (CFG, '{"name": "get_time", "arguments": {}}'),  # bare JSON
    (CFG, '<tool_call>{"name": "get_time", "arguments": {"x": 1}}'),  # unclosed at the end
    (ParserConfig.for_tools([STRICT], policy=Policy(strict_mismatch="text")),
     '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'),
    (ParserConfig.for_tools([STRICT, ToolSpec("get_time")], parallel_tool_calls=False),
     '<tool_call>{"name": "get_time", "arguments": {}}</tool_call><tool_call>{"name": "get_time", "arguments": {}}'
     '</tool_call>'),  # a second call suppressed
    (ParserConfig.for_tools([ToolSpec("get_time")], tool_choice=ToolChoice("none"), formats=("harmony",)),
     "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}<|call|>"),
    (ParserConfig.for_tools([ToolSpec("get_time")], policy=Policy(max_tool_calls=1)),
     '<tool_call>{"name": "get_time", "arguments": {}}</tool_call><tool_call>{"name": "get_time"'),
]


@pytest.mark.parametrize("config,text", CASES, ids=range(len(CASES)))
def test_boundary_events_go_out_inside_the_tables_callbacks(config, text):
    for label, chunks in chunkings(text, random_splits=4, two_split_limit=0):
        stream = WatchedStream(config)
        events = [e for chunk in chunks for e in stream.feed(chunk)] + stream.finish()
        outside = [e for e in events if id(e) not in stream.in_callbacks and (
            isinstance(e, TABLE_EVENTS) or (isinstance(e, ToolCallNote) and e.kind in REJECTIONS))]
        assert outside == [], label
        assert isinstance(events[-1], ChoiceFinished)


def test_every_case_reaches_the_callbacks_it_is_about():
    kinds = set()
    for config, text in CASES:
        stream = WatchedStream(config)
        kinds.update(type(e).__name__ if not isinstance(e, ToolCallNote) else e.kind
                     for e in stream.feed(text) + stream.finish())
    assert {"ToolCallStarted", "ToolCallEnded", "ChoiceFinished", "unknown_tool", "suppressed",
            "invalid_json", "schema_mismatch"} <= kinds
