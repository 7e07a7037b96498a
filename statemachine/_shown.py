"""A call written without an opener, or an example shown: decided once its block and the line after it are in.

A fenced JSON object (at the message's start, or at a line's start after text) and, under a forced
``tool_choice``, a bare one at a line's start after text, may be the model's call ("Here's how you would call
it:" then a ```` ```json ```` fence, issue 38) or an example it shows: API documentation with a request body, a
refusal that shows the body it would send, a tutorial, a function definition (issue 43 items 5 and 6).
:class:`HeldCall` holds such a block with the first line after it, then :func:`meant_as_call` says which it
was. A call it is when every object in it is a call of a tool the request lets the model call and nothing
around it says it is an example: no example, refusal or confirmation words in the text before it (the text
since the last call, its last 240 characters) or on the line after it; under ``auto`` also arguments that fit
the tool's parameters (every required key, no other key) and hold no placeholder (``"<city>"``,
``"..."``). Arguments alone (no name) are the call of the one tool they fit only under a forced choice, or
under ``auto`` when exactly one function tool may be called and the block is the whole answer.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Mapping

from ._callobject import call_parts, is_schema, nameless_call
from ._relaxed import relaxed_loads

if TYPE_CHECKING:
    from ._config import ParserConfig

#: How much of the text before the block is read for cue words.
BEFORE = 240
#: Words before a block that say it is shown, not called: examples, documentation, refusals, conditions.
_BEFORE_CUES = re.compile(
    r"(\be\.g\.|\b(examples?|for instance|samples?|for reference|illustrat\w*|templates?|placeholders?|schemas?"
    r"|(this|following|the) format|structure|definitions?|defined|declared?|documentation|docs|api reference"
    r"|would look|looks? like|request body|payload|body like|won'?t|will not|wouldn'?t|cannot|can'?t|can not"
    r"|unable|not able|without your|confirm\w*|approv\w*|permission|if you|once you|unless|should i|shall i"
    r"|do you want|would you like|before i|draft|not sent|have not|haven'?t|fill in|replace|had i|if i)\b)",
    re.IGNORECASE)
#: Words on the line after a block that say the same: it was not sent, the model asks first, fill it in.
_AFTER_CUES = re.compile(
    r"\b(examples?|samples?|illustrat\w*|templates?|placeholders?|schemas?|structure|request body|for reference"
    r"|not sent|nothing was sent|have not|haven'?t|shall i|should i|do you want|would you like|want me to"
    r"|go ahead|proceed|confirm\w*|approv\w*|reply yes|is that right|is this correct|replace|fill in"
    r"|your own)\b",
    re.IGNORECASE)
#: A string value that stands for one to fill in.
_PLACEHOLDER = re.compile(
    r"\s*(<[^<>]*>|\{\{.*\}\}|\.\.\.|…|your[ _-].*|string|value|example|placeholder|x{3,}|todo|tbd)\s*",
    re.IGNORECASE | re.DOTALL)
_FENCE_LINE = re.compile(r"[ ]{0,3}(`{3,})[ \t]*([A-Za-z0-9_+-]*)[ \t]*")
_CLOSING_FENCE = re.compile(r"^[ ]{0,3}(`{3,})[ \t]*$", re.MULTILINE)
_JSON_INFO = frozenset({"", "json", "json5", "jsonc"})
_WS = " \t\r\n"


class HeldCall:
    """A block that may be a call, held with the line after it until :func:`meant_as_call` can decide.

    Args:
        config: the request's tools and ``tool_choice``.
        before: the visible text before the block (since the last call), its end.
        nameless: arguments alone may be the one fitting tool's call (a forced choice, or the message's start).
    """

    __slots__ = ("config", "before", "nameless", "parts", "size")

    def __init__(self, config: ParserConfig, before: str, *, nameless: bool):
        self.config = config
        self.before = before
        self.nameless = nameless
        self.parts: list[str] = []
        self.size = 0

    def text(self) -> str:
        """Everything held."""
        return "".join(self.parts)

    def feed(self, text: str) -> bool | None:
        """Hold ``text`` too; whether the block is a call, or ``None`` while that is not known yet."""
        self.parts.append(text)
        self.size += len(text)
        if self.size > self.config.policy.hold_limit:
            return False  # the size valve (parsing.md 4.1): past it, no call
        return self._decide(final=False)

    def at_eof(self) -> bool:
        """The stream ended: whether what was held is a call."""
        return bool(self._decide(final=True))

    def _decide(self, *, final: bool) -> bool | None:
        text = "".join(self.parts)
        start = _skip(text, 0)
        if start == len(text):
            return None if not final else False
        infos = _JSON_INFO if self.before.strip(_WS) else None  # after text only a JSON fence; first, any
        block = _fenced(text, start, final, infos) if text[start] == "`" else _bare(text, start, final)
        if not isinstance(block, tuple):
            return None if block is None else False
        value, end = block
        after = _line_after(text, end, final)
        if after is None:
            return None
        whole = not after and not self.before.strip(_WS)
        return meant_as_call(value, self.before, after, self.config, nameless=self.nameless or whole)


def first_line_end(text: str) -> int:
    """Where the line the held block starts on (its fence line, or its JSON's first line) ends."""
    line_end = text.find("\n", _skip(text, 0))
    return len(text) if line_end == -1 else line_end + 1


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _fenced(text: str, start: int, final: bool, infos: frozenset[str] | None) -> tuple[Any, int] | bool | None:
    """A fence (its info string one of ``infos``, any if ``None``) holding JSON: its value and where its closing
    line ends; ``False`` if it is no such fence."""
    line_end = text.find("\n", start)
    if line_end == -1:
        return False if final or len(text) - start > 32 else None
    m = _FENCE_LINE.fullmatch(text, start, line_end)
    if m is None or (infos is not None and m.group(2).lower() not in infos):
        return False
    body = _skip(text, line_end + 1)
    if body == len(text):
        return False if final else None
    if text[body] not in "{[":
        return False
    run = len(m.group(1))
    close = next((c for c in _CLOSING_FENCE.finditer(text, body) if len(c.group(1)) >= run), None)
    if close is None:
        return False if final else None
    value = _loads(text[line_end + 1:close.start()])
    return False if value is None else (value, close.end())


def _bare(text: str, start: int, final: bool) -> tuple[Any, int] | bool | None:
    """A bare JSON object or array: its value and end; ``False`` if it is none."""
    if text[start] not in "{[":
        return False
    try:
        value, end = json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        if not final:
            return None
        value, end = relaxed_loads(text[start:]), len(text)
    return False if value is None else (value, end)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return relaxed_loads(text)


def _line_after(text: str, end: int, final: bool) -> str | None:
    """The first line of text after the block (``""`` when the answer ends there), or ``None`` while it is
    still arriving."""
    start = _skip(text, end)
    if start == len(text):
        return "" if final else None
    line_end = text.find("\n", start)
    if line_end == -1:
        return text[start:] if final or len(text) - start > BEFORE else None
    return text[start:line_end]


def meant_as_call(value: Any, before: str, after: str, config: ParserConfig, *, nameless: bool) -> bool:
    """Whether a JSON block (``value``) between ``before`` and ``after`` is the model's call, not an example."""
    objects = value if isinstance(value, list) else [value]
    if not objects or not all(_a_call(obj, config, nameless) for obj in objects):
        return False
    return not (_BEFORE_CUES.search(before[-BEFORE:]) or shown_after(after))


def shown_after(line: str) -> bool:
    """The line after a block says it was shown, not called (not sent, a question first, fill it in)."""
    return _AFTER_CUES.search(line) is not None


def _a_call(obj: Any, config: ParserConfig, nameless: bool) -> bool:
    forced = config.tool_choice.mode == "required"
    name, arguments, has_args = call_parts(obj)
    if name is None:
        named = nameless_call(config, obj) if nameless and (forced or _one_tool(config)) else None
        return named is not None and (forced or not _placeholder(json.loads(named[1])))
    allowed = config.tool_choice.allowed
    spec = config.tools.get(name)
    if spec is None or spec.kind != "function" or (allowed is not None and name not in allowed):
        return False
    if arguments is None:
        return not has_args
    args = json.loads(arguments)
    if is_schema(args, spec.parameters):
        return False
    return forced or (_fits(args, spec.parameters) and not _placeholder(args))


def _one_tool(config: ParserConfig) -> bool:
    """Exactly one function tool may be called."""
    allowed = config.tool_choice.allowed
    return sum(spec.kind == "function" and (allowed is None or name in allowed)
               for name, spec in config.tools.items()) == 1


def _fits(args: Mapping[str, Any], parameters: Mapping[str, Any] | None) -> bool:
    """Every required key is there and every key is a parameter (when the schema names its parameters)."""
    properties = (parameters or {}).get("properties")
    required = (parameters or {}).get("required")
    if isinstance(properties, Mapping) and not args.keys() <= properties.keys():
        return False
    return not isinstance(required, list) or all(key in args for key in required if isinstance(key, str))


def _placeholder(value: Any) -> bool:
    """A string in ``value`` stands for one to fill in."""
    if isinstance(value, str):
        return _PLACEHOLDER.fullmatch(value) is not None
    if isinstance(value, dict):
        return any(map(_placeholder, value.values()))
    if isinstance(value, list):
        return any(map(_placeholder, value))
    return False
