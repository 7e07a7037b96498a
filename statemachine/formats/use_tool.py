"""Format B: ``<use_tool><name>NAME</name><args>{…}</args></use_tool>`` (Obsidian Copilot)."""

from __future__ import annotations

import enum
import json
import re
from typing import Callable

from .._coerce import coerce_parameters
from .._callobject import object_text
from .._jsonlex import ValueLexer
from .._scanning import NON_WS, Stop, TextUntil, opener_at, skip_to, skip_ws
from .._reader import BodyReader, CallSink, COMPLETE, MORE, Outcome, Step, TableReader
from ._base import Refutation, TextFormat, compact_object

_TAG_MARK = re.compile(r"[<>]")
_NAME_ATTRIBUTE = re.compile(r"""name\s*=\s*(?:"([^"]*)"|'([^']*)')""")  # in a ``<use_tool …>`` opener
_CHILD_TAG = re.compile(r"[A-Za-z_][\w.-]*")
#: The note of a block a new call's opener interrupted before it was complete (case 14).
_INTERRUPTED = ("invalid_json", "a new call began before this one was complete")


class UseToolFormat(TextFormat):
    """``<use_tool><name>NAME</name><args>{…}</args></use_tool>`` (Obsidian Copilot)."""

    name = "use_tool"
    openers = ("<use_tool>", "<use_tool ")
    closer = "</use_tool>"

    def render_call(self, name: str, arguments: str) -> str:
        return f"<use_tool><name>{name}</name><args>{compact_object(arguments)}</args></use_tool>"

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return UseToolBody(sink, has_attributes=opener.endswith(" "))

    def refutes(self, opener: str, buf: str, pos: int) -> Refutation:
        """Another ``<use_tool`` right after the opener (a repeated opener): the reader's note that a new call
        began; text where ``<use_tool>``'s first child tag or JSON should stand: prose (4.2)."""
        start = skip_ws(buf, pos)
        if start == len(buf):
            return None
        if start - pos >= UseToolBody._TAG_LIMIT:
            return False
        if buf[start] == "<":
            if buf.startswith(self.openers, start):
                return _INTERRUPTED
            return None if any(op.startswith(buf[start:]) for op in self.openers) else False
        return not opener.endswith(" ") and buf[start] != "{"  # attributes, or a JSON body: the reader's


class UseToolState(str, enum.Enum):
    """Where a :class:`UseToolBody` is in its block (a ``str`` enum: table lookups hash it in C)."""

    #: The opener's attributes, up to its ``>``.
    ATTRIBUTES = "attributes"
    #: Between children: ``<name>``, ``<args>``, a parameter, a JSON body, or the closer.
    CHILDREN = "children"
    #: Inside ``<args>``: a JSON object, then ``</args>``.
    ARGS = "args"
    #: A child's value.
    CHILD = "child"
    #: A JSON object (the arguments, or a whole JSON body).
    JSON = "json"
    #: A malformed block, skipped to the closer.
    SKIP = "skip"


ATTRIBUTES, CHILDREN, ARGS, CHILD, JSON, SKIP = UseToolState


class UseToolBody(TableReader):
    """Body of ``<use_tool>`` (Obsidian Copilot): ``<name>``, ``<args>``, parameter children or JSON.

    A new call's opener where a child tag or JSON structure may stand (outside
    JSON strings and child values) ends an unfinished block (case 14): one that
    is named and has its arguments is accepted, any other fails. A child's value
    is text, like a JSON string, so an opener inside it is part of the value;
    only the ``<name>`` value can hold no tag at all.
    """

    CLOSER = "</use_tool>"
    _TAG_LIMIT = 128  # a tag (or the opener's attributes) with no '>' after this many characters is malformed

    def __init__(self, ctx: CallSink, *, has_attributes: bool):
        self.ctx = ctx
        self.state = ATTRIBUTES if has_attributes else CHILDREN
        self.json_in = CHILDREN  # the state a JSON object was met in, and goes back to
        self.reader: TextUntil | None = None
        self.lexer: ValueLexer | None = None
        self.json_body: list[str] | None = None
        self.params: dict[str, str] = {}
        self.param = ""
        self.named = False
        self.has_args = False
        self.repaired = False

    # one method per state: each returns the block's outcome, or ``None`` and where to read on

    def _read_attributes(self, buf: str, pos: int) -> Step:
        """The opener's attributes (``<use_tool name="…">``), up to its ``>``."""
        m = _TAG_MARK.search(buf, pos, pos + self._TAG_LIMIT)
        if m is None:
            if len(buf) - pos >= self._TAG_LIMIT:
                return self._invalid(buf, pos)
            return MORE, pos
        end = m.start()
        if buf[end] == "<":
            return self._stray_tag(buf, end, pos)
        m = _NAME_ATTRIBUTE.search(buf, pos, end)
        if m:
            self._name((m.group(1) if m.group(1) is not None else m.group(2)).strip())
        self.state = CHILDREN
        return None, end + 1

    def _read_tags(self, buf: str, pos: int) -> Step:
        """Between children, or inside ``<args>``: a tag, a JSON object, or the closer."""
        m = NON_WS.search(buf, pos)
        if m is None:
            return MORE, len(buf)
        pos = m.start()
        ch, state = buf[pos], self.state
        if ch == "{":
            if state is CHILDREN and not self.named:
                self.json_body = []  # a JSON body: {"name": …, …the arguments…}
            self.lexer = ValueLexer(emit=True, stops=self.ctx.openers)
            self.has_args = True
            self.json_in, self.state = state, JSON
            return None, pos
        if ch != "<":
            if not (self.named or self.has_args or self.params or state is ARGS):
                self.ctx.call_abort("not_a_call", "the block does not start a call")  # prose (4.2)
                return COMPLETE, pos
            return self._invalid(buf, pos)
        if opener_at(buf, pos, self.ctx.openers) is Stop.OPENER:
            return self._interrupted(pos)
        end = buf.find(">", pos, pos + self._TAG_LIMIT)
        if end == -1:
            return self._invalid(buf, pos) if len(buf) - pos >= self._TAG_LIMIT else (MORE, pos)
        return self._tag(buf, buf[pos + 1:end], end + 1)

    def _tag(self, buf: str, tag: str, pos: int) -> Step:
        """The tag ``<tag>`` ended just before ``pos``."""
        if self.state is ARGS:
            if tag != "/args":
                return self._invalid(buf, pos)
            self.state = CHILDREN
        elif tag == "/use_tool":
            self._finish()
            return COMPLETE, pos
        elif tag == "args":
            self.state = ARGS
        elif _CHILD_TAG.fullmatch(tag):
            self.param = tag
            self.reader = TextUntil(f"</{tag}>", tagless=tag == "name" and not self.named)
            self.state = CHILD
        else:
            return self._invalid(buf, pos)
        return None, pos

    def _read_child(self, buf: str, pos: int) -> Step:
        """A child's value (text, like a JSON string), up to its closing tag."""
        reader = self.reader
        assert reader is not None
        text, pos = reader.feed(buf, pos)
        if text is None:
            if reader.stray:  # a '<' inside the name
                reader.stray = False
                return self._stray_tag(buf, pos, pos)
            return MORE, pos
        self.reader = None
        self.state = CHILDREN
        self._child_text(text)
        return None, pos

    def _read_json(self, buf: str, pos: int) -> Step:
        """A JSON object: the arguments (streamed) or a whole JSON body (held until it closes)."""
        lexer = self.lexer
        assert lexer is not None
        text, end = lexer.feed(buf, pos)
        if self.json_body is not None:
            self.json_body.append(text)
        elif text:
            self.ctx.call_args(text)
        if end is None:
            return MORE, len(buf)
        if lexer.stopped is Stop.PARTIAL:
            return MORE, end
        if lexer.stopped:
            return self._interrupted(end)
        self.repaired |= lexer.repaired
        self.lexer = None
        self.state = self.json_in
        if self.json_body is not None:
            self._json_body_done()
        return None, end

    def _child_text(self, text: str) -> None:
        if self.param == "name" and not self.named:
            self._name(text.strip())
        else:
            self.params[self.param] = text

    def _name(self, name: str) -> None:
        self.named = True
        self.ctx.call_name(name)

    def _json_body_done(self) -> None:
        body = "".join(self.json_body or ())
        self.json_body = None
        try:
            obj = json.loads(body)
        except ValueError:
            self.ctx.call_invalid()
            return
        name = obj.pop("name", None) if isinstance(obj, dict) else None
        if not isinstance(name, str):
            self.ctx.call_invalid()
            return
        args = next((obj.pop(k) for k in ("arguments", "parameters", "args") if k in obj), obj)
        self._name(name)
        text = object_text(args) if isinstance(args, str) else None
        self.ctx.call_args(json.dumps(args, ensure_ascii=False) if text is None else text)

    def _complete(self) -> bool:
        """Named, with its arguments (an ``<args>`` value, a JSON body or parameter children) all read."""
        return self.named and (self.has_args or bool(self.params)) and self.state in (CHILDREN, ARGS)

    def _params_json(self) -> str:
        """The parameter children as the arguments object (``{}`` without any)."""
        schema = self.ctx.schema_for(self.ctx.current_name())
        args = coerce_parameters(self.params, schema) if self.params else {}
        return json.dumps(args, ensure_ascii=False)

    def _finish(self) -> None:
        if not self.named:
            self.ctx.call_abort("invalid_json", "the use_tool block has no name")
            return
        if not self.has_args:
            self.ctx.call_args(self._params_json())
        self.ctx.call_end(repaired=self.repaired)

    def _interrupted(self, pos: int) -> tuple[Outcome, int]:
        """A new call's opener at ``pos`` ends this block without its closer (case 14)."""
        if self._complete():
            self._finish()
        else:
            self.ctx.call_abort(*_INTERRUPTED)
        return COMPLETE, pos

    def _stray_tag(self, buf: str, i: int, keep: int) -> tuple[Outcome, int]:
        """A ``<`` at ``i`` where no tag may stand: a new call's opener ends the block, anything else
        is malformed; a possible opener cut by the chunk's end is fed again from ``keep``."""
        hit = opener_at(buf, i, self.ctx.openers)
        if hit is Stop.OPENER:
            return self._interrupted(i)
        if hit is Stop.PARTIAL:
            return MORE, keep
        return self._invalid(buf, i)

    def _invalid(self, buf: str, pos: int) -> tuple[Outcome, int]:
        """A malformed block: skip to the closer (or a new call's opener), then release the whole block."""
        self.ctx.call_invalid()
        self.state = SKIP
        return self._skip(buf, pos)

    def _skip(self, buf: str, pos: int) -> tuple[Outcome, int]:
        hit, end = skip_to(buf, pos, self.CLOSER, self.ctx.openers)
        if hit is None:
            return MORE, end
        self.ctx.call_abort("invalid_json", "the use_tool block is malformed")
        return COMPLETE, end

    def at_eof(self) -> None:
        if self._complete():
            self.ctx.call_unclosed(repaired=self.repaired, tail="" if self.has_args else self._params_json())
        else:
            self.ctx.call_incomplete()


#: Each state's reader.
_READERS: dict[UseToolState, Callable[[UseToolBody, str, int], Step]] = {
    ATTRIBUTES: UseToolBody._read_attributes,
    CHILDREN: UseToolBody._read_tags,
    ARGS: UseToolBody._read_tags,
    CHILD: UseToolBody._read_child,
    JSON: UseToolBody._read_json,
    SKIP: UseToolBody._skip,
}
UseToolBody.READERS = _READERS
