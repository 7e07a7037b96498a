"""JSON Schema for tools: checked once when the request comes in, then used to check a call's arguments.

A schema is the client's. jsonschema on its own would fetch a ``$ref`` to ``http://…`` or ``file://…``
from the server (and quote what it read in its error messages), recurse without end on ``{"$ref": "#"}``,
fail with an exception on ``"type": "strnig"`` or ``"minimum": "5"``, and match ``pattern`` with Python's
backtracking ``re``. :func:`schema_problem` refuses all of that up front, in one pass over the schema: local
``#/…`` refs only, keyword values of the types the validator needs, no cycle of refs that never moves into
the value, bounded nesting, patterns RE2 can run. (jsonschema's own meta-schema check is not used: it takes
10 ms for an 8-property schema and 0.4 s for 300, which a request must not be able to make the worker
spend.) :func:`schema_errors` validates only a schema that passed, with a registry that retrieves nothing
and ``pattern`` on RE2. jsonschema is imported on first use (keeps importing the core cheap).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Callable, Iterable, Iterator, Mapping
from urllib.parse import unquote

from ._regex import regex_matches, regex_problem

#: How many schemas' checks are kept (each key is the schema's JSON: at most 64 KiB by default).
CACHED_SCHEMAS = 64
#: Deepest nesting of subschemas in a schema (OpenAI's strict mode allows 10 levels of objects).
MAX_SCHEMA_NESTING = 64

#: Keywords whose value is one subschema, a list of them, or a mapping of names to them.
_ONE = ("additionalProperties", "propertyNames", "contains", "not", "if", "then", "else", "items",
        "unevaluatedItems", "unevaluatedProperties")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = ("properties", "$defs", "definitions", "dependentSchemas")
_WITH_SUBSCHEMAS = frozenset(_ONE + _LIST + _MAP)
_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
#: Keywords that apply their subschemas to the same value: a cycle through these and ``$ref`` never ends.
_IN_PLACE = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas"})
#: Keywords refused: they change where refs resolve (``$id``…), or match object keys with regexes inside
#: jsonschema, out of RE2's reach (``patternProperties``; OpenAI's strict mode does not take it either).
_REFUSED = frozenset({"$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor",
                      "patternProperties"})


class _Problem(Exception):
    """Why a schema cannot be used (the message names where inside it)."""


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` cannot be used to check arguments, or ``None`` when it can.

    Linear in the schema's size; fetches nothing, compiles each ``pattern`` with RE2. The answer (and the
    validator) for the last :data:`CACHED_SCHEMAS` schemas is kept: a tool is checked on every request that
    offers it, and again for each of its calls.
    """
    return _checked(schema)[0]


def schema_errors(schema: Mapping[str, Any], value: Any) -> list[str]:
    """Messages for every way ``value`` violates ``schema`` (empty when it conforms).

    A schema :func:`schema_problem` refuses checks nothing (empty): the request-time check refuses such a
    schema where it matters (strict tools), so this is only reached for a tool checked as a courtesy.
    """
    validator = _checked(schema)[1]
    return [] if validator is None else [e.message for e in validator.iter_errors(value)]


def _checked(schema: Any) -> tuple[str | None, Any]:
    """``(problem, None)``, or ``(None, a validator)`` for ``schema``."""
    try:
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):  # not JSON (only from an embedding host): checked uncached
        return _check(schema)
    return _check_text(text)


@lru_cache(maxsize=CACHED_SCHEMAS)
def _check_text(text: str) -> tuple[str | None, Any]:
    return _check(json.loads(text))


#: A subschema (an object), and where one is in its schema (the keys and indexes leading to it).
Node = dict[str, Any]
Path = tuple[str | int, ...]


def _check(schema: Any) -> tuple[str | None, Any]:
    try:
        nodes, refs = _walk(schema)
        _check_refs(schema, nodes, refs)
    except _Problem as exc:
        return str(exc), None
    from referencing import Registry

    return None, _validator_class()(schema, registry=Registry())  # an empty registry retrieves nothing


def _walk(schema: Any) -> tuple[dict[int, Node], list[tuple[Path, str, Node]]]:
    """The subschemas of ``schema`` by id, and every ``(path, $ref, subschema holding it)``, after checking
    nesting, keywords and patterns (set operations on each subschema's keys: a schema of thousands of
    subschemas takes milliseconds)."""
    nodes: dict[int, Node] = {}
    refs: list[tuple[Path, str, Node]] = []
    todo: list[tuple[Any, Path, int]] = [(schema, (), 0)]
    while todo:
        node, path, depth = todo.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict):
            raise _Problem(f"a schema must be an object or a boolean ({_at(path)})")
        nodes[id(node)] = node
        if depth > MAX_SCHEMA_NESTING:
            raise _Problem(f"the schema nests deeper than {MAX_SCHEMA_NESTING} levels ({_at(path)})")
        keys = node.keys()
        if keys & _REFUSED:
            raise _Problem(f"'{min(keys & _REFUSED)}' is not supported ({_at(path)})")
        for key in keys & _KEYWORDS.keys():
            test, what = _KEYWORDS[key]
            if not test(node[key]):
                raise _Problem(f"'{key}' must be {what} ({_at(path)})")
        if "$ref" in node:
            refs.append((path, node["$ref"], node))
        if "pattern" in node and (problem := regex_problem(node["pattern"])):
            raise _Problem(f"{problem} ({_at(path + ('pattern',))})")
        todo += ((child, path + steps, depth + 1) for steps, child in _children(node, keys & _WITH_SUBSCHEMAS))
    return nodes, refs


def _children(node: Node, keys: Iterable[str]) -> Iterator[tuple[Path, Any]]:
    """``(steps, subschema)`` for the subschemas right inside ``node`` under ``keys``; ``node`` passed the
    keyword checks, so each value has its keyword's shape."""
    for key in keys:
        value = node[key]
        if key in _MAP:
            yield from (((key, name), child) for name, child in value.items())
        elif key in _LIST:
            yield from (((key, i), child) for i, child in enumerate(value))
        else:
            yield (key,), value


def _check_refs(schema: Any, nodes: dict[int, Node], refs: list[tuple[Path, str, Node]]) -> None:
    """Every ``$ref`` names a subschema (one :func:`_walk` checked), and no chain of refs and in-place
    keywords loops."""
    targets: dict[int, Any] = {}
    for path, ref, node in refs:
        target = _resolve(schema, ref, path)
        if not isinstance(target, bool) and id(target) not in nodes:
            raise _Problem(f"$ref {ref!r} does not point to a subschema ({_at(path)})")
        targets[id(node)] = target
    # depth-first search for a cycle over "applies to the same value" edges; iterative (a chain may be long)
    state: dict[int, bool] = {}  # id → True while on the current path, False once done
    for start in nodes.values():
        if id(start) in state:
            continue
        stack = [(start, iter(_in_place(start, targets)))]
        state[id(start)] = True
        while stack:
            node, edges = stack[-1]
            step = next(edges, None)
            if step is None:
                state[id(node)] = False
                stack.pop()
            elif state.get(id(step)) is True:
                raise _Problem("the schema's refs loop without moving into the value (a $ref cycle)")
            elif id(step) not in state:
                state[id(step)] = True
                stack.append((step, iter(_in_place(step, targets))))


def _in_place(node: Node, targets: dict[int, Any]) -> Iterator[Node]:
    target = targets.get(id(node))
    if isinstance(target, dict):
        yield target
    yield from (child for _, child in _children(node, node.keys() & _IN_PLACE) if isinstance(child, dict))


def _resolve(schema: Any, ref: str, path: Path) -> Any:
    """The subschema a local ``#`` / ``#/a/b`` ref names."""
    if ref != "#" and not ref.startswith("#/"):
        raise _Problem(f"$ref {ref!r} is not a local '#/…' ref: only refs inside the schema are supported "
                       f"({_at(path)})")
    node = schema
    for step in ref[2:].split("/") if ref != "#" else ():
        step = unquote(step).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            raise _Problem(f"$ref {ref!r} points to nothing in the schema ({_at(path)})")
    return node


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return _is_number(value) and value >= 0 and float(value).is_integer()


def _is_type(value: Any) -> bool:
    names = value if isinstance(value, list) else [value]
    return all(isinstance(name, str) and name in _TYPES for name in names) and len(set(names)) == len(names)


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _is_schemas(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(item, (dict, bool)) for item in value)


def _is_schema_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(item, (dict, bool)) for item in value.values())


#: What the validator needs of each keyword's value (the 2020-12 meta-schema's types), with how to say it.
_KEYWORDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "type": (_is_type, "one of array, boolean, integer, null, number, object, string, or a list of them"),
    "enum": (lambda v: isinstance(v, list), "an array"),
    "required": (_is_names, "an array of strings"),
    "dependentRequired": (lambda v: isinstance(v, dict) and all(map(_is_names, v.values())),
                          "an object of string arrays"),
    "multipleOf": (lambda v: _is_number(v) and v > 0, "a number above 0"),
    "uniqueItems": (lambda v: isinstance(v, bool), "a boolean"),
    "pattern": (lambda v: isinstance(v, str), "a string"),
    "$ref": (lambda v: isinstance(v, str), "a string"),
    **{key: (_is_number, "a number") for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")},
    **{key: (_is_count, "a non-negative integer") for key in (
        "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains",
        "maxContains")},
    **{key: (lambda v: isinstance(v, (dict, bool)), "a schema (an object or a boolean)") for key in _ONE},
    **{key: (_is_schemas, "a non-empty array of schemas") for key in _LIST},
    **{key: (_is_schema_map, "an object of schemas") for key in _MAP},
}


def _at(path: Path) -> str:
    """Where ``path`` is in the schema, as a JSON pointer."""
    if not path:
        return "at the schema's root"
    return "at '" + "".join("/" + str(step).replace("~", "~0").replace("/", "~1") for step in path) + "'"


@lru_cache(maxsize=1)
def _validator_class() -> Any:
    """Draft 2020-12 with ``pattern`` matched by RE2."""
    from jsonschema import Draft202012Validator, ValidationError, validators

    def pattern(validator: Any, regex: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if validator.is_type(instance, "string") and not regex_matches(regex, instance):
            yield ValidationError(f"{instance!r} does not match {regex!r}")

    return validators.extend(Draft202012Validator, {"pattern": pattern})
