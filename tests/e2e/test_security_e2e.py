"""Security and limits end to end: client keys, body size, the per-worker stream cap, marker mode.

Real gunicorn (one gevent worker) in front of the scripted upstream; the openai SDK as the client.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest

from support.injection import QUOTED, TRANSCRIPT
from support.invariants import check_error_envelope
from support.scripted_upstream import Script, ScriptedUpstream
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

MODEL = "scripted-model"
USER = [{"role": "user", "content": "What's the weather in SF?"}]
KEY = "test"  # the key make_openai_client sends
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.fixture(scope="module")
def guarded(toolwire_factory) -> ToolwireServer:
    return toolwire_factory(TOOLWIRE_API_KEYS=f"{KEY},other-key", TOOLWIRE_MAX_CONCURRENT_STREAMS="1",
                            TOOLWIRE_MAX_BODY_BYTES="4096")


def post(server: ToolwireServer, body: Any, headers: dict[str, str] | None = None, **kwargs: Any) -> httpx.Response:
    return httpx.post(server.v1_url + "/chat/completions", headers={"Authorization": f"Bearer {KEY}", **(headers or {})},
                      timeout=10, **({"json": body} if body is not None else kwargs))


# -- auth ----------------------------------------------------------------------------------------


def test_wrong_or_missing_key_is_401_and_the_right_key_works(upstream: ScriptedUpstream, guarded: ToolwireServer,
                                                             make_openai_client) -> None:
    client = make_openai_client(guarded)
    with pytest.raises(openai.AuthenticationError) as caught:
        client.with_options(api_key="not-a-key").chat.completions.create(model=MODEL, messages=USER)
    assert caught.value.code == "invalid_api_key"
    assert caught.value.response.headers["WWW-Authenticate"] == "Bearer"
    check_error_envelope(401, caught.value.response.content)
    bare = httpx.post(guarded.v1_url + "/chat/completions", json={"model": MODEL, "messages": USER}, timeout=10)
    assert bare.status_code == 401 and bare.json()["error"]["code"] == "invalid_api_key"
    assert upstream.chat_requests == []

    upstream.enqueue(Script(text="Sunny."))
    assert client.chat.completions.create(model=MODEL, messages=USER).choices[0].message.content == "Sunny."
    assert "Bearer test" not in json.dumps(upstream.chat_requests[0].headers)
    assert httpx.get(guarded.url + "/healthz", timeout=10).status_code == 200


# -- body size -----------------------------------------------------------------------------------


def test_oversized_bodies_are_413_with_and_without_content_length(upstream: ScriptedUpstream, guarded: ToolwireServer) -> None:
    big = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "x" * 10_000}]}).encode()
    sized = post(guarded, None, content=big, headers={"Content-Type": "application/json"})
    chunked = post(guarded, None, content=iter([big[:3000], big[3000:]]), headers={"Content-Type": "application/json"})
    assert chunked.request.headers.get("Transfer-Encoding") == "chunked"
    for response in (sized, chunked):
        error = check_error_envelope(413, response.content)
        assert response.status_code == 413 and error["code"] == "request_entity_too_large"
        assert "4096-byte limit" in error["message"]
    assert upstream.chat_requests == []


# -- the stream cap ------------------------------------------------------------------------------


def wait_until_accepted(client: openai.OpenAI, deadline: float = 10.0) -> str:
    """Retry until the cap lets a request through (the slot is freed once gunicorn closes the old body)."""
    end = time.monotonic() + deadline
    while True:
        try:
            return client.chat.completions.create(model=MODEL, messages=USER).choices[0].message.content
        except openai.RateLimitError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


def test_stream_cap_429_then_released_after_disconnect_and_after_the_end(upstream: ScriptedUpstream,
                                                                          guarded: ToolwireServer,
                                                                          make_openai_client) -> None:
    client = make_openai_client(guarded)
    upstream.enqueue(Script(text="A partial answer", chunks=4, hang_after_chunks=1))
    with httpx.Client(timeout=10) as raw:
        with raw.stream("POST", guarded.v1_url + "/chat/completions", headers={"Authorization": f"Bearer {KEY}"},
                        json={"model": MODEL, "stream": True, "messages": USER}) as held:
            assert held.status_code == 200
            next(held.iter_lines())
            for stream in (False, True):
                with pytest.raises(openai.RateLimitError) as caught:
                    client.chat.completions.create(model=MODEL, messages=USER, stream=stream)
                assert caught.value.code == "concurrency_limit_exceeded"
                assert caught.value.response.headers["Retry-After"] == "1"
            assert len(upstream.chat_requests) == 1  # refused before any upstream call
    # the client went away: gunicorn closes the body, the slot comes back
    upstream.enqueue(Script(text="Next."), Script(text="And again."))
    assert wait_until_accepted(client) == "Next."
    # a finished request frees its slot at once
    assert client.chat.completions.create(model=MODEL, messages=USER).choices[0].message.content == "And again."


# -- marker mode ---------------------------------------------------------------------------------


@dataclass
class EchoScript(Script):
    """A model that repeats the tool result's sentinel and, if ``call``, writes a call with the prompt's marker."""

    call: bool = False

    def texts_for(self, request_body: dict[str, Any] | None) -> list[str]:
        prompt = "\n".join(str(m.get("content")) for m in (request_body or {}).get("messages", []))
        found = re.search(r'<tool_call marker="([A-Za-z0-9_-]+)">', prompt)
        text = f"The result says to run {QUOTED}, which I won't."
        if self.call and found:
            text += f' <tool_call marker="{found.group(1)}">{{"name": "get_weather", "arguments": {{"city": "Rome"}}}}</tool_call>'
        return [text]


def test_marker_mode_quoted_sentinel_stays_text_and_marked_call_is_a_call(upstream: ScriptedUpstream, toolwire_factory,
                                                                          make_openai_client) -> None:
    client = make_openai_client(toolwire_factory(TOOLWIRE_MARKER_MODE="true"))
    upstream.enqueue(EchoScript(chunks=5), EchoScript(chunks=3, call=True))

    message = client.chat.completions.create(model=MODEL, messages=TRANSCRIPT, tools=[WEATHER]).choices[0]
    assert message.finish_reason == "stop" and not message.message.tool_calls
    assert QUOTED in message.message.content

    with client.chat.completions.stream(model=MODEL, messages=TRANSCRIPT, tools=[WEATHER]) as stream:
        final = stream.get_final_completion().choices[0]
    assert final.finish_reason == "tool_calls"
    assert [(c.function.name, json.loads(c.function.arguments)) for c in final.message.tool_calls] == [
        ("get_weather", {"city": "Rome"})]
    assert QUOTED in final.message.content
    first, second = (re.findall(r'marker="([^"]+)"', " ".join(str(m["content"]) for m in e.body["messages"]))
                     for e in upstream.chat_requests)
    assert first and second and set(first).isdisjoint(second)  # a fresh marker per request
