"""A tool-capable back end's ``delta.tool_calls`` streams, in every dialect toolwire has to undo.

:func:`native_frames` turns the calls a model made into the ``tool_calls`` lists of successive
chunks (``Script.tool_calls`` of the scripted upstream), written the way one back end or another
writes them. Quirks (combine any):

- ``before_name``: the first part of the arguments comes before the name;
- ``cumulative``: every fragment repeats the whole argument string so far (and the name);
- ``no_index``: fragments carry no ``index``;
- ``same_index``: every call uses index 0;
- ``no_id``: no ``id`` anywhere;
- ``changing_ids``: a new ``id`` on every fragment;
- ``split_name``: the name comes in two fragments;
- ``object_args``: ``arguments`` is a JSON object, sent whole;
- ``one_delta``: all fragments of all calls in one chunk;
- ``index_from_one``: indexes start at 1;
- ``null_fields``: continuation fragments carry ``id``, ``type`` and ``name`` as ``null``;
- ``empty_continuations``: a ``{"index": i}`` fragment (no ``function``) after each fragment;
- ``interleaved``: the calls' fragments take turns (0, 1, 0, 1…);
- ``repeated_header``: every fragment repeats the call's ``id``, ``type`` and whole name, and a last one
  has ``"arguments": ""`` (llama-cpp-python 0.3.36, issue 31 fault 3).

``OPENAI`` (no quirk) is what OpenAI itself sends: a header fragment with ``index``, ``id``,
``type``, ``name`` and ``arguments: ""``, then argument pieces with only ``index`` and ``arguments``.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, Iterable, Sequence

QUIRKS = ("before_name", "cumulative", "no_index", "same_index", "no_id", "changing_ids", "split_name",
          "object_args", "one_delta", "index_from_one", "null_fields", "empty_continuations", "interleaved",
          "repeated_header")
OPENAI: frozenset[str] = frozenset()

#: Single quirks, and combinations real back ends produce together.
QUIRK_SETS: tuple[frozenset[str], ...] = (
    OPENAI,
    *(frozenset({q}) for q in QUIRKS),
    frozenset({"before_name", "split_name", "changing_ids"}),
    frozenset({"cumulative", "no_index", "no_id"}),
    frozenset({"cumulative", "split_name", "same_index"}),
    frozenset({"object_args", "no_index", "one_delta", "no_id"}),
    frozenset({"before_name", "cumulative", "changing_ids", "one_delta"}),
    frozenset({"interleaved", "cumulative", "split_name"}),
    frozenset({"interleaved", "before_name", "null_fields", "index_from_one", "empty_continuations"}),
    frozenset({"repeated_header", "same_index"}),
)

_ids = itertools.count(1)


def quirk_name(quirks: Iterable[str]) -> str:
    """A test id for a quirk set (``openai`` for none)."""
    return "+".join(sorted(quirks)) or "openai"


def cut(text: str, chunk: int | None) -> list[str]:
    """``text`` in pieces of ``chunk`` characters (one piece for ``None``)."""
    if chunk is None or not text:
        return [text]
    return [text[i:i + chunk] for i in range(0, len(text), chunk)]


def native_frames(calls: Sequence[tuple[str, dict[str, Any]]], *, quirks: Iterable[str] = OPENAI,
                  chunk: int | None = None) -> list[list[dict[str, Any]]]:
    """The ``tool_calls`` list of each chunk that streams ``calls`` (``(name, arguments)``) in ``quirks``.

    ``chunk`` cuts each argument string into pieces of that many characters (``None``: whole).
    """
    quirks = frozenset(quirks)
    unknown = quirks - set(QUIRKS)
    if unknown:
        raise ValueError(f"unknown quirks {sorted(unknown)}")
    if "interleaved" in quirks and quirks & {"no_index", "same_index"}:
        raise ValueError("interleaved calls need their own indexes")
    per_call = [_call_fragments(n, name, arguments, quirks, chunk) for n, (name, arguments) in enumerate(calls)]
    if "interleaved" in quirks:
        turns = itertools.zip_longest(*per_call)
        fragments = [fragment for turn in turns for fragment in turn if fragment is not None]
    else:
        fragments = [fragment for call in per_call for fragment in call]
    if "one_delta" in quirks:
        return [fragments]
    return [[fragment] for fragment in fragments]


def _call_fragments(n: int, name: str, arguments: dict[str, Any], quirks: frozenset[str],
                    chunk: int | None) -> list[dict[str, Any]]:
    text = json.dumps(arguments, separators=(",", ":"))  # as OpenAI's models write them
    pieces: list[Any] = [arguments] if "object_args" in quirks else cut(text, chunk)
    names = [name[: len(name) // 2], name[len(name) // 2:]] if "split_name" in quirks else [name]
    # (name piece, argument piece) per fragment, in the order the back end sends them
    steps: list[tuple[str | None, Any]]
    if "before_name" in quirks and len(pieces) > 1:
        half = len(pieces) // 2
        steps = [(None, p) for p in pieces[:half]] + [(nm, None) for nm in names] + [(None, p) for p in pieces[half:]]
    elif "before_name" in quirks:
        steps = [(None, pieces[0])] + [(nm, None) for nm in names]
    else:
        steps = [(nm, "" if i == 0 else None) for i, nm in enumerate(names)] + [(None, p) for p in pieces]
    call_id = f"call_upstream_{next(_ids)}"
    fragments = []
    sent_name = ""
    sent_args = ""
    for name_piece, args_piece in steps:
        if name_piece is not None:
            sent_name += name_piece
        if isinstance(args_piece, str):
            sent_args += args_piece
        fragment: dict[str, Any] = {}
        if "no_index" not in quirks:
            fragment["index"] = 0 if "same_index" in quirks else n + 1 if "index_from_one" in quirks else n
        if "no_id" not in quirks and ("changing_ids" in quirks or not fragments):
            fragment["id"] = f"call_upstream_{next(_ids)}" if "changing_ids" in quirks else call_id
        if not fragments:
            fragment["type"] = "function"
        elif "null_fields" in quirks:
            fragment.update({"id": None, "type": None})
        function: dict[str, Any] = {"name": None} if fragments and "null_fields" in quirks else {}
        if "cumulative" in quirks:
            if sent_name and (name_piece is not None or sent_name == name):
                function["name"] = sent_name
            if args_piece is not None:
                function["arguments"] = args_piece if not isinstance(args_piece, str) else sent_args
        else:
            if name_piece is not None:
                function["name"] = name_piece
            if args_piece is not None:
                function["arguments"] = args_piece
        fragment["function"] = function
        if "repeated_header" in quirks:
            fragment.update({"id": fragment.get("id", call_id), "type": "function"})
            function["name"] = name
        fragments.append(fragment)
        if "empty_continuations" in quirks and "index" in fragment:
            fragments.append({"index": fragment["index"]})
    if "repeated_header" in quirks:
        fragments.append({**fragments[0], "function": {"name": name, "arguments": ""}})
    return fragments
