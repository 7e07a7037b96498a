"""h11-style replay harness for the statemachine core.

``tr(config, text, expected, ...)`` feeds one model-output string through a fresh
``ChoiceStream`` under many chunkings:

* whole (the non-streaming reference),
* one character at a time,
* at every two-chunk split (strings of at most ``TWO_SPLIT_LIMIT`` characters),
* at fixed chunk sizes 1, 2, 3, 5 and 8,
* in ``RANDOM_SPLITS`` seeded random splits (sizes 1..n, and 2-4-way cuts),

checks the streaming invariants on every raw (unmerged) event list, normalizes
every run (adjacent ``TextDelta`` / ``ReasoningDelta`` / same-index
``ToolCallArgumentsDelta`` merged, ``ToolCallNote`` split off and compared as
``(kind, index, name)`` tuples), asserts that all runs are identical, and
compares the reference run with ``expected``.

``expected`` is a list of items, in order:

* ``str``: visible text (merged content between calls),
* ``Reasoning(text)``: reasoning text,
* ``Call(name, arguments, valid=True)``: one complete call; ``arguments`` is a
  ``str`` (compared byte for byte) or any other JSON value (compared after
  ``json.loads``),
* ``Custom(name, input, valid=True)``: one complete custom (freeform) tool call;
  ``input`` is compared byte for byte,
* ``Open(name, arguments)``: a call whose header went out but that never ended
  (only legal together with an ``incomplete`` note for its index).

plus ``finish=`` (the ``ChoiceFinished.finish_reason``) and optionally
``notes=`` (the expected note kinds, in order).
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from statemachine import (
    ChoiceFinished,
    ChoiceStream,
    ParserConfig,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnded,
    ToolCallInputDelta,
    ToolCallNote,
    ToolCallStarted,
    ToolSpec,
)

#: Substrings that must never appear in visible text unless the fixture says so.
SENTINELS = ("<tool_call", "</tool_call>", "<use_tool", "<function=", "<think", "<custom_tool_call",
             "<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|call|>", "<|return|>")
FIXED_SIZES = (1, 2, 3, 5, 8)
RANDOM_SPLITS = 20
TWO_SPLIT_LIMIT = 400


# expected-result items ---------------------------------------------------------

@dataclass(frozen=True)
class Reasoning:
    text: str


@dataclass(frozen=True)
class Call:
    name: str
    arguments: Any
    valid: bool = True


@dataclass(frozen=True)
class Custom:
    """A complete call to a custom (freeform) tool, with its raw input."""

    name: str
    input: str
    valid: bool = True


@dataclass(frozen=True)
class Open:
    """A call whose header was sent but that never got a ``ToolCallEnded``."""

    name: str
    arguments: Any = ""


# shared tools -------------------------------------------------------------------

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
WEATHER = ToolSpec("get_weather", "Current weather", WEATHER_SCHEMA)
TIME = ToolSpec("get_time", "The time")
SEARCH = ToolSpec("localSearch", "Search the vault", {
    "type": "object",
    "properties": {"query": {"type": "string"}, "salientTerms": {"type": "array", "items": {"type": "string"}}},
})
CFG = ParserConfig.for_tools([WEATHER, TIME, SEARCH])


# running ----------------------------------------------------------------------

def counter_ids() -> Callable[[], str]:
    """A deterministic id factory: call_0, call_1, …"""
    counter = itertools.count()
    return lambda: f"call_{next(counter)}"


def run_chunks(config: ParserConfig, chunks: Iterable[str], finish: str | None = None,
               stream: ChoiceStream | None = None) -> list:
    """Feed ``chunks`` to a fresh stream (deterministic ids), then finish; the raw events."""
    s = stream or ChoiceStream(config, id_factory=counter_ids())
    events: list = []
    for chunk in chunks:
        events += s.feed(chunk)
    events += s.finish(finish)
    return events


def chunkings(text: str, *, seed: int = 0, two_split_limit: int = TWO_SPLIT_LIMIT,
              random_splits: int = RANDOM_SPLITS) -> list[tuple[str, list[str]]]:
    """Every chunking the harness uses, labelled."""
    n = len(text)
    out: list[tuple[str, list[str]]] = [("whole", [text])]
    out.append(("chars", list(text)))
    if n <= two_split_limit:
        for i in range(1, n):
            out.append((f"split@{i}", [text[:i], text[i:]]))
    for size in FIXED_SIZES:
        out.append((f"size{size}", [text[i:i + size] for i in range(0, n, size)]))
    rng = random.Random(f"{seed}:{text}")
    for k in range(random_splits):
        if n < 2:
            out.append((f"random{k}", [text]))
            continue
        if k % 2:
            cuts = sorted(rng.sample(range(1, n), min(n - 1, rng.randint(1, 3))))
        else:
            cuts, pos = [], 0
            while True:
                pos += rng.randint(1, max(1, min(n, 12 if k % 4 == 0 else 40)))
                if pos >= n:
                    break
                cuts.append(pos)
        bounds = [0, *cuts, n]
        out.append((f"random{k}", [text[a:b] for a, b in zip(bounds, bounds[1:])]))
    return out


# invariants -----------------------------------------------------------------

def check_invariants(events: Sequence, *, leak_ok: bool = False, label: str = "") -> None:
    """Streaming invariants on one raw, unmerged event list."""
    where = f" [{label}]" if label else ""
    assert events, f"no events at all{where}"
    finishes = [i for i, e in enumerate(events) if isinstance(e, ChoiceFinished)]
    assert finishes == [len(events) - 1], f"exactly one ChoiceFinished, last{where}: {events!r}"
    incomplete = {e.index for e in events if isinstance(e, ToolCallNote) and e.kind == "incomplete"}
    open_call: ToolCallStarted | None = None
    fragments: list[str] = []
    next_index = 0
    for e in events:
        if isinstance(e, (TextDelta, ReasoningDelta)):
            assert isinstance(e.text, str) and e.text, f"empty text event{where}: {e!r}"
        if isinstance(e, ToolCallStarted):
            if open_call is not None:
                assert open_call.index in incomplete, f"call {open_call.index} never ended{where}: {events!r}"
            assert e.index == next_index, f"indices must be 0..k-1 in order{where}: {events!r}"
            assert e.call_id.startswith("call_") and e.name, f"bad header{where}: {e!r}"
            next_index += 1
            open_call, fragments = e, []
        elif isinstance(e, (ToolCallArgumentsDelta, ToolCallInputDelta)):
            assert open_call is not None and e.index == open_call.index, f"delta outside its call{where}: {events!r}"
            expected_type = ToolCallInputDelta if open_call.kind == "custom" else ToolCallArgumentsDelta
            assert type(e) is expected_type, f"{type(e).__name__} in a {open_call.kind} call{where}: {events!r}"
            assert isinstance(e.fragment, str) and e.fragment, f"empty fragment{where}: {e!r}"
            fragments.append(e.fragment)
        elif isinstance(e, ToolCallEnded):
            assert open_call is not None and e.index == open_call.index, f"Ended without Started{where}: {events!r}"
            assert (e.call_id, e.name, e.kind) == (open_call.call_id, open_call.name, open_call.kind), (
                f"Ended differs from Started{where}")
            assert "".join(fragments) == e.arguments, (
                f"fragments {''.join(fragments)!r} != Ended.arguments {e.arguments!r}{where}")
            if e.valid and e.kind == "function":
                assert isinstance(json.loads(e.arguments), dict), f"valid call with non-object arguments{where}"
            open_call = None
    if open_call is not None:
        assert open_call.index in incomplete, f"call {open_call.index} never ended and no incomplete note{where}"
    if not leak_ok:
        visible = "".join(e.text for e in events if isinstance(e, TextDelta))
        for s in SENTINELS:
            assert s not in visible, f"sentinel {s!r} leaked into content{where}: {visible!r}"


# normalization ----------------------------------------------------------------

def normalize(events: Sequence) -> tuple[list, list[tuple]]:
    """Merge adjacent text / reasoning / same-index argument deltas; split notes off."""
    merged: list = []
    notes: list[tuple] = []
    for e in events:
        if isinstance(e, ToolCallNote):
            notes.append((e.kind, e.index, e.name))
            continue
        last = merged[-1] if merged else None
        if isinstance(e, TextDelta) and isinstance(last, TextDelta):
            merged[-1] = TextDelta(last.text + e.text)
        elif isinstance(e, ReasoningDelta) and isinstance(last, ReasoningDelta):
            merged[-1] = ReasoningDelta(last.text + e.text)
        elif (isinstance(e, (ToolCallArgumentsDelta, ToolCallInputDelta)) and type(last) is type(e)
              and last.index == e.index):
            merged[-1] = type(e)(e.index, last.fragment + e.fragment)
        else:
            merged.append(e)
    return merged, notes


def summarize(merged: Sequence) -> tuple[list, str | None]:
    """Normalized events as expected-style items plus the finish reason."""
    items: list = []
    finish = None
    open_call: ToolCallStarted | None = None
    args = ""
    for e in merged:
        if isinstance(e, TextDelta):
            items.append(e.text)
        elif isinstance(e, ReasoningDelta):
            items.append(Reasoning(e.text))
        elif isinstance(e, ToolCallStarted):
            if open_call is not None:
                items.append(Open(open_call.name, args))
            open_call, args = e, ""
        elif isinstance(e, (ToolCallArgumentsDelta, ToolCallInputDelta)):
            args += e.fragment
        elif isinstance(e, ToolCallEnded):
            items.append(Custom(e.name, e.input, e.valid) if e.kind == "custom" else Call(e.name, e.arguments, e.valid))
            open_call = None
        elif isinstance(e, ChoiceFinished):
            if open_call is not None:
                items.append(Open(open_call.name, args))
                open_call = None
            finish = e.finish_reason
    return items, finish


def items_match(actual: list, expected: list) -> bool:
    if len(actual) != len(expected):
        return False
    for a, x in zip(actual, expected):
        if type(a) is not type(x):
            return False
        if isinstance(x, Custom):
            if a != x:
                return False
        elif isinstance(x, (Call, Open)):
            if a.name != x.name or (isinstance(x, Call) and a.valid != x.valid):
                return False
            if isinstance(x.arguments, str):
                if a.arguments != x.arguments:
                    return False
            else:
                try:
                    if json.loads(a.arguments) != x.arguments:
                        return False
                except ValueError:
                    return False
        elif a != x:
            return False
    return True


def _short(value: object, limit: int = 700) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit // 2] + " … " + text[-limit // 2:]


# the helper -------------------------------------------------------------------

def tr(config: ParserConfig, text: str, expected: list, *, finish: str = "stop", upstream: str | None = None,
       notes: Sequence[str] | None = None, leak_ok: bool = False,
       two_split_limit: int = TWO_SPLIT_LIMIT) -> list:
    """Feed ``text`` under every chunking; assert invariants, chunking invariance and ``expected``.

    Args:
        config: the parser configuration.
        text: the model output.
        expected: the expected items (see the module docstring).
        finish: the expected ``ChoiceFinished.finish_reason``.
        upstream: the finish reason handed to ``finish()``.
        notes: the expected note kinds in order (``None``: not compared with an expectation,
            but still required to be identical under every chunking).
        leak_ok: sentinel text in the content is intended.
    Returns:
        The normalized events of the one-shot parse.
    """
    reference = None
    ref_label = ""
    for label, chunks in chunkings(text, two_split_limit=two_split_limit):
        assert "".join(chunks) == text
        raw = run_chunks(config, chunks, upstream)
        check_invariants(raw, leak_ok=leak_ok, label=label)
        norm = normalize(raw)
        if reference is None:
            reference, ref_label = norm, label
            items, got_finish = summarize(norm[0])
            assert items_match(items, expected) and got_finish == finish, (
                f"one-shot parse differs from the expected result\n  text:     {_short(text)}\n"
                f"  expected: {_short(expected)} finish={finish!r}\n  got:      {_short(items)} finish={got_finish!r}\n"
                f"  notes:    {norm[1]!r}")
            if notes is not None:
                assert [k for k, _, _ in norm[1]] == list(notes), f"notes {norm[1]!r} != expected kinds {notes!r}"
        else:
            assert norm[0] == reference[0], (
                f"chunking {label} {_short(chunks)} differs from {ref_label}\n  text: {_short(text)}\n"
                f"  {ref_label}: {_short(summarize(reference[0]))}\n  {label}: {_short(summarize(norm[0]))}")
            assert norm[1] == reference[1], (
                f"notes under chunking {label} {_short(chunks)} differ from {ref_label}: {reference[1]!r} vs {norm[1]!r}")
    return reference[0]


def tr_raises(config: ParserConfig, text: str, exc_type: type, *, code: str | None = None,
              upstream: str | None = None) -> None:
    """Every chunking of ``text`` raises ``exc_type`` (with ``code``) before or at finish."""
    for label, chunks in chunkings(text, random_splits=6, two_split_limit=120):
        s = ChoiceStream(config, id_factory=counter_ids())
        try:
            for c in chunks:
                s.feed(c)
            s.finish(upstream)
        except exc_type as e:
            if code is not None:
                assert getattr(e, "code", None) == code, f"[{label}] code {getattr(e, 'code', None)!r} != {code!r}"
            continue
        raise AssertionError(f"[{label}] {text!r} did not raise {exc_type.__name__}")


def visible(events: Sequence) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def calls_of(events: Sequence) -> list[ToolCallEnded]:
    return [e for e in events if isinstance(e, ToolCallEnded)]
