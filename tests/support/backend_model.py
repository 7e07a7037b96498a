"""One model behaviour for the back-end conformance suite: what a back end answers, in every SSE dialect.

Every server stack of the suite (``tests/support/stacks/``) is a thin program that reads the plans
written by :func:`write_plans`, and answers ``POST …/chat/completions`` with the plan the request's
``model`` names: its status, its headers, then its writes one by one (each flushed, ``pause``
seconds apart), framed the way that stack frames a body. The behaviour is the same everywhere: a
sentence, then a ``get_weather`` call in the ``<tool_call>`` format, then the finish reason; only
the dialect of the SSE (or a whole JSON completion) changes:

- ``lf``: ``data: {…}`` events ending in a blank line, then ``data: [DONE]`` (what OpenAI sends);
- ``crlf``: the same with CRLF line ends;
- ``nospace``: ``data:{…}``, no space after the colon;
- ``fields``: ``event:``, ``id:``, ``retry:`` and comment lines around every event (sse-starlette, TGI);
- ``split``: every event cut across two writes inside a two-byte UTF-8 character of its JSON;
- ``bom``: a UTF-8 byte-order mark before the first event;
- ``nodone``: no ``[DONE]`` after the finish reason (the body just ends);
- ``json``: ``application/json``, the whole completion at once (a server ignoring ``stream``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Callable

SENTENCE = "Looking up Zürich — ☀ first."
CITY = "Zürich"
TEXT = SENTENCE + '<tool_call>{"name": "get_weather", "arguments": {"city": "%s"}}</tool_call>' % CITY
#: The dialects every stack is run with (see the module docstring).
DIALECTS = ("lf", "crlf", "nospace", "fields", "split", "bom", "nodone", "json")
#: Seconds between two writes of a split event (so they leave as separate segments).
SPLIT_PAUSE = 0.003


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-conformance", "object": "chat.completion.chunk", "created": 0, "model": "conformance",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}


def _events() -> list[dict[str, Any]]:
    """The answer's chunks: the role, the text in pieces (one cut inside ``ü``), the finish reason."""
    pieces = [TEXT[:12], TEXT[12:40], TEXT[40:]]
    return [_chunk({"role": "assistant", "content": ""}), *(_chunk({"content": p}) for p in pieces),
            _chunk({}, "stop")]


def _data(event: dict[str, Any] | str) -> bytes:
    return (event if isinstance(event, str) else json.dumps(event, ensure_ascii=False)).encode()


def _sse(line_end: bytes = b"\n", prefix: bytes = b"data: ", done: bool = True) -> list[bytes]:
    payloads = [*_events(), *(["[DONE]"] if done else [])]
    return [prefix + _data(p) + line_end + line_end for p in payloads]


def _fields() -> list[bytes]:
    writes = [b": connected\n\nretry: 3000\n\n"]
    for number, payload in enumerate([*_events(), "[DONE]"]):
        writes.append(b"event: message\nid: %d\n: keep-alive\ndata: %s\n\n" % (number, _data(payload)))
    return writes


def _split() -> list[bytes]:
    writes = []
    for event in _sse():
        multibyte = next((i for i, byte in enumerate(event) if byte >= 0xC0), None)
        cut = multibyte + 1 if multibyte is not None else len(event) // 2  # after a character's first byte
        writes += [event[:cut], event[cut:]]
    return writes


def _json() -> list[bytes]:
    message = {"role": "assistant", "content": TEXT}
    completion = {"id": "chatcmpl-conformance", "object": "chat.completion", "created": 0, "model": "conformance",
                  "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 12, "completion_tokens": 20, "total_tokens": 32}}
    return [_data(completion)]


_WRITES: dict[str, Callable[[], list[bytes]]] = {
    "lf": _sse,
    "crlf": lambda: _sse(line_end=b"\r\n"),
    "nospace": lambda: _sse(prefix=b"data:"),
    "fields": _fields,
    "split": _split,
    "bom": lambda: [b"\xef\xbb\xbf" + w if i == 0 else w for i, w in enumerate(_sse())],
    "nodone": lambda: _sse(done=False),
    "json": _json,
}


def plan(dialect: str) -> dict[str, Any]:
    """What a back end sends for model ``dialect``: status, headers, and its writes (base64)."""
    content_type = "application/json" if dialect == "json" else "text/event-stream"
    headers = {"Content-Type": content_type}
    if content_type == "text/event-stream":
        headers["Cache-Control"] = "no-cache"
    return {"status": 200, "headers": headers, "pause": SPLIT_PAUSE if dialect == "split" else 0.0,
            "writes": [base64.b64encode(w).decode() for w in _WRITES[dialect]()]}


def _cut_in_call() -> list[bytes]:
    """Model ``cut-in-call``: the body ends inside the call's arguments, with no finish reason or ``[DONE]``."""
    return _sse(done=False)[:-2] + [b"data: " + _data(_chunk({"content": TEXT[40:TEXT.rindex(CITY) + 2]})) + b"\n\n"]


def write_plans(path: Path) -> Path:
    """Write every dialect's plan, and ``cut-in-call``'s, to ``path`` (JSON, by model name) for the stack
    programs; returns ``path``."""
    plans = {dialect: plan(dialect) for dialect in DIALECTS}
    plans["cut-in-call"] = {**plan("nodone"), "writes": [base64.b64encode(w).decode() for w in _cut_in_call()]}
    path.write_text(json.dumps(plans))
    return path


def load_plans(path: str | Path) -> dict[str, dict[str, Any]]:
    """The plans written by :func:`write_plans`, writes decoded to bytes (for the Python stacks)."""
    plans = json.loads(Path(path).read_text())
    for entry in plans.values():
        entry["writes"] = [base64.b64decode(w) for w in entry["writes"]]
    return plans


def unknown_model(model: Any) -> bytes:
    """The 404 body for a model no plan names."""
    return json.dumps({"error": {"message": f"no plan for model {model!r}", "type": "invalid_request_error",
                                 "param": "model", "code": None}}).encode()
