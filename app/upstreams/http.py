"""HttpUpstream: an OpenAI-compatible Chat Completions server reached over HTTP(S).

Requests go through :class:`~app.upstreams.transport.UpstreamConnection`
(geventhttpclient's pool and parser; one pool per worker process, made after
gunicorn forks) with explicit timeouts. Failures become
:class:`UpstreamError` with the kind and status the client should see.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Iterator

import gevent
import orjson
from geventhttpclient.response import HTTPParseError, HTTPSocketPoolResponse
from pydantic import SecretStr

from ..observability.metrics import UPSTREAM_ERRORS
from .base import ChoiceDelta, UpstreamChunk, UpstreamError
from .sse import SSEDecoder
from .transport import Timeouts, UpstreamConnection

_MAX_ERROR_CHARS = 2000
#: Bytes of one read decoded at a time (see :func:`_payloads`).
DECODE_BYTES = 4096
#: ``/readyz``: the longest wait for the upstream's model list, seconds.
READY_TIMEOUT = 3.0
_STREAM_HEADERS = {"Accept": "text/event-stream", "Content-Type": "application/json"}
_JSON_HEADERS = {"Accept": "application/json"}


class HttpUpstream:
    """An upstream at ``base_url`` (the URL up to and including ``/v1``).

    Args:
        base_url: e.g. ``http://127.0.0.1:11434/v1`` or ``https://…``.
        api_key: sent as ``Authorization: Bearer``; never logged.
        timeouts: per-phase timeouts (``read`` is the longest silence allowed).
    """

    def __init__(self, base_url: str, *, api_key: SecretStr | None = None, timeouts: Timeouts | None = None):
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        headers = {}
        if api_key is not None and api_key.get_secret_value():
            headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
        self.connection = UpstreamConnection(self.base_url, timeouts=timeouts or Timeouts(), headers=headers)

    def open(self, body: dict[str, Any], *, request_id: str | None = None) -> "HttpStream":
        """POST ``/chat/completions`` and return the open stream once the status is known.

        Raises:
            UpstreamError: connect failure, timeout or a non-2xx answer.
        """
        headers = {**_STREAM_HEADERS, "X-Request-Id": request_id} if request_id else _STREAM_HEADERS
        with _mapped_errors():
            response = self.connection.request("POST", "/chat/completions", orjson.dumps(body), headers=headers)
            if response.status_code >= 400:
                raise self._status_error(response)
        return HttpStream(response)

    def models(self) -> list[dict[str, Any]]:
        """``GET /models``: the upstream's ``data`` list."""
        with _mapped_errors():
            response = self.connection.request("GET", "/models", headers=_JSON_HEADERS)
            if response.status_code >= 400:
                raise self._status_error(response)
            try:
                data = orjson.loads(response.read()).get("data")
            except (orjson.JSONDecodeError, AttributeError):
                data = None
            if not isinstance(data, list):
                raise UpstreamError("protocol", "The upstream sent a malformed model list.")
        return data

    def ready(self) -> bool:
        """Whether ``GET /models`` answers 200 within :data:`READY_TIMEOUT` seconds."""
        try:
            with gevent.Timeout(READY_TIMEOUT):
                response = self.connection.request("GET", "/models", headers=_JSON_HEADERS)
                response.read()
        except (gevent.Timeout, OSError, HTTPParseError):
            return False
        return response.status_code == 200

    def close(self) -> None:
        """Close this process's idle upstream connections."""
        self.connection.close()

    def _status_error(self, response: HTTPSocketPoolResponse) -> UpstreamError:
        try:
            body = response.read()
        finally:
            response.release()
        return status_error(response.status_code, body, retry_after=_header(response, "retry-after"),
                            secret=self._api_key)


class HttpStream:
    """An open upstream response: iterate :class:`UpstreamChunk` objects, then close."""

    def __init__(self, response: HTTPSocketPoolResponse):
        self._response = response
        self._json = (_header(response, "content-type") or "").startswith("application/json")

    def __iter__(self) -> Iterator[UpstreamChunk]:
        with _mapped_errors():
            if self._json:
                # Some servers ignore ``stream: true``; their whole completion is one chunk.
                yield from _whole_completion(_loads(self._response.read()))
                return
            pieces = event_reads(self._response)
            for payload in _payloads(pieces):
                if payload == "[DONE]":
                    # Read the (normally empty) rest of the body: only a complete response
                    # gives its connection back to the pool instead of closing it.
                    for _ in pieces:
                        pass
                    return
                yield parse_chunk(_loads(payload))

    def close(self) -> None:
        """Close the response (an unfinished one closes its connection: the upstream stops generating)."""
        self._response.release()


def event_reads(response: HTTPSocketPoolResponse) -> Iterator[bytes]:
    """The body as it arrives, one SSE event at a time, then whatever followed the last event's end.

    ``read(n)`` would wait for ``n`` bytes and hold events back, so the body is read with
    ``readline``: line by line up to the first blank line, which shows the stream's line end; from
    there on each read ends at the next blank line (a stream that changes its line ends midway is
    still decoded whole, its later events only at the end).
    """
    readline = response.readline
    while line := readline(b"\n"):
        yield line
        if line == b"\n" or line == b"\r\n":
            blank_line = b"\n\n" if line == b"\n" else b"\r\n\r\n"
            yield from iter(partial(readline, blank_line), b"")
            break
    rest = response.read()
    if rest:
        yield rest


def _header(response: HTTPSocketPoolResponse, name: str) -> str | None:
    """A response header's value (the first one, if the upstream repeated it)."""
    value = response.get(name)
    return value[0] if isinstance(value, list) else value


def parse_chunk(obj: Any) -> UpstreamChunk:
    """One ``chat.completion.chunk`` dict as an :class:`UpstreamChunk`.

    Raises:
        UpstreamError: the chunk is an error object or not a chunk at all.
    """
    if not isinstance(obj, dict):
        raise UpstreamError("protocol", "The upstream sent a malformed stream chunk.")
    if obj.get("error"):
        raise UpstreamError("server_error", f"The upstream failed mid-stream: {_message(obj)}")
    choices = []
    for choice in obj.get("choices") or ():
        delta = choice.get("delta") or {}
        choices.append(ChoiceDelta(
            index=choice.get("index") or 0,
            content=delta.get("content"),
            tool_calls=_native_calls(delta),
            finish_reason=choice.get("finish_reason"),
            reasoning=delta.get("reasoning_content") or delta.get("reasoning"),
        ))
    usage = obj.get("usage")
    return UpstreamChunk(choices=choices, usage=usage if isinstance(usage, dict) else None)


def _native_calls(delta: dict[str, Any]) -> list[Any] | None:
    """A delta's (or message's) ``tool_calls``, or its legacy ``function_call`` as the one entry."""
    calls = delta.get("tool_calls")
    if calls and isinstance(calls, list):
        return calls
    function_call = delta.get("function_call")
    return [{"function": function_call}] if isinstance(function_call, dict) else None


def _whole_completion(obj: Any) -> Iterator[UpstreamChunk]:
    if not isinstance(obj, dict) or obj.get("error"):
        yield parse_chunk(obj)
        return
    choices = []
    for choice in obj.get("choices") or ():
        message = choice.get("message") or {}
        calls = _native_calls(message)
        if calls:  # whole calls: each its own index, whatever the server wrote
            calls = [{**call, "index": i} if isinstance(call, dict) else call for i, call in enumerate(calls)]
        choices.append(ChoiceDelta(index=choice.get("index") or 0, content=message.get("content"),
                                   tool_calls=calls, finish_reason=choice.get("finish_reason"),
                                   reasoning=message.get("reasoning_content")))
    usage = obj.get("usage")
    yield UpstreamChunk(choices=choices, usage=usage if isinstance(usage, dict) else None)


def _payloads(raw_chunks: Iterator[bytes]) -> Iterator[str]:
    """The ``data`` payloads of an SSE byte stream.

    A read can hold hundreds of events (up to 64 KB from a fast upstream); it is decoded in
    :data:`DECODE_BYTES` pieces, so the first event goes on before the rest are decoded.
    """
    decoder = SSEDecoder()
    for raw in raw_chunks:
        if len(raw) <= DECODE_BYTES:
            yield from _decode(decoder, raw)
            continue
        for start in range(0, len(raw), DECODE_BYTES):
            yield from _decode(decoder, raw[start:start + DECODE_BYTES])
    yield from _decode(decoder, None)


def _decode(decoder: SSEDecoder, raw: bytes | None) -> list[str]:
    try:
        return decoder.feed(raw) if raw is not None else decoder.end()
    except UnicodeDecodeError:
        raise UpstreamError("protocol", "The upstream stream is not valid UTF-8.") from None


def _loads(payload: str | bytes) -> Any:
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise UpstreamError("protocol", "The upstream sent malformed JSON.") from None


class _mapped_errors:
    """Context manager: transport exceptions → :class:`UpstreamError`; every one leaving it is counted
    in ``toolwire_upstream_errors_total`` by kind (so do not nest it)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, UpstreamError):
            UPSTREAM_ERRORS.labels(exc.kind).inc()
        if exc is None or not isinstance(exc, (OSError, HTTPParseError)):
            return None
        if isinstance(exc, TimeoutError):
            mapped = UpstreamError("timeout", "The upstream timed out.", status=504)
        elif isinstance(exc, HTTPParseError):
            mapped = UpstreamError("protocol", "The upstream broke the HTTP protocol.")
        else:
            mapped = UpstreamError("connect", "Could not reach the upstream.")
        UPSTREAM_ERRORS.labels(mapped.kind).inc()
        raise mapped from None


def status_error(status: int, content: bytes, *, retry_after: str | None = None,
                 secret: SecretStr | None = None) -> UpstreamError:
    """The :class:`UpstreamError` for a non-2xx upstream answer with body ``content``.

    401 and 403 are about toolwire's own upstream key, not the client's
    request: they become a 502 whose message never quotes the upstream (which
    may echo part of the key). Any other upstream message has ``secret``
    masked out.
    """
    if status in (401, 403):
        return UpstreamError("auth", f"The upstream refused toolwire's credentials (HTTP {status}).",
                             code="upstream_auth_failed")
    try:
        body: Any = orjson.loads(content)
    except orjson.JSONDecodeError:
        body = content[:_MAX_ERROR_CHARS * 4].decode("utf-8", "replace")
    message = _redact(_message(body), secret)
    err = body.get("error") if isinstance(body, dict) else None
    param = err.get("param") if isinstance(err, dict) else None
    code = err.get("code") if isinstance(err, dict) else None
    if status == 429:
        return UpstreamError("rate_limited", message or "The upstream is rate limited.", status=429,
                             retry_after=retry_after)
    if status < 500:
        return UpstreamError("client_error", message or f"The upstream rejected the request (HTTP {status}).",
                             status=status,
                             param=param if isinstance(param, str) else None,
                             code=str(code) if code is not None else None)
    detail = f": {message}" if message else "."
    return UpstreamError("server_error", f"The upstream failed (HTTP {status}){detail}")


def _redact(text: str, secret: SecretStr | None) -> str:
    value = secret.get_secret_value() if secret is not None else ""
    return text.replace(value, "**********") if value else text


def _message(body: Any) -> str:
    """The error message of an upstream error body, whatever its dialect."""
    if isinstance(body, str):
        return body.strip()[:_MAX_ERROR_CHARS]
    if not isinstance(body, dict):
        return ""
    err = body.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or "")[:_MAX_ERROR_CHARS]
    for value in (err, body.get("message"), body.get("detail")):
        if isinstance(value, str) and value:
            return value[:_MAX_ERROR_CHARS]
    return ""
