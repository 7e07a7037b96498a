"""GBNF grammars of the calls a request offers: what a back end with constrained decoding (llama.cpp's ``grammar``,
xgrammar's EBNF in vLLM and SGLang) is given so that a call, once begun, is well-formed and names an offered tool.

A tool's JSON Schema becomes rules for its arguments: objects (declared properties, the required ones always,
the others optional, in their declared order), arrays, strings, numbers, integers, booleans, null, ``enum``,
``const``, ``anyOf`` / ``oneOf``, a type list and local ``$ref`` s; anything else (``allOf``, ``not``, patterns,
formats) is any JSON value of the type, so a schema is never made stricter than it says. The calls are written
as the taught format writes them (:data:`WRAPPED`), or as a bare ``{"name", "arguments"}`` object. In free text
(``calls_in_prose``) a call may also name a tool nobody offered, its arguments any object: the grammar keeps the
call well-formed but never makes a model that means another tool call an offered one.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from statemachine import ToolSpec

#: The formats whose calls are one ``{"name", "arguments"}`` object between an opener and a closer.
WRAPPED = {"tool_call": ("<tool_call>", "</tool_call>")}

_BASE = {
    "ws": '| " " | "\\n" [ \\t]{0,20}',
    "value": "object | array | string | number | boolean | null",
    "object": '"{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"',
    "array": '"[" ws ( value ws ( "," ws value ws )* )? "]"',
    "string": '"\\"" char* "\\""',
    "char": '[^"\\\\\\x7F\\x00-\\x1F] | "\\\\" ( ["\\\\/bfnrt] | "u" [0-9a-fA-F]{4} )',
    "number": '"-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?',
    "integer": '"-"? ( "0" | [1-9] [0-9]* )',
    "boolean": '"true" | "false"',
    "null": '"null"',
}
_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")


def literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    return json.dumps(text, ensure_ascii=False)


class Grammar:
    """Rules under construction: each schema's rule made once (named after its tool and place)."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}
        self._refs: dict[str, str] = {}

    def add(self, name: str, body: str) -> str:
        """Add the rule ``name ::= body`` (a fresh name if ``name`` is taken by another body); its name."""
        name = re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-").lower() or "r"
        base, n = name, 1
        while self.rules.get(name, body) != body:
            n += 1
            name = f"{base}-{n}"
        self.rules[name] = body
        return name

    def text(self, root: str) -> str:
        """The grammar: ``root ::= …`` first, then every rule used, then the JSON basics."""
        lines = [f"root ::= {root}", *(f"{name} ::= {body}" for name, body in self.rules.items())]
        return "\n".join(lines + [f"{name} ::= {body}" for name, body in _BASE.items() if name not in self.rules])

    def value(self, schema: Any, name: str, root: Mapping[str, Any]) -> str:
        """The expression a value of ``schema`` matches (``root`` holds the ``$ref`` targets)."""
        if not isinstance(schema, Mapping):
            return "value"
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._ref(ref, root)
        if "const" in schema:
            return literal(json.dumps(schema["const"], ensure_ascii=False))
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return "( " + " | ".join(literal(json.dumps(v, ensure_ascii=False)) for v in schema["enum"]) + " )"
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                alternatives = [self.value(option, f"{name}-{i}", root) for i, option in enumerate(options)]
                return "( " + " | ".join(alternatives) + " )"
        kind = schema.get("type")
        if isinstance(kind, list):
            return "( " + " | ".join(self.value({**schema, "type": k}, f"{name}-{k}", root) for k in kind) + " )"
        if kind == "object" or (kind is None and isinstance(schema.get("properties"), Mapping)):
            return self._object(schema, name, root)
        if kind == "array":
            item = self.value(schema.get("items", {}), f"{name}-item", root)
            more = f'( "," ws {item} ws )*' if schema.get("maxItems") != 1 else ""
            body = f'{item} ws {more}'.strip()
            return self.add(name, f'"[" ws {body} "]"' if schema.get("minItems", 0) >= 1 else f'"[" ws ( {body} )? "]"')
        return kind if kind in _TYPES else "value"

    def _ref(self, ref: str, root: Mapping[str, Any]) -> str:
        if ref in self._refs:
            return self._refs[ref]
        target: Any = root
        for part in ref.lstrip("#").strip("/").split("/") if ref.startswith("#") else [None]:
            target = target.get(part.replace("~1", "/").replace("~0", "~")) \
                if part is not None and isinstance(target, Mapping) else None
        if not isinstance(target, Mapping):
            return "value"
        name = self._refs[ref] = self.add("ref-" + ref.rsplit("/", 1)[-1], "value")  # a placeholder: refs may recur
        self.rules[name] = self.value(target, name + "-body", root)
        return name

    def _object(self, schema: Mapping[str, Any], name: str, root: Mapping[str, Any]) -> str:
        properties = schema.get("properties")
        if not isinstance(properties, Mapping) or not properties:
            return "object"
        required = [key for key in properties if key in (schema.get("required") or ())]
        optional = [key for key in properties if key not in required]
        member = {key: f'{literal(json.dumps(key, ensure_ascii=False))} ws ":" ws '
                       f'{self.value(properties[key], f"{name}-{key}", root)} ws' for key in properties}
        if required:
            tail = ""  # the optional members after the required ones, each one optional, in their order
            for key in reversed(optional):
                tail = self.add(f"{name}-after-{key}", f'( "," ws {member[key]} )? {tail}'.strip())
            body = ' "," ws '.join(member[key] for key in required)
            return self.add(name, " ".join(part for part in ('"{" ws', body, tail, '"}"') if part))
        firsts = []  # no member required: any optional one may come first, the later ones after it
        for i, key in enumerate(optional):
            rest = [f'( "," ws {member[k]} )?' for k in optional[i + 1:]]
            firsts.append(" ".join([member[key], *rest]))
        return self.add(name, f'"{{" ws ( {" | ".join(firsts)} )? "}}"')


def call_object(grammar: Grammar, tools: Sequence[ToolSpec], *, others: bool = False) -> str:
    """The rule of one ``{"name": …, "arguments": {…}}`` object calling one of ``tools``; with ``others``, also of
    any other name, its arguments any object (read as a call of an unknown tool, ``unknown_tool`` decides)."""
    options = [f'{_other_name(grammar, [spec.name for spec in tools])} ws "," ws "\\"arguments\\"" ws ":" ws object'] \
        if others else []
    for spec in tools:
        schema = spec.parameters or {"type": "object"}
        arguments = grammar.value(schema, f"args-{spec.name}", schema)
        if arguments not in ("object",) and not grammar.rules.get(arguments, "").startswith('"{"'):
            arguments = "object"  # the arguments are an object whatever the schema says at its top
        options.append(f'{literal(json.dumps(spec.name))} ws "," ws "\\"arguments\\"" ws ":" ws {arguments}')
    return grammar.add("call", f'"{{" ws "\\"name\\"" ws ":" ws ( {" | ".join(options)} ) ws "}}"')


def forced_calls(tools: Sequence[ToolSpec], *, parallel: bool) -> str:
    """The grammar of an answer that is only calls of ``tools``, as the bare-JSON rule reads them at a message's
    start in every format: a JSON list of call objects, or one object when calls are not ``parallel``."""
    grammar = Grammar()
    call = call_object(grammar, tools)
    return grammar.text(f'ws "[" ws {call} ( ws "," ws {call} )* ws "]"' if parallel else f"ws {call}")


def calls_in_prose(tools: Sequence[ToolSpec], fmt: str, *, bare: bool) -> str | None:
    """The grammar of free text whose calls of ``tools`` are well-formed: every ``fmt`` block (a format of
    :data:`WRAPPED`), and with ``bare`` an answer that starts with ``[`` or ``{`` (a JSON list of calls, or one call,
    as the bare-JSON rule reads it). It fits both ways a back end applies it: from the first token, or lazily
    from the opener. ``None`` when there is nothing to constrain."""
    grammar = Grammar()
    # A name the model means for a tool nobody offered stays its own: forced to an offered name, it became a
    # call of a tool that does not fit (two of BFCL's irrelevance cases, docs/benchmarks.md).
    call = call_object(grammar, tools, others=True)
    list_or_call = f'( "[" ws {call} ( ws "," ws {call} )* ws "]" | {call} )'
    if fmt not in WRAPPED:
        if not bare:
            return None
        grammar.rules["free"] = '"" | [^\\x00] free'
        return grammar.text(f'ws ( {list_or_call} free | "" | [^[{{ \\t\\n] free )')
    opener, closer = WRAPPED[fmt]
    block = grammar.add("block", f"{literal(opener)} ws {call} ws {literal(closer)}")
    prose, start = _without(grammar, opener, not_first="[{ \t\n")
    if not bare:
        return grammar.text(f"{prose} ( {block} {prose} )*")
    return grammar.text(f"ws ( {list_or_call} {prose} | {start} ) ( {block} {prose} )*")


def _other_name(grammar: Grammar, names: Sequence[str]) -> str:
    """The rule of a JSON string that is none of ``names``: one rule per node of their trie, a closing quote
    allowed wherever no name ends, any other character leaving the trie for a free tail."""
    trie: dict[str, dict] = {}
    for name in names:
        node = trie
        for char in name:
            node = node.setdefault(char, {})
        node[""] = {}  # a name ends here
    grammar.rules["name-tail"] = '"\\"" | char name-tail'

    def rule(node: dict, path: str) -> str:
        chars = [c for c in node if c]
        options = [] if "" in node else ['"\\""']
        options.append("[^" + "".join(_class_char(c) for c in ['"', "\\", *chars]) + '\\x7F\\x00-\\x1F] name-tail')
        options.append('"\\\\" ( ["\\\\/bfnrt] | "u" [0-9a-fA-F]{4} ) name-tail')
        options += [f"{literal(c)} {rule(node[c], path + c)}" for c in chars]
        return grammar.add("other-name", " | ".join(options))

    return f'"\\"" {rule(trie, "")}'


def _without(grammar: Grammar, word: str, *, not_first: str) -> tuple[str, str]:
    """Rules for any text in which ``word`` never occurs: one rule per prefix of it matched so far (the
    Knuth-Morris-Pratt automaton), a character that would complete it never allowed; and the rule for such a text
    that does not begin with one of ``not_first``."""
    chars = sorted(set(word))
    fail = [0] * (len(word) + 1)
    for i in range(1, len(word)):
        k = fail[i]
        while k and word[i] != word[k]:
            k = fail[k]
        fail[i + 1] = k + 1 if word[i] == word[k] else 0

    def step(state: int, char: str) -> int:
        while state and word[state] != char:
            state = fail[state]
        return state + 1 if word[state] == char else 0

    names = [f"prose-{i}" for i in range(len(word))]

    def options(state: int, excluded: str = "") -> str:
        onward = [c for c in chars if step(state, c)]  # the characters that keep part of the word matched
        alternatives = ['""', "[^" + "".join(map(_class_char, [*onward, *excluded])) + f"] {names[0]}"]
        alternatives += [f"{literal(c)} {names[step(state, c)]}" for c in onward
                         if step(state, c) < len(word) and c not in excluded]
        return " | ".join(alternatives)

    for state, name in enumerate(names):
        grammar.rules[name] = options(state)
    return names[0], grammar.add("prose-start", options(0, not_first))


def _class_char(char: str) -> str:
    """``char`` as it stands inside a GBNF character class."""
    return {"\t": "\\t", "\n": "\\n", "\r": "\\r"}.get(char) or ("\\" + char if char in "^-]\\[" else char)
