"""Wire dialects: how a back end's streamed answer reads, apart from the transport that carries it.

:class:`~app.upstreams.http.HttpStream` receives the body, splits it into events with the dialect's framing,
parses each event's payload as JSON and hands it to the dialect, which turns it into stream items
(:data:`~app.upstreams.base.ChunkItem`). The timeouts, pauses, byte bounds and error mapping stay with the
transport, so a second dialect (Ollama's NDJSON ``/api/chat``, Gemini's ``streamGenerateContent``) is a module
that builds one :class:`WireDialect`, not a copy of the stream. :data:`~app.upstreams.openai_chat.OPENAI_CHAT`
is the first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

from pydantic import SecretStr

from .base import ChunkItem, UpstreamChunk


class EventFraming(Protocol):
    """A body's event decoder (sans-IO): bytes in, each complete event's payload out (e.g.
    :class:`~app.upstreams.sse.SSEDecoder`)."""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The payloads of the events ``chunk`` completes."""
        ...

    def end(self) -> list[bytes]:
        """The payload of a last event the body ended without closing."""
        ...

    def one(self, chunk: bytes) -> bytes | None:
        """The payload of ``chunk`` when it is exactly one whole event and nothing is held (a token's receive);
        else ``None``, with nothing fed."""
        ...


@dataclass(frozen=True, slots=True)
class WireDialect:
    """One back-end wire dialect: the request's path and media type, the framing of the streamed body, and
    how one event's payload (parsed JSON) becomes stream items.

    Fields:
        name: the dialect's name (logs, docs).
        path: the path the streamed request is POSTed to, below the back end's base URL.
        accept: the media type of the streamed answer (the ``Accept`` header).
        framing: makes the body's event decoder, given the largest event held (``max_event_bytes``).
        done: the payload that ends the stream before the body does (OpenAI's ``[DONE]``), or ``None``.
        read: a payload as the stream item it is once :meth:`~app.upstreams.base.UpstreamStream.plain_texts`
            was asked: the common chunks (choice 0's text alone, choice 0's native call fragments alone) as a
            ``str`` and a ``list``, with no objects built, anything else as :attr:`parse` reads it. Hot path:
            called once per event.
        parse: a payload as one :class:`~app.upstreams.base.UpstreamChunk`.
        whole: a back end's non-streamed JSON answer (it ignored ``stream: true``) as chunks.

    ``read``, ``parse`` and ``whole`` take the back end's key too (an error they quote is masked with it), and
    raise :class:`~app.upstreams.base.UpstreamError` for an error object or a payload that is not theirs.
    """

    name: str
    path: str
    accept: str
    framing: Callable[[int], EventFraming]
    done: bytes | None
    read: Callable[[Any, SecretStr | None], ChunkItem]
    parse: Callable[[Any, SecretStr | None], UpstreamChunk]
    whole: Callable[[Any, SecretStr | None], Iterator[UpstreamChunk]]
