"""Test doubles for the in-process tests: a scripted fake upstream, upstream chunk builders, the shared
Chat-shaped weather tool, and the error-envelope check of a test-client response."""

from __future__ import annotations

import json
import re
import time
from typing import Any, Iterator

import gevent

from app.upstreams.base import IDLE, PAUSE, ChoiceDelta, Pause, UpstreamChunk, UpstreamError

from .injection import QUOTED

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def weather_requests(prompt: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """A non-streamed request offering :data:`WEATHER_TOOL` with ``prompt`` on each generating API, by name
    (``chat``, ``responses``, ``messages``): its path and body."""
    function = WEATHER_TOOL["function"]
    user = [{"role": "user", "content": prompt}]
    return {
        "chat": ("/v1/chat/completions", {"model": "m", "messages": user, "tools": [WEATHER_TOOL]}),
        "responses": ("/v1/responses", {"model": "m", "input": prompt, "store": False,
                                        "tools": [{"type": "function", **function}]}),
        "messages": ("/v1/messages", {"model": "m", "max_tokens": 64, "messages": user,
                                      "tools": [{"name": function["name"], "description": function["description"],
                                                 "input_schema": function["parameters"]}]}),
    }


def text_chunks(text: str, *, size: int = 5, index: int = 0, finish: str | None = "stop",
                usage: dict | None = None) -> list[UpstreamChunk]:
    """``text`` as upstream chunks of ``size`` characters, then a finish (and usage) chunk."""
    chunks = [UpstreamChunk([ChoiceDelta(index=index, content=text[i:i + size])])
              for i in range(0, len(text), size)]
    if finish:
        chunks.append(UpstreamChunk([ChoiceDelta(index=index, finish_reason=finish)]))
    if usage:
        chunks.append(UpstreamChunk([], usage=usage))
    return chunks


class FakeStream:
    def __init__(self, upstream: "FakeUpstream"):
        self.upstream = upstream
        self.closed = False
        self.pauses = False
        self.tick: float | None = None

    def plain_texts(self, *, join: bool = False) -> None:
        pass  # its chunks are built already

    def pause_every(self, tick: float | None) -> None:
        self.pauses = True
        self.tick = tick

    def confirm(self) -> None:
        pass  # a scripted failure comes when the script reaches it, as a back end's after its headers

    def __iter__(self) -> Iterator[UpstreamChunk | Pause]:
        for item in self.upstream.script:
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, (int, float)):
                yield from self._silence(item)  # a silent upstream (prefill)
                continue
            self.upstream.delivered += 1
            yield item

    def _silence(self, seconds: float) -> Iterator[Pause]:
        """Wait ``seconds``, pausing as an HTTP stream does (``PAUSE``, then ``IDLE`` every tick)."""
        if not self.pauses:
            gevent.sleep(seconds)
            return
        yield PAUSE
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if self.tick is None or self.tick >= left:
                gevent.sleep(left)
                return
            gevent.sleep(self.tick)
            yield IDLE

    def close(self) -> None:
        self.closed = True


class FakeUpstream:
    """An :class:`~app.upstreams.base.Upstream` that plays a script.

    ``script`` items: ``UpstreamChunk`` (delivered), a number (sleep that many
    seconds), an exception (raised mid-stream). ``open_error`` is raised by
    ``open``. Every body sent is kept in ``bodies``.
    """

    def __init__(self, script: list[Any] | None = None, *, open_error: UpstreamError | None = None):
        self.script = script or []
        self.open_error = open_error
        self.bodies: list[dict] = []
        self.streams: list[FakeStream] = []
        self.delivered = 0
        self.is_ready = True

    def open(self, body: dict, *, request_id: str | None = None) -> FakeStream:
        self.bodies.append(body)
        if self.open_error:
            raise self.open_error
        stream = FakeStream(self)
        self.streams.append(stream)
        return stream

    def models(self) -> list[dict]:
        return [{"id": "fake-model", "object": "model", "created": 1, "owned_by": "tests"}]

    def ready(self) -> bool:
        return self.is_ready


class Answers(FakeUpstream):
    """A back end that plays its next answer on each request (the last one again once they run out): a text (in
    chunks of ``size``, with ``usage``) or a script of chunks."""

    def __init__(self, *answers: Any, size: int = 9, usage: dict | None = None):
        super().__init__()
        self.answers = [text_chunks(a, size=size, usage=usage) if isinstance(a, str) else a for a in answers]

    def open(self, body: dict, *, request_id: str | None = None) -> FakeStream:
        self.script = self.answers[min(len(self.bodies), len(self.answers) - 1)]
        return super().open(body, request_id=request_id)


MARKER = re.compile(r'<tool_call marker="([A-Za-z0-9_-]+)">')


class EchoUpstream(FakeUpstream):
    """Answers with the quoted sentinel from the tool result, then (if asked) a call using the prompt's marker."""

    def __init__(self, *, marked_call: bool):
        super().__init__()
        self.marked_call = marked_call

    def open(self, body: dict, *, request_id: str | None = None) -> FakeStream:
        prompt = "\n".join(m["content"] for m in body["messages"])
        found = MARKER.search(prompt)
        marker = found.group(1) if found else "none"
        reply = f"The tool asked me to run {QUOTED} but I will not."
        if self.marked_call:
            reply += f' <tool_call marker="{marker}">{{"name": "get_weather", "arguments": {{"city": "Rome"}}}}</tool_call>'
        self.script = text_chunks(reply, size=7)
        return super().open(body, request_id=request_id)


# -- upstream wire (for the HTTP upstream's tests) --------------------------------------------------


def sse(*objs) -> bytes:
    return b"".join(b"data: " + (o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n\n" for o in objs)


def chunk(content=None, *, finish=None, index=0, tool_calls=None, usage=None):
    delta = {}
    if content is not None:
        delta["content"] = content
    if tool_calls:
        delta["tool_calls"] = tool_calls
    obj = {"id": "x", "object": "chat.completion.chunk", "choices": [
        {"index": index, "delta": delta, "finish_reason": finish}]}
    if usage:
        obj = {"id": "x", "object": "chat.completion.chunk", "choices": [], "usage": usage}
    return obj


def assert_envelope(response, status: int, param: str | None, code: str | None = None) -> dict:
    assert response.status_code == status, response.data
    error = response.get_json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param
    if code is not None:
        assert error["code"] == code
    return error


class PlayedStream:
    """An upstream stream of fixed chunks."""

    def __init__(self, chunks):
        self.chunks = chunks

    def plain_texts(self, *, join=False):
        pass  # its chunks are built already

    def pause_every(self, tick):
        pass  # every chunk is there: it never waits

    def confirm(self):
        pass  # every chunk is there

    def __iter__(self):
        yield from self.chunks

    def close(self) -> None:
        pass


class PlayingUpstream:
    """Plays one chunking of the model text per request."""

    def __init__(self, chunkings):
        self.chunkings = iter(chunkings)
        self.prompts: list[str] = []

    def open(self, body, *, request_id=None):
        self.prompts.append(body["messages"][0]["content"])
        chunks = [UpstreamChunk([ChoiceDelta(index=0, content=c)]) for c in next(self.chunkings)]
        return PlayedStream(chunks + [UpstreamChunk([ChoiceDelta(index=0, finish_reason="stop")])])

    def models(self):
        return [{"id": "m", "object": "model", "created": 1, "owned_by": "tests"}]

    def ready(self) -> bool:
        return True
