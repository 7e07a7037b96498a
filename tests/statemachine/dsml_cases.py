"""DeepSeek V3.2 / V4 DSML output cases mined from the peers' suites; the texts are theirs, the structure ours.

Each case is ``(source, label, text, expected, options)``: ``expected`` in the
harness's items, options for :func:`harness.tr` (``finish``, ``notes``) plus
``tools`` (the offered tools' parameter schemas by name; unset: every name in
:data:`NAMES` without properties, as the peers' parsers built without tools)
and ``differs`` (why toolwire's result is not the peer's; the peer's outcome is
in the comment). Every case runs under both formats, ``deepseek_v32`` and
``deepseek_v4``.

Sources (repository, file, commit):

* ``vllm-v32``: vllm-project/vllm ``tests/tool_parsers/test_deepseekv32_tool_parser.py``
  @ 00816550e740a13736f7ef9921097d51a3f01ede (``TestExtractToolCalls``, ``TestExtractToolCallsStreaming``,
  ``TestDelimiterPreservation``; the id, state-reset and request-adjustment tests have no text to transcribe).
* ``vllm-v4``: vllm-project/vllm ``tests/tool_parsers/test_deepseekv4_tool_parser.py``
  @ 023f36c62e71a247a9bacb7eb4cea5d55505cb63 (the structural-tag test has no text).
* ``sglang``: sgl-project/sglang ``test/registered/unit/function_call/test_deepseekv32_detector.py``
  @ 2bbf6f5db35c1bd18ddcb7361da777cb99eb07c9 (``_StreamingPreambleTestsMixin``, run there for both detectors).
* ``sglang-strict``: sgl-project/sglang ``test/registered/unit/function_call/test_deepseekv32_strict_dsml.py``
  @ 71c9f28eeb360f7f9d92a210aa4b623b2b8c0547 (its bodies in the ``tool_calls`` flavour).
"""

from __future__ import annotations

from harness import Call

D = "｜DSML｜"
FC, FE = f"<{D}function_calls>", f"</{D}function_calls>"
TC, TE = f"<{D}tool_calls>", f"</{D}tool_calls>"
INV, INV_END = f'<{D}invoke name="', f"</{D}invoke>"
PAR, PAR_END = f'<{D}parameter name="', f"</{D}parameter>"
NAMES = ("get_time", "get_weather", "my_func", "fn", "func_a", "func_b", "unknown_fn", "search", "lookup_fixture",
         "set_flag", "submit")
CALLS = {"finish": "tool_calls"}


def param(key: str, value: str, string: str = "true") -> str:
    return f'{PAR}{key}" string="{string}">{value}{PAR_END}'


def invoke(name: str, body: str) -> str:
    return f'{INV}{name}">{body}{INV_END}'


def vllm_call(name: str, params: dict[str, str], section: tuple[str, str] = (FC, FE)) -> str:
    """vLLM's ``build_tool_call``: string parameters, one invoke, newlines around it."""
    body = "".join(param(k, v) for k, v in params.items())
    return f'{section[0]}\n{INV}{name}">\n{body}\n{INV_END}\n{section[1]}'


def vllm_invoke(name: str, *params: tuple[str, str, str]) -> str:
    """One invoke of typed parameters as vLLM's tests write them (a line each)."""
    return f'{INV}{name}">\n' + "".join(param(k, v, s) + "\n" for k, v, s in params) + f"{INV_END}\n"


def vllm_typed(name: str, *params: tuple[str, str, str]) -> str:
    return f"{FC}\n{vllm_invoke(name, *params)}{FE}"


def props(**types: object) -> dict:
    return {"type": "object", "properties": {k: (t if isinstance(t, dict) else {"type": t}) for k, t in types.items()}}


def sglang_invoke(city: str) -> str:
    return invoke("get_weather", param("city", city))


def strict_block(*invokes: str, preamble: str = "") -> str:
    """SGLang's ``_block`` in the V4 flavour."""
    return f"{preamble}{TC}\n" + "\n".join(invokes) + f"\n{TE}"


PREAMBLE = "Let me look up the weather in Beijing for you."
WEATHER = {"get_weather": props(location="string")}
TIMER = {"set_timer": props(wait={"anyOf": [{"type": "object"}, {"type": "null"}]},
                            patches={"oneOf": [{"type": "array", "items": {"type": "object"}}, {"type": "null"}]})}
STRICT = {"set_flag": props(enabled="boolean"), "lookup_fixture": props(key="string"),
          "search": props(query="string", topn="integer", ratio="number"), "submit": props()}
COERCE = {"coerce": props(union_value=["null", "string"], bad_int="integer", nullable_string=["null", "string"],
                          null_string="string", whole_number="number")}

CASES = [
    # vLLM DeepSeekV32 ----------------------------------------------------------------------------------
    ("vllm-v32", "no tool call", "just some text", ["just some text"], {}),
    ("vllm-v32", "single tool, no params", f'{FC}\n{INV}get_time">\n{INV_END}\n{FE}', [Call("get_time", {})], CALLS),
    ("vllm-v32", "single tool with params", vllm_call("get_weather", {"location": "SF", "date": "2024-01-16"}),
     [Call("get_weather", {"location": "SF", "date": "2024-01-16"})], CALLS),
    ("vllm-v32", "content before the call", "Sure, let me check! " + vllm_call("get_weather", {"location": "NYC"}),
     ["Sure, let me check! ", Call("get_weather", {"location": "NYC"})], CALLS),
    ("vllm-v32", "multiple tools", f"{FC}\n" + vllm_invoke("get_weather", ("location", "SF", "true"))
     + vllm_invoke("get_weather", ("location", "NYC", "true")) + FE,
     [Call("get_weather", {"location": "SF"}), Call("get_weather", {"location": "NYC"})], CALLS),
    ("vllm-v32", "type conversion", vllm_typed("toggle", ("enabled", "true", "false"), ("count", "42", "false")),
     [Call("toggle", {"enabled": True, "count": 42})], {**CALLS, "tools": {"toggle": props(enabled="boolean",
                                                                                           count="integer")}}),
    ("vllm-v32", "string=true coerced by the schema", vllm_typed("score", ("value", "42", "true")),
     [Call("score", {"value": 42})], {**CALLS, "tools": {"score": props(value="integer")}}),
    ("vllm-v32", "string=false converted by the schema", vllm_typed("score", ("value", "42", "false")),
     [Call("score", {"value": 42})], {**CALLS, "tools": {"score": props(value="integer")}}),
    ("vllm-v32", "composed schema: object and array", vllm_typed(
        "set_timer", ("wait", '{"type":"for","minutes":2880}', "false"),
        ("patches", '[{"op":"replace","path":"/schedule","value":"quiet"}]', "false")),
     [Call("set_timer", {"wait": {"type": "for", "minutes": 2880},
                         "patches": [{"op": "replace", "path": "/schedule", "value": "quiet"}]})],
     {**CALLS, "tools": TIMER}),
    ("vllm-v32", "string=true coerced by a composed schema",
     vllm_typed("set_timer", ("wait", '{"type":"for","minutes":2880}', "true")),
     [Call("set_timer", {"wait": {"type": "for", "minutes": 2880}})], {**CALLS, "tools": TIMER}),
    ("vllm-v32", "arguments wrapper repaired", vllm_typed("get_weather", ("arguments", '{"location":"Beijing"}', "false")),
     [Call("get_weather", {"location": "Beijing"})], {**CALLS, "tools": WEATHER, "notes": ["repaired"]}),
    ("vllm-v32", "input wrapper repaired", vllm_typed("get_weather", ("input", '{"location":"Beijing"}', "true")),
     [Call("get_weather", {"location": "Beijing"})], {**CALLS, "tools": WEATHER, "notes": ["repaired"]}),
    ("vllm-v32", "object and array params", vllm_typed("update", ("tags", '["a", "b"]', "false"),
                                                       ("meta", '{"k": 1}', "false")),
     [Call("update", {"tags": ["a", "b"], "meta": {"k": 1}})], {**CALLS, "tools": {"update": props(tags="array",
                                                                                                   meta="object")}}),
    # vLLM asserts ``whole`` is an int; toolwire sends 5.0, the same JSON number for a "number" parameter
    ("vllm-v32", "number params", vllm_typed("measure", ("ratio", "3.14", "false"), ("whole", "5.0", "false")),
     [Call("measure", {"ratio": 3.14, "whole": 5})], {**CALLS, "tools": {"measure": props(ratio="number",
                                                                                         whole="number")}}),
    ("vllm-v32", "multi-typed schema", vllm_typed("set_val", ("count", "42", "false"), ("label", "hello", "false")),
     [Call("set_val", {"count": 42, "label": "hello"})],
     {**CALLS, "tools": {"set_val": props(count=["integer", "null"], label=["string", "null"])}}),
    ("vllm-v32", "multi-typed null", vllm_typed("clear", ("value", "null", "false")), [Call("clear", {"value": None})],
     {**CALLS, "tools": {"clear": props(value=["integer", "null"])}}),
    ("vllm-v32", "null kept as text for a string schema", vllm_typed("echo", ("text", "null", "false")),
     [Call("echo", {"text": "null"})], {**CALLS, "tools": {"echo": props(text="string")}}),
    ("vllm-v32", "no schema: string=false is JSON", vllm_typed("unknown_fn", ("count", "42", "false"),
                                                               ("flag", "true", "false")),
     [Call("unknown_fn", {"count": 42, "flag": True})], CALLS),
    ("vllm-v32", "streaming: plain content", "Hello, world!", ["Hello, world!"], {}),
    ("vllm-v32", "streaming: tool name", vllm_call("my_func", {"x": "1"}), [Call("my_func", {"x": "1"})], CALLS),
    ("vllm-v32", "streaming: content before", "Thinking... " + vllm_call("fn", {"a": "b"}),
     ["Thinking... ", Call("fn", {"a": "b"})], CALLS),
    ("vllm-v32", "streaming: type conversion", vllm_typed("add", ("x", "3", "false"), ("y", "4", "false")),
     [Call("add", {"x": 3, "y": 4})], {**CALLS, "tools": {"add": props(x="integer", y="integer")}}),
    ("vllm-v32", "streaming: conversion fallbacks", vllm_typed(
        "coerce", ("union_value", "hello", "false"), ("bad_int", "abc", "false"), ("nullable_string", "null", "false"),
        ("null_string", "null", "false"), ("whole_number", "3.0", "false")),
     [Call("coerce", {"union_value": "hello", "bad_int": "abc", "nullable_string": None, "null_string": "null",
                      "whole_number": 3})], {**CALLS, "tools": COERCE}),
    ("vllm-v32", "streaming: multiple tools", f"{FC}\n" + vllm_invoke("func_a", ("p", "v1", "true"))
     + vllm_invoke("func_b", ("q", "v2", "true")) + FE, [Call("func_a", {"p": "v1"}), Call("func_b", {"q": "v2"})],
     CALLS),
    ("vllm-v32", "streaming: no marker leak after prose", "Hello!" + vllm_call("fn", {"a": "b"}),
     ["Hello!", Call("fn", {"a": "b"})], CALLS),
    ("vllm-v32", "streaming: false partial marker", "<｜DSM some regular text", ["<｜DSM some regular text"], {}),
    ("vllm-v32", "delimiters as text, with a prefix", "Here is the weather: " + vllm_call("get_weather",
                                                                                         {"location": "Tokyo"}),
     ["Here is the weather: ", Call("get_weather", {"location": "Tokyo"})], CALLS),
    ("vllm-v32", "special tokens kept: search", vllm_call("search", {"query": "vllm documentation"}),
     [Call("search", {"query": "vllm documentation"})], CALLS),
    # vLLM DeepSeekV4 -----------------------------------------------------------------------------------
    ("vllm-v4", "extract tool calls", "Let me check. " + vllm_call("get_weather", {"location": "Beijing",
                                                                                  "unit": "celsius"}, (TC, TE)),
     ["Let me check. ", Call("get_weather", {"location": "Beijing", "unit": "celsius"})], CALLS),
    # vLLM's V4 parser leaves a function_calls section as text; toolwire's V4 format reads V3.2's section too
    ("vllm-v4", "function_calls section", vllm_call("search", {"query": "vllm"}), [Call("search", {"query": "vllm"})],
     {**CALLS, "differs": "both DSML formats read both sections"}),
    ("vllm-v4", "streaming complete invokes", vllm_call("search", {"query": "deepseek v4"}, (TC, TE)),
     [Call("search", {"query": "deepseek v4"})], CALLS),
    # SGLang streaming preamble (V3.2 and V4 detectors) -------------------------------------------------
    ("sglang", "prose and wrapped opener", PREAMBLE + FC + sglang_invoke("Beijing") + FE,
     [PREAMBLE, Call("get_weather", {"city": "Beijing"})], CALLS),
    ("sglang", "prose and wrapped V4 opener", PREAMBLE + TC + sglang_invoke("Beijing") + TE,
     [PREAMBLE, Call("get_weather", {"city": "Beijing"})], CALLS),
    ("sglang", "prose and bare invoke", PREAMBLE + sglang_invoke("Beijing"),
     [PREAMBLE, Call("get_weather", {"city": "Beijing"})], CALLS),
    ("sglang", "literal < without a call", "The check 3 < 5 held, done.", ["The check 3 < 5 held, done."], {}),
    ("sglang", "literal < before a call", "Since 3 < 5 holds, calling the tool. " + TC + sglang_invoke("Beijing") + TE,
     ["Since 3 < 5 holds, calling the tool. ", Call("get_weather", {"city": "Beijing"})], CALLS),
    ("sglang", "two invokes after prose", PREAMBLE + TC + sglang_invoke("Beijing") + sglang_invoke("Tokyo") + TE,
     [PREAMBLE, Call("get_weather", {"city": "Beijing"}), Call("get_weather", {"city": "Tokyo"})], CALLS),
    # SGLang strict DSML (V4 flavour) ----------------------------------------------------------------------
    ("sglang-strict", "parameter without marker or string attribute: text",
     strict_block(invoke("lookup_fixture", f'\n<parameter name="key">alpha</{D}parameter>\n'), preamble="Sure.\n\n"),
     ["Sure.\n\n" + strict_block(invoke("lookup_fixture", f'\n<parameter name="key">alpha</{D}parameter>\n'))],
     {"tools": STRICT, "notes": ["invalid_json"]}),
    # strict SGLang drops a parameter without ``string``; toolwire types it by the schema
    ("sglang-strict", "parameter without the string attribute",
     strict_block(invoke("lookup_fixture", f'{PAR}key">alpha{PAR_END}')), [Call("lookup_fixture", {"key": "alpha"})],
     {**CALLS, "tools": STRICT, "differs": "a missing string attribute is typed by the schema"}),
    ("sglang-strict", "parameter without the DSML marker: text",
     strict_block(invoke("lookup_fixture", f'<parameter name="key" string="true">alpha</{D}parameter>')),
     [strict_block(invoke("lookup_fixture", f'<parameter name="key" string="true">alpha</{D}parameter>'))],
     {"tools": STRICT, "notes": ["invalid_json"]}),
    # strict SGLang drops an unterminated parameter; toolwire ends it at the invoke's end, noted as a repair
    ("sglang-strict", "unterminated parameter tag",
     strict_block(invoke("lookup_fixture", f'{PAR}key" string="true">alpha')), [Call("lookup_fixture", {"key": "alpha"})],
     {**CALLS, "tools": STRICT, "notes": ["repaired"], "differs": "the invoke's end closes an unclosed parameter"}),
    ("sglang-strict", "non-object JSON body: text", strict_block(invoke("lookup_fixture", '["alpha"]')),
     [strict_block(invoke("lookup_fixture", '["alpha"]'))], {"tools": STRICT, "notes": ["invalid_json"]}),
    ("sglang-strict", "prose in the body: text", strict_block(invoke("lookup_fixture", "\nenable it please\n")),
     [strict_block(invoke("lookup_fixture", "\nenable it please\n"))], {"tools": STRICT, "notes": ["invalid_json"]}),
    ("sglang-strict", "shapes: two parameters", strict_block(invoke("search", "\n" + param("query", "a b") + "\n"
                                                                    + param("topn", "3", "false") + "\n"),
                                                             preamble="Let me look.\n\n"),
     ["Let me look.\n\n", Call("search", {"query": "a b", "topn": 3})], {**CALLS, "tools": STRICT}),
    ("sglang-strict", "shapes: numbers", strict_block(invoke("search", param("topn", "10", "false")
                                                             + param("ratio", "3.5", "false"))),
     [Call("search", {"topn": 10, "ratio": 3.5})], {**CALLS, "tools": STRICT}),
    ("sglang-strict", "shapes: boolean", strict_block(invoke("set_flag", param("enabled", "false", "false"))),
     [Call("set_flag", {"enabled": False})], {**CALLS, "tools": STRICT}),
    ("sglang-strict", "shapes: quotes, tags, newline and an object",
     strict_block(invoke("search", param("query", 'He said "hi" <b>&</b>\nnext')
                         + param("topn", '{"name": "John", "age": 30}', "false"))),
     [Call("search", {"query": 'He said "hi" <b>&</b>\nnext', "topn": {"name": "John", "age": 30}})],
     {**CALLS, "tools": STRICT}),
    ("sglang-strict", "shapes: empty string", strict_block(invoke("lookup_fixture", param("key", ""))),
     [Call("lookup_fixture", {"key": ""})], {**CALLS, "tools": STRICT}),
    ("sglang-strict", "zero arguments: empty body", strict_block(invoke("submit", "")), [Call("submit", {})],
     {**CALLS, "tools": STRICT}),
    ("sglang-strict", "zero arguments: blank body", strict_block(invoke("submit", "\n   \n")), [Call("submit", {})],
     {**CALLS, "tools": STRICT}),
    ("sglang-strict", "zero arguments: self-closing", strict_block(f'{INV}submit"/>'), [Call("submit", {})],
     {**CALLS, "tools": STRICT}),
    ("sglang-strict", "JSON body", strict_block(invoke("lookup_fixture", '\n{"key": "alpha"}\n')),
     [Call("lookup_fixture", '{"key": "alpha"}')], {**CALLS, "tools": STRICT}),
    ("sglang-strict", "two blocks", strict_block(invoke("lookup_fixture", param("key", "a"))) + "\n"
     + strict_block(invoke("lookup_fixture", param("key", "b"))),
     [Call("lookup_fixture", {"key": "a"}), Call("lookup_fixture", {"key": "b"})], {**CALLS, "tools": STRICT}),
]
