"""A deterministic, rule-based stand-in model that follows toolwire's tool protocol.

:class:`DemoUpstream` never sees ``tools``: like a real text-only back end it
reads only ``body["messages"]`` as produced by
:func:`app.pipeline.prompt.build_upstream_messages`, and answers:

- When the system message carries the tool block (either manifest: JSON
  Schemas or compact signatures) and the last message is a user request (not a
  tool result), it calls the best-matching tool: the one
  whose name, description and parameter names share the most words with the
  request (tool names weigh most; ties go to the manifest's first tool). A
  forced tool (``You must call `X```) is always called; under ``required`` the
  best tool is called even without overlap; under ``auto`` a request sharing
  no word with any tool gets a prose reply. An allowed subset is respected.
  The call is one short sentence, then the block written with
  ``get_format(name).render_call`` for the format of the block's worked
  example. Only required parameters are filled, plus optional enum parameters
  whose value the request names:

  - strings: the word(s) after the parameter's name (``city: Paris``), else a
    quoted string, else a path-like token (``notes.txt``, ``src/app.py``),
    else capitalised words not starting a sentence (``San Francisco``), else
    the whole request; a value already used for another parameter is skipped;
  - enums: the value named in the request, else the schema's example value;
  - numbers: a number in the request, else the schema's example value;
  - anything else: :func:`app.prompt_protocol.example_value`.
- When the last message ends with a tool result, it answers in prose quoting
  the result(s). It makes one call per request; it does not chain calls.
- Otherwise it answers in prose, echoing the request.

Text goes out in ``chunk_chars``-character chunks (one chunk counts as one
token for ``max_tokens``/``max_completion_tokens``), ``n`` choices interleaved,
each ending with its own finish chunk, then one usage chunk. ``stop``
sequences cut prose replies (never a call). Nothing sleeps.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Iterator

from statemachine import get_format, registered_formats

from ..prompt_protocol import (
    GUIDE_HEADING,
    HOW_TO_HEADING,
    MANIFEST_HEADING,
    TOOL_BLOCK_TITLE,
    TOOL_RESULT_END,
    TURN_HEADING,
    example_value,
    object_shape,
)
from .base import ChoiceDelta, UpstreamChunk

__all__ = ["DemoUpstream"]

#: ``created`` of the model entry: fixed so responses are reproducible.
_CREATED = 1_700_000_000
_STOPWORDS = frozenset(
    "a an and are as at be by can could do for from get give how i in is it me my of on or please show "
    "tell that the this to up what whats which with would you your".split()
)
_RESULT_RE = re.compile(
    r"^Tool result(?: for (?P<name>\S+))?(?: \(call_id [^)\n]*\))?:\n(?P<body>.*?)\n"
    + re.escape(TOOL_RESULT_END)
    + r"$",
    re.S | re.M,
)
#: How much of the last message the demo reads, and how much of a text it quotes back.
CONTEXT_CHARS = 8192
EXCERPT_CHARS = 2000
_MARKER_RE = re.compile(r' marker="([A-Za-z0-9_-]+)"')
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")
_QUOTED_RE = re.compile(r"\"([^\"]+)\"|“([^”]+)”|(?<!\w)'([^']+)'(?!\w)")
_PATH_RE = re.compile(r"^(?:[\w.~-]*/[\w./~-]*|\w[\w-]*\.[A-Za-z0-9]{1,5})$")
_EDGE_PUNCT = ".,;:!?()[]{}\"'"


class DemoUpstream:
    """The embedded demo model (implements ``app.upstreams.base.Upstream``).

    Args:
        model: the model id it reports.
        chunk_chars: characters per streamed content chunk (at least 1).
    """

    def __init__(self, model: str = "toolwire-demo", chunk_chars: int = 4):
        self.model = model
        self.chunk_chars = max(1, chunk_chars)

    def open(self, body: dict[str, Any], *, request_id: str | None = None) -> _DemoStream:
        """Answer a Chat Completions request as a stream of chunks.

        Args:
            body: the upstream request body (``messages``, ``n``, ``max_tokens``,
                ``max_completion_tokens``, ``stop`` are read).
            request_id: accepted for the protocol; unused.
        Returns:
            An iterable of ``UpstreamChunk`` with ``close()``.
        """
        messages = body.get("messages") or []
        reply, is_prose = _reply(messages)
        stop = body.get("stop")
        finish, matched = "stop", None
        if is_prose and stop:
            reply, matched = _cut_at_stop(reply, [stop] if isinstance(stop, str) else list(stop))
        pieces = [reply[i : i + self.chunk_chars] for i in range(0, len(reply), self.chunk_chars)]
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if limit is not None and len(pieces) > limit:
            pieces, finish = pieces[:limit], "length"

        n = max(1, int(body.get("n") or 1))
        chunks = [
            UpstreamChunk(choices=[ChoiceDelta(index=i, content=piece)]) for piece in pieces for i in range(n)
        ]
        matched = matched if finish == "stop" else None
        chunks += [UpstreamChunk(choices=[ChoiceDelta(index=i, finish_reason=finish, stop_sequence=matched)])
                   for i in range(n)]
        prompt_tokens = sum(math.ceil(len(str(m.get("content") or "")) / 4) for m in messages)  # ~4 chars a token
        completion_tokens = len(pieces) * n
        chunks.append(
            UpstreamChunk(
                usage={
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                }
            )
        )
        return _DemoStream(chunks)

    def models(self) -> list[dict[str, Any]]:
        """The single model this upstream serves."""
        return [{"id": self.model, "object": "model", "created": _CREATED, "owned_by": "toolwire"}]

    def ready(self) -> bool:
        """Always ready: the demo runs in-process."""
        return True


class _DemoStream:
    """Precomputed chunks; ``close()`` ends iteration early. It never waits, so it never pauses."""

    def __init__(self, chunks: list[UpstreamChunk]):
        self._chunks = chunks
        self._closed = False

    def plain_texts(self, *, join: bool = False) -> None:
        """Nothing to do: the chunks are built already (see :meth:`~app.upstreams.base.UpstreamStream.plain_texts`)."""

    def pause_every(self, tick: float | None) -> None:
        """Nothing to do: the chunks are all there (see :meth:`~app.upstreams.base.UpstreamStream.pause_every`)."""

    def confirm(self) -> None:
        """Nothing to wait for: the chunks are all there."""

    def __iter__(self) -> Iterator[UpstreamChunk]:
        for chunk in self._chunks:
            if self._closed:
                return
            yield chunk

    def close(self) -> None:
        self._closed = True


# --- reading the prompt --------------------------------------------------------


class _ToolBlock:
    """What the demo reads back from a tool block."""

    def __init__(self, system: str):
        self.tools: dict[str, dict[str, Any]] = {}  # name -> parameters schema
        self.descriptions: dict[str, str] = {}
        for line in _section(system, MANIFEST_HEADING)[1:]:
            if (signature := _signature(line)) is not None:  # the compact manifest
                name, self.tools[name], self.descriptions[name] = signature
        # the JSON manifest's entries (### NAME, description lines, "Parameters: {schema}"), and the custom tools'
        # guide: the demo calls only function tools
        current: str | None = None  # the entry whose description lines are being read
        for line in _section(system, MANIFEST_HEADING, to_blank=False) + _section(system, GUIDE_HEADING, to_blank=False):
            if line.startswith("### "):
                current = line[4:]
                self.descriptions[current] = ""
            elif line.startswith("Parameters: {") and current is not None:
                self.tools[current] = json.loads(line.removeprefix("Parameters: "))
                current = None
            elif line.startswith(("Parameters", "- ", "Input:", "Grammar")):
                current = None
            elif current is not None:
                self.descriptions[current] = f"{self.descriptions[current]} {line}".strip()
        rules = "\n".join(_section(system, TURN_HEADING))
        forced = re.search(r"You must call `([^`]+)`", rules)
        self.forced = forced.group(1) if forced else None
        allowed = re.search(r"Only these tools may be called in this reply: (.*)\.$", rules, re.M)
        self.allowed = re.findall(r"`([^`]+)`", allowed.group(1)) if allowed else None
        self.required = "at least one tool" in rules
        # The worked example is the first call block after the heading: its opener names the format.
        how_to = system.split(f"\n{HOW_TO_HEADING}\n", 1)[-1]

        def first_opener(fmt_name: str) -> int:
            # Without the opener's last character, so a marked opener (<tool_call marker="…">) counts too.
            found = [i for i in (how_to.find(o[:-1]) for o in get_format(fmt_name).openers) if i >= 0]
            return min(found, default=len(how_to))

        marker = _MARKER_RE.search(how_to)
        self.format = get_format(min(registered_formats(), key=first_opener)).with_marker(
            marker.group(1) if marker else None)

    @classmethod
    def find(cls, messages: list[dict[str, Any]]) -> "_ToolBlock | None":
        """The tool block of a leading system message, if there is one."""
        if messages and messages[0].get("role") == "system":
            system = str(messages[0].get("content") or "")
            if system.startswith(TOOL_BLOCK_TITLE + "\n") and f"\n{MANIFEST_HEADING}\n" in system:
                return cls(system)
        return None


def _signature(line: str) -> tuple[str, dict[str, Any], str] | None:
    """A compact manifest line, ``name(city: string, unit?: "c"|"f" = "c") - description``, as its name, a
    schema of its top-level parameters (types, enums, defaults) and its description."""
    name, paren, rest = line.partition("(")
    if not paren or not name or " " in name:
        return None
    depth, params, current = 1, [], ""
    for end, char in enumerate(rest):
        depth += (char in "({[") - (char in ")}]")
        if depth == 0 or (char == "," and depth == 1):
            params.append(current.strip())
            current = ""
            if depth == 0:
                break
        else:
            current += char
    props: dict[str, Any] = {}
    required = []
    for param in filter(None, params):
        pname, _, kind = param.partition(": ")
        kind, _, default = kind.partition(" = ")
        if pname.endswith("?"):
            pname = pname[:-1]
        else:
            required.append(pname)
        try:
            prop: dict[str, Any] = ({"enum": [json.loads(v) for v in kind.split("|")]} if kind.startswith('"')
                                    else {"type": kind} if kind.isalpha() else {})
            if default:
                prop["default"] = json.loads(default)
        except ValueError:  # a value holding "|" or " = ": the demo does without its type
            prop = {}
        props[pname] = prop
    description = rest[end + 1:].removeprefix(" - ")
    return name, {"type": "object", "properties": props, "required": required}, description


def _section(text: str, heading: str, *, to_blank: bool = True) -> list[str]:
    """The lines after ``heading`` up to the next ``## `` heading (or blank line)."""
    _, found, rest = text.partition(f"\n{heading}\n")
    lines: list[str] = []
    for line in rest.splitlines() if found else ():
        if line.startswith("## ") or (to_blank and not line):
            break
        lines.append(line)
    return lines


# --- answering -----------------------------------------------------------------


def _reply(messages: list[dict[str, Any]]) -> tuple[str, bool]:
    """The reply text, and whether it is prose (no call)."""
    last = messages[-1] if messages else {}
    if last.get("role") != "user":
        return "Hello! I am the toolwire demo model. How can I help?", True
    # Like any model, the demo reads a bounded context: the end of the last message (a 16 MiB one would
    # otherwise cost a minute of CPU and gigabytes), and it quotes at most a short excerpt of anything.
    text = str(last.get("content") or "")[-CONTEXT_CHARS:].strip()
    if text.endswith(TOOL_RESULT_END):
        results = [
            f"{m.group('name') or 'the tool'} returned: {_excerpt(m.group('body').strip())}"
            for m in _RESULT_RE.finditer(text)
        ]
        return "Here is what I found. " + " ".join(results), True
    request = text.rsplit(TOOL_RESULT_END, 1)[-1].strip()
    block = _ToolBlock.find(messages)
    name = _pick_tool(block, request) if block else None
    if block is None or name is None:
        return (f'Hello! You said: "{_excerpt(request)}". I am the toolwire demo model, so this is a canned reply.',
                True)
    arguments = json.dumps(_fill_arguments(block.tools[name], request), ensure_ascii=False)
    return f"I'll use {name} for this.\n" + block.format.render_call(name, arguments), False


def _excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"


def _words(text: str) -> set[str]:
    """Lower-case content words, camelCase and snake_case split, plural ``s`` dropped."""
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower().replace("'", "")
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in re.findall(r"[a-z0-9]+", text)} - _STOPWORDS


def _pick_tool(block: _ToolBlock, request: str) -> str | None:
    """The tool to call for ``request``, or ``None`` to answer in prose."""
    if block.forced in block.tools:
        return block.forced
    names = [n for n in block.tools if block.allowed is None or n in block.allowed]
    if not names:
        return None
    asked = _words(request)

    def score(name: str) -> int:
        params, _ = object_shape(block.tools[name])
        return (
            3 * len(asked & _words(name))
            + len(asked & _words(" ".join(params)))
            + len(asked & _words(block.descriptions.get(name, "")))
        )

    best = max(names, key=lambda n: (score(n), -names.index(n)))
    return best if block.required or score(best) > 0 else None


def _fill_arguments(schema: dict[str, Any], request: str) -> dict[str, Any]:
    """Arguments for the required parameters (and named enum values), from the request."""
    props, required = object_shape(schema)
    used: set[str] = set()
    args: dict[str, Any] = {}
    for name, prop in props.items():
        enum = prop.get("enum") if isinstance(prop, dict) else None
        if enum:
            named = next((v for v in enum if isinstance(v, str) and re.search(rf"\b{re.escape(v)}\b", request, re.I)), None)
            if named is not None:
                args[name] = named
            elif name in required:
                args[name] = example_value(prop)
        elif name in required:
            kind = prop.get("type") if isinstance(prop, dict) else None
            if kind == "string":
                args[name] = _string_for(name, request, used)
            elif kind in ("integer", "number"):
                number = next((x for x in _NUMBER_RE.findall(request) if x not in used), None)
                if number is None:
                    args[name] = example_value(prop)
                else:
                    used.add(number)
                    args[name] = int(float(number)) if kind == "integer" else float(number)
            else:
                args[name] = example_value(prop)
    return args


def _string_for(name: str, request: str, used: set[str]) -> str:
    """A string value for parameter ``name`` (see the module docstring); marks it used."""
    candidates: list[str] = []
    after_name = re.search(rf"\b{re.escape(name)}\b\s*(?:[:=]|is)?\s*(\S+)", request, re.I)
    if after_name and after_name.group(1).lower().strip(_EDGE_PUNCT) not in _STOPWORDS:
        candidates.append(after_name.group(1))
    candidates += ["".join(groups) for groups in _QUOTED_RE.findall(request)]
    candidates += [t for t in request.split() if _PATH_RE.match(t.strip(_EDGE_PUNCT))]
    candidates += _capitalised_runs(request.split())
    for value in (c.strip(_EDGE_PUNCT) for c in candidates):
        if value and value not in used:
            used.add(value)
            return value
    return request.rstrip(".?! ")


def _capitalised_runs(tokens: list[str]) -> list[str]:
    """Runs of capitalised words that do not start a sentence (``San Francisco``)."""
    runs: list[str] = []
    current: list[str] = []
    for i, token in enumerate(tokens):
        word = token.strip(_EDGE_PUNCT)
        starts_sentence = i == 0 or tokens[i - 1].endswith((".", "!", "?", ":"))
        if word[:1].isupper() and word != "I" and not starts_sentence:
            current.append(word)
        elif current:
            runs.append(" ".join(current))
            current = []
        if current and token[-1:] in _EDGE_PUNCT:  # punctuation ends a run
            runs.append(" ".join(current))
            current = []
    if current:
        runs.append(" ".join(current))
    return runs


def _cut_at_stop(text: str, stops: list[str]) -> tuple[str, str | None]:
    """``text`` up to the earliest stop sequence, and that sequence (``None``: none occurs)."""
    cuts = [(i, s) for s in stops if s and (i := text.find(s)) >= 0]
    if not cuts:
        return text, None
    at, stop = min(cuts)
    return text[:at], stop
