"""Pythonic calls: ``[get_weather(city="SF", unit='c'), noop()]`` (Llama 3.2/4, Olmo 3, Granite 3.3, Gemma 3).

::

    [get_weather(city="SF", days=3), get_time()]                       bare, at a message's start
    <|python_start|>[get_weather(city="SF")]<|python_end|>             Llama 4
    <function_calls>get_weather(city="SF")
    get_time()</function_calls>                                        Olmo 3: one call per line
    get_weather(location="Paris")                                      Granite: bare lines at the start

Keyword arguments are Python literals (``_python``), converted to JSON: each
argument goes out as ``"key": value`` once it is complete (a literal's JSON
text is known only then); ``{`` goes out with the header when the name's
``(`` arrives, ``}`` at the ``)``. A positional argument takes the name of the
schema's parameter at its position (a repair, noted). An argument that is no
literal ends its call as invalid, and the calls after it still stand.

Without a wrapper, a pythonic call is recognised only at a message's start
and only for an offered tool (the bare-JSON rule): text is held only while it
can still become ``[NAME(`` or ``NAME(`` with NAME an offered tool's name. Such
a bare call is named (and its header sent) only at its ``)``, once every
argument was a literal: ``[get_weather(c) for c in cities]`` is code, and stays
text (issue 43 item 6).
"""

from __future__ import annotations

import enum
import json
import re
from typing import Any, Callable, Sequence

from .._scanning import WS, skip_ws
from .._reader import BodyReader, CallSink, COMPLETE, MORE, Outcome, Pending, Step, TableReader
from ._base import TextFormat, call_instructions, compact_object, end_calls_at_eof
from ._python import ArgScanner, literal

_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
_NAME_LIMIT = 128
_KEYWORD = re.compile(r"\s*([A-Za-z_][\w\-]*)\s*=(?!=)")
_SEPARATORS = ",;"


class PythonicState(str, enum.Enum):
    """Where a :class:`PythonicBody` is in its block (a ``str`` enum: table lookups hash it in C)."""

    #: The first significant character: ``[`` opens a list of calls.
    START = "start"
    #: The next call's name, up to its ``(``.
    NAME = "name"
    #: A call's arguments, up to its ``)``.
    ARGS = "args"
    #: After a call: the next call, the list's end or the wrapper's.
    AFTER = "after"
    #: After the list's ``]``: the wrapper's closer.
    AFTER_LIST = "after_list"


START, NAME, ARGS, AFTER, AFTER_LIST = PythonicState


class PythonicBody(TableReader):
    """Reads pythonic calls from just after an opener (or at a message's start, ``bare``).

    The first significant character picks the form: ``[`` a list of calls
    (``,`` between, ``]`` after), a name a run of calls separated by
    whitespace. ``closer`` is the wrapper's end (``None``: the block ends with
    its calls). A call whose ``)`` arrived ends once what follows shows the
    block went on (bare lines end at once: nothing closes them).
    """

    def __init__(self, sink: CallSink, closer: str | None, *, bare: bool = False):
        self.sink = sink
        self.closer = closer
        self.bare = bare
        self.listed = False  # the calls are in a '[…]' list
        self.state = START
        self.calls = 0
        self.scanner: ArgScanner | None = None
        self.args = 0  # arguments sent for the current call
        self.keys: set[str] = set()
        self.broken = False  # the current call has an argument that is no literal
        self.pending = False  # a call whose ')' arrived, not ended yet
        self.name = ""  # the current call's name

    @property
    def in_arguments(self) -> bool:
        """The reader is inside a call's arguments."""
        return self.state is ARGS

    # one method per state: each returns the block's outcome, or ``None`` and where to read on

    def _read_start(self, buf: str, pos: int) -> Step:
        """The first significant character: ``[`` opens a list of calls, anything else is a call's name."""
        pos = skip_ws(buf, pos)
        if pos < len(buf):
            if buf[pos] == "[":
                self.listed = True
                pos += 1
            self.state = NAME
        return None, pos

    def _read_name(self, buf: str, pos: int) -> Step:
        """At the next call's name: its header once the ``(`` arrives; the block ends if it is no call."""
        pos = skip_ws(buf, pos)
        if pos == len(buf):
            return MORE, pos
        if self.listed and self.calls and buf[pos] == "]":  # a trailing comma before the list's end
            self.state = AFTER
            return None, pos
        m = _NAME.match(buf, pos)
        if m is None:
            return self._ended(pos)
        if m.end() == len(buf):  # the name may go on
            if m.end() - pos > _NAME_LIMIT or (self.bare and not self._may_be_tool(m.group())):
                return self._ended(pos)
            return MORE, pos
        if buf[m.end()] != "(" or (self.bare and m.group() not in self.sink.config.tools):
            return self._ended(pos)
        self._end_pending()
        if self.calls:
            self.sink.call_begin()
        self.calls += 1
        self.name = m.group()
        if not self.bare:
            self.sink.call_name(self.name)
        self.sink.call_args("{")
        self.scanner = ArgScanner()
        self.args, self.keys, self.broken = 0, set(), False
        self.state = ARGS
        return None, m.end() + 1

    def _read_args(self, buf: str, pos: int) -> Step:
        """A call's arguments, each sent once complete, up to its ``)``."""
        scanner = self.scanner
        assert scanner is not None
        end, keep = scanner.feed(buf, pos)
        if end is None:
            return MORE, keep
        if scanner.broken:  # no ')' will come: the call and its block end here
            self.sink.call_abort("invalid_json", "a call's argument is not a Python literal")
            return COMPLETE, end
        closed = buf[end] == ")"
        self._argument(scanner.text(), last=closed)
        if closed:
            self._call_closed()
        else:
            self.scanner = ArgScanner()
        return None, end + 1

    def _read_after(self, buf: str, pos: int) -> Step:
        """After a call (or the list): the wrapper's end, the next call or the list's end; anything else (prose,
        a new opener) ends the block here."""
        pos = skip_ws(buf, pos)
        if pos == len(buf):
            return MORE, pos
        closer = self.closer
        if closer and buf.startswith(closer, pos):  # the wrapper's end, after the calls
            self._end_pending()
            return COMPLETE, pos + len(closer)
        if closer and closer.startswith(buf[pos:]):
            return MORE, pos
        if self.state is AFTER:
            if self.listed and buf[pos] == "]":
                self.state = AFTER_LIST
                self._end_pending()
                return (None if closer else COMPLETE), pos + 1
            if self.listed and buf[pos] in _SEPARATORS:
                self.state = NAME
                return None, pos + 1
            if not self.listed and _NAME.match(buf, pos):
                self.state = NAME
                return None, pos
        return self._ended(pos)

    def _may_be_tool(self, word: str) -> bool:
        return any(name.startswith(word) for name in self.sink.config.tools)

    def _argument(self, text: str, *, last: bool) -> None:
        """One complete argument: sent as ``"key": value``; a trailing comma's empty one is skipped."""
        if not text.strip():  # no arguments, or a trailing comma's empty one
            self.broken |= not last
            return
        m = _KEYWORD.match(text)
        try:
            value = literal(text[m.end():] if m else text)
            json.dumps(value, allow_nan=False)
        except (ValueError, TypeError):
            self.broken = True
            return
        key = m.group(1) if m else self._positional_key()
        if key is None or key in self.keys:
            self.broken = True
            return
        self.keys.add(key)
        self.sink.call_args(("" if not self.args else ", ") + json.dumps(key, ensure_ascii=False) + ": "
                            + json.dumps(value, ensure_ascii=False))
        self.args += 1

    def _positional_key(self) -> str | None:
        """A positional argument's name: the schema's parameter at its position (a noted repair)."""
        schema = self.sink.schema_for(self.name) or {}
        names = list(schema.get("properties") or ())
        if self.args >= len(names) or self.keys & set(names[self.args:]):
            return None
        self.sink.note("repaired", "a positional argument was given its parameter's name")
        return str(names[self.args])

    def _call_closed(self) -> None:
        self.scanner = None
        self.state = AFTER
        if self.broken:
            self.sink.call_end(invalid=True)
            return
        self.sink.call_args("}")
        if self.bare:  # named only now: code that merely starts like a call (a comprehension) stays text
            self.sink.call_name(self.name)
        if self.bare and not self.listed:  # nothing closes bare lines: the call is over now
            self.sink.call_end()
        else:
            self.pending = True

    def _end_pending(self) -> None:
        if self.pending:
            self.pending = False
            self.sink.call_end()

    def _ended(self, pos: int) -> tuple[Outcome, int]:
        """The block ends at ``pos``: a call whose end was pending ends; with no call, the block was none."""
        self._end_pending()
        if not self.calls:
            self.sink.call_abort("not_a_call", "the block does not start a pythonic call")
        return COMPLETE, pos

    def at_eof(self) -> None:
        end_calls_at_eof(self)


def refutes_start(buf: str, pos: int) -> bool | None:
    """What a (not bare) :class:`PythonicBody` decides from its body's start ``buf[pos:]``, as
    ``TextFormat.refutes`` answers: ``True`` when neither ``[`` nor a name starts it (``not_a_call``)."""
    start = skip_ws(buf, pos)
    if start == len(buf):
        return None
    return buf[start] != "[" and _NAME.match(buf, start) is None


def bare_pythonic(buf: str, pos: int, sink: CallSink) -> BodyReader | Pending | None:
    """A bare pythonic block starting at ``buf[pos]`` (a message's start): its reader, ``Pending.PARTIAL`` while
    the text may still become ``[NAME(`` or ``NAME(`` for an offered tool, else ``None``."""
    tools = sink.config.tools
    i = pos + (buf[pos] == "[")
    while i < len(buf) and buf[i] in WS:
        i += 1
    if i == len(buf):
        return Pending.PARTIAL
    m = _NAME.match(buf, i)
    if m is None:
        return None
    word = m.group()
    if m.end() == len(buf):
        return Pending.PARTIAL if m.end() - i <= _NAME_LIMIT and any(t.startswith(word) for t in tools) else None
    if buf[m.end()] != "(" or word not in tools:
        return None
    return PythonicBody(sink, None, bare=True)


def python_call(name: str, arguments: str) -> str:
    """One call in Python syntax: ``name(key=value, …)``, values as Python literals."""
    args = json.loads(compact_object(arguments))
    pairs = args.items() if isinstance(args, dict) else ()
    return f"{name}(" + ", ".join(f"{key}={_python_literal(value)}" for key, value in pairs) + ")"


def _python_literal(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "True", False: "False", None: "None"}[value]
    if isinstance(value, list):
        return "[" + ", ".join(map(_python_literal, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_python_literal(k)}: {_python_literal(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)  # strings and numbers: JSON's spelling is Python's too


_ARG_RULES = (
    "Arguments are keyword arguments with the tool's exact parameter names; values are Python literals "
    "(strings in quotes, numbers, True/False/None, lists, dicts); a tool without parameters gets ().",)


class PythonicFormat(TextFormat):
    """Pythonic calls: a bare ``[…]`` list at a message's start, or inside ``<|python_start|>`` (Llama 4)."""

    name = "pythonic"
    bare_shows_calls = False  # (BFCL's abstract shape)
    model_names = ("llama-4", "granite-3.3", "granite-4.0-h-small")
    openers = ("<|python_start|>",)
    closer = "<|python_end|>"
    #: Llama 4's turn ends (Llama 3.2 writes Llama 3's, Granite its own).
    end_tokens = ("<|eot|>", "<|eom|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>")
    #: A bare list (or bare lines) at a message's start is read too.
    reads_bare = True

    def render_call(self, name: str, arguments: str) -> str:
        return f"[{python_call(name, arguments)}]"

    def instructions(self, example_name: str, example_arguments: str) -> str:
        return call_instructions(self.render_call(example_name, example_arguments), (
            "Write the calls as one Python list of function calls, as the very first thing in your reply, "
            "before any other text; several calls go in the same list, separated by commas.",
            *_ARG_RULES))

    def bare_instructions(self, calls: Sequence[tuple[str, str]]) -> str | None:
        """One Python list of the calls at the reply's start, in the abstract two-call shape of BFCL's prompt (the
        shape measured on ``make bench-bfcl``; ``calls`` are not shown)."""
        return (
            "To call tools, reply with only a Python list of one or more calls, in this form:\n"
            "[tool_name1(param1=value1, param2=value2), tool_name2(param=value)]\n"
            "- Put every call the request asks for in the list: several things asked, several calls.\n"
            "- Each call's keyword arguments are its tool's parameters with the values from the request.\n"
            "- Nothing else: no code fence, no comment, no text around the list.\n"
            "- If no tool fits the request, answer in plain text without any call."
        )

    def bare_start(self, buf: str, pos: int, sink: CallSink) -> BodyReader | Pending | None:
        return bare_pythonic(buf, pos, sink)

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return PythonicBody(sink, self.closer)


class Olmo3Format(TextFormat):
    """Olmo 3: pythonic calls, one per line, in ``<function_calls>…</function_calls>``."""

    name = "olmo3"
    model_names = ("olmo-3",)
    openers = ("<function_calls>",)
    closer = "</function_calls>"
    end_tokens = ("<|im_end|>", "<|endoftext|>")

    def render_call(self, name: str, arguments: str) -> str:
        return f"{self.openers[0]}{python_call(name, arguments)}{self.closer}"

    def instructions(self, example_name: str, example_arguments: str) -> str:
        return call_instructions(self.render_call(example_name, example_arguments), (
            f"Put the calls in {self.openers[0]} … {self.closer}, one Python function call per line.",
            *_ARG_RULES))

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return PythonicBody(sink, self.closer)


#: Each state's reader.
_READERS: dict[PythonicState, Callable[[PythonicBody, str, int], Step]] = {
    START: PythonicBody._read_start,
    NAME: PythonicBody._read_name,
    ARGS: PythonicBody._read_args,
    AFTER: PythonicBody._read_after,
    AFTER_LIST: PythonicBody._read_after,
}
PythonicBody.READERS = _READERS
