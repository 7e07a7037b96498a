"""Wire dialects (``app.upstreams.dialect``): a second dialect is one ``WireDialect``, read by the same
``HttpStream`` (its bounds, pauses and errors), not a copy of it."""

from __future__ import annotations

from typing import Any, Iterator

import orjson
import pytest
from pydantic import SecretStr

from app.upstreams.base import ChoiceDelta, ChunkItem, UpstreamChunk, UpstreamError
from app.upstreams.dialect import WireDialect
from app.upstreams.http import Bounds
from support.loopback import Answer


class LineFraming:
    """NDJSON: one JSON value a line."""

    def __init__(self, max_event_bytes: int):
        self.rest = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        *lines, self.rest = (self.rest + chunk).split(b"\n")
        return [line for line in lines if line.strip()]

    def end(self) -> list[bytes]:
        last, self.rest = self.rest, b""
        return [last] if last.strip() else []

    def one(self, chunk: bytes) -> bytes | None:
        return None  # no quick path: every receive is fed


def parse(obj: Any, secret: SecretStr | None) -> UpstreamChunk:
    if not isinstance(obj, dict) or "error" in obj:
        raise UpstreamError("server_error", f"The upstream failed mid-stream: {obj}")
    return UpstreamChunk([ChoiceDelta(0, obj["message"]["content"] or None,
                                      finish_reason=obj.get("done_reason") if obj.get("done") else None)])


def read(obj: Any, secret: SecretStr | None) -> ChunkItem:
    return obj["message"]["content"] if not obj.get("done") and "error" not in obj else parse(obj, secret)


def whole(obj: Any, secret: SecretStr | None) -> Iterator[UpstreamChunk]:
    yield parse(obj, secret)


#: An Ollama-like ``/api/chat`` dialect: NDJSON lines, the last one ``done``.
NDJSON_CHAT = WireDialect(name="ndjson-chat", path="/api/chat", accept="application/x-ndjson", framing=LineFraming,
                          done=None, read=read, parse=parse, whole=whole)


def lines(*objs: Any) -> bytes:
    return b"".join(orjson.dumps(obj) + b"\n" for obj in objs)


def ndjson_answer(body: bytes) -> Answer:
    return Answer(headers={"Content-Type": "application/x-ndjson"}, body=[body] if body else b"")


BODY = lines({"message": {"content": "Hel"}}, {"message": {"content": "lo"}},
             {"message": {"content": ""}, "done": True, "done_reason": "stop"})


def test_a_second_dialect_is_read_by_the_same_stream(serve):
    upstream = serve(lambda seen: ndjson_answer(BODY), dialect=NDJSON_CHAT)
    stream = upstream.open({"model": "m", "messages": []})
    seen = upstream.server.seen[0]
    assert seen.path.endswith("/api/chat") and seen.headers["accept"] == "application/x-ndjson"
    assert [(c.choices[0].content, c.choices[0].finish_reason) for c in stream] == \
        [("Hel", None), ("lo", None), (None, "stop")]


def test_its_common_chunks_come_light_and_joined_once_asked(serve):
    stream = serve(lambda seen: ndjson_answer(BODY), dialect=NDJSON_CHAT).open({"model": "m", "messages": []})
    stream.plain_texts(join=True)
    items = list(stream)
    assert items[0] == "Hello" and isinstance(items[1], UpstreamChunk) and len(items) == 2


def test_the_transport_keeps_its_bounds_and_errors_for_any_dialect(serve):
    stream = serve(lambda seen: ndjson_answer(lines({"message": {"content": "a"}}, {"error": "boom"})),
                   dialect=NDJSON_CHAT).open({})
    with pytest.raises(UpstreamError, match="boom"):
        list(stream)
    empty = serve(lambda seen: ndjson_answer(b""), dialect=NDJSON_CHAT).open({})
    with pytest.raises(UpstreamError) as caught:
        list(empty)
    assert caught.value.code == "upstream_empty_stream"
    broken = serve(lambda seen: ndjson_answer(b"{not json}\n"), dialect=NDJSON_CHAT,
                   bounds=Bounds(max_event_bytes=1024)).open({})
    with pytest.raises(UpstreamError, match="malformed JSON"):
        list(broken)
