"""The per-frame quick paths of a relayed stream yield exactly what the general paths yield.

Upstream bodies made of random chunk shapes (the common text chunk among role, finish, usage, native call,
reasoning and error chunks), written with random line ends, comments and fields, and delivered in random
receives: the SSE decoder agrees with a plain reading of the SSE rules, ``read_chunk`` with ``parse_chunk``,
and the frames the Chat and Responses endpoints send are the frames of the same chunks given as
``parse_chunk`` objects.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Iterator

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.chat.encoder import ChatEncoder
from app.pipeline.driver import ChoiceDriver
from app.pipeline.streaming import sse_body
from app.responses.encoder import ResponsesEncoder, ResponsesWireEncoder, encode_sse
from app.responses.tools import ToolOrigin
from app.upstreams.base import PAUSE, ChoiceDelta, UpstreamChunk, UpstreamError
from app.upstreams.http import HttpStream
from app.upstreams.openai_chat import parse_chunk, read_chunk
from app.upstreams.sse import SSEDecoder
from statemachine import (
    ChoiceFinished,
    ParserConfig,
    Policy,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnded,
    ToolCallInputDelta,
    ToolCallStarted,
    ToolSpec,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from frame_bench import ArrivingResponse  # noqa: E402

_TEXT = st.text(alphabet=st.sampled_from(['a', ' ', '"', '\\', '\n', 'é', '<', '>', '{', '}', '😀']), max_size=6)
_CALL = st.fixed_dictionaries({"index": st.sampled_from([0, 1])}, optional={
    "id": st.just("call_1"), "type": st.just("function"),
    "function": st.fixed_dictionaries({}, optional={"name": st.just("get_weather"), "arguments": _TEXT})})
_DELTA = st.fixed_dictionaries({}, optional={
    "role": st.just("assistant"), "content": st.one_of(st.none(), _TEXT, _TEXT, st.integers(0, 2)),
    "reasoning_content": _TEXT, "tool_calls": st.lists(_CALL, max_size=2), "function_call": st.just(
        {"name": "f", "arguments": "{}"})})
_CHOICE = st.fixed_dictionaries({"delta": st.one_of(_DELTA, _DELTA, _DELTA, st.none())}, optional={
    "index": st.sampled_from([0, 0, 0, 1, None]), "logprobs": st.none(),
    "finish_reason": st.sampled_from([None, None, "stop", "length", "tool_calls"]),
    "stop_reason": st.sampled_from([None, "END", 7])})
_CHUNK = st.fixed_dictionaries({"choices": st.lists(_CHOICE, max_size=2)}, optional={
    "id": st.just("chatcmpl-1"), "object": st.just("chat.completion.chunk"),
    "usage": st.sampled_from([None, {}, {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}, 7]),
    "error": st.sampled_from([None, {"message": "overloaded"}])})
#: The common text chunk, most of a real stream.
_TEXT_CHUNK = _TEXT.map(lambda text: {"id": "c", "object": "chat.completion.chunk", "choices": [
    {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}]})



@st.composite
def _near_text_chunks(draw: Any) -> dict[str, Any]:
    """A text chunk with one thing more or different: what the quick path must leave to the general one."""
    chunk = draw(_TEXT_CHUNK)
    choice = chunk["choices"][0]
    change = draw(st.sampled_from(["finish", "index", "usage", "error", "role", "reasoning", "call", "content",
                                   "delta", "choices", "stop", "empty"]))
    if change == "empty":  # keys some servers send on every chunk, empty (SGLang: role, reasoning, calls null)
        for key in draw(st.lists(st.sampled_from(["role", "reasoning_content", "reasoning", "thinking", "tool_calls",
                                                  "function_call", "refusal"]), min_size=1)):
            choice["delta"][key] = draw(st.sampled_from([None, "", []]))
    elif change == "finish":
        choice["finish_reason"] = draw(st.sampled_from(["stop", "length", ""]))
    elif change == "index":
        choice["index"] = draw(st.sampled_from([1, None, False]))
    elif change == "usage":
        chunk["usage"] = draw(st.sampled_from([{}, {"prompt_tokens": 1, "completion_tokens": 1}, None, 3]))
    elif change == "error":
        chunk["error"] = draw(st.sampled_from([{"message": "boom"}, None, "", "boom"]))
    elif change == "role":
        choice["delta"]["role"] = "assistant"
    elif change == "reasoning":
        choice["delta"][draw(st.sampled_from(["reasoning_content", "reasoning", "thinking"]))] = draw(_TEXT)
    elif change == "call":
        choice["delta"]["tool_calls"] = draw(st.lists(_CALL, max_size=1))
    elif change == "content":
        choice["delta"]["content"] = draw(st.sampled_from([None, 0, 1, ["a"]]))
    elif change == "delta":
        choice["delta"] = draw(st.sampled_from([None, {}, "text"]))
    elif change == "choices":
        chunk["choices"] = draw(st.sampled_from([[], [choice, choice], choice, None]))
    else:
        choice.update(stop_reason="END", finish_reason=draw(st.sampled_from([None, "stop"])))
    return chunk


#: The common chunk of a native call: choice 0's ``tool_calls`` fragments alone.
_NATIVE_CHUNK = st.lists(_CALL, min_size=1, max_size=2).map(lambda calls: {
    "id": "c", "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"tool_calls": calls}, "logprobs": None, "finish_reason": None}]})


@st.composite
def _near_native_chunks(draw: Any) -> dict[str, Any]:
    """A native fragments chunk with one thing more or different: what its quick path must leave to the general one."""
    chunk = draw(_NATIVE_CHUNK)
    choice = chunk["choices"][0]
    change = draw(st.sampled_from(["content", "role", "reasoning", "finish", "index", "usage", "calls"]))
    if change == "content":
        choice["delta"]["content"] = draw(st.sampled_from([None, "", "a", 0]))
    elif change == "role":
        choice["delta"]["role"] = "assistant"
    elif change == "reasoning":
        choice["delta"][draw(st.sampled_from(["reasoning_content", "reasoning", "thinking"]))] = draw(_TEXT)
    elif change == "finish":
        choice["finish_reason"] = draw(st.sampled_from(["tool_calls", "stop", ""]))
    elif change == "index":
        choice["index"] = draw(st.sampled_from([1, None, False]))
    elif change == "usage":
        chunk["usage"] = draw(st.sampled_from([{}, {"prompt_tokens": 1, "completion_tokens": 1}, None]))
    else:
        choice["delta"]["tool_calls"] = draw(st.sampled_from([[], None, {"index": 0}, "x"]))
    for key in draw(st.lists(st.sampled_from(["reasoning_content", "refusal", "function_call"]), max_size=2)):
        choice["delta"].setdefault(key, draw(st.sampled_from([None, "", []])))  # empty keys leave it as it was
    return chunk


def _expanded(chunk: UpstreamChunk | str | list[dict[str, Any]]) -> UpstreamChunk:
    if isinstance(chunk, str):
        return UpstreamChunk([ChoiceDelta(0, chunk)])
    return UpstreamChunk([ChoiceDelta(0, None, chunk)]) if isinstance(chunk, list) else chunk


def _outcome(call: Any) -> Any:
    try:
        return call()
    except (UpstreamError, TypeError, AttributeError, RuntimeError) as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=400)
@given(st.one_of(_CHUNK, _TEXT_CHUNK, _near_text_chunks(), _NATIVE_CHUNK, _near_native_chunks()))
def test_read_chunk_is_parse_chunk(obj):
    assert _outcome(lambda: _expanded(read_chunk(obj))) == _outcome(lambda: parse_chunk(obj))


@pytest.mark.parametrize("shape", sorted((Path(__file__).resolve().parents[2] / "bench" / "shapes").glob("*.json")),
                         ids=lambda path: path.stem)
def test_real_servers_text_chunks_take_the_quick_path(shape):
    """The text chunk of every recorded server shape (bench/shapes: llama-server, vLLM, Ollama, LM Studio, SGLang)
    is read as its text alone: extra keys (system_fingerprint, logprobs, usage and reasoning null) cost nothing."""
    chunk = orjson.loads(shape.read_bytes())["content"]
    assert read_chunk(chunk) == chunk["choices"][0]["delta"]["content"]


def reference_events(body: bytes) -> list[bytes]:
    """The data of ``body``'s events by the SSE rules, the whole body at once, line by line."""
    out, data = [], []
    for line in re.split(rb"\r\n|\r|\n", body.removeprefix(b"\xef\xbb\xbf")):
        if not line:
            if data:
                out.append(b"\n".join(data))
            data = []
        elif line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
        elif line == b"data":
            data.append(b"")
    if data:
        out.append(b"\n".join(data))
    return out


_LINE_END = st.sampled_from([b"\n", b"\n", b"\n", b"\r\n", b"\r"])


@st.composite
def sse_bodies(draw: Any, payloads: st.SearchStrategy[bytes]) -> bytes:
    """Events of ``payloads``, mostly ``data: …`` and a blank line, sometimes with what else SSE allows."""
    body = b"\xef\xbb\xbf" if draw(st.integers(0, 9)) == 0 else b""
    for payload in draw(st.lists(payloads, max_size=8)):
        end = draw(_LINE_END) if draw(st.integers(0, 3)) == 0 else b"\n"
        if draw(st.integers(0, 5)) == 0:
            body += draw(st.sampled_from([b": keep-alive", b"event: message", b"id: 7", b"retry: 10"])) + end
        lines = payload.split(b"\n") if draw(st.booleans()) else [payload]  # a multi-line event, now and then
        for line in lines:
            body += draw(st.sampled_from([b"data: ", b"data: ", b"data:"])) + line + end
        body += end * draw(st.sampled_from([1, 1, 1, 2]))
    return body


def _splits(draw: Any, body: bytes) -> list[bytes]:
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=6)))
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]


@settings(max_examples=300)
@given(st.data())
def test_the_decoder_reads_every_body_by_the_rules_however_it_arrives(data):
    body = data.draw(sse_bodies(st.one_of(_TEXT.map(str.encode), st.just(b"[DONE]"))))
    decoder = SSEDecoder()
    out = []
    for piece in _splits(data.draw, body):
        out += decoder.feed(piece)
    assert out + decoder.end() == reference_events(body)


class _Chunks:
    """An upstream stream of ready chunks (the general path's reading of the same body), then its error."""

    def __init__(self, chunks: list[UpstreamChunk], error: Exception | None):
        self._chunks = chunks
        self._error = error

    def __iter__(self) -> Iterator[UpstreamChunk]:
        yield from self._chunks
        if self._error is not None:
            raise self._error

    def plain_texts(self, *, join: bool = False) -> None:
        pass  # its chunks are built already

    def close(self) -> None:
        pass


_CONFIG = ParserConfig.for_tools([ToolSpec("get_weather", parameters={"type": "object"})])


def _frames(stream: Any, endpoint: str, config: ParserConfig = _CONFIG) -> tuple[bytes, Any]:
    """The frames an endpoint sends for ``stream``'s events (read with ``config``), and how the events ended."""
    if endpoint == "chat":
        encoder: Any = ChatEncoder("chatcmpl-1", 1, "m", include_usage=True)
    else:
        encoder = ResponsesWireEncoder(ResponsesEncoder("resp_1", "m", {}, created_at=1,
                                                        id_factory=lambda prefix: prefix + "_1"))
    frames: list[bytes] = []
    driver = ChoiceDriver(stream, config, id_factory=lambda: "call_x")
    try:
        for index, event in driver:
            if index is not None:
                frames += encoder.frames(index, event)
        end: Any = None
    except Exception as exc:  # whatever ends the stream (a model error, or a back end's nonsense) ends both alike
        end = type(exc).__name__, str(exc)
    return b"".join(frames), (end, driver.usage, driver.output_chars, dict(driver.outcomes))


_DRIVEN = st.one_of(_TEXT_CHUNK, _TEXT_CHUNK, _near_text_chunks(), _CHUNK).map(orjson.dumps)
_TOOL_TEXT = st.sampled_from(['<tool_call>{"name": "get_weather", "arguments": {"city": "P', 'aris"}}</tool_call>',
                              "Sure.", " "])


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(["chat", "responses"]))
def test_a_streams_frames_are_those_of_its_chunks_read_the_general_way(data, endpoint):
    texts = _TOOL_TEXT.map(lambda text: orjson.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}))
    body = data.draw(sse_bodies(st.one_of(_DRIVEN, texts)))
    _assert_read_alike(body, _splits(data.draw, body), endpoint)


@pytest.mark.parametrize("endpoint", ["chat", "responses"])
def test_plain_texts_that_come_at_once_go_on_as_one_in_their_place(endpoint):
    def event(delta: dict, finish: str | None = None) -> bytes:
        return b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + b"\n\n"
    native = {"tool_calls": [{"index": 0, "id": "u", "function": {"name": "get_weather", "arguments": "{}"}}]}
    body = (event({"role": "assistant", "content": "Hi"}) + event({"content": " there"}) + event(native)
            + event({"content": "after"}) + event({"content": "."}) + event({}, "stop") + b"data: [DONE]\n\n")
    # fewer frames when the events come in one receive than when each comes alone
    assert _assert_read_alike(body, [body], endpoint) < _assert_read_alike(body, list(_each_event(body)), endpoint)


_CUT_CONFIG = ParserConfig.for_tools([ToolSpec("get_weather", parameters={"type": "object"})],
                                     policy=Policy(stop_after_first_call=True))
_CUT_TEXT = 'Sure. <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call> More.<tool_call>' \
            '{"name": "get_weather", "arguments": {}}</tool_call> After.'


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(["chat", "responses"]))
def test_a_paced_stream_cut_after_its_first_call_stops_as_the_general_path_does(data, endpoint):
    # Each token its own receive (a model's pace): the driver's steady path yields a chunk's one text or argument
    # event without asking whether the policy cut the output, so the cut must come with more than that event.
    cuts = sorted(data.draw(st.sets(st.integers(1, len(_CUT_TEXT) - 1), max_size=40)))
    pieces = [_CUT_TEXT[a:b] for a, b in zip([0, *cuts], [*cuts, len(_CUT_TEXT)])]
    body = b"".join(b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"content": piece}}]}) + b"\n\n"
                    for piece in pieces) + b"data: [DONE]\n\n"
    _assert_read_alike(body, list(_each_event(body)), endpoint, _CUT_CONFIG)
    quick, _ = _frames(HttpStream(ArrivingResponse(list(_each_event(body)))), endpoint, _CUT_CONFIG)
    assert b"get_weather" in quick and b"More" not in quick and b"After" not in quick  # cut after the first call


def _each_event(body: bytes) -> Iterator[bytes]:
    for piece in body.split(b"\n\n")[:-1]:
        yield piece + b"\n\n"


def _assert_read_alike(body: bytes, receives: list[bytes], endpoint: str, config: ParserConfig = _CONFIG) -> int:
    """Assert ``body`` arriving in ``receives`` reads as the general path reads its chunks one by one (with
    ``config``); the number of frames sent."""
    events = reference_events(body)
    general: list[UpstreamChunk] = []
    error: Exception | None = None
    for payload in events:
        if payload == b"[DONE]":
            break
        try:
            general.append(parse_chunk(orjson.loads(payload)))
        except Exception as exc:  # an error chunk (or nonsense the general reading fails on): both end there
            error = exc
            break
    if not events:
        error = UpstreamError("server_error", "The upstream ended its stream without sending an event.")
    stream = HttpStream(ArrivingResponse(receives))  # type: ignore[arg-type]
    (quick, quick_end), (slow, slow_end) = _frames(stream, endpoint, config), _frames(_Chunks(general, error), endpoint,
                                                                                   config)
    # the plain texts one receive brings at once go on as one (fewer frames): what a client reads is the same
    assert _client_view(quick) == _client_view(slow)
    assert quick_end == slow_end
    return quick.count(b"data: ")


def _client_view(frames: bytes) -> list[Any]:
    """What a client reads from a stream's frames, in order: the frames with their delta strings left out (a
    header, a finish, an item, an error; Responses' ``sequence_number`` left out, as fewer deltas number the
    rest), and between them each run of delta strings of one choice or item and kind, joined."""
    view: list[Any] = []
    for frame in frames.split(b"\n\n")[:-1]:
        data = frame[frame.index(b"data: ") + 6:]
        obj = "[DONE]" if data == b"[DONE]" else orjson.loads(data)
        strings = list(_delta_strings(obj)) if isinstance(obj, dict) else []
        if isinstance(obj, dict):
            obj = _without_delta_strings(obj)
        if obj is not None:
            view.append(obj)
        for path, value in strings:
            if view and isinstance(view[-1], tuple) and view[-1][0] == path:
                view[-1] = (path, view[-1][1] + value)
            else:
                view.append((path, value))
    return view


def _delta_strings(obj: dict) -> Iterator[tuple[tuple, str]]:
    """The delta strings of a frame (Chat ``delta.content`` etc., Responses ``delta``), keyed by where they go."""
    if obj.get("type", "").endswith(".delta"):
        yield (obj["type"], obj.get("item_id"), obj.get("output_index"), obj.get("content_index")), obj["delta"]
    for choice in obj.get("choices") or ():
        delta = choice.get("delta") or {}
        for key, value in delta.items():
            if isinstance(value, str) and key != "role":
                yield ("choice", choice["index"], key), value
        for call in delta.get("tool_calls") or ():
            arguments = (call.get("function") or {}).get("arguments")
            if arguments:
                yield ("call", choice["index"], call["index"]), arguments


def _without_delta_strings(obj: dict) -> dict | None:
    """``obj`` without its delta strings; ``None`` for a frame that was those alone."""
    if obj.get("type", "").endswith(".delta"):
        return None
    out = {k: v for k, v in obj.items() if k != "sequence_number"}
    if "choices" in out:
        out["choices"] = [_bare_choice(choice) for choice in out["choices"]]
        if out["choices"] and not out.get("usage") and all(
                not choice["delta"] and not choice.get("finish_reason") for choice in out["choices"]):
            return None
    return out


def _bare_choice(choice: dict) -> dict:
    delta = {key: value for key, value in (choice.get("delta") or {}).items()
             if not isinstance(value, str) or key == "role"}
    calls = [{**call, "function": {k: v for k, v in call["function"].items() if k != "arguments"}}
             for call in delta.pop("tool_calls", ()) if call.get("id") or call["function"].get("name")]
    if calls:
        delta["tool_calls"] = calls
    return {**choice, "delta": delta}


_CORE_EVENTS = st.lists(st.one_of(
    _TEXT.map(TextDelta), _TEXT.map(ReasoningDelta), _TEXT.map(lambda text: ToolCallArgumentsDelta(0, text)),
    _TEXT.map(lambda text: ToolCallInputDelta(0, text)), st.sampled_from([
        ToolCallStarted(0, "call_1", "get_weather"), ToolCallStarted(0, "call_2", "grammar", kind="custom"),
        ToolCallStarted(0, "call_3", "lookup"), ToolCallEnded(0, "call_1", "get_weather", "{}"),
        ToolCallEnded(0, "call_1", "get_weather", "{", valid=False),
        ChoiceFinished("stop")])), max_size=12)


def _responses_encoder() -> ResponsesEncoder:
    ids = iter(range(100))
    return ResponsesEncoder("resp_1", "m", {}, created_at=1, id_factory=lambda prefix: f"{prefix}_{next(ids)}",
                            tools={"lookup": ToolOrigin("tool_search", "lookup")})


@given(_CORE_EVENTS)
def test_responses_delta_frames_are_the_events_feed_makes(events):
    quick, general = ResponsesWireEncoder(_responses_encoder()), _responses_encoder()
    assert quick.opening({}) == [encode_sse(event) for event in general.start()]
    for event in events:
        assert _outcome(lambda: quick.frames(0, event)) == _outcome(
            lambda: [encode_sse(out) for out in general.feed(event)])
    assert quick.closing({}) == [encode_sse(event) for event in general.finish({})]


class _FramesOnly:
    """An encoder without ``one_frame``: every event through ``frames``."""

    def __init__(self, encoder: Any):
        self._encoder = encoder

    def __getattr__(self, name: str) -> Any:
        if name == "one_frame":
            raise AttributeError(name)
        return getattr(self._encoder, name)


def test_a_body_sends_what_one_frame_gives_as_frames_would_send_it():
    events = [(0, TextDelta("Hi")), (None, PAUSE), (0, TextDelta(" there")), (None, PAUSE),
              (0, ToolCallStarted(0, "call_x", "get_weather")), (0, ToolCallArgumentsDelta(0, '{"city"')),
              (None, PAUSE), (0, ToolCallArgumentsDelta(0, ': "P\\u00e9"}')),
              (0, ToolCallEnded(0, "call_x", "get_weather", '{"city": "P\\u00e9"}')), (0, ChoiceFinished("tool_calls"))]

    def body(encoder: Any) -> list[bytes]:
        return list(sse_body(iter(events), encoder, lambda: {"prompt_tokens": 1, "completion_tokens": 2},
                             heartbeat_seconds=None, on_abandon=lambda: None))

    def chat() -> ChatEncoder:
        return ChatEncoder("chatcmpl-1", 1, "m", include_usage=True)

    assert hasattr(chat(), "one_frame")
    assert body(chat()) == body(_FramesOnly(chat()))


class _Unfolded:
    """A driver's events without ``fold_pauses``: a paced chunk's event and its pause as two items (as a re-ask or
    a gateway loop gets them)."""

    def __init__(self, driver: ChoiceDriver):
        self._driver = driver

    def __iter__(self) -> Iterator[Any]:
        return iter(self._driver)


class _Pulls:
    """A driver's events, counting the pulls a body makes of them."""

    def __init__(self, driver: ChoiceDriver):
        self._driver = driver
        self.pulls = 0

    def fold_pauses(self) -> None:
        getattr(self._driver, "fold_pauses", lambda: None)()  # (a driver that cannot: the test says how many)

    def __iter__(self) -> Iterator[Any]:
        for item in self._driver:
            self.pulls += 1
            yield item


_PACED_TEXT = 'Sure, <b>done</b>. <tool_call>{"name": "get_weather", "arguments": {"city": "P\\"a\\\\r\\u00e9\\nis"}}' \
              '</tool_call> Then "more" text.'


def _paced_writes(pieces: list[str], endpoint: str, events: Any = _Unfolded, last: int = 1
                  ) -> tuple[list[bytes], Any]:
    """What a body writes for a stream of ``pieces`` and its finish, each its own receive but the ``last`` events,
    which come together (the finish and ``[DONE]`` with the last texts, as a back end ends); ``events`` wraps the
    driver."""
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    receives = [b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"content": piece}}]}) + b"\n\n"
                for piece in pieces] + [b"data: " + orjson.dumps(finish) + b"\n\n", b"data: [DONE]\n\n"]
    receives[-last:] = [b"".join(receives[-last:])]
    stream = HttpStream(ArrivingResponse(receives))  # type: ignore[arg-type]
    stream.pause_every(None)
    if endpoint == "chat":
        encoder: Any = ChatEncoder("chatcmpl-1", 1, "m", include_usage=True)
    else:
        encoder = ResponsesWireEncoder(ResponsesEncoder("resp_1", "m", {}, created_at=1,
                                                        id_factory=lambda prefix: prefix + "_1"))
    source = events(ChoiceDriver(stream, _CONFIG, id_factory=lambda: "call_x"))
    writes = list(sse_body(source, encoder, lambda: {"prompt_tokens": 1, "completion_tokens": 2},
                           heartbeat_seconds=None, on_abandon=stream.close, wait=stream.wait))
    return writes, source


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(["chat", "responses"]))
def test_a_paced_chunk_with_its_pause_as_one_item_writes_what_two_items_write(data, endpoint):
    cuts = sorted(data.draw(st.sets(st.integers(1, len(_PACED_TEXT) - 1), max_size=60)))
    pieces = [_PACED_TEXT[a:b] for a, b in zip([0, *cuts], [*cuts, len(_PACED_TEXT)])]
    last = data.draw(st.integers(1, 4))
    folded, _ = _paced_writes(pieces, endpoint, _Pulls, last)
    assert folded == _paced_writes(pieces, endpoint, last=last)[0]  # the same writes, each chunk's in its own
    # and what a client reads is what it reads of the same events arriving at once (none lost after a pause)
    assert _client_view(b"".join(folded)) == _client_view(b"".join(_paced_writes(pieces, endpoint, last=99)[0]))


def test_a_paced_streams_body_pulls_its_events_once_a_chunk():
    # A token a receive: each chunk's one event comes with the pause after it, so the body resumes the driver (and
    # it the stream) once a chunk, not once more to learn that the stream will wait.
    pieces = ["Hello"] + [f" word{i}" for i in range(40)] + ['<tool_call>{"name": "get_weather", "arguments": {"c'] \
        + [f"ity{i}" for i in range(40)] + ['": 1}}</tool_call>']
    writes, pulls = _paced_writes(pieces, "chat", _Pulls)
    assert len(writes) >= 80  # a write a chunk: each went out before the next receive
    assert pulls.pulls <= len(pieces) + 10  # (a few chunks make more events: the first, the call's ends, the finish)
