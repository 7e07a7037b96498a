"""Gemma 4 output cases mined from the peers' suites; the texts are theirs, the structure ours.

Each case is ``(source, label, text, expected, options)``: ``expected`` in the
harness's items, options for :func:`harness.tr` (``finish``, ``notes``) plus
``differs`` (why toolwire's result is not the peer's; the peer's outcome is in
the comment above the case). The tools are offered without properties, as the
peers' parsers ran without tools.

Sources (repository, file, commit):

* ``ollama``: ollama/ollama ``model/parsers/gemma4_test.go`` @ fb30760996871fa9460115c753afd2c60d4ab0f7
  (``TestGemma4Parser``, the ``Ignores…`` and ``ParseGemma4ToolCall`` tests, ``TestGemma4ArgsToJSON``'s
  arguments wrapped in a call; its repair helpers' unit tests and the schema-gated raw-string and
  single-quote repairs of issue 15315 are not transcribed: toolwire does not guess where a string without
  delimiters ends).
* ``vllm``: vllm-project/vllm ``tests/tool_parsers/test_gemma4_tool_parser.py``
  @ 027004de3715411197be51ced325705abcf740a7 (``TestExtractToolCalls``, ``TestStreamingExtraction``; its
  chunkings are among the harness's; and ``TestParseGemma4Args``' delimited keys, wrapped in a call).
"""

from __future__ import annotations

import json

from harness import Call, Open, Reasoning

Q = '<|"|>'
B, E = "<|tool_call>", "<tool_call|>"
CALLS = {"finish": "tool_calls"}
NAMES = ("get_weather", "set_temp", "toggle", "set_optional", "process", "bash", "search", "exec", "plan", "edit",
         "open_file", "foo", "get_current_temperature", "get_time", "complex_function", "set_status", "get-weather",
         "weather.get", "get_status", "todowrite", "write_file", "Edit", "set_config", "set", "example",
         "args")


def call(name: str, args: str) -> str:
    return f"{B}call:{name}{{{args}}}{E}"


def q(text: str) -> str:
    return f"{Q}{text}{Q}"


EDIT = ("edits:[\n  {newText:" + q('# Gemma4 + openclaude speed optimization guide\n\nUse "nvfp4" only after validating '
                                   "tool calls.\n") + ",oldText:" + q("# Gemma4 + openclaude speed optimization guide\n\n"
                                                                      "Use the default quantization.\n")
        + "},\n  {newText:" + q('## 14. Methods tried but not adopted\n\n### 1. Model quantization\nDo not enable '
                                '"mxfp8" by default.\n') + ",oldText:" + q("## 14. Methods tried but not adopted\n")
        + "}\n]")
SPACING = ("edits:[\n  {newText:" + q("# Gemma4 + openclaude speed optimization guide...") + ",\n   oldText:"
           + q("# Gemma4 + openclaude speed optimization guide...") + "},\n  {newText:"
           + q("## 14. Methods tried but not adopted\\n\\n### 1. Model quantization...") + ",\n   oldText:"
           + q("## 14. Methods tried but not adopted\\n") + "}\n]")
HTML = ('<!DOCTYPE html>\n<html lang="zh-CN">\n<head>\n    <meta charset="UTF-8">\n'
        '    <meta name="viewport" content="width=device-width">\n')

CASES = [
    # Ollama Gemma4Parser -------------------------------------------------------------------------------
    ("ollama", "simple content", "This is a simple response.", ["This is a simple response."], {}),
    ("ollama", "tool call", call("get_weather", "location:" + q("Paris")), [Call("get_weather", {"location": "Paris"})],
     CALLS),
    ("ollama", "multiple args", call("get_weather", "location:" + q("Paris") + ",units:" + q("metric")),
     [Call("get_weather", {"location": "Paris", "units": "metric"})], CALLS),
    ("ollama", "number", call("set_temp", "value:42"), [Call("set_temp", {"value": 42})], CALLS),
    ("ollama", "boolean", call("toggle", "enabled:true"), [Call("toggle", {"enabled": True})], CALLS),
    ("ollama", "null, nested null", call("set_optional", "value:null,nested:{value:null}"),
     [Call("set_optional", {"value": None, "nested": {"value": None}})], CALLS),
    ("ollama", "nested object", call("process", "config:{enabled:true,name:" + q("test") + "}"),
     [Call("process", {"config": {"enabled": True, "name": "test"}})], CALLS),
    ("ollama", "array", call("process", "items:[" + q("a") + "," + q("b") + "]"),
     [Call("process", {"items": ["a", "b"]})], CALLS),
    ("ollama", "array of quoted strings", call("process", "items:[" + q("a") + "," + q('b "quoted"') + "," + q("c") + "]"),
     [Call("process", {"items": ["a", 'b "quoted"', "c"]})], CALLS),
    ("ollama", "multiline string", call("bash", "command:" + q("date\n")), [Call("bash", {"command": "date\n"})], CALLS),
    ("ollama", "escaped quotes stay verbatim", call("search", "query:" + q('say \\"hello\\"')),
     [Call("search", {"query": 'say \\"hello\\"'})], CALLS),
    ("ollama", "unescaped quotes", call("search", "query:" + q('say "hello"')), [Call("search", {"query": 'say "hello"'})],
     CALLS),
    ("ollama", "quote segments and a comma", call("search", "query:" + q('say "hello", then "goodbye"')),
     [Call("search", {"query": 'say "hello", then "goodbye"'})], CALLS),
    ("ollama", "mixed escaped and unescaped quotes", call("search", "query:" + q('first \\"quoted\\" then "raw"')),
     [Call("search", {"query": 'first \\"quoted\\" then "raw"'})], CALLS),
    ("ollama", "quoted path", call("exec", "command:" + q('ls -F "vault/"')), [Call("exec", {"command": 'ls -F "vault/"'})],
     CALLS),
    ("ollama", "quoted url", call("exec", "command:" + q('fetch "https://ollama.com/library/gemma4" --extract')),
     [Call("exec", {"command": 'fetch "https://ollama.com/library/gemma4" --extract'})], CALLS),
    ("ollama", "no closer at the end", f"{B}call:search{{query:" + q('say "hello" and "bye"') + "}",
     [Call("search", {"query": 'say "hello" and "bye"'})], {**CALLS, "notes": ["recovered_unclosed"]}),
    ("ollama", "raw JSON string beside a delimited one", call("search", 'query:"raw \\"quoted\\"",note:'
                                                                        + q('gemma "quoted"')),
     [Call("search", {"query": 'raw "quoted"', "note": 'gemma "quoted"'})], CALLS),
    ("ollama", "array of objects", call("plan", "steps:[{title:" + q('step "one"') + ",done:false},{title:"
                                        + q('step \\"two\\"') + ",done:true}]"),
     [Call("plan", {"steps": [{"title": 'step "one"', "done": False}, {"title": 'step \\"two\\"', "done": True}]})],
     CALLS),
    ("ollama", "edit: multiline markdown", call("edit", EDIT), [Call("edit", {"edits": [
        {"newText": '# Gemma4 + openclaude speed optimization guide\n\nUse "nvfp4" only after validating tool calls.\n',
         "oldText": "# Gemma4 + openclaude speed optimization guide\n\nUse the default quantization.\n"},
        {"newText": '## 14. Methods tried but not adopted\n\n### 1. Model quantization\nDo not enable "mxfp8" by '
                    "default.\n", "oldText": "## 14. Methods tried but not adopted\n"}]})], CALLS),
    ("ollama", "edit: spacing between pairs", call("edit", SPACING), [Call("edit", {"edits": [
        {"newText": "# Gemma4 + openclaude speed optimization guide...",
         "oldText": "# Gemma4 + openclaude speed optimization guide..."},
        {"newText": "## 14. Methods tried but not adopted\\n\\n### 1. Model quantization...",
         "oldText": "## 14. Methods tried but not adopted\\n"}]})], CALLS),
    ("ollama", "windows path", call("open_file", "path:" + q("C:\\users\\bob\\file.txt")),
     [Call("open_file", {"path": "C:\\users\\bob\\file.txt"})], CALLS),
    ("ollama", "two calls", call("get_weather", "location:" + q("Paris")) + call("get_weather", "location:" + q("London")),
     [Call("get_weather", {"location": "Paris"}), Call("get_weather", {"location": "London"})], CALLS),
    ("ollama", "thinking then content", "<|channel>thought\nLet me think about this...<channel|>The answer is 42.",
     [Reasoning("thought\nLet me think about this..."), "The answer is 42."],
     {"differs": "the channel's name stays in the reasoning"}),
    ("ollama", "two thinking blocks", "<|channel>first thought<channel|><|channel>second thought<channel|>Final answer.",
     [Reasoning("first thoughtsecond thought"), "Final answer."], {}),
    ("ollama", "thinking only", "<|channel>just thinking<channel|>", [Reasoning("just thinking")], {}),
    ("ollama", "thinking then call", "<|channel>thought\nI need to check the weather<channel|>"
     + call("get_weather", "location:" + q("Paris")),
     [Reasoning("thought\nI need to check the weather"), Call("get_weather", {"location": "Paris"})], CALLS),
    ("ollama", "tool response after a call", call("get_weather", "location:" + q("Paris")) + "<|tool_response>",
     [Call("get_weather", {"location": "Paris"})], CALLS),
    ("ollama", "tool response before content", call("get_weather", "location:" + q("Paris")) + "<|tool_response>Done.",
     [Call("get_weather", {"location": "Paris"}), "Done."], CALLS),
    ("ollama", "content then call", "Let me check that for you." + call("get_weather", "location:" + q("Paris")),
     ["Let me check that for you.", Call("get_weather", {"location": "Paris"})], CALLS),
    ("ollama", "extra closers after a call", call("get_weather", "location:" + q("Paris")) + E,
     [Call("get_weather", {"location": "Paris"})], CALLS),
    ("ollama", "extra closer before content", call("get_weather", "location:" + q("Paris")) + E + "Done.",
     [Call("get_weather", {"location": "Paris"}), "Done."], CALLS),
    ("ollama", "quoted scalars stay strings", call("foo", "n:" + q("1") + ",b:" + q("true") + ",z:" + q("null")),
     [Call("foo", {"n": "1", "b": "true", "z": "null"})], CALLS),
    ("ollama", "bare scalars keep their types", call("foo", "n:1,b:true,z:null"),
     [Call("foo", {"n": 1, "b": True, "z": None})], CALLS),
    ("ollama", "reference example", call("get_current_temperature", "detail_level:0,location:" + q("Paris, France")
                                         + ",unit:" + q("celsius")),
     [Call("get_current_temperature", {"detail_level": 0, "location": "Paris, France", "unit": "celsius"})], CALLS),
    ("ollama", "raw-quoted string holding a comma and a colon", call("foo", 'q:"a,b:c"'), [Call("foo", {"q": "a,b:c"})],
     CALLS),
    # Ollama rejects the call; toolwire ends it as invalid
    ("ollama", "raw-quoted string with an invalid escape", call("open_file", r'path:"C:\users\bob\file.txt"'),
     [Call("open_file", "{", valid=False)], {"notes": ["invalid_json"]}),
    ("ollama", "issue 15315: string left open before the object's close", call("bash", "command:" + Q + "ls"),
     [Call("bash", {"command": "ls"})], {**CALLS, "notes": ["repaired"]}),
    ("ollama", "terminal property's string left open", call("bash", "path:" + q("/tmp") + ",command:" + Q + "ls"),
     [Call("bash", {"path": "/tmp", "command": "ls"})], {**CALLS, "notes": ["repaired"]}),
    # Ollama rejects the call; toolwire ends it as invalid and drops its text up to the closer
    ("ollama", "non-terminal string left open is not repaired", call("example", "first:" + Q + "one,second:" + q("two")),
     [Call("example", '{"first": "one,second:"', valid=False)], {"notes": ["invalid_json"]}),
    *(("ollama", f"args to JSON: {label}", call("args", args.replace("Q", Q)), [Call("args", json.loads(expected))],
       CALLS) for label, args, expected in [
        ("simple string", "location:QParisQ", '{"location":"Paris"}'),
        ("multiple args", "location:QParisQ,units:QmetricQ", '{"location":"Paris","units":"metric"}'),
        ("number", "value:42", '{"value":42}'),
        ("boolean", "enabled:true", '{"enabled":true}'),
        ("nested object", "config:{enabled:true,name:QtestQ}", '{"config":{"enabled":true,"name":"test"}}'),
        ("spaces around a nested bare key", "edits:[{ newText:QaQ, oldText:QbQ} ]",
         '{"edits":[{ "newText":"a", "oldText":"b"} ]}'),
        ("space before a nested bare key", "edits:[{newText:QaQ, oldText:QbQ} ]",
         '{"edits":[{"newText":"a", "oldText":"b"} ]}'),
        ("newline before a nested bare key", "edits:[\n  {newText:QaQ,\n   oldText:QbQ}\n]",
         '{"edits":[\n  {"newText":"a",\n   "oldText":"b"}\n]}'),
        ("array", "items:[QaQ,QbQ]", '{"items":["a","b"]}'),
        ("array of delimited strings", 'items:[QaQ,Qb "quoted"Q,QcQ]', r'{"items":["a","b \"quoted\"","c"]}'),
        ("empty object", "", "{}"),
        ("mixed types", "name:QtestQ,count:5,active:true,tags:[QaQ]",
         '{"name":"test","count":5,"active":true,"tags":["a"]}'),
        ("null", "value:null", '{"value":null}'),
        ("multiline string", "command:Qdate\nQ", r'{"command":"date\n"}'),
        ("escaped double quotes", r'query:Qsay \"hello\"Q', r'{"query":"say \\\"hello\\\""}'),
        ("unescaped double quotes", 'query:Qsay "hello"Q', r'{"query":"say \"hello\""}'),
        ("quote segments", 'query:Qsay "hello", then "goodbye"Q', r'{"query":"say \"hello\", then \"goodbye\""}'),
        ("mixed escaped and unescaped quotes", r'query:Qfirst \"quoted\" then "raw"Q',
         r'{"query":"first \\\"quoted\\\" then \"raw\""}'),
        ("punctuation and structural characters", "query:Qa,b:{c}[d]Q", '{"query":"a,b:{c}[d]"}'),
        ("windows path, double backslashes", r"path:QC:\\Temp\\file.txtQ", r'{"path":"C:\\\\Temp\\\\file.txt"}'),
        ("windows path, single backslashes", r"path:QC:\users\bobQ", r'{"path":"C:\\users\\bob"}'),
        ("escaped forward slashes", r"url:Qhttps:\/\/example.com\/aQ", r'{"url":"https:\\/\\/example.com\\/a"}'),
        ("unicode escape stays verbatim", r"s:Qsnowman:\u2603Q", r'{"s":"snowman:\\u2603"}'),
        ("unknown escape", r"s:Qbad \x escapeQ", r'{"s":"bad \\x escape"}'),
        ("invalid unicode escape", r"s:Qbad \uZZZZ escapeQ", r'{"s":"bad \\uZZZZ escape"}'),
        ("raw-quoted string with escaped quotes", r'q:"say \"hi\" and \"bye\""', r'{"q":"say \"hi\" and \"bye\""}'),
        ("raw-quoted string with key-like text", 'q:"keep , oldText: literal",note:QokQ',
         '{"q":"keep , oldText: literal","note":"ok"}'),
        ("raw-quoted string with escaped quotes and key-like text", r'q:"keep , oldText: and \"quoted\" text",note:QokQ',
         r'{"q":"keep , oldText: and \"quoted\" text","note":"ok"}'),
        ("nested raw-quoted and delimited values", r'meta:{title:Qt "1"Q,note:"n \"2\""},items:[Qx "3"Q,"y \"4\""]',
         r'{"meta":{"title":"t \"1\"","note":"n \"2\""},"items":["x \"3\"","y \"4\""]}'),
    ]),
    # vLLM Gemma4ToolParser ---------------------------------------------------------------------------------
    ("vllm", "no tool calls", "Hello, how can I help you today?", ["Hello, how can I help you today?"], {}),
    ("vllm", "single call", call("get_weather", "location:" + q("London")), [Call("get_weather", {"location": "London"})],
     CALLS),
    ("vllm", "two arguments", call("get_weather", "location:" + q("San Francisco") + ",unit:" + q("celsius")),
     [Call("get_weather", {"location": "San Francisco", "unit": "celsius"})], CALLS),
    # vLLM strips the content ("Let me check the weather for you."); toolwire keeps the text as written
    ("vllm", "text before the call", "Let me check the weather for you. " + call("get_weather", "location:" + q("Paris")),
     ["Let me check the weather for you. ", Call("get_weather", {"location": "Paris"})],
     {**CALLS, "differs": "content keeps its trailing space"}),
    ("vllm", "two calls", call("get_weather", "location:" + q("London")) + call("get_time", "location:" + q("London")),
     [Call("get_weather", {"location": "London"}), Call("get_time", {"location": "London"})], CALLS),
    ("vllm", "nested arguments", call("complex_function", "nested:{inner:" + q("value") + "},list:[" + q("a") + ","
                                      + q("b") + "]"),
     [Call("complex_function", {"nested": {"inner": "value"}, "list": ["a", "b"]})], CALLS),
    ("vllm", "number and boolean", call("set_status", "is_active:true,count:42,score:3.14"),
     [Call("set_status", {"is_active": True, "count": 42, "score": 3.14})], CALLS),
    # vLLM returns the text as content; toolwire's header went out with the arguments' "{": incomplete
    ("vllm", "incomplete call", f"{B}call:get_weather{{location:" + Q + "London", [Open("get_weather", "{")],
     {"notes": ["incomplete"], "differs": "a call whose arguments began is committed"}),
    ("vllm", "hyphenated name", call("get-weather", "location:" + q("London")),
     [Call("get-weather", {"location": "London"})], CALLS),
    ("vllm", "dotted name", call("weather.get", "location:" + q("London")), [Call("weather.get", {"location": "London"})],
     CALLS),
    ("vllm", "no arguments", call("get_status", ""), [Call("get_status", {})], CALLS),
    ("vllm", "streaming: Paris, France", call("get_weather", "location:" + q("Paris, France")),
     [Call("get_weather", {"location": "Paris, France"})], CALLS),
    ("vllm", "streaming: text before", "Let me check the weather. " + call("get_weather", "location:" + q("London")),
     ["Let me check the weather. ", Call("get_weather", {"location": "London"})], CALLS),
    ("vllm", "streaming: numbers", call("set_config", "count:42,active:true"),
     [Call("set_config", {"count": 42, "active": True})], CALLS),
    ("vllm", "streaming: nested boolean", call("search", "input:{all:true}"), [Call("search", {"input": {"all": True}})],
     CALLS),
    ("vllm", "streaming: false", call("set", "flag:false"), [Call("set", {"flag": False})], CALLS),
    ("vllm", "streaming: split delimiter", call("todowrite", "content:" + q("Buy milk")),
     [Call("todowrite", {"content": "Buy milk"})], CALLS),
    ("vllm", "streaming: text after the call", call("get_weather", "location:" + q("Paris")) + "<div>",
     [Call("get_weather", {"location": "Paris"}), "<div>"], CALLS),
    ("vllm", "streaming: html argument", call("write_file", "path:" + q("index.html") + ",content:" + q(HTML)),
     [Call("write_file", {"path": "index.html", "content": HTML})], CALLS),
    ("vllm", "streaming: trailing bare boolean", call("Edit", "file_path:" + q("src/env.py") + ",old_string:"
                                                      + q("old_val") + ",new_string:" + q("new_val") + ",replace_all:false"),
     [Call("Edit", {"file_path": "src/env.py", "old_string": "old_val", "new_string": "new_val", "replace_all": False})],
     CALLS),
    ("vllm", "args: delimited dict key", call("args", "record_map:{" + q("3") + ":" + q("new text") + "}"),
     [Call("args", {"record_map": {"3": "new text"}})], CALLS),
    ("vllm", "args: nested delimited dict key", call("args", "outer:{inner:{" + q("3") + ":" + q("new text") + "}}"),
     [Call("args", {"outer": {"inner": {"3": "new text"}}})], CALLS),
]
