"""Malformed and hostile request bodies for the fuzz pass, generated deterministically.

``fuzz_cases(endpoint, seed, count)`` returns ``FuzzCase``s in three groups:

1. every field path of a valid base body set to every value of a list of wrong types, and removed;
2. fixed raw bodies: non-objects, invalid UTF-8, lone surrogates in escapes, NaN/Infinity, duplicate
   keys, raw and escaped null bytes, 10,000-level nesting, 1 MB strings, truncated JSON, odd
   content types, an empty body;
3. seeded random mutations of the base body (random JSON values at random paths) up to ``count``.

The same seed always gives the same cases, so a failure is reproducible from its ``id``.
``judge()`` says what is wrong with an answer to one (a 5xx, a malformed envelope or stream).
"""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass
from typing import Any

from .invariants import check_chat_completion, check_chat_stream, check_error_envelope, check_responses_stream
from .messages_stream import check_messages_exchange

MB_STRING = "a" * 1_000_000
DEEP = 10_000

_TOOL_PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CHAT_BASE: dict[str, Any] = {
    "model": "scripted-model",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in SF?"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"SF\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                                 "parameters": _TOOL_PARAMS, "strict": False}}],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "stream": False,
    "stream_options": {"include_usage": True},
    "n": 1,
    "temperature": 0.5,
    "max_tokens": 50,
    "stop": ["\n\n"],
}  # fmt: skip
RESPONSES_BASE: dict[str, Any] = {
    "model": "scripted-model",
    "instructions": "Be brief.",
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in SF?"}]},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"SF\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    ],
    "tools": [{"type": "function", "name": "get_weather", "description": "Weather.", "parameters": _TOOL_PARAMS,
               "strict": False}],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "stream": False,
    "store": False,
    "max_output_tokens": 50,
    "max_tool_calls": 3,
    "temperature": 0.5,
    "metadata": {"k": "v"},
    "text": {"format": {"type": "text"}},
}  # fmt: skip
MESSAGES_BASE: dict[str, Any] = {
    "model": "scripted-model",
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Weather in SF?"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "SF"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
    ],
    "tools": [{"name": "get_weather", "description": "Weather.", "input_schema": _TOOL_PARAMS}],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": False},
    "stream": False,
    "max_tokens": 50,
    "temperature": 0.5,
    "stop_sequences": ["\n\n"],
    "metadata": {"user_id": "u"},
    "thinking": {"type": "adaptive"},
}  # fmt: skip
BASES = {"chat": CHAT_BASE, "responses": RESPONSES_BASE, "messages": MESSAGES_BASE}
#: Per endpoint: the transcript's key, and the paths of a text, a tool's name and a tool's schema.
_PATHS = {
    "chat": ("messages", ("messages", 1, "content", 0, "text"), ("tools", 0, "function", "name"),
             ("tools", 0, "function", "parameters")),
    "responses": ("input", ("input", 0, "content", 0, "text"), ("tools", 0, "name"), ("tools", 0, "parameters")),
    "messages": ("messages", ("messages", 0, "content", 0, "text"), ("tools", 0, "name"),
                 ("tools", 0, "input_schema")),
}

WRONG_VALUES: list[Any] = [
    None, True, False, 0, -1, 2**63, 1.5, -1e308, "", "x", "\x00", "\ud800", "\udfff\ud800", [], [1], [None],
    {}, {"x": 1}, [[[]]], {"type": None}, "null",
]  # fmt: skip
CONTENT_TYPES = [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                 "application/json; charset=latin-1", "application/xml"]


@dataclass(frozen=True)
class FuzzCase:
    """One request: an id saying how it was made, the raw body and the Content-Type to send."""

    id: str
    body: bytes
    content_type: str | None = "application/json"


def _dump(obj: Any) -> bytes:
    # ensure_ascii turns lone surrogates into \udXXX escapes, which is exactly what we want to send.
    return json.dumps(obj, ensure_ascii=True).encode()


def field_paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key/index path inside ``obj`` (depth first)."""
    paths = []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        paths.append(prefix + (key,))
        paths += field_paths(value, prefix + (key,))
    return paths


def with_value(base: dict[str, Any], path: tuple[Any, ...], value: Any, *, delete: bool = False) -> dict[str, Any]:
    """A deep copy of ``base`` with ``path`` set to ``value`` (or removed)."""
    body = copy.deepcopy(base)
    target = body
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return body


def _name(path: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in path)


def _splice(base: dict[str, Any], path: tuple[Any, ...], raw_json: str) -> bytes:
    """``base`` dumped with the value at ``path`` replaced by ``raw_json`` (JSON text too deep for
    the ``json`` module to write)."""
    marker = "\x00splice\x00"
    return _dump(with_value(base, path, marker)).replace(_dump(marker), raw_json.encode())


def _nested(depth: int, leaf: str = "0") -> str:
    return "[" * depth + leaf + "]" * depth


def _raw_cases(endpoint: str, base: dict[str, Any]) -> list[FuzzCase]:
    text_key, text_path, tool_name_path, params_path = _PATHS[endpoint]
    good = _dump(base)
    cases = [
        FuzzCase("empty-body", b""),
        FuzzCase("whitespace-body", b"  \n\t "),
        *(FuzzCase(f"non-object-{i}", raw) for i, raw in enumerate([b"null", b"[]", b"[{}]", b"1", b"-0.0", b'"s"', b"true", b"{}"])),
        FuzzCase("truncated", good[: len(good) // 2]),
        FuzzCase("trailing-garbage", good + b"}{"),
        FuzzCase("bom-prefix", b"\xef\xbb\xbf" + good),
        FuzzCase("utf-16", json.dumps(base).encode("utf-16")),
        FuzzCase("invalid-utf8-in-value", good.replace(b'"scripted-model"', b'"scripted-\xff\xfe-model"')),
        FuzzCase("invalid-utf8-in-key", good.replace(b'"model"', b'"mo\xc0\xafdel"')),
        FuzzCase("invalid-utf8-alone", b"\xff\xfe\xfd"),
        FuzzCase("overlong-utf8", good.replace(b"Weather", b"\xc1\x81eather")),
        FuzzCase("raw-null-byte", good.replace(b"Weather", b"Wea\x00ther")),
        FuzzCase("raw-control-chars", good.replace(b"Weather", b"Wea\x01\x1fther")),
        FuzzCase("nan", good.replace(b'"temperature": 0.5', b'"temperature": NaN')),
        FuzzCase("infinity", good.replace(b'"temperature": 0.5', b'"temperature": Infinity')),
        FuzzCase("minus-infinity", good.replace(b'"temperature": 0.5', b'"temperature": -Infinity')),
        FuzzCase("huge-exponent", good.replace(b'"temperature": 0.5', b'"temperature": 1e400')),
        FuzzCase("huge-integer", good.replace(b'"temperature": 0.5', b'"temperature": ' + b"9" * 5000)),
        FuzzCase("duplicate-keys", b'{"model": "a", "model": "b", ' + good[1:]),
        FuzzCase("duplicate-tools-key", good[:-1] + b', "tools": 5}'),
        FuzzCase(f"deep-{DEEP}-body", _nested(DEEP).encode()),
        FuzzCase(f"deep-{DEEP}-objects-body", ('{"a":' * DEEP + "1" + "}" * DEEP).encode()),
        FuzzCase(f"deep-{DEEP}-in-{text_key}", _splice(base, text_path, _nested(DEEP))),
        FuzzCase(f"deep-{DEEP}-unclosed", b"[" * DEEP),
        FuzzCase("1mb-text", _dump(with_value(base, text_path, MB_STRING))),
        FuzzCase("1mb-model", _dump(with_value(base, ("model",), MB_STRING))),
        FuzzCase("1mb-tool-name", _dump(with_value(base, tool_name_path, MB_STRING))),
        FuzzCase("1mb-key", _dump({**base, MB_STRING: 1})),
        FuzzCase("many-tools", _dump(with_value(base, ("tools",), [copy.deepcopy(base["tools"][0]) for _ in range(2000)]))),
        FuzzCase("many-items", _dump(with_value(base, (text_key,), [copy.deepcopy(base[text_key][0]) for _ in range(5000)]))),
    ]
    for depth in (50, 500, 1000, 3000):
        deep_schema = '{"type": "object", "properties": {"x": ' * depth + '{"type": "string"}' + "}}" * depth
        deep_list = _nested(depth, '"x"')
        cases += [
            FuzzCase(f"schema-depth-{depth}", _splice(base, params_path, deep_schema)),
            FuzzCase(f"text-list-depth-{depth}", _splice(base, text_path, deep_list)),
            FuzzCase(f"metadata-depth-{depth}", _splice(base, ("metadata",), deep_list)),
        ]
    for escape in ("\\ud800", "\\udc00", "\\ud800\\u0041", "\\u0000", "\\uDFFF\\uD800"):
        raw = escape.encode()
        cases += [
            FuzzCase(f"escape-{escape}-in-text", good.replace(b"Weather in SF?", b"Weather " + raw)),
            FuzzCase(f"escape-{escape}-in-model", good.replace(b'"scripted-model"', b'"m' + raw + b'"')),
            FuzzCase(f"escape-{escape}-in-tool-name", good.replace(b'"name": "get_weather"', b'"name": "get' + raw + b'"')),
            FuzzCase(f"escape-{escape}-in-key", good.replace(b'"temperature"', b'"temp' + raw + b'"')),
        ]
    cases += [FuzzCase(f"content-type-{ct}", good, ct) for ct in CONTENT_TYPES]
    return cases


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2**31, -(2**63), 2**64, rng.randint(-1000, 1000)])
    if kind == 3:
        return rng.choice([0.0, -0.0, 1e-300, 1e300, rng.uniform(-10, 10)])
    if kind in (4, 5):
        alphabet = ["a", "<", ">", "{", "}", '"', "\\", "\n", "\x00", "\u202e", "\ud83d\ude00", "\ud800", "\udfff",
                    "\ufffe", "<tool_call>", "</tool_call>", "é", "\u0085"]  # fmt: skip
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
    if kind in (6, 7):
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    keys = ["type", "role", "content", "name", "text", "function", "arguments", "id", "call_id", "x"]
    return {rng.choice(keys): _random_json(rng, depth + 1) for _ in range(rng.randrange(0, 4))}


def fuzz_cases(endpoint: str, seed: int = 0, count: int = 1500) -> list[FuzzCase]:
    """At least ``count`` cases for ``endpoint`` (``chat``, ``responses`` or ``messages``); see the module doc."""
    base = BASES[endpoint]
    paths = field_paths(base)
    cases = []
    for path in paths:
        cases.append(FuzzCase(f"delete:{_name(path)}", _dump(with_value(base, path, None, delete=True))))
        for i, value in enumerate(WRONG_VALUES):
            cases.append(FuzzCase(f"wrong:{_name(path)}={i}", _dump(with_value(base, path, value))))
    cases += _raw_cases(endpoint, base)
    rng = random.Random(seed)
    serial = 0
    while len(cases) < count:
        body = base
        for path in rng.sample(paths, rng.randint(1, 3)):
            try:
                body = with_value(body, path, _random_json(rng))
            except (KeyError, IndexError, TypeError):
                continue  # an earlier mutation removed this path's parent
        cases.append(FuzzCase(f"random:{seed}:{serial}", _dump(body), rng.choice(["application/json"] * 4 + CONTENT_TYPES)))
        serial += 1
    return cases


def judge(endpoint: str, status: int, content_type: str | None, body: bytes) -> str | None:
    """What is wrong with toolwire's answer to a fuzz case (``None``: nothing).

    Wrong: a 5xx; an error without a well-formed envelope; a success that breaks the wire
    contract (the endpoint's stream checker; for Chat the completion checker, for Responses a
    non-JSON body); on Messages, anything off Anthropic's envelope, stream or message.
    """
    if status >= 500:
        return f"status {status}: {body[:300]!r}"
    try:
        if endpoint == "messages":
            check_messages_exchange(status, body, (content_type or "").startswith("text/event-stream"))
        elif status >= 400:
            check_error_envelope(status, body)
        elif (content_type or "").startswith("text/event-stream"):
            (check_chat_stream if endpoint == "chat" else check_responses_stream)(body)
        elif endpoint == "chat":
            check_chat_completion(body)
        else:
            json.loads(body)
    except (AssertionError, ValueError) as exc:
        return f"status {status}: {str(exc)[:600]}"
    return None
