"""What a request's tools ask the worker to evaluate (issue 25, items 1, 2, 12, 16), through Flask's test client.

A strict tool's schema may name an "internal" HTTP address or a file, loop on itself or not be a schema at all;
a regex (a custom tool's grammar, a schema's ``pattern``) may backtrack for minutes; two tools may share a
name; a name may hold markup. Each is a 400 naming the parameter before anything is fetched, compiled with a
backtracking engine or sent upstream, on both endpoints; what is accepted is checked in linear time.
"""

from __future__ import annotations

import json
import time

import pytest

from support.fakes import FakeUpstream, text_chunks
from support.invariants import check_error_envelope
from support.loopback import internal_service
from support.responses_calls import stream
from support.scripted_upstream import tool_call_text

SECRET = "SECRET-internal-7f3a"
USER = [{"role": "user", "content": "Weather in Paris?"}]


def chat(client, tools, **body):
    return client.post("/v1/chat/completions", json={"model": "m", "messages": USER, "tools": tools, **body})


def responses(client, tools, **body):
    return client.post("/v1/responses", json={"model": "m", "input": "Weather in Paris?", "tools": tools, **body})


def refused(response, param: str, code: str | None = None) -> dict:
    error = check_error_envelope(response.status_code, response.get_data())
    assert response.status_code == 400, response.get_data(as_text=True)
    assert error["param"] == param and "Traceback" not in error["message"]
    if code:
        assert error["code"] == code
    return error


def strict_function(schema, name="lookup"):
    return {"type": "function", "function": {"name": name, "parameters": schema, "strict": True}}


def flat(tool):
    """A Chat ``tools[]`` entry in the Responses shape."""
    return {"type": tool["type"], **tool[tool["type"]]}


# -- item 1: strict schemas fetch nothing, and a schema jsonschema cannot use is a 400 ------------------------

@pytest.fixture
def internal():
    server = internal_service(SECRET)
    yield server
    server.close()


def test_a_remote_or_file_ref_is_refused_before_anything_is_fetched(make_app, internal, tmp_path):
    secret_file = tmp_path / "secret.json"
    secret_file.write_text(json.dumps({"type": "string", "enum": [SECRET]}))
    calls = tool_call_text("lookup", {"city": "Paris"})
    for ref in (internal.url + "/schema.json", secret_file.as_uri()):
        schema = {"type": "object", "properties": {"city": {"$ref": ref}}, "required": ["city"]}
        for send, param in ((chat, "tools[0].function.parameters"), (responses, "tools[0].parameters")):
            upstream = FakeUpstream(text_chunks(calls))
            tool = strict_function(schema)
            response = send(make_app(upstream).test_client(), [tool if send is chat else flat(tool)])
            error = refused(response, param, "invalid_function_parameters")
            assert "local" in error["message"] and SECRET not in response.get_data(as_text=True)
            assert upstream.bodies == []
    assert internal.seen == []  # nothing reached the "internal" service


@pytest.mark.parametrize("schema", [
    {"$ref": "#"},
    {"type": "object", "properties": {"city": {"type": "strnig"}}},
    {"type": "object", "properties": {"city": {"type": "string", "minLength": "3"}}},
    {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"},
    {"type": "object", "properties": {"city": {"$ref": "#/$defs/missing"}}},
    {"type": "object", "properties": {"city": {"$id": "http://elsewhere/", "type": "string"}}},
    {"type": "object", "patternProperties": {"^c": {"type": "string"}}},
])
def test_a_schema_jsonschema_cannot_use_is_a_400_naming_the_parameters(make_app, schema):
    client = make_app(FakeUpstream(text_chunks(tool_call_text("lookup", {"city": "Paris"})))).test_client()
    refused(chat(client, [strict_function(schema)]), "tools[0].function.parameters", "invalid_function_parameters")
    refused(client.post("/v1/chat/completions", json={"model": "m", "messages": USER, "functions": [
        {"name": "lookup", "parameters": schema, "strict": True}]}), "functions[0].parameters")
    namespace = {"type": "namespace", "name": "geo", "tools": [
        {"type": "function", "name": "ok"}, {"type": "function", "name": "lookup", "parameters": schema, "strict": True}]}
    refused(responses(client, [namespace]), "tools[0].tools[1].parameters", "invalid_function_parameters")


def test_a_recursive_schema_that_moves_into_the_value_is_accepted_and_checked(make_app):
    tree = {"type": "object", "properties": {"name": {"type": "string"},
                                             "children": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["name"], "additionalProperties": False}
    good = tool_call_text("lookup", {"name": "a", "children": [{"name": "b", "children": []}]})
    bad = tool_call_text("lookup", {"name": "a", "children": [{"label": "b"}]})
    for text, ok in ((good, True), (bad, False)):
        client = make_app(FakeUpstream(text_chunks(text))).test_client()
        response = chat(client, [strict_function(tree)])
        calls = response.get_json()["choices"][0]["message"].get("tool_calls") if ok else None
        assert (response.status_code, bool(calls)) == ((200, True) if ok else (502, False)), response.get_json()


def test_a_non_strict_schema_is_not_refused_and_fetches_nothing(make_app, internal):
    schema = {"type": "object", "properties": {"city": {"$ref": internal.url + "/schema.json"}}}
    upstream = FakeUpstream(text_chunks(tool_call_text("lookup", {"city": "Paris"})))
    client = make_app(upstream, schema_mismatch="fail").test_client()  # a mismatch would fail: it is checked
    response = chat(client, [{"type": "function", "function": {"name": "lookup", "parameters": schema}}])
    call = response.get_json()["choices"][0]["message"]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert internal.seen == []


# -- item 2: client regexes run on RE2 ---------------------------------------------------------------------

EVIL = r"(a+)+$"


def custom_call_text(name, text):
    return f'<custom_tool_call name="{name}">\n{text}\n</custom_tool_call>'


def test_a_backtracking_grammar_is_matched_in_linear_time(make_app):
    grammar = {"type": "grammar", "syntax": "regex", "definition": EVIL}
    tool = {"type": "custom", "name": "shout", "format": grammar}
    for text, status in (("a" * 5000, "completed"), ("a" * 5000 + "!", "incomplete")):
        upstream = FakeUpstream(text_chunks(custom_call_text("shout", text), size=500))
        client = make_app(upstream, schema_mismatch="text").test_client()
        started = time.monotonic()
        summary = stream(client, model="m", input="Shout.", tools=[tool])
        assert time.monotonic() - started < 5  # Python's re: 31 characters take half a minute
        [call] = summary.response["output"]
        assert (call["type"], call["input"], call["status"]) == ("custom_tool_call", text, status)


def test_a_backtracking_schema_pattern_is_matched_in_linear_time(make_app):
    schema = {"type": "object", "properties": {"word": {"type": "string", "pattern": EVIL}}, "required": ["word"],
              "additionalProperties": False}
    for word, status in (("a" * 5000, 200), ("a" * 5000 + "!", 502)):
        client = make_app(FakeUpstream(text_chunks(tool_call_text("lookup", {"word": word}), size=500))).test_client()
        started = time.monotonic()
        response = chat(client, [strict_function(schema)])
        assert time.monotonic() - started < 5
        assert response.status_code == status
        if status == 502:
            assert response.get_json()["error"]["code"] == "tool_arguments_invalid"


@pytest.mark.parametrize("definition", [r"(a)\1", r"(?=a)a", r"(?<!b)a", r"a{1,5000}", "(unclosed"])
def test_a_regex_re2_cannot_run_is_refused_with_its_parameter(make_app, definition):
    client = make_app(FakeUpstream(text_chunks("never"))).test_client()
    grammar = {"type": "grammar", "syntax": "regex", "definition": definition}
    refused(responses(client, [{"type": "custom", "name": "x", "format": grammar}]), "tools[0].format.definition")
    chat_tool = {"type": "custom", "custom": {"name": "x", "format": {"type": "grammar", "grammar": {
        "syntax": "regex", "definition": definition}}}}
    refused(chat(client, [chat_tool]), "tools[0].custom.format.grammar.definition")
    pattern = {"type": "object", "properties": {"w": {"type": "string", "pattern": definition}}}
    error = refused(chat(client, [strict_function(pattern)]), "tools[0].function.parameters")
    assert "/properties/w/pattern" in error["message"]


# -- item 12: names that collide ----------------------------------------------------------------------------

def test_a_name_offered_twice_is_a_400_naming_the_second_tool(make_app):
    client = make_app(FakeUpstream(text_chunks("never"))).test_client()
    f = {"type": "function", "function": {"name": "lookup"}}
    custom = {"type": "custom", "custom": {"name": "lookup"}}
    refused(chat(client, [f, {"type": "function", "function": {"name": "other"}}, f]), "tools[2].function.name",
            "duplicate_tool_name")
    refused(chat(client, [f, custom]), "tools[1].custom.name", "duplicate_tool_name")
    refused(client.post("/v1/chat/completions", json={"model": "m", "messages": USER, "functions": [
        {"name": "lookup"}, {"name": "lookup"}]}), "functions[1].name", "duplicate_tool_name")
    namespace = {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "f"}]}
    flattened = {"type": "function", "name": "ns__f"}
    refused(responses(client, [flattened, namespace]), "tools[1].tools[0].name", "duplicate_tool_name")
    refused(responses(client, [namespace, flattened]), "tools[1].name", "duplicate_tool_name")
    refused(responses(client, [{"type": "local_shell"}, {"type": "function", "name": "local_shell"}]),
            "tools[1].name", "duplicate_tool_name")
    refused(responses(client, [{"type": "local_shell"}, {"type": "local_shell"}]), "tools[1].type")


# -- item 16: names OpenAI would refuse ---------------------------------------------------------------------

@pytest.mark.parametrize("name", ["<img src=x onerror=alert(1)>", "get\nweather", "a.b", "x" * 65, "", "naïve"])
def test_a_tool_name_outside_openais_alphabet_is_refused(make_app, name):
    client = make_app(FakeUpstream(text_chunks("never"))).test_client()
    refused(chat(client, [{"type": "function", "function": {"name": name}}]), "tools[0].function.name")
    refused(chat(client, [{"type": "custom", "custom": {"name": name}}]), "tools[0].custom.name")
    refused(responses(client, [{"type": "function", "name": name}]), "tools[0].name")
    refused(responses(client, [{"type": "namespace", "name": name, "tools": [{"type": "function", "name": "f"}]}]),
            "tools[0].name")
