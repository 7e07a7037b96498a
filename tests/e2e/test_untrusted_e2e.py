"""Nothing a request carries reaches the network, the disk or the clock (issue 25, items 1, 2, 12, 16), served by
real gunicorn (one gevent worker) in front of the scripted upstream, driven by the openai SDK and httpx.

A strict tool's ``$ref`` naming an "internal" loopback service or a file is a 400 before anything is fetched; a
backtracking regex grammar is matched by RE2 while the worker keeps serving; two tools of one name are a 400;
16 MiB of ``[],`` is refused without stalling the event loop.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai
import pytest

from support.loopback import internal_service
from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

MODEL = "scripted-model"
USER = [{"role": "user", "content": "Weather in Paris?"}]
SECRET = "SECRET-internal-51c9"


@pytest.fixture
def internal():
    server = internal_service(SECRET)
    yield server
    server.close()


def test_a_strict_ref_to_an_internal_service_or_a_file_fetches_nothing(
        upstream: ScriptedUpstream, toolwire_server: ToolwireServer, make_openai_client, internal, tmp_path) -> None:
    client = make_openai_client(toolwire_server)
    secret_file = tmp_path / "secret.json"
    secret_file.write_text(json.dumps({"enum": [SECRET]}))
    for ref in (internal.url + "/schema.json", secret_file.as_uri()):
        upstream.enqueue(Script(text=tool_call_text("lookup", {"city": "Paris"})))  # what the model would do
        parameters = {"type": "object", "properties": {"city": {"$ref": ref}}, "required": ["city"]}
        with pytest.raises(openai.BadRequestError) as chat:
            client.chat.completions.create(model=MODEL, messages=USER, tools=[{"type": "function", "function": {
                "name": "lookup", "parameters": parameters, "strict": True}}])
        with pytest.raises(openai.BadRequestError) as responses:
            client.responses.create(model=MODEL, input="Weather in Paris?", tools=[{
                "type": "function", "name": "lookup", "parameters": parameters, "strict": True}])
        upstream.reset()
        assert chat.value.body["param"] == "tools[0].function.parameters"
        assert responses.value.body["param"] == "tools[0].parameters"
        for caught in (chat, responses):
            assert caught.value.body["code"] == "invalid_function_parameters"
            assert SECRET not in caught.value.response.text
    assert internal.seen == [] and upstream.chat_requests == []


def test_a_backtracking_grammar_is_answered_promptly_and_the_worker_keeps_serving(
        upstream: ScriptedUpstream, toolwire_server: ToolwireServer, make_openai_client) -> None:
    client = make_openai_client(toolwire_server)
    shout = {"type": "custom", "name": "shout", "format": {"type": "grammar", "syntax": "regex",
                                                           "definition": r"(a+)+$"}}
    text = "a" * 40 + "!"  # Python's re: about 2**40 steps; RE2: 41
    upstream.enqueue(Script(text=f'<custom_tool_call name="shout">\n{text}\n</custom_tool_call>'))
    started = time.monotonic()
    response = client.responses.create(model=MODEL, input="Shout.", tools=[shout])
    assert time.monotonic() - started < 10
    [call] = [item for item in response.output if item.type == "custom_tool_call"]
    assert call.input == text  # a mismatch is sent as written by default (schema_mismatch=emit)
    assert httpx.get(toolwire_server.url + "/healthz", timeout=5).status_code == 200


def test_two_tools_of_one_name_are_refused_naming_the_second(
        upstream: ScriptedUpstream, toolwire_server: ToolwireServer, make_openai_client) -> None:
    client = make_openai_client(toolwire_server)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=MODEL, input="hi", tools=[
            {"type": "namespace", "name": "ns", "description": "", "tools": [{"type": "function", "name": "f"}]},
            {"type": "function", "name": "ns__f", "parameters": {"type": "object"}, "strict": False}])
    assert (caught.value.body["param"], caught.value.body["code"]) == ("tools[1].name", "duplicate_tool_name")
    assert upstream.chat_requests == []


def probed(server: ToolwireServer, body: bytes) -> tuple[httpx.Response, float]:
    """The answer to ``body``, and the longest ``/healthz`` took on the same worker while it was handled."""
    answer: list[httpx.Response] = []
    big = threading.Thread(target=lambda: answer.append(httpx.post(
        server.v1_url + "/chat/completions", content=body, headers={"Content-Type": "application/json"},
        timeout=20)))
    slowest = 0.0
    with httpx.Client(timeout=20) as probe:
        probe.get(server.url + "/healthz")
        big.start()
        while big.is_alive():
            started = time.monotonic()
            probe.get(server.url + "/healthz")
            slowest = max(slowest, time.monotonic() - started)
            time.sleep(0.02)
    big.join()
    return answer[0], slowest


def test_millions_of_empty_arrays_are_refused_without_stalling_the_worker(toolwire_factory) -> None:
    server = toolwire_factory(TOOLWIRE_API_KEYS=None)
    size = 16 * 1024 * 1024 - 100
    # the baseline: as many bytes in one string, refused right after parsing (no messages)
    plain, baseline = probed(server, b'{"model": "m", "x": "' + b"a" * size + b'"}')
    arrays, slowest = probed(server, b'{"model": "m", "x": [' + b"[]," * (size // 3) + b"0]}")
    assert plain.status_code == 400 and plain.json()["error"]["param"] == "messages"
    error = arrays.json()["error"]
    assert arrays.status_code == 400 and error["code"] == "invalid_json" and "arrays and objects" in error["message"]
    # reading 16 MiB holds the worker a while either way; parsing 5.6 million lists held it 3 to 12 s more
    assert slowest < 2 * baseline + 0.5, f"the worker answered nothing for {slowest:.2f} s ({baseline:.2f} s)"
