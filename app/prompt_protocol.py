"""The text protocol between toolwire's prompt and the model: what the tool block says, and how.

The prompt builder (:mod:`app.pipeline.prompt`) writes it; the demo back end
(:mod:`app.upstreams.demo`), a stand-in model, reads it back. Both import it from
here, so neither depends on the other: the block's headings, the line that ends
every tool result, and the JSON-schema helpers behind the worked examples.
"""

from __future__ import annotations

from typing import Any, Mapping

#: First line of the tool block.
TOOL_BLOCK_TITLE = "# Tools"
#: Heading of the manifest: one ``NAME {schema}`` line per tool follows its intro line.
MANIFEST_HEADING = "## Manifest"
#: Heading of the per-tool guide (``### NAME``, description, parameters, example).
GUIDE_HEADING = "## Tool guide"
#: Heading of the call-format instructions with the worked example.
HOW_TO_HEADING = "## How to call"
#: Heading of the ``tool_choice`` / strict / parallel lines (``- …`` each), when any.
TURN_HEADING = "## This turn"
#: Last line of every rendered tool result.
TOOL_RESULT_END = "End of tool result."
_COMBINATORS = ("oneOf", "anyOf", "allOf")
#: How deep example values and type names descend into nested schemas.
MAX_SCHEMA_DEPTH = 4


def example_value(schema: Any, depth: int = 0) -> Any:
    """A plausible value for a JSON Schema, for worked examples.

    Uses the schema's ``default``, ``example``, first of ``examples``,
    ``const`` or first ``enum`` value, else a placeholder for its type; objects
    get their required properties (all properties when none is required).

    Args:
        schema: a JSON Schema (anything else counts as ``{}``).
        depth: current nesting depth; past a cap, containers are left empty.
    Returns:
        A JSON-serialisable value.
    """
    schema = resolve_schema(schema)
    for key in ("default", "example"):
        if key in schema:
            return schema[key]
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return schema["examples"][0]
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = primary_type(schema)
    if kind == "object":
        if depth >= MAX_SCHEMA_DEPTH:
            return {}
        props, required = object_shape(schema)
        keys = [k for k in required if k in props] or list(props)
        return {k: example_value(props[k], depth + 1) for k in keys}
    if kind == "array":
        return [] if depth >= MAX_SCHEMA_DEPTH else [example_value(schema.get("items"), depth + 1)]
    if kind == "integer":
        minimum = schema.get("minimum")
        return int(minimum) if isinstance(minimum, (int, float)) else 1
    if kind == "number":
        return schema.get("minimum", 1.5)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "example"


def object_shape(schema: Mapping[str, Any]) -> tuple[Mapping[str, Any], list[str]]:
    """An object schema's ``properties`` and ``required`` names; client schemas are not
    validated, so malformed values count as absent."""
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    required = schema.get("required")
    return props, [k for k in required if isinstance(k, str)] if isinstance(required, list) else []


def resolve_schema(schema: Any) -> dict[str, Any]:
    """A schema with ``oneOf``/``anyOf``/``allOf`` replaced by their first branch.

    The outer keys (description, default…) win over the branch's.
    """
    if not isinstance(schema, Mapping):
        return {}
    resolved = dict(schema)
    for _ in range(MAX_SCHEMA_DEPTH):
        key = next((k for k in _COMBINATORS if k in resolved and "type" not in resolved), None)
        if key is None:
            break
        branches = resolved.pop(key)
        if isinstance(branches, list) and branches and isinstance(branches[0], Mapping):
            resolved = {**branches[0], **resolved}
    return resolved


def primary_type(schema: Mapping[str, Any]) -> str | None:
    """The schema's type, the first non-null one of a type list, or inferred."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind is None and "properties" in schema:
        return "object"
    if kind is None and "items" in schema:
        return "array"
    return kind if isinstance(kind, str) else None
