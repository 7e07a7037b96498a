"""A parsed call object: its parts (name, arguments), and the tool a name-less one is for.

The keys are those the streamed reader (:mod:`._jsoncall`) interprets too. A call object without a name
(parsing.md 4.4): small models drop the name, ``<tool_call>{"arguments": {"city": "Paris"}}</tool_call>``,
write the arguments alone (``{"city": "Paris"}``), or fill in the manifest's JSON Schema shape
(``{"type": "json", "properties": {"city": "Paris"}}``, SmolLM2-135M). When the argument keys fit exactly
one function tool the request lets the model call (its required keys present, no key it does not name),
the call is that tool's, a repair; when none or several fit, the object is no call.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ._config import ParserConfig
from ._relaxed import relaxed_loads

NAME_KEYS = frozenset({"name", "tool_name"})
NAME_ALIASES = frozenset({"function", "tool"})  # a name only when the value is a string
ARG_KEYS = frozenset({"arguments", "parameters", "args", "input", "tool_input", "params"})
WRAPPER_KEYS = frozenset({"function", "tool_call"})


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

    def walk(level: dict[str, Any]) -> None:
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


def is_schema(value: Any, parameters: Mapping[str, Any] | None) -> bool:
    """Whether ``value``, written where a call's arguments go, is a JSON Schema of an object (a function
    definition's ``parameters``: ``type`` ``object`` and every property a schema), not arguments for a tool whose
    ``parameters`` name neither ``type`` nor ``properties`` (issue 43 item 6)."""
    if not isinstance(value, dict) or value.get("type") != "object":
        return False
    properties = value.get("properties")
    if not isinstance(properties, dict) or not all(isinstance(p, dict) for p in properties.values()):
        return False
    own = (parameters or {}).get("properties")
    return not (isinstance(own, Mapping) and ("type" in own or "properties" in own))


#: The keys of a JSON Schema object that a model copies from the manifest around the values it fills in.
_SCHEMA_SHAPE_KEYS = frozenset({"type", "properties", "required"})


def nameless_call(config: ParserConfig, value: Any) -> tuple[str, str] | None:
    """The call a parsed call object without a name stands for: the one tool its arguments fit, and the
    arguments as JSON object text; ``None`` when it has a name or is no such call."""
    if not isinstance(value, dict):
        return None
    name, arguments_text, under_key = call_parts(value)
    if name is not None:
        return None
    if under_key:
        if arguments_text is None:
            return None
        arguments = json.loads(arguments_text)
    else:
        properties = value.get("properties")
        schema_shaped = isinstance(properties, dict) and value.keys() <= _SCHEMA_SHAPE_KEYS
        arguments = properties if schema_shaped else value
    tool = tool_fitting(config, arguments)
    return None if tool is None else (tool, json.dumps(arguments, ensure_ascii=False))


def tool_fitting(config: ParserConfig, arguments: Mapping[str, Any]) -> str | None:
    """The one function tool ``config`` lets the model call whose parameters ``arguments`` fit (every required
    key present, every key a named parameter); ``None`` when no tool or several fit, or ``arguments`` is empty."""
    keys = arguments.keys()
    if not keys:
        return None
    allowed = config.tool_choice.allowed
    fitting = None
    for name, spec in config.tools.items():
        if spec.kind != "function" or (allowed is not None and name not in allowed):
            continue
        parameters = spec.parameters or {}
        properties = parameters.get("properties")
        required = parameters.get("required")
        if not isinstance(properties, Mapping) or not keys <= properties.keys():
            continue
        if isinstance(required, list) and not {key for key in required if isinstance(key, str)} <= keys:
            continue
        if fitting is not None:
            return None  # two fit: which one the model meant is not known
        fitting = name
    return fitting
