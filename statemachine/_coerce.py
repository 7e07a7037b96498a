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


def schema_type(schema: Mapping[str, Any] | None) -> str | None:
    """The JSON type a (sub)schema asks for; the first branch of oneOf/anyOf/allOf."""
    if not isinstance(schema, Mapping):
        return None
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), None)
    if typ is None:
        for key in ("anyOf", "oneOf", "allOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                return schema_type(branches[0])
        return None
    typ = str(typ).lower()
    return _SQL_TYPES.get(typ, typ)


def coerce_value(text: str, schema: Mapping[str, Any] | None) -> Any:
    """A textual parameter value as the type its schema asks for (always JSON-serialisable), else the string itself."""
    typ = schema_type(schema)
    if typ in (None, "string"):
        return text
    stripped = text.strip()
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(stripped)
            json.dumps(value, allow_nan=False)  # a Python literal (set, bytes, nan…) may not be JSON
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if typ == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)
        return value
    if typ == "boolean" and stripped.lower() in ("true", "false"):
        return stripped.lower() == "true"
    return text


def coerce_parameters(params: Mapping[str, str], schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """Textual parameters as a JSON object, in the schema's order, then alphabetical."""
    props = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
    order = [k for k in props if k in params] + sorted(k for k in params if k not in props)
    return {k: coerce_value(params[k], props.get(k)) for k in order}
