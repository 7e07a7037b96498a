"""The compact manifest: each tool as a signature line (``get_weather(city: string, unit?: "c"|"f")``).

Small models read a signature better than a JSON Schema, and copy a schema's shape into their calls
(``{"type": "object", "properties": {"city": "Paris"}}``, issue 31); a signature is also about half the
prompt tokens. A parameter's type is written as a reader expects it: ``string``, ``integer``, an enum's
values (``"c"|"f"``), ``string[]``, a nested object's own fields in braces; ``?`` marks an optional
parameter and ``= value`` its default. Parameter descriptions follow on indented lines.

The worked call uses values the schema gives (``default``, ``examples``, ``enum``, ``const``); a string
without one is written as its name in angle brackets (``"<city>"``), a hint a reader fills in rather than a
plausible value (the JSON manifest's ``"example"`` was copied into real calls).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from statemachine import ToolSpec

from ..prompt_protocol import MAX_SCHEMA_DEPTH, example_value, object_shape, primary_type, resolve_schema

__all__ = ["compact_example", "signature_lines"]

_EMPTY: Mapping[str, Any] = {"type": "object", "properties": {}}
#: Schema keys that give a value to show (example_value takes the first of them it finds).
_VALUE_KEYS = ("default", "example", "examples", "const", "enum")


def signature_lines(tool: ToolSpec) -> list[str]:
    """A function tool's signature and description, then one indented line per described parameter."""
    props, required = object_shape(resolve_schema(tool.parameters or _EMPTY))
    head = f"{tool.name}({_fields(props, required, 0)})"
    description = (tool.description or "").strip()
    lines = [f"{head} - {description}" if description else head]
    for name, schema in props.items():
        text = str(resolve_schema(schema).get("description") or "").strip()
        if text:
            lines.append(f"  {name}: {text}")
    return lines


def compact_example(schema: Any, name: str = "value", depth: int = 0, made_up: list[Any] | None = None, *,
                    another: bool = False, hints: bool = False) -> Any:
    """Arguments for the worked call: the schema's own values, a ``"<name>"`` hint for a string without one.

    ``made_up`` collects the values the schema does not give: the hints, and the placeholders of numbers (not a
    boolean's, which has two values only). ``another`` makes those of a second call of the same tool:
    ``"<another name>"``, a number's placeholder one more. With ``hints``, the call's optional string parameters
    without a value of their own are shown too, as hints: shown only the required ones, a small model left out
    what the request said of the others (BFCL's ``mode="dynamic"``, ``country="United Kingdom"``, issue 38);
    shown an optional number's placeholder or an enum's first value, it copied them.
    """
    resolved = resolve_schema(schema)
    given = any(key in resolved for key in _VALUE_KEYS)
    kind = primary_type(resolved)
    if given or kind not in ("object", "array", "string"):
        value = example_value(resolved)
        if not given and kind in ("integer", "number"):
            if another:
                value += 1
            if made_up is not None:
                made_up.append(value)
        return value
    if kind == "string":
        hint = f"<another {name}>" if another else f"<{name}>"
        if made_up is not None:
            made_up.append(hint)
        return hint
    if depth >= MAX_SCHEMA_DEPTH:
        return {} if kind == "object" else []
    if kind == "array":
        return [compact_example(resolved.get("items"), name, depth + 1, made_up, another=another)]
    props, required = object_shape(resolved)
    keys = [key for key in required if key in props] or list(props)
    if hints and depth == 0:  # in the order they are declared
        keys = [key for key in props if key in keys or _bare_string(props[key])]
    return {key: compact_example(props[key], key, depth + 1, made_up, another=another) for key in keys}


def _bare_string(schema: Any) -> bool:
    """Whether ``schema`` is a string's without a value of its own to show."""
    resolved = resolve_schema(schema)
    return primary_type(resolved) == "string" and not any(key in resolved for key in _VALUE_KEYS)


def _fields(props: Mapping[str, Any], required: list[str], depth: int) -> str:
    return ", ".join(f"{name}{'' if name in required else '?'}: {_type_text(schema, depth)}"
                     for name, schema in props.items())


def _type_text(schema: Any, depth: int) -> str:
    """``string``, ``"c"|"f"``, ``integer[]``, ``{name: string, size?: integer}``, ``string|null``…, with ``= default``."""
    resolved = resolve_schema(schema)
    text = _bare_type(resolved, depth)
    if "default" in resolved:
        text += f" = {_json(resolved['default'])}"
    return text


def _bare_type(schema: Mapping[str, Any], depth: int) -> str:
    if "const" in schema:
        return _json(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return "|".join(_json(value) for value in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list) and kind:
        return "|".join(str(k) for k in kind)
    kind = primary_type(schema)
    if depth >= MAX_SCHEMA_DEPTH:
        return kind or "any"
    if kind == "array":
        items = resolve_schema(schema.get("items"))
        inner = _bare_type(items, depth + 1) if items else "any"
        return f"({inner})[]" if "|" in inner else f"{inner}[]"
    if kind == "object":
        props, required = object_shape(schema)
        return f"{{{_fields(props, required, depth + 1)}}}" if props else "object"
    return kind or "any"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
