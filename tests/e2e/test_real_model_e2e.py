"""A real model in the loop: llama.cpp's ``llama-server`` with SmolLM2-135M-Instruct and Gemma 3 270M, built and
downloaded once by ``support.llama_cpp_server`` (``make test`` runs its ``--install``), behind toolwire; native
mode's faults with llama-cpp-python's server (``support.llama_server``) where that server is what is tested.

What a 135M or 270M model can honestly be expected to do is not to choose tools well; these tests assert
that the pipeline works with real model text: every answer is well-formed (the wire-contract checkers),
a streamed and an unstreamed answer to the same model text are the same (the tap replays one generation
to every variant), Chat and Responses agree, a call the model writes comes out parsed, native mode's
follow-up turn is accepted, and an openai SDK agent loop reaches a final answer.

With ``TOOLWIRE_RECORD_MODEL_ANSWERS=<file>`` the model's answers are written there: the recordings in
``tests/e2e/data/real_model_answers.json`` were made so, and ``test_real_model_replay.py`` replays them
without the model.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Iterator

import openai
import pytest

from support.endpoints import CHAT, RESPONSES, Outcome, send
from support.llama_cpp_server import LlamaCppServer
from support.llama_server import LlamaServer, ModelServer
from support.model_tap import ModelTap
from support.real_model import EXAMPLE_EXCHANGE, HISTORY, MAX_TOKENS, MODELS, NAMES, PROMPTS, TOOLS, request
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

TEST_TIME_LIMIT = 120.0  # a CPU model: the tool block's first prompt processing alone takes seconds
@pytest.fixture(scope="module")
def recordings() -> Iterator[list[dict[str, Any]]]:
    """The answers to record (written at the end when ``TOOLWIRE_RECORD_MODEL_ANSWERS`` names a file)."""
    kept: list[dict[str, Any]] = []
    yield kept
    target = os.environ.get("TOOLWIRE_RECORD_MODEL_ANSWERS")
    if target:
        with open(target, "w") as out:
            json.dump(kept, out, indent=1, ensure_ascii=False)
            out.write("\n")


def _tapped(server: ModelServer) -> Iterator[ModelTap]:
    with server, ModelTap(server.v1_url) as tap:
        yield tap


@pytest.fixture(scope="module")
def smollm2() -> Iterator[ModelTap]:
    yield from _tapped(LlamaCppServer("smollm2", n_ctx=4096))


@pytest.fixture(scope="module")
def gemma3() -> Iterator[ModelTap]:
    yield from _tapped(LlamaCppServer("gemma3", n_ctx=4096))


@pytest.fixture(scope="module")
def smollm2_python() -> Iterator[ModelTap]:
    """llama-cpp-python's server: its ``chatml`` format ignores ``tools`` but forces a named tool_choice."""
    yield from _tapped(LlamaServer("smollm2"))


def toolwire_for(factory: Callable[..., ToolwireServer], tap: ModelTap) -> ToolwireServer:
    return factory(TOOLWIRE_UPSTREAM_URL=tap.v1_url, TOOLWIRE_MODEL_MAP=json.dumps(MODELS),
                   TOOLWIRE_UPSTREAM_READ_TIMEOUT="100")


def four_ways(server: ToolwireServer, model: str, prompt: str) -> dict[tuple[str, bool], Outcome]:
    """The prompt through Chat and Responses, streamed and not; every answer checked against the contract.
    An answer may fail only as toolwire fails a call it cannot deliver (``invalid_tool_call``)."""
    outcomes = {}
    for endpoint in (CHAT, RESPONSES):
        for stream in (True, False):
            outcome = send(server.v1_url, endpoint, request(endpoint, model, prompt, stream=stream), within=100,
                           headers={"X-Request-Id": f"real-{model}-{endpoint.name}-{stream}"})
            assert outcome.kind == "completed" or "invalid_tool_call" in json.dumps(outcome.error), (
                endpoint.name, stream, outcome.kind, outcome.error, outcome.body[-800:])
            outcomes[endpoint.name, stream] = outcome
    return outcomes


def seen(outcome: Outcome) -> tuple[Any, ...]:
    """What the client got: the calls and the text, or that the answer failed."""
    return ("completed", outcome.calls, outcome.text.strip()) if outcome.kind == "completed" else ("failed",)


def record(recordings: list[dict[str, Any]], tap: ModelTap, model: str, known: int, outcome: Outcome) -> None:
    """Keep the one model text both endpoints got (``known``: how many answers the tap had before)."""
    fresh = tap.answers[known:]
    if len(fresh) == 1 and outcome.kind == "completed":
        [(body, payloads)] = fresh
        recordings.append({"model": model, "tool_format": MODELS[model].get("tool_format"), "body": body,
                           "payloads": payloads, "calls": [list(call) for call in outcome.calls],
                           "text": outcome.text})


def assert_one_model_text(outcomes: dict[tuple[str, bool], Outcome], tap: ModelTap, forwarded_before: int) -> None:
    chat, chat_whole = outcomes["chat", True], outcomes["chat", False]
    responses, responses_whole = outcomes["responses", True], outcomes["responses", False]
    assert seen(chat) == seen(chat_whole), "stream = non-stream (Chat)"
    assert seen(responses) == seen(responses_whole), "stream = non-stream (Responses)"
    if tap.forwarded - forwarded_before == 1:  # both endpoints sent the same body: one model text
        assert seen(chat) == seen(responses), "Chat = Responses"
    for name, arguments in chat.calls:
        assert name in NAMES and isinstance(arguments, dict), "a call comes out parsed, for an offered tool"


# (Gemma 3 270M is a base model: without the example it echoes the tool block until max_tokens; one prompt.)
@pytest.mark.parametrize("model, prompt", [("smollm2", "followup_next_call"), ("smollm2", "no_tool"),
                                           ("gemma3", "followup_next_call")])
def test_prompt_mode_with_a_real_model(request: pytest.FixtureRequest, model: str, prompt: str,
                                       toolwire_factory: Callable[..., ToolwireServer],
                                       recordings: list[dict[str, Any]]) -> None:
    tap: ModelTap = request.getfixturevalue(model)
    before, known = tap.forwarded, len(tap.answers)
    outcomes = four_ways(toolwire_for(toolwire_factory, tap), model, PROMPTS[prompt])
    assert_one_model_text(outcomes, tap, before)
    record(recordings, tap, model, known, outcomes["chat", False])


def test_the_compact_manifest_and_the_example_exchange_with_a_real_model(
        smollm2: ModelTap, toolwire_factory: Callable[..., ToolwireServer]) -> None:
    """A first turn (no history from the client) to SmolLM2 taught by its model_map entry: the model gets the
    signatures and the example exchange before the question; the answer is well-formed, streamed = not."""
    server = toolwire_for(toolwire_factory, smollm2)
    question = [{"role": "user", "content": "What's the weather in Madrid?"}]
    outcomes = []
    for stream in (True, False):
        body = {**request(CHAT, "smollm2-taught", "", stream=stream), "messages": question}
        outcomes.append(send(server.v1_url, CHAT, body, within=100, headers={"X-Request-Id": f"taught-{stream}"}))
        assert outcomes[-1].kind == "completed", (outcomes[-1].error, outcomes[-1].body[-800:])
    assert seen(outcomes[0]) == seen(outcomes[1])
    assert all(name in NAMES for name, _ in outcomes[0].calls)
    sent = next(body for body, _ in reversed(smollm2.answers) if body["messages"][-1] == question[0])
    assert "get_weather(city: string) - " in sent["messages"][0]["content"]
    assert [m["content"].splitlines()[0] for m in sent["messages"][1:3]] == [
        EXAMPLE_EXCHANGE["user"], '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>']


def test_native_mode_forced_call_and_its_follow_up_turn(smollm2_python: ModelTap,
                                                        toolwire_factory: Callable[..., ToolwireServer]) -> None:
    """llama-cpp-python's ``chatml`` format ignores ``tools`` but forces a named tool_choice with a grammar:
    one call (no phantom second one from its repeated headers, fault 3), a non-UUID request id accepted
    (fault 7), and the next turn, the call and its result in native shape, accepted (fault 6)."""
    server = toolwire_for(toolwire_factory, smollm2_python)
    forced = {"type": "function", "function": {"name": "get_weather"}}
    for stream in (True, False):
        body = request(CHAT, "smollm2-native", PROMPTS["followup_next_call"], stream=stream, tool_choice=forced)
        outcome = send(server.v1_url, CHAT, body, within=100, headers={"X-Request-Id": f"native-{stream}"})
        assert outcome.kind == "completed", (outcome.error, outcome.body[-800:])
        assert [name for name, _ in outcome.calls] == ["get_weather"]
    call = {"id": "call_paris", "type": "function", "function": {"name": "get_weather",
                                                                 "arguments": json.dumps(outcome.calls[0][1])}}
    follow_up = request(CHAT, "smollm2-native", PROMPTS["followup_next_call"], stream=False)
    follow_up["messages"] += [{"role": "assistant", "content": None, "tool_calls": [call]},
                              {"role": "tool", "tool_call_id": "call_paris", "content": '{"temperature_c": 21}'}]
    answered = send(server.v1_url, CHAT, follow_up, within=100)
    assert answered.kind == "completed", (answered.error, answered.body[-800:])


def test_an_openai_sdk_agent_loop_reaches_a_final_answer(smollm2: ModelTap,
                                                         toolwire_factory: Callable[..., ToolwireServer]) -> None:
    """The openai SDK runs the loop: the model's calls are executed and answered until it answers in text;
    from the third turn on the loop offers no tools, as agents do to get an answer."""
    server = toolwire_for(toolwire_factory, smollm2)
    client = openai.OpenAI(base_url=server.v1_url, api_key="unused", max_retries=0, timeout=100)
    messages: list[Any] = [*HISTORY, {"role": "user", "content": PROMPTS["followup_next_call"]}]
    for turn in range(4):
        tools = [{"type": "function", "function": t} for t in TOOLS] if turn < 2 else openai.NOT_GIVEN
        answer = client.chat.completions.create(model="smollm2", messages=messages, tools=tools, temperature=0,
                                                max_tokens=MAX_TOKENS)
        choice = answer.choices[0]
        if not choice.message.tool_calls:
            assert choice.finish_reason in ("stop", "length") and choice.message.content
            return
        assert choice.finish_reason == "tool_calls"
        messages.append({"role": "assistant", "content": choice.message.content, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in choice.message.tool_calls]})
        for call in choice.message.tool_calls:
            assert call.function.name in NAMES and isinstance(json.loads(call.function.arguments), dict)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": '{"temperature_c": 21}'})
    pytest.fail("the loop asked for a final answer and got none")
