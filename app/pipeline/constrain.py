"""Constrained calls (``constrain_calls``): the fields that make a back end with constrained decoding write
well-formed calls of the offered tools in prompt mode.

Each back end takes its own request shape (docs/backends.md):

* ``llama.cpp`` (``llama-server``): a GBNF ``grammar``. Under a forced choice the whole answer is calls; otherwise
  free text in which every call block is well-formed, sent with ``grammar_lazy``, ``grammar_triggers`` (the
  opener) and ``preserved_tokens``. Its ``/v1/chat/completions`` replaces the lazy fields with its template's
  (``oaicompat_chat_params_parse``), so there the grammar applies from the first token, which the free-text
  part of it allows; its ``/v1/completions`` keeps them.
* ``vllm``: ``structured_outputs``: ``grammar`` (xgrammar's EBNF) for a forced choice, a ``structural_tag``
  (a JSON string: each tool's ``begin`` / ``schema`` / ``end``, triggered by the opener) otherwise.
* ``sglang``: ``ebnf`` for a forced choice, ``response_format: {"type": "structural_tag", …}`` otherwise.
* ``response_format``: a forced choice only, as a JSON-schema ``response_format`` (llama-cpp-python).

``auto`` picks the way by the back end's own name for itself in its model list (``owned_by``: ``llamacpp``,
``vllm``, ``sglang``), asked once per worker; a back end that names itself otherwise gets no constraint.
"""

from __future__ import annotations

import json
import logging
import math
import time
from typing import Any

import gevent

from statemachine import ParserConfig, ToolSpec

from ..upstreams.base import UpstreamError
from .grammar import WRAPPED, calls_in_prose, forced_calls
from .native import upstream_name
from .plan import forced_call_format

log = logging.getLogger("toolwire.pipeline.constrain")

#: The constraint of a back end that says who it is, by the ``owned_by`` of its model list.
ENGINES = {"llamacpp": "llama.cpp", "vllm": "vllm", "sglang": "sglang"}
#: What llama.cpp's ``grammar_triggers`` calls a trigger word (``COMMON_GRAMMAR_TRIGGER_TYPE_WORD``).
TRIGGER_WORD = 1

#: How long a back end that could not say who it is goes unconstrained before it is asked again, seconds.
RETRY_SECONDS = 60.0
#: How long the request that asks may wait for the answer, seconds: a model list is instant on a healthy back end.
PROBE_SECONDS = 2.0

_KNOWN: dict[str, tuple[str | None, float]] = {}  # per back end: its way, and until when (inf: for good)


def engine_of(upstream: Any) -> str | None:
    """The constraint way of the back end ``upstream`` (:data:`ENGINES`), or ``None``; its model list is asked once
    per worker (once a minute while that fails)."""
    key = upstream_name(upstream)
    known = _KNOWN.get(key)
    if known is not None and time.monotonic() < known[1]:
        return known[0]
    try:
        with gevent.Timeout(PROBE_SECONDS, UpstreamError("timeout", "The model list took too long.")):
            models = upstream.models()
    except (UpstreamError, AttributeError) as exc:
        log.info("could not ask the back end who it is: %s", exc)
        _KNOWN[key] = (None, time.monotonic() + RETRY_SECONDS)
        return None
    owners = {entry.get("owned_by") for entry in models if isinstance(entry, dict)}
    engine = next((ENGINES[owner] for owner in owners if owner in ENGINES), None)
    _KNOWN[key] = (engine, math.inf)
    return engine


def resolve(setting: str, upstream: Any) -> str | None:
    """The way ``constrain_calls`` (``auto``, ``on``, ``off`` or a way's name) constrains calls to ``upstream``."""
    if setting == "off":
        return None
    if setting in ("auto", "on"):
        return engine_of(upstream) or ("response_format" if setting == "on" else None)
    return setting


def constraint_fields(config: ParserConfig, way: str, fmt: str) -> dict[str, Any]:
    """The fields that constrain the calls of ``config``'s request on a back end of ``way``, the taught format being
    ``fmt``; empty when nothing is constrained (no function tool may be called, a custom tool may be, or the
    free-text form is not one the way can express)."""
    choice = config.tool_choice
    if not config.parsing_enabled or any(spec.kind != "function" for spec in config.tools.values()):
        return {}
    allowed = [spec for name, spec in sorted(config.tools.items()) if choice.allowed is None or name in choice.allowed]
    if not allowed:
        return {}
    if way == "response_format":
        constraint = forced_call_format(config)
        return {"response_format": constraint} if constraint else {}
    if choice.mode == "required":
        if not config.bare_json:  # a JSON answer asked for: bare calls are content
            return {}
        grammar = forced_calls(allowed, parallel=config.parallel_tool_calls)
        shapes: dict[str, dict[str, Any]] = {"llama.cpp": {"grammar": grammar}, "sglang": {"ebnf": grammar},
                                             "vllm": {"structured_outputs": {"grammar": grammar}}}
        return shapes.get(way, {})
    if way == "llama.cpp":
        return _llama_cpp(allowed, fmt, bare=config.bare_json)
    if fmt not in WRAPPED:
        return {}
    tag = structural_tag(allowed, *WRAPPED[fmt])
    if way == "vllm":
        return {"structured_outputs": {"structural_tag": json.dumps(tag)}}
    return {"response_format": tag} if way == "sglang" else {}


def _llama_cpp(tools: list[ToolSpec], fmt: str, *, bare: bool) -> dict[str, Any]:
    """llama-server's fields when a call may come: the grammar of text with well-formed calls, lazy on the
    opener of a wrapped format."""
    grammar = calls_in_prose(tools, fmt, bare=bare)
    if grammar is None:
        return {}
    if fmt not in WRAPPED:
        return {"grammar": grammar}
    opener, closer = WRAPPED[fmt]
    return {"grammar": grammar, "grammar_lazy": True, "grammar_triggers": [{"type": TRIGGER_WORD, "value": opener}],
            "preserved_tokens": [opener, closer]}


def structural_tag(tools: list[ToolSpec], opener: str, closer: str) -> dict[str, Any]:
    """xgrammar's structural tag for ``tools`` written as ``opener{"name": …, "arguments": …}closer``: free text until
    the opener, then one tool's call whose arguments follow its schema."""
    structures = [{"begin": f'{opener}{{"name": {json.dumps(spec.name)}, "arguments": ',
                   "schema": dict(spec.parameters or {"type": "object"}), "end": f"}}{closer}"} for spec in tools]
    return {"type": "structural_tag", "structures": structures, "triggers": [opener]}
