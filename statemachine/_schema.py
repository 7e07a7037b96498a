"""JSON Schema validation for strict tools (jsonschema, imported on first use)."""

from __future__ import annotations

from typing import Any, Mapping


def schema_errors(schema: Mapping[str, Any], value: Any) -> list[str]:
    """Messages for every way ``value`` violates ``schema`` (empty when it conforms)."""
    from jsonschema import Draft202012Validator  # lazy: keeps importing the core cheap

    validator = Draft202012Validator(schema)
    return [e.message for e in validator.iter_errors(value)]
