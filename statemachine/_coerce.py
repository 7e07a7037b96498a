"""Schema-driven coercion of textual parameter values (format C parameters, ``<use_tool>`` children)."""

from __future__ import annotations

import ast
import json
from typing import Any, Mapping

_SQL_TYPES = {
    "varchar": "string", "char": "string", "text": "string", "str": "string",
    "int": "integer", "bigint": "integer", "smallint": "integer", "long": "integer",
    "float": "number", "double": "number", "decimal": "number", "bool": "boolean",
    "list": "array", "dict": "object", "map": "object",
}


def schema_types(schema: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Every JSON type a (sub)schema allows, in order: its ``type`` (or type list), else the types of
    its ``anyOf`` / ``oneOf`` branches (``allOf``: the first); DB-style names mapped (``varchar``…)."""
    if not isinstance(schema, Mapping):
        return ()
    typ = schema.get("type")
    if typ is None:
        for key in ("anyOf", "oneOf", "allOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                picked = branches[:1] if key == "allOf" else branches
                return tuple(dict.fromkeys(t for branch in picked for t in schema_types(branch)))
        return ()
    names = typ if isinstance(typ, list) else [typ]
    return tuple(dict.fromkeys(_SQL_TYPES.get(str(t).lower(), str(t).lower()) for t in names))


def schema_type(schema: Mapping[str, Any] | None) -> str | None:
    """The first non-null JSON type a (sub)schema allows (see :func:`schema_types`)."""
    return next((t for t in schema_types(schema) if t != "null"), None)


def streams_as_string(schema: Mapping[str, Any] | None) -> bool:
    """Whether a value for ``schema`` is sent as a JSON string as it arrives: no type, or only ``string``
    (``null`` aside: a string-or-null value is always the string, so it can stream)."""
    return all(t in ("string", "null") for t in schema_types(schema))


def coerce_value(text: str, schema: Mapping[str, Any] | None) -> Any:
    """A textual parameter value as the type its schema asks for (always JSON-serialisable), else the string itself.

    A union prefers a non-string type the value parses as (``"3"`` for ``["string", "integer"]`` is
    ``3``); ``null`` (or ``None``) is ``None`` where the schema allows null and a non-string type; an
    object or array value written as a JSON string holding one is decoded once more.
    """
    types = schema_types(schema)
    if streams_as_string(schema):
        return text
    stripped = text.strip()
    if "null" in types and stripped in ("null", "None"):
        return None
    wanted = [t for t in types if t != "null"]
    value = _parse(stripped, double_encoded="object" in wanted or "array" in wanted)
    if value is _UNPARSED:
        if wanted[0] == "boolean" and stripped.lower() in ("true", "false"):
            return stripped.lower() == "true"
        return text
    kind = _json_type(value)
    if len(wanted) > 1 and kind not in wanted and not (kind == "integer" and "number" in wanted):
        return text if "string" in wanted else value
    if "integer" in wanted and isinstance(value, float) and value.is_integer() and (
            wanted[0] == "integer" or "number" not in wanted):
        value = int(value)
    return value


_UNPARSED = object()


def _parse(text: str, *, double_encoded: bool) -> Any:
    """``text`` as JSON, else as a Python literal that is JSON-serialisable, else ``_UNPARSED``."""
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(text)
            json.dumps(value, allow_nan=False)  # a Python literal (set, bytes, nan…) may not be JSON
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if double_encoded and isinstance(value, str) and value.strip()[:1] in ("{", "["):
            inner = _parse(value.strip(), double_encoded=False)
            if isinstance(inner, (dict, list)):
                return inner
        return value
    return _UNPARSED


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), "null")


def coerce_parameters(params: Mapping[str, str], schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """Textual parameters as a JSON object, in the schema's order, then alphabetical."""
    props = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
    order = [k for k in props if k in params] + sorted(k for k in params if k not in props)
    return {k: coerce_value(params[k], props.get(k)) for k in order}
