"""The JSON call object reader: one call object ``{"name": …, "arguments": {…}}``, streamed.

Shared by the ``tool_call`` format, bare JSON at the start of a message and
fenced JSON (parsing.md 2.1 A, 2.2), and by any registered format whose block
holds JSON call objects (the block reader, :mod:`._jsonblock`).
"""

from __future__ import annotations

import enum
import json
import re
from typing import TYPE_CHECKING, Any, Callable

from ._callobject import ARG_KEYS, NAME_ALIASES, NAME_KEYS, WRAPPER_KEYS, call_parts, is_schema, nameless_call, \
    object_text
from ._jsonlex import ESCAPE, STRING, StringReader, ValueLexer
from ._relaxed import RelaxedValue, relaxed_loads
from ._reader import COMPLETE, MORE, Outcome
from ._scanning import NON_WS, Stop, opener_at
from ._shown import meant_as_call

if TYPE_CHECKING:
    from ._reader import CallSink

_LITERAL_END = re.compile(r"[\s,}\]<]")
_JSON_VALUE_START = frozenset('"{[-0123456789tfn')


class Reading(str, enum.Enum):
    """What a :class:`JsonCallParser`'s current sub-reader reads (a ``str`` enum: table lookups hash it in C)."""

    ARGS = "args"  #: the arguments' object (or array) value, streamed
    SKIP = "skip"  #: another key's object or array value, passed over
    LITERAL = "literal"  #: a number, ``true``, ``false`` or ``null``
    KEY = "key"  #: a key
    NAME = "name"  #: the function name's string
    ARGS_STRING = "args_string"  #: arguments written as a string that holds an object
    SKIP_STRING = "skip_string"  #: another key's string value
    RELAXED = "relaxed"  #: the whole object, read again as relaxed JSON (case 25)


class Expect(str, enum.Enum):
    """What the call object's grammar expects next, outside any value."""

    OPEN = "open"
    KEY = "key"
    COLON = "colon"
    VALUE = "value"
    COMMA = "comma"  #: a comma or the closing brace


#: A step of the parser: ``(None, pos)`` reads on from ``pos``; ``(MORE, len(buf))``: the object is still
#: open; ``(COMPLETE, end)``: it closed; a :class:`~statemachine._scanning.Stop`: why it stopped at ``pos``.
ParseStep = tuple[Outcome | Stop | None, int]


class JsonCallParser:
    """Parses one call object ``{"name": …, "arguments": {…}}`` starting at its ``{``.

    Only keys of the call object itself (depth 1, or inside a ``function`` /
    ``tool_call`` wrapper) are interpreted, so a ``"name"`` nested in the
    arguments is never the function name. Object arguments stream verbatim;
    string arguments are collected and decoded once when the string closes.
    The value of an alias key (``parameters``, ``args``…) is held until the
    object closes, because a later ``arguments`` key wins over it (case 37).

    Relaxed JSON (case 25): a grammar violation in the arguments is the value
    lexer's business; one in the call object itself, before any argument text
    was reported, restarts the object as relaxed JSON: it is read to its end,
    parsed once, and its name and canonical arguments are reported then.

    ``feed`` returns ``(MORE, len(buf))`` while the object is open, else ``(status, pos)``
    with status ``COMPLETE`` (then :meth:`complete` reports it), ``Stop.INVALID`` (a
    grammar violation at ``pos``), ``Stop.OPENER`` (a call opener outside strings
    interrupts the object at ``pos``) or ``Stop.PARTIAL`` (maybe an opener, cut
    by the chunk's end: feed ``buf[pos:]`` again with the next chunk).
    """

    def __init__(self, ctx: CallSink, *, bare: bool = False, by_fit: bool = False):
        self.ctx = ctx
        self.bare = bare
        self.by_fit = by_fit  # bare, yet named by its arguments (``_named_by_arguments``)
        self.fitting: tuple[str, str] | None = None  # bare arguments alone: the one tool's call if nothing follows
        self.stops = ctx.openers
        self.levels = 0
        self.expect = Expect.OPEN
        self.reading: Reading | None = None  # what the current sub-reader is for
        self.lexer: ValueLexer | None = None
        self.string: StringReader | None = None
        self.literal: list[str] = []
        self.key = ""
        self.name: str | None = None
        self.saw_args = False  # an arguments value (under any arguments-like key) began
        self.saw_arguments = False  # … under the ``arguments`` key itself
        self.holding_alias = False  # the arguments read so far are an alias key's
        self.before_alias = (False, False)  # (invalid, repaired) before the alias value
        self.held: list[str] = []  # argument text not sent yet (see _args)
        self.repaired = False
        self.invalid = False
        self.raw: list[str] | None = []  # the object's text while no argument text was reported
        self.unnamed: list[str] | None = []  # the object's text while it has no name (a name-less call's repair)
        self.relaxed: RelaxedValue | None = None
        self.relaxed_room = 0  # how much more of a relaxed call object may be held
        self._start = 0  # where the current feed began

    def feed(self, buf: str, pos: int) -> ParseStep:
        self._start = start = pos
        n = len(buf)
        status: Outcome | Stop | None = MORE
        while pos < n:
            reading = self.reading
            if reading is not None:  # a value, key or name is being read
                status, pos = _SUB_READERS[reading](self, buf, pos)
                if status is not None:
                    break
                self._read(reading)
                continue
            m = NON_WS.search(buf, pos)
            if m is None:
                status, pos = MORE, n
                break
            pos = m.start()
            ch = buf[pos]
            if ch == "<":  # never JSON here: a new call's opener, or a grammar violation
                status = opener_at(buf, pos, self.stops) or Stop.INVALID
                break
            status, pos = _GRAMMAR[self.expect](self, buf, pos, ch)
            if status is not None:
                break
        else:
            status = MORE
        if self.raw is not None:
            self.raw.append(buf[start:pos])
        if self.unnamed is not None:
            if self.name is None:
                self.unnamed.append(buf[start:pos])
            else:
                self.unnamed = None
        return status, pos

    def _read(self, reading: Reading) -> None:
        """The sub-reader for ``reading`` is done: what the grammar expects next."""
        if self.reading is reading:
            self.reading = None
        if reading is not Reading.KEY:
            self.expect = Expect.COMMA
        elif self.expect is Expect.KEY:
            self.expect = Expect.COLON

    # sub-readers: one per kind of value ------------------------------------------

    def _read_lexed(self, buf: str, pos: int) -> ParseStep:
        """An object or array value: streamed (the arguments) or passed over."""
        lexer = self.lexer
        assert lexer is not None
        text, end = lexer.feed(buf, pos)
        if text:
            self._args(text)
        if end is None:
            return MORE, len(buf)
        if lexer.stopped:
            return lexer.stopped, end
        self.repaired |= lexer.repaired
        self.invalid |= lexer.failed
        return None, end

    def _read_literal(self, buf: str, pos: int) -> ParseStep:
        m = _LITERAL_END.search(buf, pos)
        if m is None:
            self.literal.append(buf[pos:])
            return MORE, len(buf)
        self.literal.append(buf[pos:m.start()])
        self._literal_done()
        return None, m.start()

    def _read_string(self, buf: str, pos: int) -> ParseStep:
        """A key, the name, or a string value."""
        string = self.string
        assert string is not None and self.reading is not None
        end = string.feed(buf, pos)
        if end is None:
            return MORE, len(buf)
        self._string_done(self.reading, string)
        return None, end

    # the call object's grammar: one method per expectation ----------------------

    def _at_open(self, buf: str, pos: int, ch: str) -> ParseStep:
        self.levels = 1  # a parser starts at its object's '{'
        self.expect = Expect.KEY
        return None, pos + 1

    def _at_key(self, buf: str, pos: int, ch: str) -> ParseStep:
        if ch == '"':
            self.string = StringReader()
            self.reading = Reading.KEY
            return None, pos + 1
        if ch == "}":
            return self._closing_brace(pos)
        return self._relax(buf, pos)

    def _at_colon(self, buf: str, pos: int, ch: str) -> ParseStep:
        if ch != ":":
            return self._relax(buf, pos)
        self.expect = Expect.VALUE
        return None, pos + 1

    def _at_value(self, buf: str, pos: int, ch: str) -> ParseStep:
        if ch not in _JSON_VALUE_START:
            return self._relax(buf, pos)
        return None, pos + 1 if self._start_value(ch) else pos  # else the value's reader reads ``ch`` itself

    def _at_comma(self, buf: str, pos: int, ch: str) -> ParseStep:
        if ch == ",":
            self.expect = Expect.KEY
            return None, pos + 1
        if ch == "}":
            return self._closing_brace(pos)
        return self._relax(buf, pos)

    def _closing_brace(self, pos: int) -> ParseStep:
        return (COMPLETE if self._close_level() else None), pos + 1

    # relaxed JSON (case 25) ----------------------------------------------------

    def _relax(self, buf: str, pos: int) -> ParseStep:
        """The call object broke strict JSON at ``pos``: read it again from its start as relaxed JSON."""
        if self.raw is None:  # argument text went out already: too late
            return Stop.INVALID, pos
        text = "".join(self.raw) + buf[self._start:pos]
        self.raw = None
        self.held = []
        self.holding_alias = False
        self.relaxed = RelaxedValue(stops=self.stops, halt=True)
        self.relaxed.feed(text, 0)  # strict JSON so far, so it neither ends nor fails here
        self.relaxed_room = self.ctx.config.policy.hold_limit - len(text)
        self.reading = Reading.RELAXED
        return None, pos  # read on by the relaxed reader

    def _read_relaxed(self, buf: str, pos: int) -> ParseStep:
        """Read on in the relaxed call object; nothing of it went out, so it is held, at most
        ``hold_limit`` characters (the size valve, 4.1): past that it is not a call."""
        relaxed = self.relaxed
        assert relaxed is not None
        room = self.relaxed_room
        cut = len(buf) - pos > room
        end = relaxed.feed(buf[:pos + max(room, 0)] if cut else buf, pos)
        stopped = relaxed.stopped
        if end is None or (cut and stopped is Stop.PARTIAL):
            if cut:
                return Stop.INVALID, pos + max(room, 0) if end is None else end
            self.relaxed_room -= len(buf) - pos
            return MORE, len(buf)
        if stopped:
            self.relaxed_room -= end - pos
            return stopped, end
        return (Stop.INVALID, end) if relaxed.failed else self._relaxed_call(relaxed, end)

    def _relaxed_call(self, relaxed: RelaxedValue, end: int) -> ParseStep:
        """Report the name and canonical arguments of the relaxed call object that ended at ``end``."""
        self.reading = None
        self.repaired = True
        try:
            value = json.loads(relaxed.text() or "")
        except ValueError:  # JSON by construction; should that ever fail, it is no call, never an exception
            return Stop.INVALID, end
        name, arguments, has_args = call_parts(value)
        if name is None:
            named = self._named_by_arguments(value)
            if named is None:
                return (COMPLETE if self.fitting else Stop.INVALID), end  # its block names bare arguments alone
            name, arguments, has_args = *named, True
        self.name = name
        self.saw_args = has_args
        if not self.bare or has_args:
            self.ctx.call_name(name)
        if arguments is None:
            self.invalid = has_args  # arguments that hold no object are never sent
        else:
            self._send(arguments)
        return COMPLETE, end

    # value dispatch -------------------------------------------------------

    def _start_value(self, ch: str) -> bool:
        """Start reading a value; return whether ``ch`` was consumed here."""
        key = self.key
        if key in ARG_KEYS and not self.saw_arguments and (key == "arguments" or not self.saw_args):
            if key != "arguments":
                self.holding_alias = True
                self.before_alias = (self.invalid, self.repaired)
            elif self.holding_alias:  # "arguments" replaces the alias value read before it
                self.holding_alias = False
                self.held = []
                self.invalid, self.repaired = self.before_alias
            self.saw_arguments = key == "arguments"
            self.saw_args = True
            if ch == "[":
                self.invalid = True  # arguments must be an object
            consumed = self._read_value(ch, Reading.ARGS)
            if self.reading is Reading.ARGS:
                self._name_ready()
            elif self.reading is Reading.LITERAL:
                self.key = "args_literal"  # only ``null`` is accepted (as {})
            return consumed
        if (key in NAME_KEYS or key in NAME_ALIASES) and ch == '"' and self.name is None:
            self.string = StringReader()
            self.reading = Reading.NAME
            return True
        if key in WRAPPER_KEYS and ch == "{":
            self.levels += 1
            self.expect = Expect.KEY
            return True
        return self._read_value(ch, Reading.SKIP)

    def _read_value(self, ch: str, kind: Reading) -> bool:
        """Start the reader for a value beginning with ``ch``: ``kind`` ``ARGS`` streams an object or
        array value, ``SKIP`` passes over it. Return whether ``ch`` was consumed here."""
        if ch in "{[":
            self.lexer = ValueLexer(emit=kind is Reading.ARGS, stops=self.stops)
            self.reading = kind
            return False
        if ch == '"':
            self.string = StringReader()
            self.reading = Reading.ARGS_STRING if kind is Reading.ARGS else Reading.SKIP_STRING
            return True
        self.reading = Reading.LITERAL
        self.literal = []
        return False

    def _string_done(self, reading: Reading, string: StringReader) -> None:
        if reading is Reading.KEY:
            self.key = string.decoded() or ""
        elif reading is Reading.NAME:
            self.name = string.decoded() or ""
            if not self.bare or self.saw_args:
                self.ctx.call_name(self.name)
                if not self.holding_alias:
                    self._release_held()
        elif reading is Reading.ARGS_STRING:
            decoded = string.decoded()
            arguments = None if decoded is None else object_text(decoded)
            if arguments is not None and decoded is not None:
                self.repaired |= arguments != decoded.strip()  # relaxed JSON, made canonical
                self._name_ready()
                self._args(arguments)
            else:
                self.invalid = True  # a string that does not hold an object is not unwrapped

    def _literal_done(self) -> None:
        if self.key == "args_literal":
            if "".join(self.literal) == "null":
                self._name_ready()
                self._args("{}")
            else:
                self.invalid = True
        self.reading = None
        self.expect = Expect.COMMA

    def _name_ready(self) -> None:
        """In bare mode the name is reported only once an arguments value begins."""
        if self.bare and self.name is not None and self.saw_args:
            self.ctx.call_name(self.name)

    def argument_lane(self) -> Callable[[str], str | None] | None:
        """Inside a string of the arguments that go out as they are: the lexer's ``string_chunk`` (see
        ``BodyReader.argument_lane``), which reads a chunk that stays in the string as ``feed`` would, for
        ``_args``."""
        lexer = self.lexer
        if (self.reading is Reading.ARGS and lexer is not None and (lexer.state is STRING or lexer.state is ESCAPE)
                and self.raw is None and self.unnamed is None and not self.holding_alias
                and not (self.bare and self.name is None)):
            return lexer.string_chunk
        return None

    def _args(self, text: str) -> None:
        """Argument text: held while it is an alias key's, or in bare mode until the name is known."""
        if self.holding_alias or (self.bare and self.name is None):
            self.held.append(text)
        else:  # _send, inlined: this is the arguments' path per chunk
            self.raw = None
            self.ctx.call_args(text)

    def _send(self, text: str) -> None:
        self.raw = None  # reported: the object can no longer be read again as relaxed JSON
        self.ctx.call_args(text)

    def _release_held(self) -> None:
        if self.held:
            text = "".join(self.held)
            self.held = []
            self._send(text)

    def _close_level(self) -> bool:
        self.levels -= 1
        if self.levels > 0:
            self.expect = Expect.COMMA
            return False
        return True

    def complete(self) -> bool:
        """The object closed: send what is still held; ``False`` if it was not a call.

        The caller ends the call (``call_end``) once it knows the block is over.
        """
        if self.name is None and not self.invalid and self.unnamed is not None:
            self._name_this_call()
        if self.fitting is not None:
            return False  # its block decides, at its end
        if self.name is None or (self.bare and not self.saw_args):
            self.ctx.call_abort("invalid_json", "the block has no function name")
            return False
        if self.holding_alias and self._defines():
            self.ctx.call_abort("not_a_call", "a function definition: its parameters are a JSON Schema")
            return False
        self.holding_alias = False  # no "arguments" key came after the alias: its value stands
        self._release_held()
        if not self.saw_args:
            self._send("{}")
        return True

    def _defines(self) -> bool:
        """The alias key's value (``parameters``: held until the object closed) is a JSON Schema: the object is a
        function definition, not a call (issue 43 item 6)."""
        try:
            value = json.loads("".join(self.held))
        except ValueError:
            return False
        return is_schema(value, self.ctx.schema_for(self.name))

    def _name_this_call(self) -> None:
        """The object closed without a name: the one tool its arguments fit names it (a noted repair). Its
        arguments, if they stood under an arguments-like key, were reported (or held) already."""
        text = "".join(self.unnamed or ())
        try:
            value = json.loads(text)
        except ValueError:
            value = relaxed_loads(text)
        named = self._named_by_arguments(value)
        if named is None:
            return
        self.name, arguments = named
        self.ctx.call_name(self.name)
        if not self.saw_args:
            self.saw_args = True
            self._send(arguments)

    def _named_by_arguments(self, value: Any) -> tuple[str, str] | None:
        """:func:`~._callobject.nameless_call` for this object, which then counts as repaired. Bare JSON is named
        by its block only once what follows it shows it is no example (``fitting``: under a forced
        ``tool_choice``, or under ``auto`` the one tool's arguments, ``_shown``), or when a held block was found
        to be the call (``by_fit``)."""
        config = self.ctx.config
        if self.bare and not self.by_fit:
            if config.tool_choice.mode == "required" or meant_as_call(value, "", "", config, nameless=True):
                self.fitting = nameless_call(config, value)
            return None
        named = nameless_call(config, value)
        self.repaired |= named is not None
        return named


#: The sub-reader of each kind of value.
_SUB_READERS: dict[Reading, Callable[[JsonCallParser, str, int], ParseStep]] = {
    Reading.ARGS: JsonCallParser._read_lexed,
    Reading.SKIP: JsonCallParser._read_lexed,
    Reading.LITERAL: JsonCallParser._read_literal,
    Reading.KEY: JsonCallParser._read_string,
    Reading.NAME: JsonCallParser._read_string,
    Reading.ARGS_STRING: JsonCallParser._read_string,
    Reading.SKIP_STRING: JsonCallParser._read_string,
    Reading.RELAXED: JsonCallParser._read_relaxed,
}

#: The grammar's reader of a significant character for each expectation.
_GRAMMAR: dict[Expect, Callable[[JsonCallParser, str, int, str], ParseStep]] = {
    Expect.OPEN: JsonCallParser._at_open,
    Expect.KEY: JsonCallParser._at_key,
    Expect.COLON: JsonCallParser._at_colon,
    Expect.VALUE: JsonCallParser._at_value,
    Expect.COMMA: JsonCallParser._at_comma,
}
