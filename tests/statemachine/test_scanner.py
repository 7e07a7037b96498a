"""Table-driven scanner fixtures: the three text formats, parsing.md section 7 and the 8.3 seed cases.

Every fixture goes through ``harness.tr``: fed whole, per character, at every two-chunk split, at
fixed sizes and in seeded random splits; all runs must agree and equal the expected result, which
is what the SPEC (parsing.md) asks for, not necessarily what the implementation does.

Whitespace note: the implementation holds trailing whitespace while a call could follow and drops
it when a call does follow (so ``"Hi <tool_call>…"`` shows ``"Hi"``). Fixtures that are not about
whitespace therefore put no whitespace directly before a call; the whitespace rules themselves are
tested separately against the spec's own examples (4.8, case 10, seed cases 1 and 2).
"""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from harness import (
    CFG,
    Call,
    Open,
    Reasoning,
    ToolCallEnded,
    calls_of,
    chunkings,
    check_invariants,
    normalize,
    run_chunks,
    summarize,
    tr,
    visible,
)
from statemachine import (
    ChoiceStream,
    ModelOutputError,
    ParserConfig,
    Policy,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallNote,
    ToolCallStarted,
    ToolSpec,
)

SF = '{"city": "SF"}'
WX = f'{{"name": "get_weather", "arguments": {SF}}}'
TM = '{"name": "get_time", "arguments": {}}'


def tc(body: str) -> str:
    return f"<tool_call>{body}</tool_call>"


# (id, text, expected, finish, extra kwargs for tr)
FORMAT_A = [
    ("a-basic", tc(WX), [Call("get_weather", SF)], "tool_calls", {}),
    ("a-whitespace-newlines", "<tool_call>\n  " + WX + "\n</tool_call>", [Call("get_weather", SF)], "tool_calls", {}),
    ("a-args-before-name", tc('{"arguments": {"city": "SF"}, "name": "get_weather"}'),
     [Call("get_weather", SF)], "tool_calls", {}),
    ("a-stringified-args", tc(r'{"name": "get_weather", "arguments": "{\"city\": \"SF\"}"}'),
     [Call("get_weather", {"city": "SF"})], "tool_calls", {}),
    ("a-parameters-alias", tc('{"name": "get_weather", "parameters": {"city": "SF"}}'),
     [Call("get_weather", SF)], "tool_calls", {}),
    ("a-args-alias", tc('{"name": "get_weather", "args": {"city": "SF"}}'), [Call("get_weather", SF)], "tool_calls", {}),
    ("a-input-alias", tc('{"name": "get_weather", "input": {"city": "SF"}}'), [Call("get_weather", SF)], "tool_calls", {}),
    ("a-params-alias", tc('{"name": "get_weather", "params": {"city": "SF"}}'), [Call("get_weather", SF)], "tool_calls", {}),
    ("a-model-id-ignored", tc('{"id": "call_from_model", "name": "get_weather", "arguments": {"city": "SF"}}'),
     [Call("get_weather", SF)], "tool_calls", {}),
    ("a-openai-wrapper",
     tc(r'{"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"SF\"}"}}'),
     [Call("get_weather", {"city": "SF"})], "tool_calls", {}),
    ("a-function-wrapper", tc('{"function": {"name": "get_weather", "arguments": {"city": "SF"}}}'),
     [Call("get_weather", SF)], "tool_calls", {}),
    ("a-tool-call-wrapper", tc('{"tool_call": {"name": "get_weather", "arguments": {"city": "SF"}}}'),
     [Call("get_weather", SF)], "tool_calls", {}),
    ("a-tool-tool-input", tc('{"tool": "get_weather", "tool_input": {"city": "SF"}}'),
     [Call("get_weather", SF)], "tool_calls", {}),
    ("a-array", tc(f"[{WX}, {TM}]"), [Call("get_weather", SF), Call("get_time", "{}")], "tool_calls", {}),
    ("a-concatenated", tc(WX + TM), [Call("get_weather", SF), Call("get_time", "{}")], "tool_calls", {}),
    ("a-semicolon", tc(WX + "; " + TM), [Call("get_weather", SF), Call("get_time", "{}")], "tool_calls", {}),
    ("a-nested-name-in-args", tc('{"arguments": {"name": "Bob", "city": "x"}, "name": "get_weather"}'),
     [Call("get_weather", '{"name": "Bob", "city": "x"}')], "tool_calls", {}),
    ("a-nested-name-after-name", tc('{"name": "get_weather", "arguments": {"name": "get_time", "city": "x"}}'),
     [Call("get_weather", '{"name": "get_time", "city": "x"}')], "tool_calls", {}),
    ("a-namespace-decorations", tc('{"name": "functions.get_time:0", "arguments": {}}'),
     [Call("get_time", "{}")], "tool_calls", {}),
    ("a-qwen3-coder-nesting",
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nSF\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
     "</function>\n</tool_call>",
     [Call("get_weather", {"city": "SF", "days": 3})], "tool_calls", {}),
]

FORMAT_B = [
    ("b-name-args", '<use_tool><name>get_weather</name><args>{"city": "SF", "days": 3}</args></use_tool>',
     [Call("get_weather", '{"city": "SF", "days": 3}')], "tool_calls", {}),
    ("b-attr-double", '<use_tool name="get_weather"><args>{"city": "SF"}</args></use_tool>',
     [Call("get_weather", SF)], "tool_calls", {}),
    ("b-attr-single", "<use_tool name='get_weather'><args>{\"x\":1}</args></use_tool>",
     [Call("get_weather", '{"x":1}')], "tool_calls", {}),
    ("b-param-children-coerced",
     '<use_tool><name>localSearch</name><query>vitest docs</query><salientTerms>["vitest"]</salientTerms></use_tool>',
     [Call("localSearch", {"query": "vitest docs", "salientTerms": ["vitest"]})], "tool_calls", {}),
    ("b-param-children-schema-order", "<use_tool><name>get_weather</name><days>3</days><city>SF</city></use_tool>",
     [Call("get_weather", '{"city": "SF", "days": 3}')], "tool_calls", {}),
    ("b-string-typed-number-stays-string", "<use_tool><name>get_weather</name><city>3</city></use_tool>",
     [Call("get_weather", {"city": "3"})], "tool_calls", {}),
    ("b-json-body", '<use_tool>{"name": "get_weather", "city": "SF"}</use_tool>',
     [Call("get_weather", {"city": "SF"})], "tool_calls", {}),
    ("b-no-args", "<use_tool><name>get_time</name></use_tool>", [Call("get_time", "{}")], "tool_calls", {}),
    ("b-two-blocks-noise",
     'x<use_tool><name>get_weather</name><args>{"city":"a"}</args></use_tool> noise'
     '<use_tool name="get_time"><args>{}</args></use_tool> y',
     ["x", Call("get_weather", '{"city":"a"}'), " noise", Call("get_time", "{}"), " y"], "tool_calls", {}),
]

FORMAT_C = [
    ("c-json-body", '<function=get_weather>{"city": "SF", "days": 3}</function>',
     [Call("get_weather", '{"city": "SF", "days": 3}')], "tool_calls", {}),
    ("c-params", "<function=get_weather><parameter=city>\nSF\n</parameter><parameter=days>\n3\n</parameter></function>",
     [Call("get_weather", {"city": "SF", "days": 3})], "tool_calls", {}),
    ("c-params-no-newlines", "<function=get_weather><parameter=city>SF</parameter><parameter=days>3</parameter></function>",
     [Call("get_weather", {"city": "SF", "days": 3})], "tool_calls", {}),
    ("c-string-schema-keeps-string", "<function=get_weather><parameter=city>\n3\n</parameter></function>",
     [Call("get_weather", {"city": "3"})], "tool_calls", {}),
    ("c-one-newline-trimmed", "<function=get_weather><parameter=city>\n\nSF\n\n</parameter></function>",
     [Call("get_weather", {"city": "\nSF\n"})], "tool_calls", {}),
    ("c-value-with-lt", "<function=get_weather><parameter=city>\na < b </b>\n</parameter></function>",
     [Call("get_weather", {"city": "a < b </b>"})], "tool_calls", {}),
    ("c-unclosed-param", "<function=get_weather><parameter=city>SF<parameter=days>3</function>",
     [Call("get_weather", {"city": "SF", "days": 3})], "tool_calls", {}),
    ("c-empty", "<function=get_time></function>", [Call("get_time", "{}")], "tool_calls", {}),
    ("c-two-calls-one-chunk",
     "<function=get_weather><parameter=city>SF</parameter></function><function=localSearch>"
     "<parameter=query>q</parameter></function>",
     [Call("get_weather", {"city": "SF"}), Call("localSearch", {"query": "q"})], "tool_calls", {}),
]


@pytest.mark.parametrize("case", FORMAT_A + FORMAT_B + FORMAT_C, ids=lambda c: c[0])
def test_formats(case):
    _, text, expected, finish, kw = case
    tr(CFG, text, expected, finish=finish, **kw)


QWEN_CODER = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nSan \"Fran\" \\ cisco\n\n</parameter>\n"
              "<parameter=days>\n3\n</parameter>\n<parameter=note>x\n</parameter>\n</function>\n</tool_call>")


def test_c_parameters_exact_arguments_text():
    """2.1 C: arrival order, ``", "`` between parameters, strings escaped, schema-typed values coerced."""
    tr(CFG, QWEN_CODER, [Call("get_weather", '{"city": "San \\"Fran\\" \\\\ cisco\\n", "days": 3, "note": "x"}')],
       finish="tool_calls")


def test_c_parameters_stream_as_they_arrive():
    """2.1 C "Streaming the parameter body": ``{`` at the first ``<parameter=``, the key at its ``>``,
    string text as it arrives (one trailing newline held), a non-string value only once it closes; a
    parameter closes once the tag after its ``</parameter>`` (with its name) shows the ``</parameter>`` was
    the closer."""
    s = ChoiceStream(CFG)
    sent: list[tuple[str, str]] = []  # (the text fed so far, the fragments that text released)
    fed = ""
    for ch in QWEN_CODER:
        fed += ch
        fragments = "".join(e.fragment for e in s.feed(ch) if isinstance(e, ToolCallArgumentsDelta))
        if fragments:
            sent.append((fed, fragments))
    s.finish()
    released = {fragment: fed for fed, fragment in sent}
    assert released["{"].endswith("<parameter=")
    assert released['"city": "'].endswith("<parameter=city>")
    assert released["S"].endswith("\nS")  # the value's first newline is trimmed, its text streams at once
    assert released["\\n"].endswith("cisco\n\n")  # a newline goes out once another character follows it
    # a value closes once the next tag's name shows a new parameter (a key already sent would be value text)
    assert released['", "days": '].endswith("</parameter>\n<parameter=days>")
    assert released['3, "note": "'].endswith("3\n</parameter>\n<parameter=note>")  # an integer is held until then
    assert released['"}'].endswith("</function>")  # the last value's quote and the object's end together
    assert "".join(f for _, f in sent) == '{"city": "San \\"Fran\\" \\\\ cisco\\n", "days": 3, "note": "x"}'


@pytest.mark.parametrize("upstream,expected,finish,notes", [
    ("stop", [Call("get_weather", {"city": "SF", "days": 3})], "tool_calls", ["recovered_unclosed"]),
    ("length", [Open("get_weather", '{"city": "SF", "days": 3')], "length", ["incomplete"]),
])
def test_c_parameters_unclosed_function(upstream, expected, finish, notes):
    """4.11: parameters complete but no ``</function>``: accepted after ``stop``, incomplete after ``length``."""
    text = "<function=get_weather><parameter=city>SF</parameter><parameter=days>3</parameter>"
    tr(CFG, text, expected, finish=finish, upstream=upstream, notes=notes)


def test_c_parameter_values_that_are_not_json_stay_strings():
    """2.1 C: coercion falls back to the string (a Python set literal is not JSON)."""
    text = "<function=get_weather><parameter=days>{1, 2}</parameter><parameter=extra>[1, 2]</parameter></function>"
    tr(CFG, text, [Call("get_weather", '{"days": "{1, 2}", "extra": "[1, 2]"}')], finish="tool_calls")


def test_c_parameter_name_without_end_is_bounded():
    """10.1: a ``<parameter=`` whose ``>`` never comes is given up after a bounded look-ahead, the same
    under every chunking (nothing is re-scanned without limit)."""
    text = "<function=get_weather><parameter=" + "x" * 200
    tr(CFG, text, [Call("get_weather", "{", valid=False), "x" * 200], finish="stop", two_split_limit=0)


def test_use_tool_attribute_wins_over_json_name():
    """8.3: name attribute and JSON ``name`` both present → the attribute wins."""
    text = '<use_tool name="get_weather">{"name": "get_time", "city": "SF"}</use_tool>'
    for label, chunks in chunkings(text, random_splits=5):
        events = run_chunks(CFG, chunks)
        check_invariants(events, label=label)
        assert [c.name for c in calls_of(events)] == ["get_weather"], label
        assert json.loads(calls_of(events)[0].arguments).get("city") == "SF", label


def test_use_tool_two_blocks_refeed_adds_nothing():
    """8.3: two blocks in order; feeding nothing more after them adds no event."""
    text = ('a<use_tool><name>get_weather</name><args>{"city":"a"}</args></use_tool> -- '
            '<use_tool name="get_time"><args>{}</args></use_tool>')
    s = ChoiceStream(CFG)
    first = s.feed(text)
    assert [c.name for c in calls_of(first)] == ["get_weather", "get_time"]
    assert s.feed("") == []
    tail = s.finish()
    assert calls_of(tail) == [] and tail[-1].finish_reason == "tool_calls"


# --- parsing.md section 7 ----------------------------------------------------------------

SECTION7 = [
    # 1. sentinel split at every byte: the harness splits everywhere; text on both sides survives
    ("c01-split-everywhere", "ab" + tc(TM) + "cd", ["ab", Call("get_time", "{}"), "cd"], "tool_calls", {}),
    # 2. '<' in ordinary text, and a false '<' before a real sentinel in the same chunk
    ("c02-lt-prose", "if a < b, x<y, <div>, <3 and a lone <", ["if a < b, x<y, <div>, <3 and a lone <"], "stop", {}),
    ("c02-false-lt-then-call", "x<y then:" + tc(TM), ["x<y then:", Call("get_time", "{}")], "tool_calls", {}),
    # 3. sentinels sharing a prefix
    ("c03-shared-prefix", "use <tools> and <tool> or <tool_call_x> and <use_toolbox> <function_x>",
     ["use <tools> and <tool> or <tool_call_x> and <use_toolbox> <function_x>"], "stop", {"leak_ok": True}),
    # 4. stream ends with a partial sentinel
    ("c04-partial-at-eof", "… use <tool", ["… use <tool"], "stop", {}),
    ("c04-partial-use-tool-at-eof", "then <use_t", ["then <use_t"], "stop", {}),
    ("c04-partial-closer-prefix-at-eof", "a </tool_ca", ["a </tool_ca"], "stop", {}),
    # 5. trailing whitespace released at finish
    ("c05-trailing-ws", "Hello  \n", ["Hello  \n"], "stop", {}),
    # 8. prose and a complete call in one chunk
    ("c08-prose-then-call", "Hi!" + tc(WX), ["Hi!", Call("get_weather", SF)], "tool_calls", {}),
    # 9. text after the call
    ("c09-text-after", tc(WX) + " Anything else?", [Call("get_weather", SF), " Anything else?"], "tool_calls", {}),
    # 10. whitespace-only text between and around calls dropped
    ("c10-ws-only-dropped", "\n\n" + tc(TM) + "\n \n" + tc(TM) + "\n",
     [Call("get_time", "{}"), Call("get_time", "{}")], "tool_calls", {}),
    # 11. two calls back to back
    ("c11-back-to-back", tc(WX) + tc(TM), [Call("get_weather", SF), Call("get_time", "{}")], "tool_calls", {}),
    # 12. parallel calls in one JSON array, brackets not emitted, string-aware split
    ("c12-array-string-aware", tc('[{"name": "get_weather", "arguments": {"city": "a],[{b"}}, ' + TM + "]"),
     [Call("get_weather", '{"city": "a],[{b"}'), Call("get_time", "{}")], "tool_calls", {}),
    # 13. calls joined by ';' or concatenated
    ("c13-concat", tc(WX + TM + ";" + WX),
     [Call("get_weather", SF), Call("get_time", "{}"), Call("get_weather", SF)], "tool_calls", {}),
    # 14. new opener before the previous call closed, previous body complete
    ("c14-implicit-close", "<tool_call>" + WX + tc(TM), [Call("get_weather", SF), Call("get_time", "{}")],
     "tool_calls", {}),
    # 15. wrong or mismatched closers: call accepted, orphan closers dropped
    ("c15-closer-tool", "<tool_call>" + WX + "</tool>ok", [Call("get_weather", SF), "ok"], "tool_calls", {}),
    ("c15-closer-think", "<tool_call>" + WX + "</think>ok", [Call("get_weather", SF), "ok"], "tool_calls", {}),
    ("c15-closer-function", "<tool_call>" + WX + "</function>ok", [Call("get_weather", SF), "ok"], "tool_calls", {}),
    ("c15-closer-underscore", "<tool_call>" + WX + "</_call>ok", [Call("get_weather", SF), "ok"], "tool_calls", {}),
    ("c15-doubled-closer", tc(WX) + "</tool_call>ok", [Call("get_weather", SF), "ok"], "tool_calls", {}),
    # an array that holds no call, then a closer (its own or another's): the block was text (it crashed once)
    ("c15-empty-array", "<tool_call>[]</tool_call>ok", ["<tool_call>[]</tool_call>ok"], "stop",
     {"leak_ok": True, "notes": []}),
    ("c15-open-array-closed", "<tool_call>[</function>ok", ["<tool_call>[</function>ok"], "stop",
     {"leak_ok": True, "notes": []}),
    # 16. no closing tag at EOF, stop + complete body → accepted
    ("c16-unclosed-complete", "<tool_call>" + WX, [Call("get_weather", SF)], "tool_calls",
     {"notes": ["recovered_unclosed"]}),
    # 17. closer inside a string
    ("c17-closer-in-string", tc('{"name": "get_weather", "arguments": {"city": "print(\'</tool_call>\')"}}'),
     [Call("get_weather", '{"city": "print(\'</tool_call>\')"}')], "tool_calls", {}),
    ("c17-several-false-closers",
     tc('{"name": "get_weather", "arguments": {"city": "</tool_call></tool_call>\\"</tool_call>"}}'),
     [Call("get_weather", '{"city": "</tool_call></tool_call>\\"</tool_call>"}')], "tool_calls", {}),
    # 18. opener inside a string of an active call
    ("c18-opener-in-string", tc('{"name": "get_weather", "arguments": {"city": "<tool_call>{\\"name\\": 1}"}}'),
     [Call("get_weather", '{"city": "<tool_call>{\\"name\\": 1}"}')], "tool_calls", {}),
    # 19. braces and brackets inside strings
    ("c19-braces-in-strings", tc('{"name": "get_weather", "arguments": {"q": "a}b{", "note": "x]y"}}'),
     [Call("get_weather", '{"q": "a}b{", "note": "x]y"}')], "tool_calls", {}),
    # 20. escaped quotes and backslashes, split mid-escape by the harness
    ("c20-escapes",
     tc(r'{"name": "get_weather", "arguments": {"a": "say \"hi\"", "b": "C:\\dir\\", "c": "\\\""}}'),
     [Call("get_weather", r'{"a": "say \"hi\"", "b": "C:\\dir\\", "c": "\\\""}')], "tool_calls", {}),
    # 21. nested objects and arrays
    ("c21-nested", tc('{"name": "get_weather", "arguments": {"a": {"b": [1, {"c": [2, 3]}], "d": []}, "e": [[]]}}'),
     [Call("get_weather", '{"a": {"b": [1, {"c": [2, 3]}], "d": []}, "e": [[]]}')], "tool_calls", {}),
    # 23. raw control characters escaped on the fly
    ("c23-control-chars", tc('{"name": "get_weather", "arguments": {"city": "l1\nl2\tt\x01"}}'),
     [Call("get_weather", '{"city": "l1\\nl2\\tt\\u0001"}')], "tool_calls", {}),
    # 26. literals at chunk boundaries (the harness splits inside them)
    ("c26-literals", tc('{"name": "get_weather", "arguments": {"n": 123, "t": true, "f": false, "z": null, "x": -1.5e3}}'),
     [Call("get_weather", '{"n": 123, "t": true, "f": false, "z": null, "x": -1.5e3}')], "tool_calls", {}),
    # 27. call-like text inside <think>…</think>: stays reasoning
    ("c27-draft-in-think", "<think>I could call " + tc(TM) + " maybe</think>Answer.",
     [Reasoning("I could call " + tc(TM) + " maybe"), "Answer."], "stop", {}),
    ("c27-promoted", "<think>calling now:" + tc(TM), [Reasoning("calling now:"), Call("get_time", "{}")],
     "tool_calls", {}),
    ("c27-after-think", "<think>plan</think>" + tc(TM), [Reasoning("plan"), Call("get_time", "{}")], "tool_calls", {}),
    # 29. fences: a fence-only call message is a call; a fenced example with prose is content
    ("c29-fence-only-call", '```json\n{"name": "get_weather", "arguments": {"city": "SF"}}\n```',
     [Call("get_weather", SF)], "tool_calls", {}),
    ("c29-fenced-example-with-prose", "Example:\n```\n" + tc(WX) + "\n```\nThat is all.",
     ["Example:\n```\n" + tc(WX) + "\n```\nThat is all."], "stop", {"leak_ok": True}),
    ("c29-tilde-fence", "Example:\n~~~ xml\n" + tc(WX) + "\n~~~\nThat is all.",
     ["Example:\n~~~ xml\n" + tc(WX) + "\n~~~\nThat is all."], "stop", {"leak_ok": True}),
    ("c29-call-after-the-fence-closes", "Example:\n```\n" + tc(WX) + "\n  ```\nNow:" + tc(TM),
     ["Example:\n```\n" + tc(WX) + "\n  ```\nNow:", Call("get_time", "{}")], "tool_calls", {"leak_ok": True}),
    ("c29-fence-after-a-call", tc(TM) + "Example:\n```\n" + tc(WX) + "\n```",
     [Call("get_time", "{}"), "Example:\n```\n" + tc(WX) + "\n```"], "tool_calls", {"leak_ok": True}),
    ("c29-short-closer-does-not-close", "x\n````\n```\n" + tc(WX) + "\n````\ny",
     ["x\n````\n```\n" + tc(WX) + "\n````\ny"], "stop", {"leak_ok": True}),
    ("c29-closer-with-text-does-not-close", "x\n```\n``` js\n" + tc(WX) + "\n```\ny",
     ["x\n```\n``` js\n" + tc(WX) + "\n```\ny"], "stop", {"leak_ok": True}),
    ("c29-indented-four-spaces-is-no-fence", "x\n    ```\n" + tc(TM), ["x\n    ```\n", Call("get_time", "{}")],
     "tool_calls", {}),
    ("c29-backtick-in-info-is-no-fence", "x\n```a`b\n" + tc(TM), ["x\n```a`b\n", Call("get_time", "{}")],
     "tool_calls", {}),
    ("c29-inline-backticks-are-no-fence", "x ```\n" + tc(TM), ["x ```\n", Call("get_time", "{}")], "tool_calls", {}),
    ("c29-fence-wrapping-the-whole-message-call", "```xml\n" + tc(WX) + "\n```", [Call("get_weather", SF)],
     "tool_calls", {}),
    ("c29-fence-after-released-block-text", tc('{"name": "nope", "arguments": {}}\n```\n') + tc(TM),
     [tc('{"name": "nope", "arguments": {}}\n```\n') + tc(TM)], "stop", {"leak_ok": True}),
    ("c29-fence-unknown-name", '```json\n{"name": "nope", "arguments": {}}\n```',
     ['```json\n{"name": "nope", "arguments": {}}\n```'], "stop", {}),
    # 30. sentinel in prose / inline code
    ("c30-inline-code", "I will use the `<tool_call>` tag.", ["I will use the `<tool_call>` tag."], "stop",
     {"leak_ok": True}),
    ("c30-prose-after-opener", "Use <tool_call> tags to call tools.", ["Use <tool_call> tags to call tools."], "stop",
     {"leak_ok": True}),
    # 31. bare JSON that is not a call
    ("c31-json-no-name", '{"answer": 42}', ['{"answer": 42}'], "stop", {}),
    ("c31-json-no-args-key", '{"name": "get_weather"}', ['{"name": "get_weather"}'], "stop", {}),
    ("c31-json-not-at-start", "Result: " + WX, ["Result: " + WX], "stop", {}),
    ("c31-json-unknown-name", '{"name": "nope", "arguments": {}}', ['{"name": "nope", "arguments": {}}'], "stop", {}),
    ("c31-array-prose", "[1, 2, 3] is a list", ["[1, 2, 3] is a list"], "stop", {}),
    ("c31-brace-prose", "{curly} braces first", ["{curly} braces first"], "stop", {}),
    ("c06-bare-json-call-at-start", '{"name": "get_weather", "parameters": {"city": "SF"}}',
     [Call("get_weather", SF)], "tool_calls", {}),
    # 32. arguments before name
    ("c32-args-before-name", tc('{"arguments": {"city": "SF", "days": 2}, "name": "get_weather"}'),
     [Call("get_weather", '{"city": "SF", "days": 2}')], "tool_calls", {}),
    # 33. nested "name"
    ("c33-nested-name", tc('{"arguments": {"user": {"name": "Bob"}}, "name": "get_weather"}'),
     [Call("get_weather", '{"user": {"name": "Bob"}}')], "tool_calls", {}),
    # 34. a name that is a prefix of a longer one (never a partial name)
    ("c34-prefix-names", tc('{"name": "get_weather_full", "arguments": {}}') + tc('{"name": "get_weather", "arguments": {}}'),
     [Call("get_weather_full", "{}"), Call("get_weather", "{}")], "tool_calls", {}),
    # 35. unknown name → content; decorations stripped first
    ("c35-unknown-content", tc('{"name": "nope", "arguments": {"a": 1}}'),
     [tc('{"name": "nope", "arguments": {"a": 1}}')], "stop", {"leak_ok": True, "notes": ["unknown_tool"]}),
    ("c35-decorated-known", tc('{"name": "functions.get_weather:3", "arguments": {"city": "SF"}}'),
     [Call("get_weather", SF)], "tool_calls", {}),
    # 36. arguments as a JSON-encoded string
    ("c36-stringified", tc(r'{"name": "get_weather", "arguments": "{\"city\": \"SF\", \"days\": 1}"}'),
     [Call("get_weather", {"city": "SF", "days": 1})], "tool_calls", {}),
    # 37. alternative keys and wrappers; arguments wins over parameters
    ("c37-arguments-then-parameters", tc('{"name": "get_weather", "arguments": {"city": "SF"}, "parameters": {"city": "LA"}}'),
     [Call("get_weather", SF)], "tool_calls", {}),
    ("c37-parameters-then-arguments", tc('{"name": "get_weather", "parameters": {"city": "LA"}, "arguments": {"city": "SF"}}'),
     [Call("get_weather", SF)], "tool_calls", {}),
    ("c37-invalid-alias-then-arguments", tc('{"name": "get_weather", "args": [1], "arguments": {"city": "SF"}}'),
     [Call("get_weather", SF)], "tool_calls", {}),
    ("c37-alias-then-stringified-arguments",
     tc(r'{"name": "get_weather", "input": {"city": "LA"}, "arguments": "{\"city\": \"SF\"}"}'),
     [Call("get_weather", SF)], "tool_calls", {}),
    ("c37-two-aliases-first-wins", tc('{"name": "get_weather", "parameters": {"city": "SF"}, "args": {"city": "LA"}}'),
     [Call("get_weather", SF)], "tool_calls", {}),
    ("c37-arguments-before-name", tc('{"parameters": {"city": "LA"}, "arguments": {"city": "SF"}, "name": "get_weather"}'),
     [Call("get_weather", SF)], "tool_calls", {}),
    ("c37-bare", '{"name": "get_weather", "parameters": {"city": "LA"}, "arguments": {"city": "SF"}}',
     [Call("get_weather", SF)], "tool_calls", {}),
    # 38. missing / empty / null arguments
    ("c38-missing", tc('{"name": "get_time"}'), [Call("get_time", "{}")], "tool_calls", {}),
    ("c38-empty", tc('{"name": "get_time", "arguments": {}}'), [Call("get_time", "{}")], "tool_calls", {}),
    ("c38-null", tc('{"name": "get_time", "arguments": null}'), [Call("get_time", "{}")], "tool_calls", {}),
    # 45. chunking invariance on a mixed fixture
    ("c45-mixed", "Let me check. " + tc(WX) + " and also:" + '<use_tool name="get_time"><args>{}</args></use_tool>'
     + " done <3",
     ["Let me check. ", Call("get_weather", SF), " and also:", Call("get_time", "{}"), " done <3"], "tool_calls", {}),
]

EXTRA_TOOLS = ParserConfig.for_tools([*CFG.tools.values(), ToolSpec("get_weather_full")])


@pytest.mark.parametrize("case", SECTION7, ids=lambda c: c[0])
def test_section7(case):
    _, text, expected, finish, kw = case
    tr(EXTRA_TOOLS, text, expected, finish=finish, **kw)


def test_c14_new_opener_after_incomplete_body():
    """7.14: an opener (outside strings) interrupts an incomplete body → the next call still starts;
    the abandoned fragment goes through the failure policy and is never a valid call."""
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "SF"' + tc(TM)
    for label, chunks in chunkings(text, random_splits=5, two_split_limit=0):
        events = run_chunks(CFG, chunks)
        check_invariants(events, label=label)
        ended = calls_of(events)
        assert [(c.name, c.valid) for c in ended if c.valid] == [("get_time", True)], (label, events)
        assert not any(c.name == "get_weather" and c.valid for c in ended), (label, events)


@pytest.mark.parametrize("text,expected", [
    # the header went out: the interrupted call ends invalid with what was sent; the finish is not tool_calls
    ('<tool_call>{"name": "get_weather", "arguments": {"city": "SF", "days": [1' + tc(TM),
     [Call("get_weather", '{"city": "SF", "days": [1', valid=False), Call("get_time", "{}")]),
    # nothing of the call was sent: its text goes back to content, the next call still starts
    ('<tool_call>{"name": "get_weather", ' + tc(TM), ['<tool_call>{"name": "get_weather", ', Call("get_time", "{}")]),
    ('<tool_call>{"arguments": {"a": 1, ' + tc(TM), ['<tool_call>{"arguments": {"a": 1, ', Call("get_time", "{}")]),
    ('<function=get_weather>{"city": "SF", "days": 3' + tc(TM),
     [Call("get_weather", '{"city": "SF", "days": 3', valid=False), Call("get_time", "{}")]),
    # an opener inside a string is part of the value; a '<' that opens nothing is not JSON (not even
    # relaxed): nothing after it is sent, the call ends invalid with what went out before it
    (tc('{"name": "get_weather", "arguments": {"city": "<tool_call>", "n": 1<2}}'),
     [Call("get_weather", '{"city": "<tool_call>", "n": 1', valid=False)]),
])
def test_c14_opener_interrupts_an_incomplete_body(text, expected):
    """7.14 / 4.9: an opener outside strings ends an incomplete body; the failure policy applies to it."""
    finish = "tool_calls" if all(c.valid for c in expected if isinstance(c, Call)) else "stop"
    tr(CFG, text, expected, finish=finish, leak_ok=isinstance(expected[0], str))


@pytest.mark.parametrize("text", ["<tool_call>" + WX, '<use_tool><name>get_weather</name><args>{"city": "SF"}</args>',
                                  "<tool_call>" + WX + "\n"])
@pytest.mark.parametrize("upstream,finish", [("length", "length"), ("content_filter", "content_filter")])
def test_c16_unclosed_block_cut_by_upstream_is_incomplete(text, upstream, finish):
    """4.11: a complete body without its closer, when the upstream cut the output, is an incomplete call."""
    tr(CFG, text, [Open("get_weather", SF)], finish=finish, upstream=upstream, notes=["incomplete"])


def test_c16_closed_call_then_length_is_kept():
    """4.11 / 5: a call whose block closed is complete even when the upstream then stops for length."""
    tr(CFG, tc(WX) + " and then", [Call("get_weather", SF), " and then"], finish="length", upstream="length")


@pytest.mark.parametrize("upstream", ["length", "max_tokens"])
def test_c16_unclosed_complete_body_with_length_is_not_executable(upstream):
    """7.16 / 4.11: upstream ``length`` → never an executable call, finish ``length``."""
    text = "<tool_call>" + WX
    for label, chunks in chunkings(text, random_splits=5, two_split_limit=0):
        events = run_chunks(CFG, chunks, upstream)
        check_invariants(events, leak_ok=True, label=label)
        assert events[-1].finish_reason == "length", label
        assert not [c for c in calls_of(events) if c.valid], f"[{label}] an executable call under length: {events!r}"


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "get_weather", "argu',
    '<tool_call>{"name": "get_weather", "arguments": {"city": "S',
    '<use_tool><name>get_weather</name>',
])
def test_c16_incomplete_body_at_eof(text):
    """7.16 / 4.11 / 4.3: an incomplete body is never executable and the finish is not ``tool_calls``.
    When the arguments value had not begun, the header must not have been sent (4.3), so the raw
    block goes back to content."""
    args_begun = "arguments\": {" in text
    expected = [Open("get_weather", '{"city": "S')] if args_begun else [text]
    tr(CFG, text, expected, finish="stop", leak_ok=not args_begun)


def test_c20_mid_escape_boundaries():
    """7.20: a chunk boundary between ``\\`` and ``"`` (and between two backslashes) keeps the escape."""
    body = r'{"name": "get_weather", "arguments": {"a": "x\\\"y\\", "b": "\"\""}}'
    text = tc(body)
    expected_args = r'{"a": "x\\\"y\\", "b": "\"\""}'
    for i, ch in enumerate(text):
        if ch == "\\":
            events = run_chunks(CFG, [text[:i + 1], text[i + 1:]])
            assert [c.arguments for c in calls_of(events)] == [expected_args], i


def test_c22_unicode_verbatim():
    """7.22 / 4.15: literal UTF-8 and model escapes pass through verbatim."""
    args = '{"city": "東京 🌧️ مرحبا 👩‍👩‍👧", "e": "\\u00e9 \\ud83d\\ude00 \\uAC00"}'
    tr(CFG, tc('{"name": "get_weather", "arguments": ' + args + "}"), [Call("get_weather", args)], finish="tool_calls")


def test_c24_invalid_escapes_repaired():
    """7.24: ``\\'``, ``\\d``, ``\\_`` repaired at the escape; stream and final text identical (harness)."""
    text = tc(r'{"name": "get_weather", "arguments": {"a": "it\'s", "b": "\d+", "c": "x\_y"}}')
    one_shot = calls_of(run_chunks(CFG, [text]))
    assert len(one_shot) == 1 and one_shot[0].valid
    tr(CFG, text, [Call("get_weather", one_shot[0].arguments)], finish="tool_calls")
    args = json.loads(one_shot[0].arguments)
    assert args["a"] == "it's"
    assert args["b"] in ("\\d+", "d+") and args["c"] in ("x\\_y", "x_y")


@pytest.mark.parametrize("value", ['"{hello world}"', '"[oops"', r'"{\"a\": 1} tail text"', '"hello"'])
def test_c36_non_object_string_not_unwrapped(value):
    """7.36 / 4.7: strings that do not hold an object are not unwrapped, and never go out as a valid
    call with non-object or non-JSON arguments."""
    text = tc('{"name": "get_weather", "arguments": ' + value + "}")
    inner = json.loads(value)
    for label, chunks in chunkings(text, random_splits=4, two_split_limit=0):
        events = run_chunks(CFG, chunks)
        check_invariants(events, leak_ok=True, label=label)
        for c in calls_of(events):
            assert c.arguments != inner, f"[{label}] the string was unwrapped: {c!r}"
            if c.valid:
                assert isinstance(json.loads(c.arguments), dict)


def test_c41_empty_deltas_change_nothing():
    """7.41: empty feeds emit nothing and do not change the state."""
    s = ChoiceStream(CFG)
    assert s.feed("") == [] and s.state.value == "text"
    s.feed("<tool_call>")
    state = s.state
    assert s.feed("") == [] and s.state == state
    s.feed(WX + "</tool_call>")
    assert s.feed("") == []
    assert s.finish()[-1].finish_reason == "tool_calls"


def test_c46_very_long_arguments_streamed_verbatim():
    """7.46: a 300 KB argument string streams verbatim and in pieces, not as one final blob."""
    content = "x" * 300_000
    args = json.dumps({"path": "f.txt", "content": content})
    text = tc('{"name": "get_weather", "arguments": ' + args + "}")
    s = ChoiceStream(CFG)
    events: list = []
    fragments_before_end = 0
    for i in range(0, len(text), 4096):
        out = s.feed(text[i:i + 4096])
        events += out
        if not any(isinstance(e, ToolCallEnded) for e in events):
            fragments_before_end += sum(isinstance(e, ToolCallArgumentsDelta) for e in out)
    events += s.finish()
    check_invariants(events)
    assert [c.arguments for c in calls_of(events)] == [args]
    assert fragments_before_end > 50


def test_c47_size_valve_non_json():
    """7.47: ``<tool_call>`` + 5 KB of non-JSON is released as content."""
    text = "<tool_call>" + ("not json at all " * 320)
    tr(CFG, text, [text], finish="stop", leak_ok=True, two_split_limit=0)


def test_c47_size_valve_pre_name_buffer():
    """7.47 / 4.4: arguments before the name that grow past the hold limit are released as content,
    identically under every chunking (including one big chunk)."""
    text = tc('{"arguments": {"a": "' + "x" * 5000 + '"}, "name": "get_time"}')
    tr(CFG, text, [text], finish="stop", leak_ok=True, two_split_limit=0)


def test_c47_size_valve_open_brace_without_name():
    """7.47: an opener plus an object that never names a function, growing past the limit, goes back to text."""
    text = '<tool_call>{"arguments": {"a": [' + ", ".join(["1"] * 3000)
    tr(CFG, text, [text], finish="stop", leak_ok=True, two_split_limit=0)


# --- seed regression cases (parsing.md 8.3) --------------------------------------------------

def test_seed1_partial_opener_then_block():
    """8.3 #1: ``"Hello <tool"`` shows ``"Hello "`` only; the next chunk completes the block and
    adds ``" world"``: one call, visible ``" world"``."""
    s = ChoiceStream(CFG)
    first = s.feed("Hello <tool")
    assert visible(first) == "Hello "
    second = s.feed('_call>{"name": "get_time", "arguments": {}}</tool_call> world') + s.finish()
    assert [c.name for c in calls_of(second)] == ["get_time"]
    assert visible(second) == " world"


def test_seed2_two_calls_with_prose():
    """8.3 #2: visible ``"A  B  C"``, two calls in order, no errors."""
    text = "A " + tc(TM) + " B " + tc(WX) + " C"
    tr(CFG, text, ["A ", Call("get_time", "{}"), " B ", Call("get_weather", SF), " C"], finish="tool_calls",
       notes=[])


def test_seed3_close_tag_split():
    """8.3 #3: ``</tool`` + ``_call> done`` → nothing on chunk 1; the call plus ``" done"`` on chunk 2."""
    s = ChoiceStream(CFG)
    assert [e for e in s.feed("<tool_call>" + WX + "</tool") if isinstance(e, (TextDelta, ToolCallNote))] == []
    out = s.feed("_call> done")
    assert visible(out) == " done"
    s2 = ChoiceStream(CFG)
    a = s2.feed("<tool_call>" + WX + "</tool")
    b = s2.feed("_call> done")
    assert [c.name for c in calls_of(a + b)] == ["get_weather"]  # complete by the end of chunk 2
    assert visible(a) == "" and visible(b) == " done"


def test_seed4_invalid_json_released_as_text():
    """8.3 #4: invalid JSON, non-strict → the whole block, tags included, re-emitted; error invalid_json."""
    text = "<tool_call>{oops}</tool_call> after"
    tr(CFG, text, [text], finish="stop", leak_ok=True, notes=["invalid_json"])


@pytest.mark.parametrize("body", [
    WX + ">",      # #5 stray '>' before the close tag
    WX + "}",      # #6 stray extra '}'
    WX + "]",      # #7 stray trailing ']'
])
def test_seed5_6_7_stray_characters_repaired(body):
    tr(CFG, tc(body), [Call("get_weather", SF)], finish="tool_calls")


def test_seed8_unknown_name_strict():
    """8.3 #8 / 4.14 table: unknown name with strict tools → nothing visible, no call, error unknown_tool."""
    strict = ParserConfig.for_tools([ToolSpec("get_weather", parameters=CFG.tools["get_weather"].parameters,
                                              strict=True)])
    text = tc('{"name": "nope", "arguments": {}}')
    s = ChoiceStream(strict)
    try:
        events = s.feed(text) + s.finish()
    except ModelOutputError as e:
        assert e.code == "unknown_tool"
        return
    assert visible(events) == "", f"unknown name under strict tools leaked as text: {events!r}"
    assert calls_of(events) == []
    assert any(isinstance(e, ToolCallNote) and e.kind == "unknown_tool" for e in events)


def test_seed9_unclosed_recovered():
    """8.3 #9: no close tag at end of stream, complete JSON → call recovered, no visible text."""
    tr(CFG, "<tool_call>" + WX, [Call("get_weather", SF)], finish="tool_calls")


def test_seed_use_tool_unclosed_not_silently_dropped():
    """8.3: ``<use_tool><name>x</name>`` without a close tag at the end → case 16, not a silent drop."""
    text = "<use_tool><name>get_time</name>"
    events = run_chunks(CFG, [text])
    kinds = [e.kind for e in events if isinstance(e, ToolCallNote)]
    assert visible(events) == text or "incomplete" in kinds
    assert events[-1].finish_reason != "tool_calls"


def test_seed_use_tool_not_json_is_failed_block():
    """8.3: ``<use_tool>{not-json}</use_tool>`` → a failed block, not a ``use_tool`` call."""
    text = "<use_tool>{not-json}</use_tool>"
    tr(CFG, text, [text], finish="stop", leak_ok=True, notes=["invalid_json"])


def test_seed_malformed_use_tool_opener():
    """8.3: malformed opener ``<use_tool</use_tool>`` → content."""
    text = "say <use_tool</use_tool> ok"
    tr(CFG, text, [text], finish="stop", leak_ok=True)


def test_seed_partial_prefix_use_t():
    """8.3: partial prefix ``before <use_t`` → nothing of ``<use_t`` sent before the end."""
    s = ChoiceStream(CFG)
    out = s.feed("before <use_t")
    assert visible(out).rstrip() == "before" and "<" not in visible(out)
    assert visible(out + s.finish()) == "before <use_t"


def test_seed_xml_in_small_chunks():
    """8.3: XML in 4- or 5-character chunks → one well-formed call, no fragments in content."""
    text = 'intro:<use_tool><name>get_weather</name><args>{"city": "SF"}</args></use_tool>'
    for size in (4, 5):
        events = run_chunks(CFG, [text[i:i + size] for i in range(0, len(text), size)])
        check_invariants(events)
        assert visible(events) == "intro:"
        assert [(c.name, c.arguments) for c in calls_of(events)] == [("get_weather", SF)]


def test_seed_utf8_arguments_slices():
    """8.3: emoji ZWJ sequences and CJK split into 3- and 4-character slices → exact round trip."""
    args = json.dumps({"city": "👨‍👩‍👧‍👦 北京市 🏳️‍🌈", "note": "한국어"}, ensure_ascii=False)
    text = tc('{"name": "get_weather", "arguments": ' + args + "}")
    for size in (3, 4):
        events = run_chunks(CFG, [text[i:i + size] for i in range(0, len(text), size)])
        assert [c.arguments for c in calls_of(events)] == [args]


def test_seed_8kb_arguments():
    args = json.dumps({"city": "z" * 9000})
    tr(CFG, tc('{"name": "get_weather", "arguments": ' + args + "}"), [Call("get_weather", args)],
       finish="tool_calls", two_split_limit=0)


def test_one_shot_equals_streaming_on_random_mix():
    """8.1 #5: random concatenations of fixtures give the same normalized events in one shot and per chunk."""
    pieces = ["Hi!", tc(WX), " so ", tc(TM), "x<y ", '<use_tool name="get_time"><args>{}</args></use_tool>',
              " ok", "<function=get_weather>{\"city\": \"Q\"}</function>", " <3 "]
    rng = random.Random(7)
    for _ in range(15):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        ref = normalize(run_chunks(CFG, [text]))
        for label, chunks in chunkings(text, random_splits=6, two_split_limit=0):
            events = run_chunks(CFG, chunks)
            check_invariants(events, label=label)
            assert normalize(events) == ref, (text, label)


def test_started_header_comes_before_arguments_and_name_is_complete():
    """4.3: the header carries the complete name; no partial name is ever sent."""
    text = tc('{"name": "get_weather_full", "arguments": {"a": 1}}')
    for label, chunks in chunkings(text, random_splits=0, two_split_limit=400):
        events = run_chunks(EXTRA_TOOLS, chunks)
        names = [e.name for e in events if isinstance(e, ToolCallStarted)]
        assert names == ["get_weather_full"], label


def test_summary_helpers_are_consistent():
    """The harness's own summary of a known stream (guards the harness against silently passing)."""
    events = run_chunks(CFG, ["a" + tc(TM) + "b"])
    items, finish = summarize(normalize(events)[0])
    assert items == ["a", Call("get_time", "{}"), "b"] and finish == "tool_calls"
    with pytest.raises(AssertionError):
        tr(CFG, "a" + tc(TM) + "b", ["a", Call("get_time", "{}"), "c"], finish="tool_calls")


@pytest.mark.parametrize("text", [
    WX,  # a bare call-shaped object at message start
    "[" + WX + "]",
    "```json\n" + WX + "\n```",  # fenced
])
def test_c31_json_output_requests_keep_bare_json_as_content(text):
    """31: when the client asked for JSON output, a JSON answer shaped like a call is content."""
    tr(replace(EXTRA_TOOLS, bare_json=False), text, [text], finish="stop")


def test_c31_json_output_requests_still_parse_sentinel_calls():
    tr(replace(EXTRA_TOOLS, bare_json=False), tc(WX), [Call("get_weather", SF)], finish="tool_calls")


@pytest.mark.parametrize("value, decoded", [
    (r'"a\uZZ"', "a\\uZZ"),  # no hex digit: the backslash is literal
    (r'"a\u00ZZ"', "a\\u00ZZ"),  # two hex digits, then none
    (r'"x\u12"', "x\\u12"),  # the string closes inside the escape
    (r'"caf\u00e9"', "café"),  # a whole escape passes through verbatim
])
def test_c24_unicode_escapes_without_four_hex_digits_repaired(value, decoded):
    """7.24: a ``\\u`` escape stands only with four hex digits, else it is repaired at the escape (every split)."""
    text = tc('{"name": "get_weather", "arguments": {"city": ' + value + "}}")
    one_shot = calls_of(run_chunks(CFG, [text]))
    assert len(one_shot) == 1 and one_shot[0].valid
    assert json.loads(one_shot[0].arguments) == {"city": decoded}
    tr(CFG, text, [Call("get_weather", one_shot[0].arguments)], finish="tool_calls")
