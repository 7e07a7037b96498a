"""A client's schema is checked before it is used (statemachine/_schema.py): whatever the schema, the check
answers (never raises), and a schema it accepts validates any value without raising, fetching or looping."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statemachine._schema import MAX_SCHEMA_NESTING, schema_errors, schema_problem

JSON_SCALARS = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-5, 5, allow_nan=False) | st.text(max_size=4)
JSON = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8)
REFS = st.sampled_from(["#", "#/$defs/a", "#/$defs/b", "#/properties/x", "#/items", "#/$defs/missing",
                        "http://127.0.0.1:9/s.json", "file:///etc/passwd", "other.json#/a"])
WORDS = st.sampled_from(["type", "enum", "const", "required", "minimum", "maxLength", "multipleOf", "pattern",
                         "format", "uniqueItems", "dependentRequired", "description"])
VALUES = (JSON | st.sampled_from(["string", "number", "object", "strnig", ["string", "null"], ["a"], [],
                                  "^a+$", "(a)\\1", "(a+)+$", 0, -1, 2.5]))
#: Keyword values of the right type (half of the subschemas), with a backtracking pattern among them.
GOOD = {"type": st.sampled_from(["string", "number", "integer", "object", "array", ["string", "null"]]),
        "minimum": st.integers(-3, 3), "maxLength": st.integers(0, 4), "required": st.lists(st.sampled_from("ax")),
        "pattern": st.sampled_from(["^a+$", "(a+)+$", "b"]), "enum": st.lists(JSON_SCALARS, max_size=3),
        "const": JSON_SCALARS, "multipleOf": st.sampled_from([1, 0.5, 2]), "uniqueItems": st.booleans()}
KEYWORDS = st.fixed_dictionaries({}, optional=GOOD) | st.dictionaries(WORDS, VALUES, max_size=3)
APPLICATORS = st.sampled_from(["properties", "$defs", "items", "prefixItems", "allOf", "anyOf", "oneOf", "not",
                               "if", "then", "else", "additionalProperties", "contains", "propertyNames",
                               "dependentSchemas", "unevaluatedProperties"])


def _node(children):
    """A subschema: a few plain keywords, maybe a $ref, and applicators holding ``children``."""
    def build(words, ref, applied):
        node = dict(words)
        if ref is not None:
            node["$ref"] = ref
        for key, kids in applied:
            if key in ("properties", "$defs", "dependentSchemas"):
                node[key] = {name: kid for name, kid in zip(("a", "b", "x"), kids)}
            elif key in ("prefixItems", "allOf", "anyOf", "oneOf"):
                node[key] = kids
            else:
                node[key] = kids[0] if kids else True
        return node

    return st.builds(build, KEYWORDS, st.none() | REFS,
                     st.lists(st.tuples(APPLICATORS, st.lists(children, max_size=3)), max_size=3))


TREES = st.recursive(st.booleans() | _node(st.booleans()), _node, max_leaves=12)
#: Trees, and trees under a root that holds the targets of the refs (so that many refs resolve)
SCHEMAS = TREES | st.builds(lambda root, a, b, x: {**root, "$defs": {"a": a, "b": b}, "properties": {"x": x}},
                            _node(TREES), TREES, TREES, TREES)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SCHEMAS, JSON)
def test_any_schema_is_checked_and_an_accepted_one_validates_any_value(schema, value):
    problem = schema_problem(schema)
    assert problem is None or isinstance(problem, str)
    errors = schema_errors(schema, value)
    assert isinstance(errors, list) and (problem is None or errors == [])


def test_what_is_refused_and_what_is_not():
    assert schema_problem({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
                           "$defs": {"unused": {"$ref": "#/$defs/unused2"}, "unused2": {"type": "string"}}}) is None
    deep: dict = {}
    node = deep
    for _ in range(MAX_SCHEMA_NESTING + 1):
        node["not"] = {}
        node = node["not"]
    assert "nests deeper" in schema_problem(deep)
    assert "cycle" in schema_problem({"$defs": {"a": {"not": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"})
    assert "not a local" in schema_problem({"$ref": "other.json#/a"})
    assert schema_errors({"pattern": "^a"}, "a\ud800") == []  # a lone surrogate (UTF-8 cannot hold it) matches
    assert schema_errors({"properties": {"w": {"pattern": "^(a+)+$"}}}, {"w": "a" * 100_000 + "!"}) == [
        f"'{'a' * 100_000}!' does not match '^(a+)+$'"]
