"""``/v1/messages``: an answer a client stop sequence ended has ``stop_reason: "stop_sequence"`` and names the
sequence, where the back end says which one it was (vLLM's ``stop_reason``, SGLang's ``matched_stop``) or
toolwire cut the text itself (the demo; Codex's emulation). Before, it was always ``end_turn``."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from app.upstreams.demo import DemoUpstream
from app.upstreams.openai_chat import parse_chunk
from support.fakes import chunk, sse
from support.loopback import sse_answer
from support.messages_stream import check_messages_stream

ASK = {"model": "claude-test", "max_tokens": 256, "messages": [{"role": "user", "content": "Tell me a joke"}]}


def finish_of(app: Any, stream: bool, **body: Any) -> tuple[str, str | None, str]:
    """``(stop_reason, stop_sequence, text)`` of the message, from the body or the stream's ``message_delta``."""
    response = app.test_client().post("/v1/messages", json={**ASK, **body, "stream": stream})
    if not stream:
        message = response.get_json()
        return message["stop_reason"], message["stop_sequence"], message["content"][0]["text"]
    events = check_messages_stream(response.get_data())
    [delta] = [e["delta"] for e in events if e["type"] == "message_delta"]
    text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    return delta["stop_reason"], delta["stop_sequence"], text


def vllm_answer(stop_key: str, stop_value: Any) -> bytes:
    end = chunk(finish="stop")
    end["choices"][0][stop_key] = stop_value
    return sse(chunk("Why did the chicken "), end, b"[DONE]")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("stop_key", ["stop_reason", "matched_stop"], ids=["vllm", "sglang"])
def test_the_back_ends_named_stop_sequence_is_the_stop_reason(make_app: Callable[..., Any], serve: Callable[..., Any],
                                                              stop_key: str, stream: bool) -> None:
    app = make_app(serve(lambda seen: sse_answer(vllm_answer(stop_key, "cross"))))
    assert finish_of(app, stream, stop_sequences=["cross", "road"]) == (
        "stop_sequence", "cross", "Why did the chicken ")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("stop_value, stops", [
    (None, ["cross"]),  # an end of turn
    (2, ["cross"]),  # vLLM names a stop token by its id
    ("</s>", ["cross"]),  # not one of the client's sequences
    ("cross", None),  # the client asked for none
], ids=["none", "token-id", "not-the-clients", "none-asked"])
def test_any_other_end_is_end_turn(make_app: Callable[..., Any], serve: Callable[..., Any], stop_value: Any,
                                   stops: list[str] | None, stream: bool) -> None:
    app = make_app(serve(lambda seen: sse_answer(vllm_answer("stop_reason", stop_value))))
    assert finish_of(app, stream, stop_sequences=stops)[:2] == ("end_turn", None)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_the_demo_back_end_reports_the_sequence_it_cut_at(make_app: Callable[..., Any], stream: bool) -> None:
    app = make_app(DemoUpstream())
    reason, sequence, text = finish_of(app, stream, stop_sequences=["zzz", "demo"])
    assert (reason, sequence) == ("stop_sequence", "demo")
    assert text == 'Hello! You said: "Tell me a joke". I am the toolwire '


def test_a_length_finish_is_never_a_stop_sequence() -> None:
    end = chunk(finish="length")
    end["choices"][0]["stop_reason"] = "cross"
    assert parse_chunk(end).choices[0].stop_sequence is None
