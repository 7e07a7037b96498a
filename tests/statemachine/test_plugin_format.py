"""A format written from the public plug-in API alone: ``[[call NAME]]{…json…}[[/call]]``.

This module imports nothing private from ``statemachine`` (a test below reads its own imports), so what
it uses (``TextFormat``, ``BodyReader``, ``CallSink``, ``Outcome``, ``Pending``, ``register_format``) is
enough to write a format: its reader reports to the sink and returns outcomes; the core does the rest. The
format also reads a reply's first call written without its opener (``get_weather]]{…}[[/call]]``), as
pythonic lists and Harmony's first recipient are read.
"""

from __future__ import annotations

import ast
import enum
import json
import pathlib

from statemachine import ChoiceStream, ParserConfig, ToolCallEnded, ToolCallStarted, ToolSpec
from statemachine.formats import BodyReader, CallSink, Outcome, Pending, TextFormat, register_format, registered_formats

OPENER = "[[call "
CLOSER = "[[/call]]"


class BracketState(enum.Enum):
    """Where the reader is in a block."""

    NAME = "name"  # up to the header's ``]]``
    ARGUMENTS = "arguments"  # the JSON object, streamed up to the closer


class BracketBody:
    """Reads ``NAME]]{…}[[/call]]`` after the opener: one method per state."""

    def __init__(self, sink: CallSink):
        self.sink = sink
        self.state = BracketState.NAME

    def feed(self, buf: str, pos: int) -> tuple[Outcome, int]:
        while pos < len(buf):
            outcome, pos = READERS[self.state](self, buf, pos)
            if outcome is not None:
                return outcome, pos
        return Outcome.MORE, pos

    def read_name(self, buf: str, pos: int) -> tuple[Outcome | None, int]:
        end = buf.find("]]", pos)
        if end == -1:
            return Outcome.MORE, pos  # the name is handed back with the next chunk
        name = buf[pos:end].strip()
        if not name.isidentifier():
            self.sink.call_abort("not_a_call", "no name")
            return Outcome.COMPLETE, pos
        self.sink.call_name(name)
        self.state = BracketState.ARGUMENTS
        return None, end + 2

    def read_arguments(self, buf: str, pos: int) -> tuple[Outcome | None, int]:
        end = buf.find(CLOSER, pos)
        if end != -1:
            self.sink.call_args(buf[pos:end])
            self.sink.call_end()
            return Outcome.COMPLETE, end + len(CLOSER)
        keep = next((i for i in range(max(pos, len(buf) - len(CLOSER) + 1), len(buf))
                     if CLOSER.startswith(buf[i:])), len(buf))  # a closer cut by the chunk's end waits
        self.sink.call_args(buf[pos:keep])
        return Outcome.MORE, keep

    def at_eof(self) -> None:
        self.sink.call_incomplete()


READERS = {BracketState.NAME: BracketBody.read_name, BracketState.ARGUMENTS: BracketBody.read_arguments}


class BracketFormat(TextFormat):
    name = "test_brackets"
    openers = (OPENER,)
    closer = CLOSER

    def render_call(self, name: str, arguments: str) -> str:
        return f"{OPENER}{name}]]{arguments}{CLOSER}"

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return BracketBody(sink)

    reads_bare = True

    def bare_start(self, buf: str, pos: int, sink: CallSink) -> BodyReader | Pending | None:
        """A reply may leave out its first call's opener: ``NAME]]`` of an offered tool at its start."""
        heads = [name + "]]" for name in sink.config.tools]
        if any(buf.startswith(head, pos) for head in heads):
            return BracketBody(sink)
        if any(head.startswith(buf[pos:]) for head in heads):
            return Pending.PARTIAL  # the chunk ended too soon to tell: asked again with more text
        return None


if BracketFormat.name not in registered_formats():
    register_format(BracketFormat())

CONFIG = ParserConfig.for_tools([ToolSpec("get_weather")], formats=(BracketFormat.name,))
TEXT = 'Checking. [[call get_weather]]{"city": "Paris"}[[/call]] Done.'


def _run(chunks: list[str]) -> list[object]:
    stream = ChoiceStream(CONFIG, id_factory=lambda: "call_1")
    return [e for chunk in chunks for e in stream.feed(chunk)] + stream.finish()


def test_a_hand_written_format_streams_its_calls_under_any_chunking():
    for size in (1, 2, 3, 7, len(TEXT)):
        events = _run([TEXT[i:i + size] for i in range(0, len(TEXT), size)])
        started = [e for e in events if isinstance(e, ToolCallStarted)]
        ended = [e for e in events if isinstance(e, ToolCallEnded)]
        assert [(e.name, e.call_id) for e in started] == [("get_weather", "call_1")], size
        assert [json.loads(e.arguments) for e in ended] == [{"city": "Paris"}] and ended[0].valid, size
        text = "".join(getattr(e, "text", "") for e in events)
        assert text == "Checking.  Done.", size


def test_an_unknown_name_goes_back_to_text():
    stream = ChoiceStream(CONFIG)
    events = stream.feed("a [[call nope]]{}[[/call]] b") + stream.finish()
    assert "".join(getattr(e, "text", "") for e in events) == "a [[call nope]]{}[[/call]] b"


def test_a_call_without_its_opener_at_the_replys_start_is_read_under_any_chunking():
    bare = 'get_weather]]{"city": "Paris"}[[/call]] Done.'
    for size in (1, 2, 3, 7, len(bare)):
        events = _run([bare[i:i + size] for i in range(0, len(bare), size)])
        ended = [e for e in events if isinstance(e, ToolCallEnded)]
        assert [(e.name, json.loads(e.arguments)) for e in ended] == [("get_weather", {"city": "Paris"})], size
        assert "".join(getattr(e, "text", "") for e in events) == " Done.", size


def test_text_that_only_began_like_a_bare_call_stays_text():
    for text in ("get_weather is sunny", "get_wea", "Later: get_weather]]{}[[/call]]"):
        for size in (1, 4, len(text)):
            events = _run([text[i:i + size] for i in range(0, len(text), size)])
            assert not [e for e in events if isinstance(e, ToolCallStarted)], (text, size)
            assert "".join(getattr(e, "text", "") for e in events) == text, (text, size)


def test_this_format_imports_nothing_private():
    tree = ast.parse(pathlib.Path(__file__).read_text())
    modules = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names]
    assert not [m for m in modules if m and any(part.startswith("_") for part in m.split("."))
                and m != "__future__"]
    assert not [n for n in names if n.startswith("_")]
