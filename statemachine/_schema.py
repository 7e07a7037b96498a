"""JSON Schema for tools: checked once when the request comes in, then used to check a call's arguments.

A schema is the client's. jsonschema on its own would fetch a ``$ref`` to ``http://…`` or ``file://…``
from the server (and quote what it read in its error messages), recurse without end on ``{"$ref": "#"}``,
fail with an exception on ``"type": "strnig"``, and match ``pattern`` with Python's backtracking ``re``.
:func:`schema_problem` refuses all of that up front (local ``#/…`` refs only, the 2020-12 meta-schema, no
cycle of refs that never moves into the value, bounded nesting, patterns RE2 can run); :func:`schema_errors`
validates only a schema that passed, with a registry that retrieves nothing and ``pattern`` on RE2.
jsonschema is imported on first use (keeps importing the core cheap).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Iterator, Mapping
from urllib.parse import unquote

from ._regex import compile_regex, regex_problem

#: How many schemas' checks are kept (each key is the schema's JSON: at most 64 KiB by default).
CACHED_SCHEMAS = 64
#: Deepest nesting of subschemas in a schema (OpenAI's strict mode allows 10 levels of objects).
MAX_SCHEMA_NESTING = 64

#: Keywords whose value is one subschema, a list of them, or a mapping of names to them.
_ONE = ("additionalProperties", "propertyNames", "contains", "not", "if", "then", "else", "items",
        "additionalItems", "unevaluatedItems", "unevaluatedProperties")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_MAP = ("properties", "$defs", "definitions", "dependentSchemas")
#: Keywords that apply their subschemas to the same value: a cycle through these and ``$ref`` never ends.
_IN_PLACE = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas"})
#: Keywords refused: they change where refs resolve (``$id``…), or match object keys with regexes inside
#: jsonschema, out of RE2's reach (``patternProperties``; OpenAI's strict mode does not take it either).
_REFUSED = ("$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor",
            "patternProperties")


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


def _check(schema: Any) -> tuple[str | None, Any]:
    try:
        nodes, refs = _walk(schema)
        _check_meta(schema)
        _check_refs(schema, nodes, refs)
    except _Problem as exc:
        return str(exc), None
    from referencing import Registry

    return None, _validator_class()(schema, registry=Registry())  # an empty registry retrieves nothing


def _walk(schema: Any) -> tuple[dict[int, dict[str, Any]], list[tuple[str, str, dict[str, Any]]]]:
    """The subschemas of ``schema`` by id, and every ``(pointer, $ref, subschema holding it)``, after
    checking nesting, keywords and patterns (the meta-schema check comes after: it recurses, so the depth
    is bounded first)."""
    nodes: dict[int, dict[str, Any]] = {}
    refs = []
    todo = [(schema, "", 0)]
    while todo:
        node, pointer, depth = todo.pop()
        if not isinstance(node, dict):
            continue
        nodes[id(node)] = node
        if depth > MAX_SCHEMA_NESTING:
            raise _Problem(f"the schema nests deeper than {MAX_SCHEMA_NESTING} levels (at '{pointer}')")
        for key in _REFUSED:
            if key in node:
                raise _Problem(f"'{key}' is not supported (at '{pointer}')")
        ref = node.get("$ref")
        if isinstance(ref, str):
            refs.append((pointer, ref, node))
        pattern = node.get("pattern")
        if isinstance(pattern, str) and (problem := regex_problem(pattern)):
            raise _Problem(f"{problem} (at '{pointer}/pattern')")
        todo += ((child, path, depth + 1) for path, child in _subschemas(node, pointer))
    return nodes, refs


def _subschemas(node: dict[str, Any], pointer: str, keys: Any = None) -> Iterator[tuple[str, Any]]:
    """``(pointer, subschema)`` for the subschemas right inside ``node`` (under ``keys``: only those)."""
    for key in _ONE:
        if key in node and (keys is None or key in keys) and not isinstance(node[key], list):
            yield f"{pointer}/{_escape(key)}", node[key]
    for key in _LIST:
        if isinstance(node.get(key), list) and (keys is None or key in keys):
            yield from ((f"{pointer}/{key}/{i}", item) for i, item in enumerate(node[key]))
    for key in _MAP:
        if isinstance(node.get(key), dict) and (keys is None or key in keys):
            yield from ((f"{pointer}/{_escape(key)}/{_escape(name)}", item) for name, item in node[key].items())


def _check_meta(schema: Any) -> None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        # no format checker: it would compile "pattern" with Python's re, not RE2
        Draft202012Validator.check_schema(schema, format_checker=None)
    except SchemaError as exc:
        where = "".join(f"/{_escape(str(step))}" for step in exc.path)
        raise _Problem(f"{exc.message} (at '{where}')") from None


def _check_refs(schema: Any, nodes: dict[int, dict[str, Any]], refs: list[tuple[str, str, dict[str, Any]]]) -> None:
    """Every ``$ref`` names a subschema (one :func:`_walk` checked), and no chain of refs and in-place
    keywords loops."""
    targets = {}
    for pointer, ref, node in refs:
        target = _resolve(schema, ref, pointer)
        if not isinstance(target, bool) and id(target) not in nodes:
            raise _Problem(f"$ref {ref!r} does not point to a subschema (at '{pointer}')")
        targets[id(node)] = target
    # depth-first search for a cycle over "applies to the same value" edges; iterative (a chain may be long)
    state: dict[int, bool] = {}  # id → True while on the current path, False once done
    for start in nodes.values():
        if id(start) in state:
            continue
        path = [(start, iter(_in_place(start, targets)))]
        state[id(start)] = True
        while path:
            node, edges = path[-1]
            step = next(edges, None)
            if step is None:
                state[id(node)] = False
                path.pop()
            elif state.get(id(step)) is True:
                raise _Problem("the schema's refs loop without moving into the value (a $ref cycle)")
            elif id(step) not in state:
                state[id(step)] = True
                path.append((step, iter(_in_place(step, targets))))


def _in_place(node: dict[str, Any], targets: dict[int, Any]) -> Iterator[dict[str, Any]]:
    target = targets.get(id(node))
    if isinstance(target, dict):
        yield target
    yield from (child for _, child in _subschemas(node, "", _IN_PLACE) if isinstance(child, dict))


def _resolve(schema: Any, ref: str, pointer: str) -> Any:
    """The subschema a local ``#`` / ``#/a/b`` ref names."""
    if ref != "#" and not ref.startswith("#/"):
        raise _Problem(f"$ref {ref!r} is not a local '#/…' ref: only refs inside the schema are supported "
                       f"(at '{pointer}')")
    node = schema
    for step in ref[2:].split("/") if ref != "#" else ():
        step = unquote(step).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            raise _Problem(f"$ref {ref!r} points to nothing in the schema (at '{pointer}')")
    return node


def _escape(step: str) -> str:
    return step.replace("~", "~0").replace("/", "~1")


@lru_cache(maxsize=1)
def _validator_class() -> Any:
    """Draft 2020-12 with ``pattern`` matched by RE2."""
    from jsonschema import Draft202012Validator, ValidationError, validators

    def pattern(validator: Any, regex: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if validator.is_type(instance, "string") and not compile_regex(regex).search(instance):
            yield ValidationError(f"{instance!r} does not match {regex!r}")

    return validators.extend(Draft202012Validator, {"pattern": pattern})
