"""Conformance: toolwire against the real server stacks users run as back ends (``support.backends``).

Every stack serves the same model behaviour (``support.backend_model``: a sentence, then a
``get_weather`` call in the ``<tool_call>`` format) in every SSE dialect; toolwire, under gunicorn,
relays it to the openai SDK over Chat and Responses, streamed and not, and the wire contract is
checked on every exchange. Each stack's toolwire then makes several requests in a row: a stack that
frames its bodies keeps one connection for all of them, a close-delimited one leaves none open.
A stream that ends inside a call's arguments with no finish reason fails on every stack. The stacks,
and a toolwire in front of each, start once per module.
"""

from __future__ import annotations

import contextlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import openai
import pytest

from support.backend_model import CITY, DIALECTS, SENTENCE
from support.backends import STACKS, Backends
from support.server import ToolwireServer, run_toolwire
from support.tools import WEATHER

pytestmark = pytest.mark.e2e

CHAT_WEATHER = {"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}
MESSAGES = [{"role": "user", "content": "Weather in Zürich?"}]
SETTINGS = {"TOOLWIRE_UPSTREAM_READ_TIMEOUT": "10", "TOOLWIRE_GRACEFUL_TIMEOUT": "2"}


@pytest.fixture(scope="module")
def backends() -> Iterator[Backends]:
    with Backends() as running:
        yield running


@pytest.fixture(scope="module")
def toolwires(backends) -> Iterator[dict[str, ToolwireServer]]:
    """A toolwire in front of each stack, all started at once (a boot is mostly waiting)."""
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(len(STACKS)) as pool:
        starts = {name: pool.submit(stack.enter_context, run_toolwire({
            **SETTINGS, "TOOLWIRE_UPSTREAM_URL": backends.v1_url(name)})) for name in (s.name for s in STACKS)}
        yield {name: start.result() for name, start in starts.items()}


@pytest.fixture(params=[stack.name for stack in STACKS])
def stack_toolwire(request, toolwires) -> tuple[str, ToolwireServer]:
    """One stack's name and the toolwire in front of it."""
    return request.param, toolwires[request.param]


def _chat(client, dialect: str, stream: bool) -> tuple[str, list, str | None]:
    """Content, tool calls and finish reason of one Chat completion."""
    kwargs = dict(model=dialect, messages=MESSAGES, tools=[CHAT_WEATHER])
    if not stream:
        choice = client.chat.completions.create(**kwargs).choices[0]
        calls = [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls or ()]
        return choice.message.content or "", calls, choice.finish_reason
    content, arguments, names, finish = "", {}, {}, None
    for chunk in client.chat.completions.create(**kwargs, stream=True):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for call in choice.delta.tool_calls or ():
                names[call.index] = names.get(call.index) or call.function.name
                arguments[call.index] = arguments.get(call.index, "") + (call.function.arguments or "")
            finish = choice.finish_reason or finish
    return content, [(names[i], json.loads(arguments[i])) for i in sorted(names)], finish


def _responses(client, dialect: str, stream: bool) -> tuple[str, list, str | None]:
    """Text, function calls and status of one Response."""
    kwargs = dict(model=dialect, input="Weather in Zürich?", tools=[WEATHER])
    if stream:
        events = list(client.responses.create(**kwargs, stream=True))
        response = events[-1].response
        assert events[-1].type == "response.completed", events[-1]
    else:
        response = client.responses.create(**kwargs)
    calls = [(item.name, json.loads(item.arguments)) for item in response.output if item.type == "function_call"]
    return response.output_text, calls, response.status


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_stack_and_dialect_relays_the_answer_and_its_call(stack_toolwire, make_openai_client, dialect, api,
                                                                  stream):
    _, server = stack_toolwire
    ask = _chat if api == "chat" else _responses
    text, calls, end = ask(make_openai_client(server), dialect, stream)
    assert text.startswith(SENTENCE)
    assert calls == [("get_weather", {"city": CITY})]
    assert end == ("tool_calls" if api == "chat" else "completed")


def test_several_requests_reuse_one_connection_or_leave_none_open(stack_toolwire, make_openai_client, backends):
    name, server = stack_toolwire
    client = make_openai_client(server)
    for dialect in ("lf", "json", "nodone", "split"):
        assert _chat(client, dialect, stream=True)[1] == [("get_weather", {"city": CITY})]
    keep_alive = next(stack.keep_alive for stack in STACKS if stack.name == name)
    expected = 1 if keep_alive else 0
    deadline = time.monotonic() + 3
    while (held := backends.connections_to(name)) != expected and time.monotonic() < deadline:
        time.sleep(0.02)
    assert held == expected, f"{name}: toolwire holds {held} connections to it"


def test_a_stream_cut_inside_a_call_fails_on_every_stack(stack_toolwire, make_openai_client):
    """No finish reason, no ``[DONE]``: the body ends inside a call's arguments (for the close-delimited
    stacks the close is that end). A cut stream, whatever the framing said."""
    _, server = stack_toolwire
    client = make_openai_client(server)
    for stream in (True, False):
        with pytest.raises(openai.APIError) as failed:
            _chat(client, "cut-in-call", stream)
        assert failed.value.code == "upstream_protocol", stream
