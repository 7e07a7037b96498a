"""HttpUpstream: an OpenAI-compatible Chat Completions server reached over httpx.

One ``httpx.Client`` per worker process, created lazily (after gunicorn forks)
with explicit timeouts. Failures become :class:`UpstreamError` with the kind
and status the client should see.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

import httpx
import orjson
from pydantic import SecretStr

from ..observability.metrics import UPSTREAM_ERRORS
from .sse import SSEDecoder
from .transport import make_transport
from .base import ChoiceDelta, UpstreamChunk, UpstreamError

_MAX_ERROR_CHARS = 2000
#: Bytes of one read decoded at a time (see :func:`_payloads`).
DECODE_BYTES = 4096
# No cap on open upstream connections: gunicorn's worker_connections already bounds the streams a
# worker holds, and a smaller pool cap queues requests inside httpx, whose pool rescans every
# connection per queued request (it stalled the 2,000-stream benchmark at the 1,000 cap).
_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=100)


class HttpUpstream:
    """An upstream at ``base_url`` (the URL up to and including ``/v1``).

    Args:
        base_url: e.g. ``http://127.0.0.1:11434/v1``.
        api_key: sent as ``Authorization: Bearer``; never logged.
        timeout: per-phase timeouts (``read`` is the longest silence allowed).
        transport: an httpx transport (tests pass ``httpx.MockTransport``).
    """

    def __init__(self, base_url: str, *, api_key: SecretStr | None = None,
                 timeout: httpx.Timeout | None = None, transport: httpx.BaseTransport | None = None):
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._timeout = timeout or httpx.Timeout(300.0, connect=10.0)
        self._transport = transport
        self._client: httpx.Client | None = None
        self._pid: int | None = None

    @property
    def client(self) -> httpx.Client:
        """This process's client (a forked worker gets its own)."""
        if self._client is None or self._pid != os.getpid():
            headers = {"Accept": "text/event-stream"}
            if self._api_key is not None and self._api_key.get_secret_value():
                headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
            self._client = httpx.Client(timeout=self._timeout, headers=headers,
                                        transport=self._transport or make_transport(_LIMITS))
            self._pid = os.getpid()
        return self._client

    def open(self, body: dict[str, Any], *, request_id: str | None = None) -> "HttpStream":
        """POST ``/chat/completions`` and return the open stream once the status is known.

        Raises:
            UpstreamError: connect failure, timeout or a non-2xx answer.
        """
        payload = orjson.dumps(body)
        headers = {"Content-Type": "application/json", "Content-Length": str(len(payload))}
        if request_id:
            headers["X-Request-Id"] = request_id
        # Sent from an iterator, which lets go of the bytes once written: as plain content they would stay
        # on the response's request for the whole stream (the prompt, often the largest thing a stream holds).
        request = self.client.build_request("POST", f"{self.base_url}/chat/completions",
                                            content=iter((payload,)), headers=headers)
        with _mapped_errors():
            response = self.client.send(request, stream=True)
            if response.status_code >= 400:
                try:
                    response.read()
                finally:
                    response.close()
                raise status_error(response, secret=self._api_key)
        return HttpStream(response)

    def models(self) -> list[dict[str, Any]]:
        """``GET /models``: the upstream's ``data`` list."""
        with _mapped_errors():
            response = self.client.get(f"{self.base_url}/models", headers={"Accept": "application/json"})
            if response.status_code >= 400:
                raise status_error(response, secret=self._api_key)
            try:
                data = orjson.loads(response.content).get("data")
            except (orjson.JSONDecodeError, AttributeError):
                data = None
            if not isinstance(data, list):
                raise UpstreamError("protocol", "The upstream sent a malformed model list.")
        return data

    def ready(self) -> bool:
        """Whether ``GET /models`` answers 200 within a short timeout."""
        try:
            response = self.client.get(f"{self.base_url}/models", timeout=httpx.Timeout(3.0))
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    def close(self) -> None:
        """Close this process's client."""
        if self._client is not None:
            self._client.close()
            self._client = None


class HttpStream:
    """An open upstream response: iterate :class:`UpstreamChunk` objects, then close."""

    def __init__(self, response: httpx.Response):
        self._response = response
        self._json = response.headers.get("content-type", "").startswith("application/json")

    def __iter__(self) -> Iterator[UpstreamChunk]:
        with _mapped_errors():
            if self._json:
                # Some servers ignore ``stream: true``; their whole completion is one chunk.
                self._response.read()
                yield from _whole_completion(_loads(self._response.content))
                return
            raw_chunks = self._response.iter_bytes()
            for payload in _payloads(raw_chunks):
                if payload == "[DONE]":
                    # Read the (normally empty) rest of the body: only a fully read response
                    # goes back to the connection pool instead of being thrown away.
                    for _ in raw_chunks:
                        pass
                    return
                yield parse_chunk(_loads(payload))

    def close(self) -> None:
        """Close the response (aborts the upstream generation)."""
        self._response.close()


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
    """Context manager: httpx exceptions → :class:`UpstreamError`; every one leaving it is counted
    in ``toolwire_upstream_errors_total`` by kind (so do not nest it)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, UpstreamError):
            UPSTREAM_ERRORS.labels(exc.kind).inc()
        if exc is None or not isinstance(exc, httpx.HTTPError):
            return None
        if isinstance(exc, httpx.TimeoutException):
            mapped = UpstreamError("timeout", "The upstream timed out.", status=504)
        elif isinstance(exc, (httpx.RemoteProtocolError, httpx.DecodingError)):
            mapped = UpstreamError("protocol", "The upstream broke the HTTP protocol.")
        else:
            mapped = UpstreamError("connect", "Could not reach the upstream.")
        UPSTREAM_ERRORS.labels(mapped.kind).inc()
        raise mapped from None


def status_error(response: httpx.Response, *, secret: SecretStr | None = None) -> UpstreamError:
    """The :class:`UpstreamError` for a non-2xx upstream answer (its body already read).

    401 and 403 are about toolwire's own upstream key, not the client's
    request: they become a 502 whose message never quotes the upstream (which
    may echo part of the key). Any other upstream message has ``secret``
    masked out.
    """
    status = response.status_code
    if status in (401, 403):
        return UpstreamError("auth", f"The upstream refused toolwire's credentials (HTTP {status}).",
                             code="upstream_auth_failed")
    try:
        body: Any = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        body = response.text[:_MAX_ERROR_CHARS]
    message = _redact(_message(body), secret)
    err = body.get("error") if isinstance(body, dict) else None
    param = err.get("param") if isinstance(err, dict) else None
    code = err.get("code") if isinstance(err, dict) else None
    if status == 429:
        return UpstreamError("rate_limited", message or "The upstream is rate limited.", status=429,
                             retry_after=response.headers.get("Retry-After"))
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
