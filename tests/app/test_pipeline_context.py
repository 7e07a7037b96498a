"""The pipeline runs on what the endpoint hands it: no Flask app, no request, no ambient record."""

from __future__ import annotations

import flask
import orjson

from app.chat.encoder import ChatEncoder
from app.chat.plan import chat_generation
from app.chat.schemas import parse_chat_request
from app.chat.views import plan_chat_completion
from app.observability.record import RequestRecord
from app.pipeline.context import RequestContext
from app.pipeline.generate import generate
from app.pipeline.streaming import SSEBody
from app.settings import Settings
from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks

CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


def _body(**extra):
    return {"model": "m", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER_TOOL],
            **extra}


def test_a_chat_completion_outside_any_flask_context():
    assert not flask.has_app_context()
    upstream = FakeUpstream(text_chunks("Sure." + CALL))
    record = RequestRecord("req-1", "POST", "/v1/chat/completions")
    context = RequestContext(Settings(), upstream, record=record)
    reply = generate(*plan_chat_completion(_body(), context), context)
    message = reply["choices"][0]["message"]
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"
    assert reply["choices"][0]["finish_reason"] == "tool_calls"
    assert upstream.streams and len(record.drivers) == 1  # the record it was handed got the driver
    assert record.drivers[0].outcomes["emitted"] == 1


def test_a_stream_outside_any_flask_context_reports_to_its_record():
    record = RequestRecord("req-2", "POST", "/v1/chat/completions")
    context = RequestContext(Settings(heartbeat_seconds=5), FakeUpstream(text_chunks("Hello there.")), record=record,
                             keepalive=False)
    reply = generate(*plan_chat_completion(_body(stream=True), context), context)
    assert isinstance(reply, SSEBody)
    frames = b"".join(reply).split(b"\n\n")
    assert frames[-2] == b"data: [DONE]"
    text = "".join(orjson.loads(frame[6:])["choices"][0]["delta"].get("content") or ""
                   for frame in frames[:-2] if frame.startswith(b"data: {"))
    assert text == "Hello there."
    assert record.stream and record.first_byte is not None


def test_the_context_says_marker_mode():
    upstream = FakeUpstream(text_chunks("No call."))
    record = RequestRecord("req-3", "POST", "/v1/chat/completions")
    context = RequestContext(Settings(auto_marker=False), upstream, record=record, marker_requested=True)
    req = parse_chat_request(_body())
    generation = chat_generation(_body(), req, context.settings, marker_requested=context.marker_requested)
    assert generation.config.marker  # X-Toolwire-Marker: 1, as the HTTP layer read it
    reply = generate(generation, ChatEncoder("chatcmpl-1", 0, "m"), context)
    assert reply["choices"][0]["message"]["content"] == "No call."
    assert generation.config.marker in upstream.bodies[0]["messages"][0]["content"]  # the prompt teaches it
