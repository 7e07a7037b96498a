"""The gateway-tools seam (docs/gateway-tools.md): a call of a tool the gateway runs is never sent to the client;
it is run, its result given back to the model and the next generation opens in the same response, usage summed,
under the toolset's limits and the request's time limit. A trivial in-process tool and a scripted back end."""

from __future__ import annotations

import json
import time
from typing import Any

import gevent
import pytest

from app.gateway_tools.base import GatewayApprovalRequested, GatewayCallFinished, GatewayCallStarted, \
    GatewayTool, GatewayToolset, ToolRun
from app.observability.record import RequestRecord
from app.pipeline.context import RequestContext
from app.pipeline.generate import Generation, generate
from app.pipeline.streaming import SSEBody
from app.profile import model_profile
from app.settings import Settings
from statemachine import ChoiceFinished, ParserConfig, TextDelta, ToolCallEnded, ToolSpec
from support.fakes import Answers as Scripted, FakeUpstream

USAGE = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}


def answers(*texts: str) -> Scripted:
    return Scripted(*texts, size=9, usage=USAGE)


def call(name: str, arguments: dict) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


class Adder(GatewayTool):
    """Adds two numbers; sleeps ``delay`` seconds first."""

    def __init__(self, *, delay: float = 0.0, needs_approval: bool = False, answer: str | None = None):
        super().__init__("calc__add", "Add two numbers.", {
            "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"]}, needs_approval=needs_approval, kind="test")
        self.delay = delay
        self.answer = answer
        self.runs: list[tuple[dict, float]] = []
        self.closed = 0

    def close(self) -> None:
        self.closed += 1

    def run(self, arguments: dict, deadline: float) -> ToolRun:
        self.runs.append((arguments, deadline))
        gevent.sleep(self.delay)
        if arguments.get("a") == "boom":
            raise RuntimeError("kaput")
        return ToolRun(self.answer or str(arguments["a"] + arguments["b"]), payload={"sum": True})


class Recorder:
    """An encoder that keeps every event (and says each as one SSE frame)."""

    keepalive = b": keep-alive\n\n"

    def __init__(self):
        self.events: list[Any] = []

    def opening(self, usage):
        return []

    def frames(self, index, event):
        self.events.append(event)
        return [b"data: " + type(event).__name__.encode() + b"\n\n"]

    def closing(self, usage):
        self.usage = usage
        return [b"data: end\n\n"]

    def error_frames(self, error, usage):
        self.error = error
        return b"data: error\n\n"

    def add(self, index, event):
        self.events.append(event)

    def body(self, usage):
        self.usage = usage
        return {"usage": dict(usage)}


WEATHER = ToolSpec("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}})


def run(upstream: FakeUpstream, tool: GatewayTool, *, stream: bool = False, max_calls: int = 8,
        timeout: float = 5.0, max_result_chars: int = 1000, **settings: Any) -> tuple[Recorder, RequestRecord]:
    settings_ = Settings(**{"reask_calls": "off", **settings})
    record = RequestRecord("rid", "POST", "/v1/responses")
    context = RequestContext(settings_, upstream, record=record, keepalive=False)
    generation = Generation(model_profile(settings_, "m"), [{"role": "user", "content": "What is 2 + 3?"}],
                            ParserConfig.for_tools([WEATHER]), {}, stream,
                            gateway=GatewayToolset({tool.name: tool}, max_calls=max_calls, timeout_seconds=timeout,
                                                   max_result_chars=max_result_chars))
    encoder = Recorder()
    reply = generate(generation, encoder, context)
    if isinstance(reply, SSEBody):
        b"".join(reply)
    return encoder, record


def kinds(encoder: Recorder) -> list[str]:
    return [type(e).__name__ for e in encoder.events if not isinstance(e, TextDelta)]


@pytest.mark.parametrize("stream", [False, True])
def test_a_gateway_call_runs_and_the_answer_follows_in_the_same_response(stream) -> None:
    upstream = answers("Let me add. " + call("calc__add", {"a": 2, "b": 3}), "It is 5.")
    tool = Adder()
    encoder, record = run(upstream, tool, stream=stream)
    assert tool.runs and tool.runs[0][0] == {"a": 2, "b": 3}
    assert kinds(encoder) == ["GatewayCallStarted", "GatewayCallFinished", "ChoiceFinished"]
    finished = [e for e in encoder.events if isinstance(e, GatewayCallFinished)][0]
    assert finished.run.output == "5" and finished.run.payload == {"sum": True} and finished.tool is tool
    assert json.loads(finished.arguments) == {"a": 2, "b": 3}
    assert "".join(e.text for e in encoder.events if isinstance(e, TextDelta)) == "Let me add. It is 5."
    assert not any(isinstance(e, ToolCallEnded) for e in encoder.events), "the client never saw the call"
    assert encoder.events[-1] == ChoiceFinished("stop")
    second = upstream.bodies[1]["messages"]
    assert "calc__add" in json.dumps(upstream.bodies[0]["messages"]), "the model was taught the tool"
    assert "5" in second[-1]["content"] or "5" in json.dumps(second[-2:]), "the result went back to the model"
    assert encoder.usage["prompt_tokens"] == 20 and encoder.usage["completion_tokens"] == 6, "usage summed"
    assert record.gateway == ("test.call:ok",)
    assert tool.closed >= 1, "the tool's connection let go once the response ended"


def test_a_client_call_beside_a_gateway_call_ends_the_response_with_both() -> None:
    upstream = answers(call("calc__add", {"a": 1, "b": 1}) + call("get_weather", {"city": "Oslo"}), "never")
    encoder, _ = run(upstream, Adder())
    assert kinds(encoder) == ["ToolCallStarted", "ToolCallArgumentsDelta", "ToolCallEnded", "GatewayCallStarted",
                              "GatewayCallFinished", "ChoiceFinished"]
    assert len(upstream.bodies) == 1


def test_a_call_needing_approval_is_not_run_and_ends_the_response() -> None:
    upstream = answers(call("calc__add", {"a": 1, "b": 1}), "never")
    tool = Adder(needs_approval=True)
    encoder, _ = run(upstream, tool)
    assert kinds(encoder) == ["GatewayApprovalRequested", "ChoiceFinished"] and not tool.runs
    request = encoder.events[0]
    assert isinstance(request, GatewayApprovalRequested) and json.loads(request.arguments) == {"a": 1, "b": 1}
    assert len(upstream.bodies) == 1


def test_past_the_call_limit_the_model_is_told_and_offered_the_tool_no_more() -> None:
    upstream = answers(call("calc__add", {"a": 0, "b": 1}),
                       call("calc__add", {"a": 1, "b": 1}) + call("calc__add", {"a": 2, "b": 1}), "Done.")
    tool = Adder()
    encoder, record = run(upstream, tool, max_calls=2)
    assert len(tool.runs) == 2 and len(upstream.bodies) == 3
    refused = [e for e in encoder.events if isinstance(e, GatewayCallFinished)][-1]
    assert refused.run.error and "limit of 2" in refused.run.output
    assert "calc__add" in json.dumps(upstream.bodies[1]["messages"][0])
    assert "calc__add" not in json.dumps(upstream.bodies[2]["messages"][0]), "no longer taught"
    assert record.gateway == ("test.call:ok", "test.call:ok", "test.call:limit")


def test_a_failing_tool_is_the_model_s_error_and_a_long_result_is_cut() -> None:
    upstream = answers(call("calc__add", {"a": "boom", "b": 1}), call("calc__add", {"a": 1, "b": 1}), "ok")
    encoder, record = run(upstream, Adder(answer="x" * 5000), max_result_chars=100)
    runs = [e.run for e in encoder.events if isinstance(e, GatewayCallFinished)]
    assert runs[0].error and "kaput" in runs[0].output
    assert runs[1].error is None and runs[1].output.startswith("x" * 100) and len(runs[1].output) < 200
    assert record.gateway == ("test.call:error", "test.call:ok")


@pytest.mark.parametrize("stream", [False, True])
def test_a_hung_tool_costs_no_more_than_its_timeout(stream) -> None:
    upstream = answers(call("calc__add", {"a": 1, "b": 1}), "It hung.")
    tool = Adder(delay=30)
    began = time.monotonic()
    encoder, record = run(upstream, tool, stream=stream, timeout=0.5, heartbeat_seconds=0.1)
    took = time.monotonic() - began
    assert 0.5 <= took < 3, took
    finished = [e for e in encoder.events if isinstance(e, GatewayCallFinished)][0]
    assert finished.run.error and "0.5 seconds" in finished.run.output
    assert encoder.events[-1] == ChoiceFinished("stop") and record.gateway == ("test.call:timeout",)


def test_the_request_s_time_limit_bounds_a_run_too() -> None:
    upstream = answers(call("calc__add", {"a": 1, "b": 1}), "never")
    began = time.monotonic()
    encoder, _ = run(upstream, Adder(delay=30), stream=True, timeout=20, stream_max_seconds=0.6,
                     heartbeat_seconds=0.1)
    assert time.monotonic() - began < 3
    assert encoder.error.code == "stream_time_limit"


def test_a_streamed_call_s_start_goes_out_before_it_runs_and_idle_ticks_keep_the_stream() -> None:
    upstream = answers(call("calc__add", {"a": 1, "b": 1}), "2")
    tool = Adder(delay=0.5)
    settings_ = Settings(reask_calls="off", heartbeat_seconds=0.1)
    context = RequestContext(settings_, upstream, keepalive=True)
    generation = Generation(model_profile(settings_, "m"), [{"role": "user", "content": "1+1?"}],
                            ParserConfig.for_tools([WEATHER]), {}, True, gateway=GatewayToolset({tool.name: tool}))
    body = generate(generation, Recorder(), context)
    pieces = []
    for piece in body:
        pieces.append((time.monotonic(), piece))
    started = next(t for t, p in pieces if b"GatewayCallStarted" in p)
    finished = next(t for t, p in pieces if b"GatewayCallFinished" in p)
    assert finished - started >= 0.4, "the start went out before the run"
    assert sum(p == Recorder.keepalive for _, p in pieces) >= 2, "keep-alives while the tool ran"


def test_a_gateway_tool_named_like_a_client_tool_is_refused() -> None:
    clash = Adder()
    clash.name = "get_weather"
    with pytest.raises(ValueError, match="get_weather"):
        run(answers("hi"), clash)


def test_the_event_classes_are_plain_values() -> None:
    tool = Adder()
    assert GatewayCallStarted("c", tool, "{}") == GatewayCallStarted("c", tool, "{}")
