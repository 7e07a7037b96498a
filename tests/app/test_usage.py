"""``usage`` when the back end reports none (:mod:`app.pipeline.usage`): counted once at the end by the back end's
own tokenizer (llama-server's ``/apply-template`` and ``/tokenize``), within a bound, else the estimate; the access
line says which. Against the real llama-server: tests/e2e/test_token_counts_e2e.py."""

from __future__ import annotations

import json
import time
from typing import Any, Callable

import pytest

from app.pipeline import usage as usage_module
from support.loopback import Answer, Seen, json_answer, sse_answer

#: The model's answer, one chunk a word, and no usage.
WORDS = ["Paris ", "is ", "sunny ", "today."]
QUESTION = {"model": "m", "messages": [{"role": "user", "content": "How is the weather in Paris now?"}]}


def back_end(*, tokenizer: bool = True, usage: dict[str, int] | None = None, slow: float = 0.0
             ) -> Callable[[Seen], Answer]:
    """A llama-server-shaped back end: its Chat stream has ``usage`` only if given; its tokenizer (if it has one)
    renders a prompt as its messages' contents and makes a token of each word (the template adds two)."""
    def handle(seen: Seen) -> Answer:
        body = json.loads(seen.body or b"{}")
        if seen.path.endswith("/chat/completions"):
            chunks = [{"choices": [{"index": 0, "delta": {"content": word}}]} for word in WORDS]
            chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            if usage:
                chunks.append({"choices": [], "usage": usage})
            return sse_answer(b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks)
                              + b"data: [DONE]\n\n")
        if not tokenizer:
            return json_answer(404, b'{"error": "no route"}')
        time.sleep(slow)
        if seen.path == "/apply-template":
            prompt = "<s> " + " ".join(m["content"] for m in body["messages"]) + " </s>"
            return json_answer(200, json.dumps({"prompt": prompt}).encode())
        return json_answer(200, json.dumps({"tokens": list(range(len(body["content"].split())))}).encode())
    return handle


def chat(make_app: Any, upstream: Any, **body: Any) -> dict[str, Any]:
    if body.get("stream"):
        body["stream_options"] = {"include_usage": True}
    answer = make_app(upstream).test_client().post("/v1/chat/completions", buffered=True,
                                                   json={**QUESTION, **body})
    assert answer.status_code == 200, answer.get_data(as_text=True)
    if not body.get("stream"):
        return answer.get_json()["usage"]
    [usage] = [json.loads(line[6:])["usage"] for line in answer.get_data(as_text=True).splitlines()
               if line.startswith("data: {") and json.loads(line[6:]).get("usage")]
    return usage


def access_usage(json_log: Any) -> str:
    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
    return [line for line in lines if line["logger"] == "toolwire.access"][-1]["usage"]


@pytest.fixture(autouse=True)
def fresh_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usage_module, "_REPORTS_USAGE", {})


@pytest.mark.parametrize("stream", [False, True])
def test_a_back_end_without_usage_is_counted_by_its_tokenizer_once_at_the_end(
        make_app: Any, serve: Callable[..., Any], json_log: Any, stream: bool) -> None:
    upstream = serve(back_end())
    usage = chat(make_app, upstream, stream=stream)
    # the prompt: 2 template tokens + 7 words; the completion: 4 words and the model's own end-of-turn token
    assert usage == {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}
    assert access_usage(json_log) == "tokenizer"
    paths = [seen.path for seen in upstream.server.seen]
    assert paths == ["/v1/chat/completions", "/apply-template", "/tokenize", "/tokenize"]  # once, at the end


def test_a_back_end_seen_to_report_usage_is_not_counted_again(make_app: Any, serve: Callable[..., Any],
                                                              json_log: Any) -> None:
    reported = {"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37}
    upstream = serve(back_end(usage=reported))
    assert chat(make_app, upstream) == reported
    assert chat(make_app, upstream, stream=True) == reported
    assert access_usage(json_log) == "back_end"
    assert [seen.path for seen in upstream.server.seen] == ["/v1/chat/completions"] * 2


def test_without_a_tokenizer_usage_is_the_estimate(make_app: Any, serve: Callable[..., Any], json_log: Any) -> None:
    upstream = serve(back_end(tokenizer=False))
    usage = chat(make_app, upstream)
    assert usage["completion_tokens"] == 6  # 22 characters at about four a token
    assert access_usage(json_log) == "estimate"


def test_a_slow_tokenizer_is_given_up_for_the_estimate(make_app: Any, serve: Callable[..., Any], json_log: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usage_module, "TIMEOUT_SECONDS", 0.2)
    upstream = serve(back_end(slow=1.0))
    started = time.monotonic()
    usage = chat(make_app, upstream)
    assert time.monotonic() - started < 1.0
    assert usage["completion_tokens"] == 6 and access_usage(json_log) == "estimate"


def test_kept_output_keeps_a_paced_streams_chunks_that_come_with_their_pause() -> None:
    # A token a receive: the stream hands each chunk with the pause after it as one item, which is kept and passed on
    import sys
    from pathlib import Path

    from app.upstreams.base import PAUSE
    from app.upstreams.http import HttpStream

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from frame_bench import ArrivingResponse

    receives = [b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": word}}]}).encode() + b"\n\n"
                for word in WORDS] + [b"data: [DONE]\n\n"]
    stream = HttpStream(ArrivingResponse(receives))  # type: ignore[arg-type]
    stream.plain_texts()
    stream.pause_every(None)
    kept = usage_module.KeptOutput(stream, object(), {})
    items = list(kept)
    assert items == [WORDS[0], PAUSE, *((word, PAUSE) for word in WORDS[1:])]  # (the first receive is decoded whole)
    assert kept.pieces == WORDS and kept.ended
