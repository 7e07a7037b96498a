"""HttpUpstream: an OpenAI-compatible Chat Completions server reached over HTTP(S).

Requests go through :class:`~app.upstreams.transport.UpstreamConnection`
(geventhttpclient's pool and parser; one pool per worker process, made after
gunicorn forks) with explicit timeouts. Failures become
:class:`UpstreamError` with the kind and status the client should see. How the
answer's events read is the upstream's wire dialect
(:class:`~app.upstreams.dialect.WireDialect`; :mod:`app.upstreams.openai_chat` by default).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import gevent
import orjson
from geventhttpclient.response import HTTPParseError, HTTPSocketPoolResponse
from pydantic import BaseModel, SecretStr, field_validator

from ..observability.metrics import UPSTREAM_ERRORS
from ..settings import Settings
from .base import (IDLE, MAX_ERROR_CHARS, PAUSE, ChunkItem, StreamItem, UpstreamChunk, UpstreamError, error_message,
                   redact)
from .dialect import EventFraming, WireDialect
from .openai_chat import OPENAI_CHAT
from .sse import EventTooLarge
from .transport import BoundedResponse, BufferLimitExceeded, Timeouts, UpstreamConnection

log = logging.getLogger("toolwire.upstream.http")

#: The namespace of the UUIDs sent upstream for request ids that are not UUIDs (see :func:`upstream_request_id`).
_REQUEST_ID_NAMESPACE = uuid.UUID("5f0c2d7e-3b1a-4e7f-9a51-7d8e2c6b4a90")
_LOWER_HEX_32 = re.compile(r"[0-9a-f]{32}")
#: The OpenAI error types of a 4xx passed through as the upstream named them (anything else: invalid_request_error).
_CLIENT_ERROR_TYPES = frozenset({"invalid_request_error", "not_found_error", "permission_error", "conflict_error",
                                 "unprocessable_entity_error"})
#: The most of an upstream error body read (a longer one is not quoted at all).
MAX_ERROR_BODY_BYTES = 64 * 1024
#: Bytes of one read decoded at a time (see :meth:`HttpStream._events`).
DECODE_BYTES = 4096
#: ``/readyz``: the longest wait for the upstream's model list, seconds.
READY_TIMEOUT = 3.0
_JSON_HEADERS = {"Accept": "application/json", "Accept-Encoding": "identity"}
#: A back end's answers that mean it has no such endpoint.
NO_ENDPOINT = (404, 405, 501)


@dataclass(frozen=True, slots=True)
class Bounds:
    """What one upstream answer may hold or take.

    Fields:
        idle_content: seconds a stream may send no data event (keep-alive comments or silence); ``None`` = no limit.
        max_event_bytes: the largest SSE event (or line) held while it arrives.
        max_body_bytes: the largest non-streamed JSON answer.
    """

    idle_content: float | None = 300.0
    max_event_bytes: int = 8 * 1024 * 1024
    max_body_bytes: int = 64 * 1024 * 1024


class HttpSection(BaseModel):
    """The ``openai`` kind's section: the back-end settings an :class:`HttpUpstream` is made from (types as the
    settings have them; ``upstream_url`` required)."""

    upstream_url: str
    upstream_api_key: SecretStr | None
    upstream_connect_timeout: float
    upstream_read_timeout: float
    upstream_write_timeout: float
    upstream_idle_content_seconds: float
    upstream_max_event_bytes: int
    upstream_max_body_bytes: int

    @field_validator("upstream_url", mode="before")
    @classmethod
    def _needed(cls, value: Any) -> Any:
        if not value:
            raise ValueError("needs a url (TOOLWIRE_UPSTREAM_URL, a named back end's url)")
        return value


def make_http_upstream(settings: Settings, section: HttpSection) -> HttpUpstream:
    """The ``openai`` kind's factory: an :class:`HttpUpstream` at ``upstream_url``, with the back end's timeouts
    and bounds."""
    timeouts = Timeouts(connect=section.upstream_connect_timeout, read=section.upstream_read_timeout,
                        write=section.upstream_write_timeout)
    bounds = Bounds(idle_content=section.upstream_idle_content_seconds or None,
                    max_event_bytes=section.upstream_max_event_bytes, max_body_bytes=section.upstream_max_body_bytes)
    return HttpUpstream(section.upstream_url, api_key=section.upstream_api_key, timeouts=timeouts, bounds=bounds)


class HttpUpstream:
    """An upstream at ``base_url`` (the URL up to and including ``/v1``).

    Args:
        base_url: e.g. ``http://127.0.0.1:11434/v1`` or ``https://…``.
        api_key: sent as ``Authorization: Bearer``; never logged.
        timeouts: per-phase timeouts (``read`` is the longest silence allowed).
        bounds: what one answer may hold or take.
        dialect: how its streamed answers read (default OpenAI's Chat Completions).
    """

    def __init__(self, base_url: str, *, api_key: SecretStr | None = None, timeouts: Timeouts | None = None,
                 bounds: Bounds | None = None, dialect: WireDialect = OPENAI_CHAT):
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.bounds = bounds or Bounds()
        self.dialect = dialect
        self._stream_headers = {"Accept": dialect.accept, "Accept-Encoding": "identity",
                                "Content-Type": "application/json"}
        read = (timeouts or Timeouts()).read
        # Silence is idle too: a stream that sends nothing ends at the idle limit when it is the shorter.
        self._stream_read_timeout = min(read, self.bounds.idle_content or read)
        headers = {}
        if api_key is not None and api_key.get_secret_value():
            headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
        self.connection = UpstreamConnection(self.base_url, timeouts=timeouts or Timeouts(), headers=headers)

    def open(self, body: dict[str, Any], *, request_id: str | None = None) -> "HttpStream":
        """POST to the dialect's path (``/chat/completions``) and return the open stream once the status is known.

        Raises:
            UpstreamError: connect failure, timeout or a non-2xx answer.
        """
        headers = {**self._stream_headers, "X-Request-Id": upstream_request_id(request_id)} if request_id \
            else self._stream_headers
        with MAPPED_ERRORS:
            response = self.connection.request("POST", self.dialect.path, body, headers=headers,
                                               read_timeout=self._stream_read_timeout,
                                               max_buffer=self.bounds.max_event_bytes)
            if response.status_code >= 300:
                raise self._status_error(response)
            _check_encoding(response)
        return HttpStream(response, self.bounds, secret=self._api_key, dialect=self.dialect)

    def models(self) -> list[dict[str, Any]]:
        """``GET /models``: the upstream's ``data`` list."""
        with MAPPED_ERRORS:
            response = self.connection.request("GET", "/models", headers=_JSON_HEADERS,
                                               max_buffer=self.bounds.max_body_bytes)
            if response.status_code >= 300:
                raise self._status_error(response)
            _check_encoding(response)
            try:
                data = orjson.loads(response.read_body()).get("data")
            except (orjson.JSONDecodeError, AttributeError):
                data = None
            if not isinstance(data, list):
                raise UpstreamError("protocol", "The upstream sent a malformed model list.")
        return data

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /embeddings`` with ``body`` (OpenAI's: ``model``, ``input``): the back end's answer.

        Raises:
            UpstreamError: connect failure, timeout, a non-2xx answer or a body that is not a JSON object.
        """
        with MAPPED_ERRORS:
            response = self.connection.request("POST", "/embeddings", body,
                                               headers={**_JSON_HEADERS, "Content-Type": "application/json"},
                                               max_buffer=self.bounds.max_body_bytes)
            if response.status_code >= 300:
                raise self._status_error(response)
            _check_encoding(response)
            try:
                answer = orjson.loads(response.read_body())
            except orjson.JSONDecodeError:
                answer = None
            if not isinstance(answer, dict):
                raise UpstreamError("protocol", "The upstream sent a malformed embeddings answer.")
        return answer

    def relay(self, path: str, body: bytes, *, content_type: str, at_root: bool = False,
              request_id: str | None = None) -> "RelayedAnswer":
        """POST ``body`` as it is to ``path`` under the base URL (``at_root``: under the server's root, where
        llama.cpp and vLLM serve ``/tokenize``) and return the answer once its status and headers are in.

        Raises:
            UpstreamError: connect failure, timeout or a non-2xx answer; kind ``no_endpoint`` with the back end's
                status when it answered 404, 405 or 501 (it has no such endpoint).
        """
        headers = {"Content-Type": content_type, "Accept-Encoding": "identity"}
        if request_id:
            headers["X-Request-Id"] = upstream_request_id(request_id)
        with MAPPED_ERRORS:
            response = self.connection.request("POST", path, body, headers=headers, at_root=at_root,
                                               read_timeout=self._stream_read_timeout,
                                               max_buffer=self.bounds.max_body_bytes)
            if response.status_code in NO_ENDPOINT:
                response.release()
                raise UpstreamError("no_endpoint", f"The upstream has no POST {path} (HTTP {response.status_code}).",
                                    status=response.status_code, code="unsupported_endpoint")
            if response.status_code >= 300:
                raise self._status_error(response)
            _check_encoding(response)
        return RelayedAnswer(response, self.bounds.max_body_bytes)

    def ready(self) -> bool:
        """Whether ``GET /models`` answers 200 within :data:`READY_TIMEOUT` seconds."""
        try:
            with gevent.Timeout(READY_TIMEOUT):
                response = self.connection.request("GET", "/models", headers=_JSON_HEADERS,
                                                   max_buffer=self.bounds.max_body_bytes)
                response.read_body()
        except (gevent.Timeout, OSError, HTTPParseError, BufferLimitExceeded):
            return False
        return response.status_code == 200

    def healthy(self, path: str) -> bool:
        """Whether ``GET path`` under the server's root (its health endpoint, llama.cpp's and vLLM's ``/health``)
        answers 200; the caller bounds the wait."""
        try:
            response = self.connection.request("GET", path, headers=_JSON_HEADERS, at_root=True,
                                               max_buffer=MAX_ERROR_BODY_BYTES)
            response.read_body()
        except (OSError, HTTPParseError, BufferLimitExceeded):
            return False
        return response.status_code == 200

    def close(self) -> None:
        """Close this process's idle upstream connections."""
        self.connection.close()

    def _status_error(self, response: BoundedResponse) -> UpstreamError:
        status = response.status_code
        if status < 400:  # a redirect (or another 3xx): never an empty answer
            location = _header(response, "location")
            response.release()
            target = f" to {location[:MAX_ERROR_CHARS]!r}" if location else ""
            return UpstreamError("protocol", f"The upstream answered with a redirect (HTTP {status}){target}; "
                                             "set TOOLWIRE_UPSTREAM_URL to the final address.",
                                 code="upstream_redirect")
        response.max_buffer = MAX_ERROR_BODY_BYTES
        try:
            body = response.read_body() if _identity(response) else b""
        except BufferLimitExceeded:
            body = b""  # too long to be an error envelope: not quoted
        finally:
            response.release()
        return status_error(status, body, retry_after=_header(response, "retry-after"), secret=self._api_key)


class HttpStream:
    """An open upstream response: iterate :class:`UpstreamChunk` objects (the common ones light once asked, see
    :meth:`plain_texts`), then close. The transport's part: receiving, timeouts, pauses and bounds; how the body's
    events read is the ``dialect``'s (:class:`~app.upstreams.dialect.WireDialect`)."""

    __slots__ = ("_response", "_bounds", "_secret", "_dialect", "_json", "_pauses", "_wait", "_received", "_read",
                 "_join")

    def __init__(self, response: BoundedResponse, bounds: Bounds | None = None, *, secret: SecretStr | None = None,
                 dialect: WireDialect = OPENAI_CHAT):
        self._response = response
        self._bounds = bounds or Bounds()
        self._secret = secret
        self._dialect = dialect
        self._json = (_header(response, "content-type") or "").startswith("application/json")
        self._pauses = False
        self._wait = response.read_timeout  # the longest one wait for bytes: a tick when pausing
        self._received: bool | Exception | None = None  # what :meth:`wait` received, for the next pull
        self._read: Callable[[Any, SecretStr | None], ChunkItem] = dialect.parse
        self._join = False  # a run of plain texts that arrived together goes on as one (see plain_texts)

    def plain_texts(self, *, join: bool = False) -> None:
        """From now on yield the common chunks (choice 0's text and nothing else, choice 0's native call fragments
        and nothing else) as that text alone, a ``str``, and that list (the dialect's ``read``); the driver asks for
        it, so most chunks of a stream build no objects. With
        ``join``, a run of them that arrived together is one ``str`` (a debug view that shows each chunk
        does not ask for that)."""
        self._read = self._dialect.read
        self._join = join

    def pause_every(self, tick: float | None) -> None:
        """See :meth:`~app.upstreams.base.UpstreamStream.pause_every`."""
        self._pauses = True
        if tick:
            self._wait = min(tick, self._wait)

    def wait(self) -> None:
        """Right after a pause (:meth:`pause_every`), wait here for the back end's next bytes (or a tick of
        silence), as the next pull would; that pull then goes on with what came, or fails as it would have.

        The caller's frame is the stream's shallowest: a greenlet suspended there keeps a smaller copy
        of its C stack through the wait than one suspended inside this stream's generator, below every
        generator between (each nested one is ~400 bytes an open stream).
        """
        try:
            self._received = self._response.receive(self._wait)
        except Exception as exc:  # raised by the next pull, where its errors are mapped
            self._received = exc

    def __iter__(self) -> Iterator[StreamItem]:
        return self._whole() if self._json else self._events()

    def confirm(self) -> None:
        """Wait for the first bytes of a streamed body (native and ``auto`` tool modes: a back end that fails after
        its 200 headers must fail before the client's first byte, so the prompt-mode retry can still answer).

        Raises:
            UpstreamError: the body ended empty (``upstream_empty_stream``), timed out or broke.
        """
        response = self._response
        if self._json:
            return
        with MAPPED_ERRORS:
            while not response.unread and not response.message_complete:
                if not response.receive(response.read_timeout):
                    response.release()
                    raise TimeoutError("the upstream went silent")
            if not response.unread:
                raise _empty_stream()

    def _whole(self) -> Iterator[UpstreamChunk]:
        """A JSON answer: some servers ignore ``stream: true``; their whole completion is one chunk."""
        with MAPPED_ERRORS:
            self._response.max_buffer = self._bounds.max_body_bytes
            yield from self._dialect.whole(_loads(self._response.read_body()), self._secret)

    def _events(self) -> Iterator[StreamItem]:
        """The chunks of the body's events (SSE) as it arrives, with the pauses asked for (see :meth:`pause_every`).

        One generator receives, decodes and parses, so an open stream holds one frame, and nothing of
        its last read, through each wait. A read can hold hundreds of events (up to 64 KB from a fast
        upstream); it is decoded in :data:`DECODE_BYTES` pieces, so the first event goes on before the
        rest are decoded. Once :meth:`plain_texts` was asked to join them, a piece's run of plain texts (choice 0's
        text alone) goes on as one text: a client reads the same, in fewer frames, and each chunk that
        arrived together is not driven, parsed and encoded on its own. A receive that is one whole event (a model's
        token, most receives of a paced stream) skips the pieces and the run (the decoder's ``one``), and goes out with
        the pause after it as one item (a :data:`~app.upstreams.base.PausedChunk`). Silence longer than the response's
        ``read_timeout`` is a timeout, and so are reads without a data event (keep-alive comments) for
        ``idle_content`` seconds; the clock is read only after a silent tick or such a read, never per
        receive or event.
        """
        response, secret, pauses, read, loads = self._response, self._secret, self._pauses, self._read, orjson.loads
        join, done = self._join, self._dialect.done
        decoder = self._dialect.framing(self._bounds.max_event_bytes)
        one = decoder.one
        idle_limit = self._bounds.idle_content
        read_limit, wait = response.read_timeout, self._wait
        silent_since: float | None = None  # no bytes since
        idle_since: float | None = None  # bytes, but no data event, since
        fresh = True  # something may have been produced since the last pause
        data: bytes | None
        chunk: ChunkItem
        delivered = False  # a data event came
        with MAPPED_ERRORS:
            while True:
                if response.unread:
                    fresh = True
                    silent_since = None  # bytes came (also when the consumer's wait got them: its True is not read)
                    data = response.take()
                    payload = one(data)
                    if payload is not None:  # one whole event, as a back end sends a token (most receives): no
                        # pieces, no run of texts to join
                        if payload == done:
                            _let_go(response)
                            return
                        try:
                            obj = loads(payload)
                        except orjson.JSONDecodeError:
                            raise _malformed(payload) from None
                        delivered = True
                        idle_since = None
                        if pauses and not response.message_complete:  # the wait is next: the chunk and its
                            # pause as one item, so the consumer resumes this stream once a chunk, not twice
                            chunk = read(obj, secret)
                            data = payload = obj = None  # not held through the wait (the chunk is, a few bytes)
                            fresh = False
                            yield chunk, PAUSE
                        else:
                            yield read(obj, secret)
                            data = payload = obj = None  # not held through the next wait
                    else:
                        for start in range(0, len(data), DECODE_BYTES):
                            texts: list[str] = []  # plain texts of this piece's run of events, yielded as one
                            try:
                                for payload in decoder.feed(data[start:start + DECODE_BYTES]):
                                    if payload == done:
                                        if texts:
                                            yield "".join(texts)
                                        _let_go(response)
                                        return
                                    try:  # (orjson.loads inline, not _event_json: this is every frame's path)
                                        obj = loads(payload)
                                    except orjson.JSONDecodeError:
                                        raise _malformed(payload) from None
                                    chunk = read(obj, secret)
                                    if join and chunk.__class__ is str:
                                        texts.append(chunk)
                                        continue
                                    if texts:
                                        yield "".join(texts)
                                        texts = []
                                    yield chunk
                            except Exception:
                                if texts:  # what came before a broken event goes out before its error
                                    yield "".join(texts)
                                raise
                            if texts:
                                yield "".join(texts)
                        if payload is not None:
                            delivered = True
                            idle_since = None
                        elif idle_limit:  # a read of keep-alive comments only
                            idle_since = _idle_since(idle_since, idle_limit)
                        data = payload = obj = None  # not held through the next wait
                if response.message_complete and not response.unread:  # (bytes left: the consumer's wait after a
                    # chunk with its pause brought the body's end; they are read first, as received below)
                    yield from self._last(decoder, delivered)
                    return
                if pauses and fresh:
                    yield PAUSE
                    fresh = False
                received, self._received = self._received, None  # the consumer may have waited (see wait)
                if received is None:
                    received = response.receive(wait)
                elif isinstance(received, Exception):
                    raise received
                if received:
                    silent_since = None
                    continue
                silent_since = _silent_since(silent_since, wait, read_limit, response)
                if pauses:
                    yield IDLE

    def _last(self, decoder: EventFraming, delivered: bool) -> Iterator[ChunkItem]:
        """The end of the body: a last event that lacked its blank line; none at all is a failed stream.

        Raises:
            UpstreamError: no event came (``upstream_empty_stream``), or the last one is broken.
        """
        for payload in decoder.end():
            if payload == self._dialect.done:
                return
            delivered = True
            yield self._read(_event_json(payload), self._secret)
        if not delivered:
            raise _empty_stream()

    def close(self) -> None:
        """Close the response (an unfinished one closes its connection: the upstream stops generating)."""
        self._response.release()


class RelayedAnswer:
    """A back end's answer to a relayed request (:meth:`HttpUpstream.relay`): its status and type, then its body
    whole (:meth:`read`) or as it arrives (:meth:`pieces`), never parsed.

    Args:
        response: the open response, its headers read.
        max_body_bytes: the most of a whole body read.
    """

    __slots__ = ("_response", "_max_body_bytes", "status", "content_type", "length")

    def __init__(self, response: BoundedResponse, max_body_bytes: int):
        self._response = response
        self._max_body_bytes = max_body_bytes
        self.status: int = response.status_code
        self.content_type: str = _header(response, "content-type") or "application/octet-stream"
        length = _header(response, "content-length")
        self.length: int | None = int(length) if length and length.isdigit() else None

    def read(self) -> bytes:
        """The whole body (at most the back end's ``max_body_bytes``).

        Raises:
            UpstreamError: it timed out, broke or was too large.
        """
        with MAPPED_ERRORS:
            self._response.max_buffer = self._max_body_bytes
            return self._response.read_body()

    def pieces(self) -> Iterator[bytes]:
        """The body's bytes as they arrive, each receive's at once.

        Raises:
            UpstreamError: the back end went silent for its read timeout, or the connection broke before the body's
                end (``upstream_connect``, ``upstream_protocol``).
        """
        response = self._response
        with MAPPED_ERRORS:
            while True:
                if response.unread:
                    yield response.take()
                if response.message_complete:
                    return
                if not response.receive(response.read_timeout):
                    response.release()
                    raise TimeoutError("the upstream went silent")

    def close(self) -> None:
        """Let the answer go (an unfinished one closes its connection: the back end stops)."""
        self._response.release()


def upstream_request_id(request_id: str) -> str:
    """The ``X-Request-Id`` the back end gets: the request's own id when it is a UUID, else a UUID made from it.

    Some servers refuse any other id (llama-cpp-python answers 400 with an empty body), so a client's
    ``req-abc.1`` goes as ``uuid5(namespace, "req-abc.1")``: the same id always maps to the same UUID, and the
    mapping is logged (``toolwire.upstream.http``, debug) to find the request in the back end's log.
    """
    if _LOWER_HEX_32.fullmatch(request_id):  # toolwire's own ids: str(UUID(...)) without the object
        return f"{request_id[:8]}-{request_id[8:12]}-{request_id[12:16]}-{request_id[16:20]}-{request_id[20:]}"
    try:
        return str(uuid.UUID(request_id))
    except ValueError:
        mapped = str(uuid.uuid5(_REQUEST_ID_NAMESPACE, request_id))
        log.debug("request %s goes upstream as X-Request-Id %s", request_id, mapped,
                  extra={"fields": {"upstream_request_id": mapped}})
        return mapped


def _let_go(response: BoundedResponse) -> None:
    """A stream's end payload came: read the (normally empty) rest so the connection goes back to the pool, or
    close a connection that is not kept (its body ends at the close: no wait for that)."""
    if response.should_keep_alive():
        response.read_body(keep=False)
    else:
        response.release()


def _idle_since(since: float | None, limit: float) -> float:
    """When the reads without a data event began (now, at the first of them).

    Raises:
        UpstreamError: they have gone on for more than ``limit`` seconds (a 504).
    """
    now = time.monotonic()
    if since is None:
        return now
    if now - since > limit:
        raise UpstreamError("timeout", f"The upstream sent no content for {limit:g} seconds.", status=504)
    return since


def _silent_since(since: float | None, wait: float, limit: float, response: BoundedResponse) -> float:
    """When the silence that a wait of ``wait`` seconds just ended in began.

    Raises:
        TimeoutError: it has lasted ``limit`` seconds (the response is closed).
    """
    now = time.monotonic()
    if since is None:
        since = now - wait
    if now - since >= limit:
        response.release()
        raise TimeoutError("the upstream went silent")
    return since


def _empty_stream() -> UpstreamError:
    """A 200 stream that ended with no event and no ``[DONE]``: the back end failed after its headers
    (llama-cpp-python does for tools it cannot stream), never an empty answer."""
    return UpstreamError("server_error", "The upstream ended its stream without sending an event.",
                         code="upstream_empty_stream")


def _header(response: HTTPSocketPoolResponse, name: str) -> str | None:
    """A response header's value (the first one, if the upstream repeated it)."""
    value = response.get(name)
    return value[0] if isinstance(value, list) else value


def _identity(response: HTTPSocketPoolResponse) -> bool:
    encoding = _header(response, "content-encoding")
    return not encoding or encoding.strip().lower() == "identity"


def _check_encoding(response: BoundedResponse) -> None:
    """Refuse a compressed body: toolwire asks for ``identity`` and never inflates (no gzip bomb can grow it)."""
    if not _identity(response):
        response.release()
        raise UpstreamError("protocol", f"The upstream sent a {_header(response, 'content-encoding')!r}-encoded "
                                        "body although toolwire asked for identity.",
                            code="upstream_content_encoding")


def _event_json(payload: bytes) -> Any:
    """An event's data parsed (orjson checks its UTF-8, which the SSE decoder leaves as it came)."""
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise _malformed(payload) from None


def _malformed(payload: bytes) -> UpstreamError:
    """The error of an event's data that orjson refused: not UTF-8, or not JSON."""
    try:
        payload.decode()
    except UnicodeDecodeError:
        return UpstreamError("protocol", "The upstream stream is not valid UTF-8.")
    return UpstreamError("protocol", "The upstream sent malformed JSON.")


def _loads(payload: str | bytes) -> Any:
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise UpstreamError("protocol", "The upstream sent malformed JSON.") from None


class _MappedErrors:
    """Context manager: transport exceptions → :class:`UpstreamError`; every one leaving it is counted
    in ``toolwire_upstream_errors_total`` by kind (so do not nest it). Stateless: the one
    :data:`MAPPED_ERRORS` serves every ``with`` (an open stream's upstream holds none of its own)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, UpstreamError):
            UPSTREAM_ERRORS.labels(exc.kind).inc()
        if exc is None or not isinstance(exc, (OSError, HTTPParseError, BufferLimitExceeded, EventTooLarge)):
            return None
        if isinstance(exc, (BufferLimitExceeded, EventTooLarge)):
            mapped = UpstreamError("protocol", f"The upstream sent an SSE event, line or body of {exc}; "
                                               "toolwire stopped reading it.", code="upstream_too_large")
        elif isinstance(exc, TimeoutError):
            mapped = UpstreamError("timeout", "The upstream timed out.", status=504)
        elif isinstance(exc, HTTPParseError):
            mapped = UpstreamError("protocol", "The upstream broke the HTTP protocol.")
        else:
            mapped = UpstreamError("connect", "Could not reach the upstream.")
        UPSTREAM_ERRORS.labels(mapped.kind).inc()
        raise mapped from None


MAPPED_ERRORS = _MappedErrors()


def status_error(status: int, content: bytes, *, retry_after: str | None = None,
                 secret: SecretStr | None = None) -> UpstreamError:
    """The :class:`UpstreamError` for a non-2xx upstream answer with body ``content``.

    401 and 403 are about toolwire's own upstream key, not the client's
    request: they become a 502 whose message never quotes the upstream (which
    may echo part of the key). Only a JSON error object is quoted (its message,
    ``param`` and ``code``, with ``secret`` masked out); any other body (an HTML
    page naming internal hosts, plain text) is never forwarded.
    """
    if status in (401, 403):
        return UpstreamError("auth", f"The upstream refused toolwire's credentials (HTTP {status}).",
                             code="upstream_auth_failed")
    try:
        body: Any = orjson.loads(content)
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        body = None
    message = redact(error_message(body), secret)
    err = body.get("error") if body is not None else None
    param = err.get("param") if isinstance(err, dict) else None
    code = err.get("code") if isinstance(err, dict) else None
    type_ = err.get("type") if isinstance(err, dict) else None
    param = redact(param, secret) if isinstance(param, str) else None
    code = redact(str(code), secret) if code is not None else None
    if status == 429:
        return UpstreamError("rate_limited", message or "The upstream is rate limited.", status=429,
                             retry_after=retry_after)
    if status < 500:
        return UpstreamError("client_error", message or f"The upstream rejected the request (HTTP {status}).",
                             status=status, param=param, code=code,
                             type=type_ if type_ in _CLIENT_ERROR_TYPES else None)
    detail = f": {message}" if message else "."
    return UpstreamError("server_error", f"The upstream failed (HTTP {status}){detail}", upstream_status=status)
