"""Unit tests of the wire-contract checkers (tests/support/invariants.py).

Each broken variant is a row of wire-contract section 6 (or a section 9 invariant) applied to a
known-good baseline; the checker must reject it naming the right invariant, and accept the baseline.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

import httpx
import openai
import pytest

from support.invariants import (
    ContractViolation,
    StreamRecorder,
    check_chat_completion,
    check_chat_stream,
    check_error_envelope,
    check_responses_stream,
)

TOP = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1730000000, "model": "m", "system_fingerprint": "fp_1"}


def chunk(delta: dict[str, Any], *, index: int = 0, finish: str | None = None, usage: bool = True) -> dict[str, Any]:
    """One chat chunk with the constant top-level fields."""
    body = {**TOP, "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    return {**body, "usage": None} if usage else body


def sse(frames: list[Any], *, eol: str = "\n") -> str:
    """Serialise frames (dicts → JSON, strings verbatim as data) into an SSE body."""
    out = []
    for frame in frames:
        payload = frame if isinstance(frame, str) else json.dumps(frame, separators=(",", ":"))
        out.append(f"data: {payload}{eol}{eol}")
    return "".join(out)


def baseline_chat() -> list[Any]:
    """The section 3.6 example: two parallel calls with include_usage."""
    return [
        chunk({"role": "assistant", "content": None, "refusal": None,
               "tool_calls": [{"index": 0, "id": "call_A", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_B", "type": "function", "function": {"name": "get_time", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"tz":"CET"}'}}]}),
        chunk({}, finish="tool_calls"),
        {**TOP, "choices": [], "usage": {"prompt_tokens": 82, "completion_tokens": 40, "total_tokens": 122,
                                         "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                                         "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                                                       "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}},
        "[DONE]",
    ]  # fmt: skip


def text_stream(*pieces: str, finish: str = "stop") -> list[Any]:
    """A plain text stream without usage."""
    frames = [chunk({"role": "assistant", "content": "", "refusal": None}, usage=False)]
    frames += [chunk({"content": p}, usage=False) for p in pieces]
    return frames + [chunk({}, finish=finish, usage=False), "[DONE]"]


def tc(index: int, **fields: Any) -> dict[str, Any]:
    """A delta with one tool_calls entry."""
    return {"tool_calls": [{"index": index, **fields}]}


def test_baseline_36_is_accepted_and_summarised() -> None:
    summary = check_chat_stream(sse(baseline_chat()), include_usage=True, legacy=False, status=200, content_type="text/event-stream")
    choice = summary.choice(0)
    assert [(c.id, c.name, c.args, c.complete) for c in choice.tool_calls] == [
        ("call_A", "get_weather", {"city": "Paris"}, True),
        ("call_B", "get_time", {"tz": "CET"}, True),
    ]
    assert (choice.finish_reason, choice.role, choice.content) == ("tool_calls", "assistant", "")
    assert summary.usage["total_tokens"] == 122
    assert summary.done and summary.error is None
    assert (summary.id, summary.model) == ("chatcmpl-1", "m")


def test_text_with_keepalive_comments_and_crlf_is_accepted() -> None:
    raw = ": keep-alive\r\n\r\n" + sse(text_stream("Hel", "lo"), eol="\r\n")
    summary = check_chat_stream(raw, include_usage=False)
    assert summary.choice(0).content == "Hello"
    assert summary.comments == ["keep-alive"]


def test_mid_stream_error_frame_is_accepted() -> None:
    frames = text_stream("Hi")[:2] + [{"error": {"message": "upstream exploded", "type": "server_error", "param": None, "code": "server_error"}}, "[DONE]"]
    summary = check_chat_stream(sse(frames))
    assert summary.error["message"] == "upstream exploded"
    assert summary.choice(0).finish_reason is None


def test_error_frame_may_cut_an_open_call() -> None:
    frames = [
        chunk({"role": "assistant", "content": None, **tc(0, id="call_Z", type="function", function={"name": "f", "arguments": ""})}, usage=False),
        chunk(tc(0, function={"arguments": '{"a": '}), usage=False),
        {"error": {"message": "cut", "type": "server_error", "param": None, "code": None}},
    ]
    summary = check_chat_stream(sse(frames))
    assert summary.choice(0).tool_calls[0].complete is False


def test_legacy_function_call_is_accepted_when_requested() -> None:
    frames = [
        chunk({"role": "assistant", "content": None, "function_call": {"name": "get_weather", "arguments": ""}}, usage=False),
        chunk({"function_call": {"arguments": '{"city": "SF"}'}}, usage=False),
        chunk({}, finish="function_call", usage=False),
        "[DONE]",
    ]
    summary = check_chat_stream(sse(frames), legacy=True, include_usage=False)
    call = summary.choice(0).function_call
    assert (call.name, call.args, summary.choice(0).finish_reason) == ("get_weather", {"city": "SF"}, "function_call")
    with pytest.raises(ContractViolation, match=r"\[inv 16\]"):
        check_chat_stream(sse(frames), legacy=False)


def _mutate(fn: Callable[[list[Any]], Any]) -> Callable[[], str]:
    """A broken stream: the baseline frames changed in place by ``fn`` (its result is ignored)."""

    def build() -> str:
        frames = baseline_chat()
        fn(frames)
        return sse(frames)

    return build


def _text(fn: Callable[[list[Any]], str]) -> Callable[[], str]:
    """A broken stream: the raw text ``fn`` makes from the baseline frames."""
    return lambda: fn(baseline_chat())


BROKEN_CHAT: dict[str, tuple[Callable[[], str], int]] = {
    "role repeated on every chunk": (_mutate(lambda f: [c["choices"][0]["delta"].update(role="assistant") for c in f[1:6]]), 6),
    "role never sent": (_mutate(lambda f: f[0]["choices"][0]["delta"].pop("role")), 6),
    "choice without delta": (_mutate(lambda f: f[5]["choices"][0].pop("delta")), 6),
    "choice index missing": (_mutate(lambda f: f[1]["choices"][0].pop("index")), 6),
    "tool_calls index missing": (_mutate(lambda f: f[1]["choices"][0]["delta"]["tool_calls"][0].pop("index")), 8),
    "continuation without function object": (_mutate(lambda f: f[1]["choices"][0]["delta"]["tool_calls"][0].pop("function")), 8),
    "indices start at 1": (_mutate(lambda f: [t.update(index=t["index"] + 1) for c in f[:5] for t in c["choices"][0]["delta"]["tool_calls"]]), 9),
    "type missing on first fragment": (_mutate(lambda f: f[0]["choices"][0]["delta"]["tool_calls"][0].pop("type")), 10),
    "id missing entirely": (_mutate(lambda f: f[0]["choices"][0]["delta"]["tool_calls"][0].pop("id")), 10),
    "args before name": (_mutate(lambda f: f[0]["choices"][0]["delta"]["tool_calls"][0]["function"].pop("name")), 10),
    "duplicate call id": (_mutate(lambda f: f[3]["choices"][0]["delta"]["tool_calls"][0].update(id="call_A")), 10),
    "type null on continuation": (_mutate(lambda f: f[1]["choices"][0]["delta"]["tool_calls"][0].update(type=None)), 7),
    "null content on a later delta": (_mutate(lambda f: f[1]["choices"][0]["delta"].update(content=None)), 7),
    "id and type on every fragment": (_mutate(lambda f: f[1]["choices"][0]["delta"]["tool_calls"][0].update(id="call_A", type="function")), 11),
    "name on every fragment": (_mutate(lambda f: f[1]["choices"][0]["delta"]["tool_calls"][0]["function"].update(name="get_weather")), 11),
    "name split get_ + weather": (_mutate(lambda f: (f[0]["choices"][0]["delta"]["tool_calls"][0]["function"].update(name="get_"),
                                                     f[1]["choices"][0]["delta"]["tool_calls"][0]["function"].update(name="weather"))), 11),
    "fragments interleaved 0,1,0": (_mutate(lambda f: (f.insert(4, f.pop(2)))), 12),
    "full arguments re-sent at the end": (_mutate(lambda f: f.insert(3, chunk(tc(0, function={"arguments": '{"city":"Paris"}'})))), 13),
    "cumulative arguments": (_mutate(lambda f: f[2]["choices"][0]["delta"]["tool_calls"][0]["function"].update(arguments='{"city":"Paris"}')), 13),
    "parameterless call with empty arguments": (_mutate(lambda f: f[4]["choices"][0]["delta"]["tool_calls"][0]["function"].update(arguments="")), 13),
    "finish_reason missing": (_mutate(lambda f: f.pop(5)), 14),
    "finish_reason twice": (_mutate(lambda f: f.insert(5, chunk({}, finish="tool_calls"))), 14),
    "finish_reason on every chunk": (_mutate(lambda f: [c["choices"][0].update(finish_reason="tool_calls") for c in f[:5]]), 14),
    "tool call after finish": (_mutate(lambda f: f.insert(6, chunk(tc(1, function={"arguments": " "})))), 14),
    "stop despite tool calls": (_mutate(lambda f: f[5]["choices"][0].update(finish_reason="stop")), 15),
    "tool_calls finish without calls": (lambda: sse(text_stream("hi", finish="tool_calls")), 15),
    "function_call delta in a tools response": (_mutate(lambda f: f[4]["choices"][0]["delta"].update(function_call={"arguments": "{}"})), 16),
    "object missing": (_mutate(lambda f: f[2].pop("object")), 5),
    "chunk id changes": (_mutate(lambda f: f[3].update(id="chatcmpl-2")), 5),
    "model empty": (_mutate(lambda f: [c.update(model="") for c in f[:7]]), 5),
    "usage chunk before finish": (_mutate(lambda f: f.insert(5, f.pop(6))), 17),
    "usage null missing on chunks": (_mutate(lambda f: f[1].pop("usage")), 17),
    "non-standard usage fields": (_mutate(lambda f: f[6]["usage"].update(time_to_first_token=0.2)), 17),
    "usage without ints": (_mutate(lambda f: f[6]["usage"].update(total_tokens="122")), 17),
    "[DONE] missing": (_mutate(lambda f: f.pop()), 18),
    "[DONE] twice": (_mutate(lambda f: f.append("[DONE]")), 18),
    "chunk after [DONE]": (_mutate(lambda f: f.append(chunk({}))), 18),
    "frames after the error frame": (_mutate(lambda f: f.insert(3, {"error": {"message": "boom"}})), 19),
    "error frame without message": (_mutate(lambda f: (f.__setitem__(slice(3, None), [{"error": {"type": "server_error"}}]))), 19),
    "event: lines in chat": (_text(lambda f: sse(f).replace("data: {", "event: message\ndata: {")), 3),
    "event: ping without data": (_text(lambda f: "event: ping\n\n" + sse(f)), 2),
    "empty comment keep-alive": (_text(lambda f: ":\n\n" + sse(f)), 2),
    "invalid JSON payload": (_text(lambda f: sse(f).replace('"arguments":"{\\"tz', '"arguments":{\\"tz')), 1),
    "multi-line JSON": (_text(lambda f: sse(f).replace('"object":', '\ndata: "object":', 1)), 1),
    "no blank line after the last event": (_text(lambda f: sse(f)[:-1]), 1),
}


@pytest.mark.parametrize("name", list(BROKEN_CHAT))
def test_broken_chat_stream_is_rejected(name: str) -> None:
    build, invariant = BROKEN_CHAT[name]
    with pytest.raises(ContractViolation, match=rf"\[inv {invariant}\]"):
        check_chat_stream(build(), include_usage=True)


def test_choices_must_first_appear_in_index_order() -> None:
    frames = [
        chunk({"role": "assistant", "content": "b"}, index=1, usage=False),
        chunk({"role": "assistant", "content": "a"}, index=0, usage=False),
        chunk({}, index=0, finish="stop", usage=False),
        chunk({}, index=1, finish="stop", usage=False),
        "[DONE]",
    ]
    with pytest.raises(ContractViolation, match=r"\[3.10\] choice 1 appears before choice 0"):
        check_chat_stream(sse(frames))
    frames[0], frames[1] = frames[1], frames[0]
    summary = check_chat_stream(sse(frames))
    assert (summary.choice(0).content, summary.choice(1).content) == ("a", "b")


def test_usage_chunk_without_include_usage_is_rejected() -> None:
    with pytest.raises(ContractViolation, match=r"\[inv 17\]"):
        check_chat_stream(sse(baseline_chat()), include_usage=False)


def test_missing_usage_chunk_is_rejected_when_requested() -> None:
    with pytest.raises(ContractViolation, match=r"\[inv 17\] include_usage requested"):
        check_chat_stream(sse(text_stream("hi")), include_usage=True)


def test_tool_calls_in_a_legacy_response_are_rejected() -> None:
    with pytest.raises(ContractViolation, match=r"\[inv 16\]"):
        check_chat_stream(sse(baseline_chat()), legacy=True)


def test_call_ids_must_be_unique_across_responses() -> None:
    seen: set[str] = set()
    check_chat_stream(sse(baseline_chat()), seen_call_ids=seen)
    assert seen == {"call_A", "call_B"}
    with pytest.raises(ContractViolation, match=r"\[inv 10\] call id 'call_A' was already used"):
        check_chat_stream(sse(baseline_chat()), seen_call_ids=seen)


def test_wrong_status_or_content_type_is_rejected() -> None:
    with pytest.raises(ContractViolation, match=r"\[inv 1\] stream answered with status 500"):
        check_chat_stream(sse(text_stream("x")), status=500)
    with pytest.raises(ContractViolation, match=r"\[inv 1\] content-type"):
        check_chat_stream(sse(text_stream("x")), content_type="application/json")


# ---- non-streaming -------------------------------------------------------------------------------


def completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    """A non-streaming chat completion with one choice."""
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1730000000, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "logprobs": None, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


CALL = {"id": "call_A", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}


def test_section_39_completion_is_accepted() -> None:
    check_chat_completion(completion({"content": None, "refusal": None, "tool_calls": [CALL]}, "tool_calls"), legacy=False)
    check_chat_completion(completion({"content": None, "function_call": {"name": "f", "arguments": "{}"}}, "function_call"), legacy=True)
    check_chat_completion(json.dumps(completion({"content": "hi"}, "stop")).encode())


@pytest.mark.parametrize(
    ("body", "label"),
    [
        (completion({"content": None, "tool_calls": [CALL]}, "stop"), "inv 15"),
        (completion({"content": "hi"}, "tool_calls"), "inv 15"),
        (completion({"content": "", "tool_calls": [CALL]}, "tool_calls"), "3.9"),
        (completion({"content": None, "tool_calls": [{**CALL, "type": None}]}, "tool_calls"), "3.9"),
        (completion({"content": None, "tool_calls": [{**CALL, "function": {"name": "f", "arguments": ""}}]}, "tool_calls"), "inv 13"),
        (completion({"content": None, "tool_calls": [CALL, CALL]}, "tool_calls"), "inv 10"),
        (completion({"content": None, "function_call": {"name": "f", "arguments": "{}"}}, "function_call"), "inv 16"),
        (completion({"content": None, "tool_calls": [CALL]}, "function_call"), "inv 16"),
        ({**completion({"content": "hi"}, "stop"), "object": "chat.completion.chunk"}, "3.9"),
    ],
)
def test_broken_completion_is_rejected(body: dict[str, Any], label: str) -> None:
    with pytest.raises(ContractViolation, match=rf"\[{label}\]"):
        check_chat_completion(body, legacy=False)


# ---- Responses ------------------------------------------------------------------------------------

RESPONSE = {
    "id": "resp_1", "object": "response", "created_at": 1730000000, "model": "m", "output": [],
    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "status": "in_progress", "error": None,
    "incomplete_details": None, "instructions": None, "metadata": {}, "temperature": None, "top_p": None,
    "max_output_tokens": None, "previous_response_id": None, "reasoning": None, "store": False,
    "text": {"format": {"type": "text"}}, "truncation": "disabled", "usage": None, "user": None,
}  # fmt: skip
MSG_DONE = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "Let me check.", "annotations": [], "logprobs": []}]}  # fmt: skip
FC_DONE = {"id": "fc_1", "type": "function_call", "status": "completed", "arguments": '{"city":"Paris"}', "call_id": "call_A", "name": "get_weather"}
USAGE = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
         "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}  # fmt: skip


def baseline_responses() -> list[dict[str, Any]]:
    """The section 4.2 order: one message, then one function call, then response.completed."""
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    msg = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    fc = {"item_id": "fc_1", "output_index": 1}
    events = [
        {"type": "response.created", "response": copy.deepcopy(RESPONSE)},
        {"type": "response.in_progress", "response": copy.deepcopy(RESPONSE)},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", **msg, "part": part},
        {"type": "response.output_text.delta", **msg, "delta": "Let me ", "logprobs": []},
        {"type": "response.output_text.delta", **msg, "delta": "check.", "logprobs": []},
        {"type": "response.output_text.done", **msg, "text": "Let me check.", "logprobs": []},
        {"type": "response.content_part.done", **msg, "part": {**part, "text": "Let me check."}},
        {"type": "response.output_item.done", "output_index": 0, "item": copy.deepcopy(MSG_DONE)},
        {"type": "response.output_item.added", "output_index": 1, "item": {**FC_DONE, "status": "in_progress", "arguments": ""}},
        {"type": "response.function_call_arguments.delta", **fc, "delta": '{"city":'},
        {"type": "response.function_call_arguments.delta", **fc, "delta": '"Paris"}'},
        {"type": "response.function_call_arguments.done", **fc, "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "response.output_item.done", "output_index": 1, "item": dict(FC_DONE)},
        {"type": "response.completed", "response": {**copy.deepcopy(RESPONSE), "status": "completed",
                                                    "output": [copy.deepcopy(MSG_DONE), dict(FC_DONE)], "usage": dict(USAGE)}},
    ]  # fmt: skip
    for n, event in enumerate(events):
        event["sequence_number"] = n
    return events


def rsse(events: list[dict[str, Any]], *, event_lines: bool = True) -> str:
    """Serialise Responses events with ``event:`` lines."""
    return "".join((f"event: {e.get('type')}\n" if event_lines else "") + f"data: {json.dumps(e)}\n\n" for e in events)


def test_responses_baseline_is_accepted() -> None:
    summary = check_responses_stream(": keep-alive\n\n" + rsse(baseline_responses()), seen_call_ids=set())
    assert summary.response["status"] == "completed"
    assert [i["id"] for i in summary.items] == ["msg_1", "fc_1"]
    assert summary.error is None and summary.comments == ["keep-alive"]


def test_responses_error_event_terminal_is_accepted() -> None:
    events = baseline_responses()[:2] + [{"type": "error", "sequence_number": 2, "message": "boom", "code": None, "param": None}]
    summary = check_responses_stream(rsse(events))
    assert summary.error["message"] == "boom" and summary.response is None


def _rmut(fn: Callable[[list[dict[str, Any]]], Any], *, renumber: bool = True) -> Callable[[], str]:
    """A broken stream: the baseline events changed in place by ``fn`` (result ignored), then
    renumbered unless ``renumber`` is false."""

    def build() -> str:
        events = baseline_responses()
        fn(events)
        if renumber:
            for n, event in enumerate(events):
                event["sequence_number"] = n
        return rsse(events)

    return build


BROKEN_RESPONSES: dict[str, tuple[Callable[[], str], int]] = {
    "sequence gap": (_rmut(lambda e: e[5].update(sequence_number=6), renumber=False), 21),
    "sequence starts at 1": (_rmut(lambda e: [x.update(sequence_number=x["sequence_number"] + 1) for x in e], renumber=False), 21),
    "sequence_number missing": (_rmut(lambda e: e[3].pop("sequence_number"), renumber=False), 21),
    "first event not response.created": (_rmut(lambda e: e.pop(0)), 22),
    "created with non-empty output": (_rmut(lambda e: e[0]["response"].update(output=[MSG_DONE])), 22),
    "no terminal event": (_rmut(lambda e: e.pop()), 22),
    "trailing [DONE]": (lambda: rsse(baseline_responses()) + "data: [DONE]\n\n", 22),
    "event after terminal": (_rmut(lambda e: e.append({"type": "response.in_progress", "response": dict(RESPONSE)})), 22),
    "event line differs from type": (lambda: rsse(baseline_responses()).replace("event: response.output_text.delta", "event: delta", 1), 3),
    "event lines missing": (lambda: rsse(baseline_responses(), event_lines=False), 3),
    "response id changes": (_rmut(lambda e: e[-1]["response"].update(id="resp_2")), 23),
    "documented key missing": (_rmut(lambda e: e[0]["response"].pop("tools")), 23),
    "output_index gap": (_rmut(lambda e: [x.update(output_index=2) for x in e[9:14]]), 24),
    "two items share output_index": (_rmut(lambda e: [x.update(output_index=0) for x in e[9:14]]), 24),
    "missing output_item.done": (_rmut(lambda e: e.pop(13)), 24),
    "items overlap": (_rmut(lambda e: e.insert(8, e.pop(9))), 24),
    "function_call id without fc_": (_rmut(lambda e: [x["item"].update(id="item_1") for x in (e[9], e[13])]), 25),
    "call_id changes between added and done": (_rmut(lambda e: e[13]["item"].update(call_id="call_B")), 25),
    "function_call without call_id": (_rmut(lambda e: [x["item"].pop("call_id") for x in (e[9], e[13])]), 25),
    "item_id does not match": (_rmut(lambda e: e[10].update(item_id="fc_other")), 26),
    "text delta targets function_call": (_rmut(lambda e: e.insert(11, {"type": "response.output_text.delta", "item_id": "fc_1", "output_index": 1,
                                                                       "content_index": 0, "delta": "x", "logprobs": []})), 26),
    "delta without content_part.added": (_rmut(lambda e: e.pop(3)), 27),
    "output_text.done text differs": (_rmut(lambda e: e[6].update(text="Let me")), 27),
    "message without content lifecycle": (_rmut(lambda e: [e.pop(i) for i in (7, 6, 5, 4, 3)]), 27),
    "function_call added with full arguments": (_rmut(lambda e: e[9]["item"].update(arguments='{"city":"Paris"}')), 28),
    "no function_call_arguments.delta": (_rmut(lambda e: (e.pop(11), e.pop(10))), 28),
    "arguments.done differs from deltas": (_rmut(lambda e: e[12].update(arguments='{"city":"Rome"}')), 28),
    "arguments.done without name": (_rmut(lambda e: e[12].pop("name")), 29),
    "completed output []": (_rmut(lambda e: e[-1]["response"].update(output=[])), 30),
    "completed output null": (_rmut(lambda e: e[-1]["response"].update(output=None)), 30),
    "completed output out of order": (_rmut(lambda e: e[-1]["response"]["output"].reverse()), 30),
    "usage missing cache_write_tokens": (_rmut(lambda e: e[-1]["response"]["usage"]["input_tokens_details"].pop("cache_write_tokens")), 30),
    "usage null in completed": (_rmut(lambda e: e[-1]["response"].update(usage=None)), 30),
    "failed without error": (_rmut(lambda e: e[-1].update(type="response.failed", response={**e[-1]["response"], "status": "failed"})), 31),
    "incomplete without reason": (_rmut(lambda e: e[-1].update(type="response.incomplete", response={**e[-1]["response"], "status": "incomplete"})), 31),
    "error event without message": (_rmut(lambda e: e.__setitem__(slice(2, None), [{"type": "error", "code": "x"}])), 31),
    "unknown event type": (_rmut(lambda e: e.insert(2, {"type": "response.heartbeat"})), 32),
    "custom done terminator": (_rmut(lambda e: e.append({"type": "done"})), 32),
}


@pytest.mark.parametrize("name", list(BROKEN_RESPONSES))
def test_broken_responses_stream_is_rejected(name: str) -> None:
    build, invariant = BROKEN_RESPONSES[name]
    with pytest.raises(ContractViolation, match=rf"\[inv {invariant}\]"):
        check_responses_stream(build())


# ---- error envelopes --------------------------------------------------------------------------------


def test_error_envelope() -> None:
    good = {"error": {"message": "bad", "type": "invalid_request_error", "param": "messages", "code": None}}
    assert check_error_envelope(400, json.dumps(good).encode())["param"] == "messages"
    for status, body in [
        (200, good),
        (400, {"error": {"message": "bad", "type": "invalid_request_error", "code": None}}),
        (400, {"error": {"message": "", "type": "x", "param": None, "code": None}}),
        (400, {"error": "bad"}),
        (502, b"<html>Bad Gateway</html>"),
    ]:
        with pytest.raises(ContractViolation, match=r"\[inv 4\]"):
            check_error_envelope(status, body)


# ---- the recording transport --------------------------------------------------------------------------


def mock_server(body: str, status: int = 200, content_type: str = "text/event-stream") -> httpx.MockTransport:
    """A transport answering every request with ``body``."""
    return httpx.MockTransport(lambda request: httpx.Response(status, content=body.encode(), headers={"content-type": content_type}))


def test_recorder_checks_what_the_openai_sdk_saw() -> None:
    recorder = StreamRecorder(seen_call_ids=set())
    transport = recorder.transport()
    transport._inner = mock_server(sse(text_stream("Hel", "lo")))
    client = openai.OpenAI(base_url="http://toolwire.test/v1", api_key="t", max_retries=0, http_client=httpx.Client(transport=transport))
    with client.chat.completions.stream(model="m", messages=[{"role": "user", "content": "hi"}]) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "Hello"
    assert recorder.check_all() == []
    (record,) = recorder.records
    assert record.request_body["stream"] is True and record.summary.choice(0).content == "Hello"


def test_recorder_reports_a_broken_stream_and_drains_on_early_close() -> None:
    recorder = StreamRecorder(seen_call_ids=set())
    transport = recorder.transport()
    error = {"error": {"message": "upstream exploded", "type": "server_error", "param": None, "code": None}}
    transport._inner = mock_server(sse(text_stream("a")[:2] + [error, "[DONE]", "[DONE]"]))
    client = openai.OpenAI(base_url="http://toolwire.test/v1", api_key="t", max_retries=0, http_client=httpx.Client(transport=transport))
    with pytest.raises(openai.APIError, match="upstream exploded"):
        for _ in client.chat.completions.create(model="m", messages=[], stream=True):
            pass
    (record,) = recorder.records
    assert record.eof and record.body.count(b"[DONE]") == 2  # drained past where the SDK stopped
    (failure,) = recorder.check_all()
    assert "[inv 18] [DONE] sent 2 times" in failure
    assert recorder.check_all() == []  # each record is checked once


def test_recorder_checks_error_envelopes() -> None:
    recorder = StreamRecorder(seen_call_ids=set())
    transport = recorder.transport()
    transport._inner = mock_server('{"detail": "nope"}', status=502, content_type="application/json")
    client = openai.OpenAI(base_url="http://toolwire.test/v1", api_key="t", max_retries=0, http_client=httpx.Client(transport=transport))
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=[])
    (failure,) = recorder.check_all()
    assert "[inv 4] error body has no 'error' object" in failure
