"""Call-body parsers, one per text format, driven by the choice stream's scanner.

A body receives the text after its opener. ``feed(buf, pos)`` returns
``(status, pos)``: ``MORE`` with the position up to which it consumed (the
scanner keeps ``buf[pos:]``, a possible partial tag, and hands it back in
front of the next chunk), or ``DONE`` with the position where the block
ended (the rest is ordinary text again). ``at_eof()`` is called when the
stream ends inside the block. Bodies report what they find to the choice
stream (``ctx``): ``call_begin``, ``call_name``, ``call_args``,
``call_end`` and ``call_abort``; the choice stream applies policy.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any, Mapping

from ._jsonlex import StringReader, ValueLexer
from ._openers import opener_at
from ._relaxed import RelaxedValue, relaxed_loads

MORE = "more"
DONE = "done"

_WS = " \t\r\n"
NAME_KEYS = frozenset({"name", "tool_name"})
NAME_ALIASES = frozenset({"function", "tool"})  # a name only when the value is a string
ARG_KEYS = frozenset({"arguments", "parameters", "args", "input", "tool_input", "params"})
WRAPPER_KEYS = frozenset({"function", "tool_call"})
_LITERAL_END = re.compile(r"[\s,}\]<]")
_JSON_VALUE_START = frozenset('"{[-0123456789tfn')
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')
_NON_WS = re.compile(r"[^ \t\r\n]")
_TAG_MARK = re.compile(r"[<>]")
_NAME_ATTRIBUTE = re.compile(r"""name\s*=\s*(?:"([^"]*)"|'([^']*)')""")  # in a ``<use_tool …>`` opener
_CHILD_TAG = re.compile(r"[A-Za-z_][\w.-]*")


def _partial_at_end(buf: str, pos: int, needles: tuple[str, ...]) -> int:
    """Where a proper prefix of one of ``needles`` starts at the end of ``buf`` (or ``len(buf)``)."""
    n = len(buf)
    start = max(pos, n - max(map(len, needles)) + 1)
    found = n
    for first in {x[0] for x in needles}:  # only where a needle's first character stands (per chunk: O(1) finds)
        i = buf.find(first, start)
        while i != -1 and i < found:
            tail = buf[i:]
            if any(x.startswith(tail) for x in needles):
                found = i
                break
            i = buf.find(first, i + 1)
    return found


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

    ``feed`` returns ``None`` while the object is open, else ``(status, pos)``
    with status ``DONE`` (then :meth:`complete` reports it), ``"invalid"`` (a
    grammar violation at ``pos``), ``"opener"`` (a call opener outside strings
    interrupts the object at ``pos``) or ``"partial"`` (maybe an opener, cut
    by the chunk's end: feed ``buf[pos:]`` again with the next chunk).
    """

    def __init__(self, ctx: Any, *, bare: bool = False):
        self.ctx = ctx
        self.bare = bare
        self.stops = ctx.openers
        self.levels = 0
        self.expect = "open"
        self.reading: str | None = None  # what the current sub-reader is for
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
        self.relaxed: RelaxedValue | None = None
        self.relaxed_room = 0  # how much more of a relaxed call object may be held
        self._start = 0  # where the current feed began

    def feed(self, buf: str, pos: int) -> tuple[str, int] | None:
        self._start = pos
        result = self._feed(buf, pos)
        if self.raw is not None:
            self.raw.append(buf[pos:len(buf) if result is None else result[1]])
        return result

    def _feed(self, buf: str, pos: int) -> tuple[str, int] | None:
        n = len(buf)
        while pos < n:
            reading = self.reading
            if reading is not None:
                if reading == "relaxed":
                    return self._feed_relaxed(buf, pos)
                if reading in ("args", "skip"):
                    text, end = self.lexer.feed(buf, pos)
                    if text:
                        self._args(text)
                    if end is None:
                        return None
                    if self.lexer.stopped:
                        return self.lexer.stopped, end
                    self.repaired |= self.lexer.repaired
                    self.invalid |= self.lexer.failed
                    pos = end
                elif reading == "literal":
                    m = _LITERAL_END.search(buf, pos)
                    if m is None:
                        self.literal.append(buf[pos:])
                        return None
                    self.literal.append(buf[pos:m.start()])
                    pos = m.start()
                    self._literal_done()
                else:
                    end = self.string.feed(buf, pos)
                    if end is None:
                        return None
                    pos = end
                    self._string_done(reading)
                if self.reading == reading:
                    self.reading = None
                if self.expect == "key" and reading == "key":
                    self.expect = "colon"
                elif reading != "key":
                    self.expect = "comma"
                continue
            ch = buf[pos]
            if ch in _WS:
                pos += 1
                continue
            if ch == "<":  # never JSON here: a new call's opener, or a grammar violation
                return opener_at(buf, pos, self.stops) or "invalid", pos
            expect = self.expect
            if expect == "open":
                self.levels = 1  # a parser starts at its object's '{'
                self.expect = "key"
            elif expect == "key":
                if ch == '"':
                    self.string = StringReader()
                    self.reading = "key"
                elif ch == "}":
                    if self._close_level():
                        return DONE, pos + 1
                else:
                    return self._relax(buf, pos)
            elif expect == "colon":
                if ch != ":":
                    return self._relax(buf, pos)
                self.expect = "value"
            elif expect == "value":
                if ch not in _JSON_VALUE_START:
                    return self._relax(buf, pos)
                if not self._start_value(ch):
                    continue  # the value's reader consumes this character itself
            else:  # comma
                if ch == ",":
                    self.expect = "key"
                elif ch == "}":
                    if self._close_level():
                        return DONE, pos + 1
                else:
                    return self._relax(buf, pos)
            pos += 1
        return None

    # relaxed JSON (case 25) ----------------------------------------------------

    def _relax(self, buf: str, pos: int) -> tuple[str, int] | None:
        """The call object broke strict JSON at ``pos``: read it again from its start as relaxed JSON."""
        if self.raw is None:  # argument text went out already: too late
            return "invalid", pos
        text = "".join(self.raw) + buf[self._start:pos]
        self.raw = None
        self.held = []
        self.holding_alias = False
        self.relaxed = RelaxedValue(stops=self.stops, halt=True)
        self.relaxed.feed(text, 0)  # strict JSON so far, so it neither ends nor fails here
        self.relaxed_room = self.ctx.config.policy.hold_limit - len(text)
        self.reading = "relaxed"
        return self._feed(buf, pos)

    def _feed_relaxed(self, buf: str, pos: int) -> tuple[str, int] | None:
        """Read on in the relaxed call object; nothing of it went out, so it is held, at most
        ``hold_limit`` characters (the size valve, 4.1): past that it is not a call."""
        room = self.relaxed_room
        cut = len(buf) - pos > room
        end = self.relaxed.feed(buf[:pos + max(room, 0)] if cut else buf, pos)
        stopped = self.relaxed.stopped
        if end is None or (cut and stopped == "partial"):
            if cut:
                return "invalid", pos + max(room, 0) if end is None else end
            self.relaxed_room -= len(buf) - pos
            return None
        if stopped:
            self.relaxed_room -= end - pos
            return stopped, end
        return ("invalid", end) if self.relaxed.failed else self._relaxed_call(end)

    def _relaxed_call(self, end: int) -> tuple[str, int]:
        """Report the name and canonical arguments of the relaxed call object that ended at ``end``."""
        self.reading = None
        self.repaired = True
        try:
            name, arguments, has_args = call_parts(json.loads(self.relaxed.text()))
        except ValueError:  # JSON by construction; should that ever fail, it is no call, never an exception
            return "invalid", end
        if name is None:
            return "invalid", end
        self.name = name
        self.saw_args = has_args
        if not self.bare or has_args:
            self.ctx.call_name(name)
        if arguments is None:
            self.invalid = has_args  # arguments that hold no object are never sent
        else:
            self._send(arguments)
        return DONE, end

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
            consumed = self._read_value(ch, "args")
            if self.reading == "args":
                self._name_ready()
            elif self.reading == "literal":
                self.key = "args_literal"  # only ``null`` is accepted (as {})
            return consumed
        if (key in NAME_KEYS or key in NAME_ALIASES) and ch == '"' and self.name is None:
            self.string = StringReader()
            self.reading = "name"
            return True
        if key in WRAPPER_KEYS and ch == "{":
            self.levels += 1
            self.expect = "key"
            return True
        return self._read_value(ch, "skip")

    def _read_value(self, ch: str, kind: str) -> bool:
        """Start the reader for a value beginning with ``ch``: ``kind`` ``"args"`` streams an object or
        array value, ``"skip"`` passes over it. Return whether ``ch`` was consumed here."""
        if ch in "{[":
            self.lexer = ValueLexer(emit=kind == "args", stops=self.stops)
            self.reading = kind
            return False
        if ch == '"':
            self.string = StringReader()
            self.reading = kind + "_string"
            return True
        self.reading = "literal"
        self.literal = []
        return False

    def _string_done(self, reading: str) -> None:
        if reading == "key":
            self.key = self.string.decoded() or ""
        elif reading == "name":
            self.name = self.string.decoded() or ""
            if not self.bare or self.saw_args:
                self.ctx.call_name(self.name)
                if not self.holding_alias:
                    self._release_held()
        elif reading == "args_string":
            decoded = self.string.decoded()
            arguments = None if decoded is None else object_text(decoded)
            if arguments is not None:
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
        self.expect = "comma"

    def _name_ready(self) -> None:
        """In bare mode the name is reported only once an arguments value begins."""
        if self.bare and self.name is not None and self.saw_args:
            self.ctx.call_name(self.name)

    def _args(self, text: str) -> None:
        """Argument text: held while it is an alias key's, or in bare mode until the name is known."""
        if self.holding_alias or (self.bare and self.name is None):
            self.held.append(text)
        else:
            self._send(text)

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
            self.expect = "comma"
            return False
        return True

    def complete(self) -> bool:
        """The object closed: send what is still held; ``False`` if it was not a call.

        The caller ends the call (``call_end``) once it knows the block is over.
        """
        if self.name is None or (self.bare and not self.saw_args):
            self.ctx.call_abort("invalid_json", "the block has no function name")
            return False
        self.holding_alias = False  # no "arguments" key came after the alias: its value stands
        self._release_held()
        if not self.saw_args:
            self._send("{}")
        return True


def object_text(text: str) -> str | None:
    """``text`` if it is a JSON object; a relaxed JSON object's canonical text; else ``None``."""
    try:
        if isinstance(json.loads(text), dict):
            return text.strip()
    except ValueError:
        value = relaxed_loads(text)
        if isinstance(value, dict):
            return json.dumps(value, ensure_ascii=False)
    return None


def call_parts(obj: Any) -> tuple[str | None, str | None, bool]:
    """A parsed call object's name, arguments as JSON object text, and whether it had an arguments key.

    The same keys count as for the streamed object: wrappers are entered, the first
    string under a name key is the name, ``arguments`` wins over the aliases; null
    arguments are ``{}``, a string holding an object is unwrapped, anything else gives
    ``None`` arguments.
    """
    name = None
    args: dict[str, Any] = {}

    def walk(level: dict) -> None:
        nonlocal name
        for key, value in level.items():
            if key in WRAPPER_KEYS and isinstance(value, dict):
                walk(value)
            elif key in NAME_KEYS or key in NAME_ALIASES:
                if name is None and isinstance(value, str):
                    name = value
            elif key in ARG_KEYS:
                args.setdefault(key, value)

    if not isinstance(obj, dict):
        return None, None, False
    walk(obj)
    if not args:
        return name, None, False
    value = args.get("arguments", next(iter(args.values())))
    if value is None:
        return name, "{}", True
    if isinstance(value, str):
        return name, object_text(value), True
    return name, json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else None, True


class JsonCallsBody:
    """Body of ``<tool_call>`` (and of a bare JSON call at message start).

    Accepts one object, several objects (``{…}{…}``, ``{…}; {…}``), an array of
    call objects, or a ``<function=…>`` block (Qwen3-Coder). After the calls, the
    closer (or a mismatched ``</…>`` closer) ends the block; a stray ``}``,
    ``]`` or ``>`` is dropped; a new opener or prose ends it implicitly. A new
    opener inside an unfinished object interrupts it (case 14).

    A call object that closed is ended only once what follows shows the block
    went on (the closer, a separator, the next call, prose): at the end of the
    stream it is an unclosed block, which an upstream ``length`` makes
    unusable (4.11). Bare JSON has no closer, so its calls end at once.
    """

    def __init__(self, ctx: Any, closer: str | None, *, bare: bool = False):
        self.ctx = ctx
        self.closer = closer
        self.bare = bare
        self.state = "start"
        self.parser: JsonCallParser | None = None
        self.inner: FunctionBody | None = None
        self.in_array = False
        self.calls = 0
        self.stray_dropped = False
        self.ending: tuple[bool, bool] | None = None  # (repaired, invalid) of a closed, not yet ended call

    def feed(self, buf: str, pos: int) -> tuple[str, int]:
        n = len(buf)
        while pos < n:
            if self.parser is not None:
                result = self.parser.feed(buf, pos)
                if result is None:
                    return MORE, n
                status, pos = result
                if status == "partial":
                    return MORE, pos
                parser, self.parser = self.parser, None
                self.calls += 1
                if status == "opener":
                    self.ctx.call_abort("invalid_json", "a new call began before this one was complete")
                    return DONE, pos
                if status == "invalid":
                    if self.bare or self.calls > 1:
                        self.ctx.call_abort("invalid_json", "the call body is not valid JSON")
                        return DONE, pos
                    self.state = "skip_to_closer"
                    self.ctx.call_invalid()
                    continue
                self.state = "after"
                if parser.complete():
                    self.ending = (parser.repaired, parser.invalid)
                    if self.bare:
                        self._end_call()
                continue
            if self.inner is not None:
                status, pos = self.inner.feed(buf, pos)
                if status == MORE:
                    return MORE, pos
                self.inner = None
                self.calls += 1
                self.state = "after"
                continue
            state = self.state
            if state == "skip_to_closer":
                hit, end = skip_to(buf, pos, self.closer, self.ctx.openers)
                if hit is None:
                    return MORE, end
                self.ctx.call_abort("invalid_json", "the call body is not valid JSON")
                return DONE, end
            ch = buf[pos]
            if ch in _WS:
                pos += 1
                continue
            if ch == "{":
                if self.calls:  # the opener began the first call; later ones begin here
                    self._end_call()
                    self.ctx.call_begin()
                self.parser = JsonCallParser(self.ctx, bare=self.bare)
                continue
            if state == "start":
                if ch == "[":
                    self.in_array = True
                    self.state = "array"
                    pos += 1
                    continue
                if ch == "<" and not self.bare:
                    opener = "<function="
                    if buf.startswith(opener, pos):
                        self.inner = FunctionBody(self.ctx, self.closer)
                        pos += len(opener)
                        continue
                    if opener.startswith(buf[pos:]):
                        return MORE, pos
                self.ctx.call_abort("not_a_call", "the block does not start a call")
                return DONE, pos
            # after a call, or between array elements
            if ch in "}]>" and not self.stray_dropped and not self.bare and not (ch == "]" and self.in_array):
                self.stray_dropped = True
                self.ctx.note("repaired", f"stray {ch!r} after the call dropped")
                pos += 1
                continue
            if ch == "<" and not self.bare:
                end = buf.find(">", pos)
                if end == -1 and n - pos <= 32:
                    return MORE, pos  # a tag still arriving: the closer, or what comes next
            self._end_call()  # anything else shows the call object was the whole call
            if ch in ",;":
                pos += 1
                continue
            if ch == "]" and self.in_array:
                self.in_array = False
                pos += 1
                continue
            if ch == "<" and not self.bare and end != -1:
                tag = buf[pos:end + 1]
                if tag.startswith("</"):
                    if tag != self.closer:
                        self.ctx.note("repaired", f"mismatched closer {tag!r} accepted")
                    return DONE, end + 1
            return self._ended(pos)  # a new opener, any other tag or prose: the block ended without its closer
        return MORE, n

    def _end_call(self) -> None:
        """End the call whose object closed, now that the block is known to go on or end."""
        if self.ending is not None:
            repaired, invalid = self.ending
            self.ending = None
            self.ctx.call_end(repaired=repaired, invalid=invalid)

    def _ended(self, pos: int) -> tuple[str, int]:
        """The block ends at ``pos``; if no call was parsed in it (``[`` then prose), it was text."""
        if not self.calls:
            self.ctx.call_abort("not_a_call", "the block holds no call")
        return DONE, pos

    def at_eof(self) -> None:
        if self.parser is not None:
            self.ctx.call_incomplete()
        elif self.inner is not None:
            self.inner.at_eof()
        elif self.state == "skip_to_closer":
            self.ctx.call_abort("invalid_json", "the call body is not valid JSON")
        elif self.state == "start" or not self.calls:
            self.ctx.call_abort("invalid_json", "the block ended before a call started")
        elif self.ending is not None:
            repaired, invalid = self.ending
            self.ending = None
            self.ctx.call_unclosed(repaired=repaired, invalid=invalid)
        elif not self.bare:
            self.ctx.note("recovered_unclosed", "the call had no closer; its JSON was complete")


class UseToolBody:
    """Body of ``<use_tool>`` (Obsidian Copilot): ``<name>``, ``<args>``, parameter children or JSON.

    A new call's opener where a child tag or JSON structure may stand (outside
    JSON strings and child values) ends an unfinished block (case 14): one that
    is named and has its arguments is accepted, any other fails. A child's value
    is text, like a JSON string, so an opener inside it is part of the value;
    only the ``<name>`` value can hold no tag at all.
    """

    CLOSER = "</use_tool>"
    _TAG_LIMIT = 128  # a tag (or the opener's attributes) with no '>' after this many characters is malformed

    def __init__(self, ctx: Any, *, has_attributes: bool):
        self.ctx = ctx
        self.state = "attributes" if has_attributes else "children"
        self.reader: _TextUntil | None = None
        self.lexer: ValueLexer | None = None
        self.json_body: list[str] | None = None
        self.params: dict[str, str] = {}
        self.param = ""
        self.named = False
        self.has_args = False
        self.repaired = False

    def feed(self, buf: str, pos: int) -> tuple[str, int]:
        n = len(buf)
        while pos < n:
            state = self.state
            if state == "skip":
                return self._skip(buf, pos)
            if self.reader is not None:
                reader = self.reader
                text, pos = reader.feed(buf, pos)
                if text is None:
                    if reader.stray:  # a '<' inside the name
                        reader.stray = False
                        return self._stray_tag(buf, pos, pos)
                    return MORE, pos
                self.reader = None
                self._child_text(text)
                continue
            if self.lexer is not None:
                text, end = self.lexer.feed(buf, pos)
                if self.json_body is not None:
                    self.json_body.append(text)
                elif text:
                    self.ctx.call_args(text)
                if end is None:
                    return MORE, n
                if self.lexer.stopped == "partial":
                    return MORE, end
                if self.lexer.stopped:
                    return self._interrupted(end)
                self.repaired |= self.lexer.repaired
                self.lexer = None
                pos = end
                if self.json_body is not None:
                    self._json_body_done()
                continue
            if state == "attributes":
                m = _TAG_MARK.search(buf, pos, pos + self._TAG_LIMIT)
                if m is None:
                    if n - pos >= self._TAG_LIMIT:
                        return self._invalid(buf, pos)
                    return MORE, pos
                end = m.start()
                if buf[end] == "<":
                    return self._stray_tag(buf, end, pos)
                m = _NAME_ATTRIBUTE.search(buf, pos, end)
                if m:
                    self._name((m.group(1) if m.group(1) is not None else m.group(2)).strip())
                self.state = "children"
                pos = end + 1
                continue
            ch = buf[pos]
            if ch in _WS:
                pos += 1
                continue
            if ch == "{" and state in ("children", "args"):
                if state == "children" and not self.named:
                    self.json_body = []  # a JSON body: {"name": …, …the arguments…}
                self.lexer = ValueLexer(emit=True, stops=self.ctx.openers)
                self.has_args = True
                continue
            if ch != "<":
                if not (self.named or self.has_args or self.params or state == "args"):
                    self.ctx.call_abort("not_a_call", "the block does not start a call")  # prose (4.2)
                    return DONE, pos
                return self._invalid(buf, pos)
            if opener_at(buf, pos, self.ctx.openers) == "opener":
                return self._interrupted(pos)
            end = buf.find(">", pos, pos + self._TAG_LIMIT)
            if end == -1:
                if n - pos >= self._TAG_LIMIT:
                    return self._invalid(buf, pos)
                return MORE, pos
            tag = buf[pos + 1:end]
            pos = end + 1
            if state == "args":
                if tag != "/args":
                    return self._invalid(buf, pos)
                self.state = "children"
            elif tag == "/use_tool":
                self._finish()
                return DONE, pos
            elif tag == "args":
                self.state = "args"
            elif _CHILD_TAG.fullmatch(tag):
                self.param = tag
                self.reader = _TextUntil(f"</{tag}>", tagless=tag == "name" and not self.named)
            else:
                return self._invalid(buf, pos)
        return MORE, n

    def _child_text(self, text: str) -> None:
        if self.param == "name" and not self.named:
            self._name(text.strip())
        else:
            self.params[self.param] = text

    def _name(self, name: str) -> None:
        self.named = True
        self.ctx.call_name(name)

    def _json_body_done(self) -> None:
        body = "".join(self.json_body)
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
        return (self.named and (self.has_args or bool(self.params)) and self.state != "skip"
                and self.reader is None and self.lexer is None and self.json_body is None)

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

    def _interrupted(self, pos: int) -> tuple[str, int]:
        """A new call's opener at ``pos`` ends this block without its closer (case 14)."""
        if self._complete():
            self._finish()
        else:
            self.ctx.call_abort("invalid_json", "a new call began before this one was complete")
        return DONE, pos

    def _stray_tag(self, buf: str, i: int, keep: int) -> tuple[str, int]:
        """A ``<`` at ``i`` where no tag may stand: a new call's opener ends the block, anything else
        is malformed; a possible opener cut by the chunk's end is fed again from ``keep``."""
        hit = opener_at(buf, i, self.ctx.openers)
        if hit == "opener":
            return self._interrupted(i)
        if hit == "partial":
            return MORE, keep
        return self._invalid(buf, i)

    def _invalid(self, buf: str, pos: int) -> tuple[str, int]:
        """A malformed block: skip to the closer (or a new call's opener), then release the whole block."""
        self.ctx.call_invalid()
        self.state = "skip"
        return self._skip(buf, pos)

    def _skip(self, buf: str, pos: int) -> tuple[str, int]:
        hit, end = skip_to(buf, pos, self.CLOSER, self.ctx.openers)
        if hit is None:
            return MORE, end
        self.ctx.call_abort("invalid_json", "the use_tool block is malformed")
        return DONE, end

    def at_eof(self) -> None:
        if self._complete():
            self.ctx.call_unclosed(repaired=self.repaired, tail="" if self.has_args else self._params_json())
        else:
            self.ctx.call_incomplete()


def skip_to(buf: str, pos: int, closer: str, openers: tuple[str, ...]) -> tuple[str | None, int]:
    """Where a malformed block being skipped ends: ``("closer", after it)``, ``("opener", at it)``
    when a new call begins first (case 14), or ``(None, keep)``: not yet, ``buf[keep:]`` may be a
    tag cut by the chunk's end."""
    i = buf.find("<", pos)
    while i != -1:
        if buf.startswith(closer, i):
            return "closer", i + len(closer)
        hit = opener_at(buf, i, openers)
        if hit == "opener":
            return "opener", i
        if hit == "partial" or (len(buf) - i < len(closer) and closer.startswith(buf[i:])):
            return None, i
        i = buf.find("<", i + 1)
    return None, len(buf)


class _TextUntil:
    """Collects text up to a literal closer, across chunks.

    With ``tagless`` the text holds no ``<`` but the closer's: at any other
    ``<`` ``feed`` stops there and sets ``stray``; the caller decides.
    """

    def __init__(self, closer: str, *, tagless: bool = False):
        self.closer = closer
        self.tagless = tagless
        self.stray = False
        self.parts: list[str] = []

    def feed(self, buf: str, pos: int) -> tuple[str | None, int]:
        if self.tagless:
            i = buf.find("<", pos)
            if i != -1 and not buf.startswith(self.closer, i) and not self.closer.startswith(buf[i:]):
                self.parts.append(buf[pos:i])
                self.stray = True
                return None, i
        i = buf.find(self.closer, pos)
        if i == -1:
            keep = _partial_at_end(buf, pos, (self.closer,))
            self.parts.append(buf[pos:keep])
            return None, keep
        self.parts.append(buf[pos:i])
        return "".join(self.parts), i + len(self.closer)


class FunctionBody:
    """Body of ``<function=NAME>``: a JSON object, or ``<parameter=K>V</parameter>`` children.

    Parameters stream as they arrive (parsing.md 2.1 C): ``{`` when the first
    one opens, ``"K": `` when its name's ``>`` arrives, a string-typed value as
    escaped JSON string fragments (one trailing newline held until it is known
    not to be the last), any other value once its parameter closes (schema
    coercion may change its text), ``, `` between, ``}`` at ``</function>``.

    A value may contain ``</parameter>``-like text: ``</parameter>`` closes the
    parameter only when what follows it (after whitespace) is ``<parameter=``,
    ``</function>``, the enclosing block's closer or the end of the stream, so
    it and the whitespace after it are held until that is known.
    """

    CLOSER = "</function>"
    _PARAM_CLOSE = "</parameter>"
    _PARAM_END = (_PARAM_CLOSE, "<parameter=", "</function>")
    _PARAM_END_RE = re.compile("|".join(map(re.escape, _PARAM_END)))  # what ends a parameter value
    _PARAM_OPEN = "<parameter="
    _TAG_LIMIT = 128  # a name with no '>' after this many characters is not a tag
    _CLOSE_HOLD = 1024  # whitespace after a '</parameter>' held at most this long; past it, the value goes on

    def __init__(self, ctx: Any, outer_closer: str | None = None):
        self.ctx = ctx
        self.outer_closer = outer_closer  # the enclosing block's closer (``</tool_call>``): implies ``</function>``
        self.tags = (self._PARAM_OPEN, self.CLOSER) + ((outer_closer,) if outer_closer else ())
        self.state = "name"
        self.closing: list[str] | None = None  # a '</parameter>' and the whitespace after it, held
        self.closing_len = 0
        self.partial = False  # the last feed stopped at a tag cut by the chunk's end
        self.lexer: ValueLexer | None = None
        self.repaired = False
        self.streamed_json = False
        self.props: Mapping[str, Any] = {}  # the tool's schema properties
        self.params = 0  # parameters opened so far
        self.schema: Mapping[str, Any] | None = None  # the current parameter's schema
        self.held: list[str] | None = None  # a non-string value's text, held until its parameter closes
        self.value_start = True  # nothing of the current value read yet (its first newline is trimmed)
        self.newline = False  # a string value's trailing newline, held

    def feed(self, buf: str, pos: int) -> tuple[str, int]:
        n = len(buf)
        self.partial = False
        while pos < n:
            state = self.state
            if self.lexer is not None:
                text, end = self.lexer.feed(buf, pos)
                if text:
                    self.ctx.call_args(text)
                if end is None:
                    return MORE, n
                if self.lexer.stopped == "partial":
                    return MORE, end
                if self.lexer.stopped:
                    self.ctx.call_abort("invalid_json", "a new call began before this one was complete")
                    return DONE, end
                self.repaired |= self.lexer.repaired
                self.lexer = None
                self.streamed_json = True
                pos = end
                continue
            if state in ("name", "param_name"):
                end = buf.find(">", pos, pos + self._TAG_LIMIT)
                if end == -1:
                    if n - pos >= self._TAG_LIMIT:
                        return self._invalid(pos, "no '>' after the name")
                    return MORE, pos
                name = buf[pos:end].strip().strip("\"'")
                if state == "param_name":
                    self._param_open(name)
                elif not name or any(c in name for c in " \n<"):
                    return self._invalid(pos, "bad function name")
                else:
                    self._named(name)
                pos = end + 1
                continue
            if state == "value":
                m = self._PARAM_END_RE.search(buf, pos)
                if m is None:
                    # every tag starts with '<': without one the whole rest is value text
                    keep = n if buf.find("<", pos) == -1 else _partial_at_end(buf, pos, self._PARAM_END)
                    self._value(buf[pos:keep])
                    return MORE, keep
                i, hit = m.start(), m.group()
                self._value(buf[pos:i])
                if hit == self._PARAM_CLOSE:
                    self.closing = [hit]
                    self.closing_len = len(hit)
                    self.state = "closing"
                    pos = i + len(hit)
                else:  # an unclosed parameter ends at the next one or at </function>
                    self._param_close()
                    self.state = "body"
                    pos = i
                continue
            if state == "closing":
                pos = self._closing(buf, pos)
                if self.partial:
                    return MORE, pos
                continue
            ch = buf[pos]
            if ch in _WS:
                pos += 1
                continue
            if ch == "{" and not self.params and not self.streamed_json:
                self.lexer = ValueLexer(emit=True, stops=self.ctx.openers)
                continue
            for tag in self.tags:
                if buf.startswith(tag, pos):
                    break
                if tag.startswith(buf[pos:]):
                    return MORE, pos
            else:
                self.ctx.call_invalid()
                return self._invalid(pos, "unexpected text in the function body")
            if tag == self._PARAM_OPEN:
                if not self.params and not self.streamed_json:
                    self.ctx.call_args("{")
                self.state = "param_name"
                pos += len(tag)
                continue
            if tag == self.outer_closer:  # no </function>: the block's closer ends the function too
                self.repaired = True
                self._finish()
                return DONE, pos
            self._finish()
            return DONE, pos + len(tag)
        return MORE, n

    def _closing(self, buf: str, pos: int) -> int:
        """After a ``</parameter>``: decide from what follows whether it closed the parameter."""
        n = len(buf)
        m = _NON_WS.search(buf, pos)
        j = n if m is None else m.start()
        room = self._CLOSE_HOLD - self.closing_len
        if j - pos > room:  # too much whitespace to hold: the '</parameter>' was value text
            self._not_closed(buf[pos:pos + room])
            return pos + room
        self.closing.append(buf[pos:j])
        self.closing_len += j - pos
        if j == n:
            return n
        if any(buf.startswith(tag, j) for tag in self.tags):
            self.closing = None
            self._param_close()
            self.state = "body"
        elif any(tag.startswith(buf[j:]) for tag in self.tags):
            self.partial = True  # a tag cut by the chunk's end: decided with the next chunk
        else:
            self._not_closed("")
        return j

    def _not_closed(self, more: str) -> None:
        """The held ``</parameter>`` (and whitespace) belongs to the value."""
        text = "".join(self.closing) + more
        self.closing = None
        self.state = "value"
        self._value(text)

    def _invalid(self, pos: int, message: str) -> tuple[str, int]:
        self.ctx.call_abort("invalid_json", message)
        return DONE, pos

    def _named(self, name: str) -> None:
        self.ctx.call_name(name)
        schema = self.ctx.schema_for(self.ctx.current_name())
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        self.props = props if isinstance(props, Mapping) else {}
        self.state = "body"

    def _param_open(self, key: str) -> None:
        self.schema = self.props.get(key)
        string = schema_type(self.schema) in (None, "string")
        self.held = None if string else []
        self.value_start = True
        self.newline = False
        sep = ", " if self.params else ""
        self.params += 1
        self.ctx.call_args(sep + json.dumps(key, ensure_ascii=False) + (': "' if string else ": "))
        self.state = "value"

    def _value(self, text: str) -> None:
        if not text:
            return
        if self.value_start:
            self.value_start = False
            if text[0] == "\n":
                text = text[1:]
        if self.held is not None:
            self.held.append(text)
            return
        if self.newline:
            text = "\n" + text
        self.newline = text.endswith("\n")
        if self.newline:
            text = text[:-1]
        if text:
            # json.dumps (non-ASCII kept) changes only quotes, backslashes and control characters
            self.ctx.call_args(json.dumps(text, ensure_ascii=False)[1:-1] if _NEEDS_ESCAPE.search(text) else text)

    def _param_close(self) -> None:
        if self.held is None:
            self.ctx.call_args('"')  # a held trailing newline was the value's last: trimmed
            return
        text = "".join(self.held)
        if text.endswith("\n"):
            text = text[:-1]
        self.ctx.call_args(json.dumps(coerce_value(text, self.schema), ensure_ascii=False))

    def _finish(self) -> None:
        if not self.streamed_json:
            self.ctx.call_args("}" if self.params else "{}")
        self.ctx.call_end(repaired=self.repaired)

    def at_eof(self) -> None:
        if self.state == "closing" and not self.partial:  # '</parameter>' then only whitespace: it closed
            self._param_close()
            self.state = "body"
        if self.state == "body" and self.lexer is None and (self.streamed_json or self.params):
            self.ctx.call_unclosed(repaired=self.repaired, tail="" if self.streamed_json else "}")
        else:
            self.ctx.call_incomplete()


# Schema-driven coercion of textual parameter values ------------------------

_SQL_TYPES = {
    "varchar": "string", "char": "string", "text": "string", "str": "string",
    "int": "integer", "bigint": "integer", "smallint": "integer", "long": "integer",
    "float": "number", "double": "number", "decimal": "number", "bool": "boolean",
    "list": "array", "dict": "object", "map": "object",
}


def schema_type(schema: Mapping[str, Any] | None) -> str | None:
    """The JSON type a (sub)schema asks for; the first branch of oneOf/anyOf/allOf."""
    if not isinstance(schema, Mapping):
        return None
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), None)
    if typ is None:
        for key in ("anyOf", "oneOf", "allOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                return schema_type(branches[0])
        return None
    typ = str(typ).lower()
    return _SQL_TYPES.get(typ, typ)


def coerce_value(text: str, schema: Mapping[str, Any] | None) -> Any:
    """A textual parameter value as the type its schema asks for (always JSON-serialisable), else the string itself."""
    typ = schema_type(schema)
    if typ in (None, "string"):
        return text
    stripped = text.strip()
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(stripped)
            json.dumps(value, allow_nan=False)  # a Python literal (set, bytes, nan…) may not be JSON
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if typ == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)
        return value
    if typ == "boolean" and stripped.lower() in ("true", "false"):
        return stripped.lower() == "true"
    return text


def coerce_parameters(params: Mapping[str, str], schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """Textual parameters as a JSON object, in the schema's order, then alphabetical."""
    props = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
    order = [k for k in props if k in params] + sorted(k for k in params if k not in props)
    return {k: coerce_value(params[k], props.get(k)) for k in order}
