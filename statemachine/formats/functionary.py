"""Functionary: v3.1's ``<function=NAME>{…}</function>`` and ``<|python_tag|>`` code, v3.2's ``>>>NAME`` recipients.

::

    <function=get_weather>{"city": "SF"}</function>      v3.1 (format C's JSON body)
    <|python_tag|>print(1 + 1)                            v3.1: code for the ``python`` tool
    all\\nSure, one moment.>>>get_weather\\n{"city": "SF"}  v3.2: the first recipient has no ``>>>``

In v3.2 every part of the reply names its recipient on a line of its own:
``all`` is the user (the text after it is content; the ``all`` line is not),
any other name is a tool whose JSON arguments follow. A reply's first
recipient comes without ``>>>``: at a message's start ``all`` or an offered
tool's name followed by a newline is read as one. ``python`` takes raw code,
sent as ``{"code": …}``.
"""

from __future__ import annotations

import json
import re

from .._jsonlex import ValueLexer
from .._scanning import WS, partial_at_end
from .._reader import BodyReader, CallSink, COMPLETE, MORE, Outcome, Pending
from ._base import TextFormat, call_instructions, compact_object
from ._tokens import ObjectArguments
from .function import FunctionBody, FunctionFormat

PYTHON_TAG = "<|python_tag|>"
RECIPIENT = ">>>"
_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
_NAME_SO_FAR = re.compile(r"\s*(?:[A-Za-z_][\w.\-]*\s*)?")  # a recipient line's start that may still be a name
_NAME_LIMIT = 128
_CODE_ENDS = ("<|eom_id|>", "<|eot_id|>", RECIPIENT)


class CodeBody:
    """Raw code for the ``python`` tool, up to an end token, the next recipient or the end of the stream."""

    def __init__(self, sink: CallSink):
        self.sink = sink
        self.started = False

    def feed(self, buf: str, pos: int) -> tuple[Outcome, int]:
        if not self.started:
            self.started = True
            self.sink.call_name("python")
            self.sink.call_args('{"code": "')
        ends = [i for i in (buf.find(end, pos) for end in _CODE_ENDS) if i != -1]
        stop = min(ends) if ends else partial_at_end(buf, pos, _CODE_ENDS)
        if buf[pos:stop]:
            self.sink.call_args(json.dumps(buf[pos:stop], ensure_ascii=False)[1:-1])
        if not ends:
            return MORE, stop
        self.sink.call_args('"}')
        self.sink.call_end()
        end = buf.startswith(RECIPIENT, stop)  # the next recipient is an opener: read it as one
        return COMPLETE, stop if end else stop + len(next(e for e in _CODE_ENDS if buf.startswith(e, stop)))

    def at_eof(self) -> None:
        if not self.started:
            self.sink.call_abort("not_a_call", "the block ended before a call started")
        else:
            self.sink.call_unclosed(tail='"}')


class RecipientBody(ObjectArguments):
    """One v3.2 part after ``>>>`` (or at a message's start): its recipient line, then JSON arguments or code."""

    def __init__(self, sink: CallSink):
        self.sink = sink
        self.inner: BodyReader | None = None
        self.lexer: ValueLexer | None = None
        self.repaired = self.invalid = False
        self.named = False

    def feed(self, buf: str, pos: int) -> tuple[Outcome, int]:
        if self.inner is not None:
            return self.inner.feed(buf, pos)
        if self.lexer is not None:
            return self._arguments(buf, pos)
        if not self.named:
            line_end = buf.find("\n", pos, pos + _NAME_LIMIT + 1)
            if line_end == -1:
                return (MORE, pos) if len(buf) - pos <= _NAME_LIMIT else self._not_a_call(pos)
            name = buf[pos:line_end].strip()
            if name == "all":  # text for the user follows: the recipient line is dropped
                self.sink.drop_block()
                return COMPLETE, line_end + 1
            if not _NAME.fullmatch(name):
                return self._not_a_call(pos)
            if name == "python":
                self.inner = CodeBody(self.sink)
                return self.inner.feed(buf, line_end + 1)
            self.named = True
            self.sink.call_name(name)
            pos = line_end + 1
        while pos < len(buf) and buf[pos] in WS:
            pos += 1
        if pos == len(buf):
            return MORE, pos
        if buf[pos] != "{":
            self.sink.call_abort("invalid_json", "a tool's recipient line is not followed by JSON arguments")
            return COMPLETE, pos
        self.lexer = ValueLexer(stops=self.sink.openers)
        return self._arguments(buf, pos)

    def _arguments(self, buf: str, pos: int) -> tuple[Outcome, int]:
        outcome, end = self.read_object(buf, pos)
        if outcome is not None:
            return outcome, end
        self.sink.call_end(repaired=self.repaired, invalid=self.invalid)
        return COMPLETE, end

    def _not_a_call(self, pos: int) -> tuple[Outcome, int]:
        self.sink.call_abort("not_a_call", "the recipient line names no tool")
        return COMPLETE, pos

    def at_eof(self) -> None:
        if self.inner is not None:
            self.inner.at_eof()
        elif self.lexer is not None or self.named:
            self.sink.call_incomplete()
        else:
            self.sink.call_abort("not_a_call", "the block ended before a call started")


class FunctionaryFormat(FunctionFormat):
    """Functionary v3.1: format C's ``<function=NAME>{…}</function>``, and ``<|python_tag|>`` code."""

    name = "functionary"
    model_names = ("functionary-small-v3.1", "functionary-medium-v3.1")
    openers = (*FunctionFormat.openers, PYTHON_TAG)
    end_tokens = ("<|eot_id|>", "<|eom_id|>")  # Llama 3.1's, which Functionary is built on

    def instructions(self, example_name: str, example_arguments: str) -> str:
        return call_instructions(self.render_call(example_name, example_arguments), (
            "Write each call as <function=NAME> with the tool's exact name, its arguments as one JSON object, "
            "then </function>.",))

    def marked_openers(self, marker: str) -> dict[str, str]:
        return {**super().marked_openers(marker), f'<|python_tag marker="{marker}"|>': PYTHON_TAG}

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return CodeBody(sink) if opener == PYTHON_TAG else FunctionBody(sink)


class FunctionaryV32Format(TextFormat):
    """Functionary v3.2: ``>>>NAME`` then JSON arguments, ``>>>all`` then text (see the module docstring)."""

    name = "functionary_v3_2"
    model_names = ("functionary",)
    openers = (RECIPIENT,)
    end_tokens = ("<|eot_id|>",)
    closer = ""
    reads_bare = True

    def render_call(self, name: str, arguments: str) -> str:
        return f"{RECIPIENT}{name}\n{compact_object(arguments)}"

    def instructions(self, example_name: str, example_arguments: str) -> str:
        return call_instructions(self.render_call(example_name, example_arguments), (
            f"Start each part of your reply with {RECIPIENT} and its recipient on a line of its own: all for "
            "text to the user, or the tool's exact name followed by its arguments as one JSON object.",))

    def bare_start(self, buf: str, pos: int, sink: CallSink) -> BodyReader | Pending | None:
        m = _NAME.match(buf, pos)
        if m is None:
            return None
        word, names = m.group(), ("all", *sink.config.tools)
        if m.end() == len(buf):
            return Pending.PARTIAL if m.end() - pos <= _NAME_LIMIT and any(n.startswith(word) for n in names) else None
        line_end = m.end()
        while line_end < len(buf) and buf[line_end] in " \t\r":
            line_end += 1
        if line_end == len(buf):
            return Pending.PARTIAL if word in names else None
        return RecipientBody(sink) if buf[line_end] == "\n" and word in names else None

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return RecipientBody(sink)

    def refutes(self, opener: str, buf: str, pos: int) -> bool | None:
        """The recipient line names no tool, or cannot any more (``>>>>``, ``>>> x = 1``): what
        ``RecipientBody`` would release as text; ``None`` while its name is still arriving."""
        line = buf[pos:pos + _NAME_LIMIT + 1]
        end = line.find("\n")
        if end == -1:
            return True if len(line) > _NAME_LIMIT or not _NAME_SO_FAR.fullmatch(line) else None
        return not _NAME.fullmatch(line[:end].strip())
