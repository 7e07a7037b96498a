"""What every upstream (the embedded demo model, an HTTP server) hands to the endpoints."""

from __future__ import annotations

import base64
import functools
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol

from pydantic import SecretStr

#: What stands in for a secret found in a message.
MASK = "**********"
#: A shorter secret is not looked for in base64 (its few characters would mask unrelated text).
_MIN_ENCODED_SECRET = 8
#: The most characters of a back end's error message quoted.
MAX_ERROR_CHARS = 2000


@dataclass(slots=True)
class ChoiceDelta:
    """One choice's part of one upstream ``chat.completion.chunk``.

    Fields:
        index: the upstream choice index.
        content: text, or ``None`` when the chunk carried none.
        tool_calls: raw native ``delta.tool_calls`` entries (dicts), if any.
        finish_reason: the upstream's finish reason, if this chunk ends the choice.
        reasoning: ``reasoning_content`` text, if the upstream sends it.
        stop_sequence: the request's stop sequence that ended the choice, when the back end names it (vLLM's
            ``stop_reason``, SGLang's ``matched_stop``) or cut the text there itself (Codex, the demo).
    """

    index: int = 0
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    finish_reason: str | None = None
    reasoning: str | None = None
    stop_sequence: str | None = None


@dataclass(slots=True)
class UpstreamChunk:
    """One decoded upstream chunk.

    Fields:
        choices: the per-choice deltas it carried.
        usage: the upstream's usage object when it sent one.
    """

    choices: list[ChoiceDelta] = field(default_factory=list)
    usage: dict[str, Any] | None = None


class UpstreamError(Exception):
    """The upstream failed; ``kind`` says how, ``status`` what the client gets.

    Kinds: ``client_error`` (upstream 4xx other than 401, 403 and 429, passed
    through with its status and message), ``auth`` (upstream 401/403: toolwire's
    own key was refused → 502, never quoting the upstream), ``rate_limited`` (429,
    ``retry_after`` seconds when known), ``server_error`` (upstream 5xx or an error
    object mid-stream → 502), ``connect`` (refused, DNS, a reset connection →
    502), ``timeout`` (→ 504), ``protocol`` (broken HTTP, malformed SSE or JSON
    → 502).
    """

    def __init__(self, kind: str, message: str, *, status: int = 502,
                 retry_after: str | None = None, param: str | None = None, code: str | None = None,
                 type: str | None = None, upstream_status: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.param = param
        self.code = code
        self.type = type  # a ``client_error``'s OpenAI error type, when the upstream named one
        self.upstream_status = upstream_status  # the back end's own HTTP status, when it answered with one

    def redacted(self, secret: str | SecretStr | None) -> "UpstreamError":
        """This error with ``secret`` masked out of everything the client is sent (message, ``param``, ``code``)."""
        if not _secret_value(secret):
            return self
        self.message = redact(self.message, secret)
        self.args = (self.message,)
        self.param = None if self.param is None else redact(self.param, secret)
        self.code = None if self.code is None else redact(self.code, secret)
        return self


def redact(text: str, secret: str | SecretStr | None) -> str:
    """``text`` with every occurrence of ``secret`` (an upstream API key), or of it in base64 (an echoed
    ``Authorization`` header), replaced by :data:`MASK`."""
    value = _secret_value(secret)
    if not value:
        return text
    for form in _secret_forms(value):
        text = text.replace(form, MASK)
    return text


@functools.lru_cache(maxsize=8)
def _secret_forms(value: str) -> tuple[str, ...]:
    """``value`` itself, and the base64 characters that stand for it wherever it sits in an encoded text.

    Base64 codes 3 bytes as 4 characters, so what ``value`` becomes depends on its offset (mod 3) in
    the encoded bytes. For each offset, only the characters made of ``value``'s bits alone are kept:
    they appear whatever surrounds it.
    """
    raw = value.encode()
    forms = [value]
    if len(raw) >= _MIN_ENCODED_SECRET:
        for offset in range(3):
            coded = base64.b64encode(bytes(offset) + raw + bytes(2)).decode()
            core = coded[-(-8 * offset // 6):(8 * (offset + len(raw))) // 6]
            forms += [core, core.replace("+", "-").replace("/", "_")]
    return tuple(dict.fromkeys(forms))


def _secret_value(secret: str | SecretStr | None) -> str:
    return secret.get_secret_value() if isinstance(secret, SecretStr) else secret or ""


def error_message(body: Any) -> str:
    """The error message of an upstream JSON error object, whatever its dialect."""
    if not isinstance(body, dict):
        return ""
    err = body.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or "")[:MAX_ERROR_CHARS]
    for value in (err, body.get("message"), body.get("detail")):
        if isinstance(value, str) and value:
            return value[:MAX_ERROR_CHARS]
    return ""


class Pause:
    """A stream's word between chunks, once asked for with :meth:`UpstreamStream.pause_every`.

    :data:`PAUSE` comes before every wait for the back end: what was produced so far should go
    out now. :data:`IDLE` comes after each tick of silence: time to check the clock (a keep-alive,
    the stream's time limit). No second greenlet per stream is needed to notice either.
    """

    __slots__ = ("idle",)

    def __init__(self, idle: bool):
        self.idle = idle

    def __repr__(self) -> str:
        return "IDLE" if self.idle else "PAUSE"


PAUSE = Pause(idle=False)
IDLE = Pause(idle=True)

#: Choice 0's text and nothing else (``UpstreamChunk([ChoiceDelta(0, text)])``, most chunks of a stream), as a
#: stream yields it once :meth:`UpstreamStream.plain_texts` was asked: the text alone, no objects built.
PlainText = str
#: Choice 0's native call fragments and nothing else (``UpstreamChunk([ChoiceDelta(0, tool_calls=fragments)])``,
#: most chunks of a native call), as a stream yields them once :meth:`UpstreamStream.plain_texts` was asked.
CallFragments = list[dict[str, Any]]
#: What one event of a back end's answer becomes (see :class:`~app.upstreams.dialect.WireDialect`).
ChunkItem = UpstreamChunk | PlainText | CallFragments
#: A chunk and the pause that follows it, as one item: the last chunk a receive brought, when the stream waits next
#: (most chunks of a paced stream: its consumer then resumes the stream once a chunk, not once more for the pause).
PausedChunk = tuple[ChunkItem, Pause]
#: What an upstream stream yields: its chunks, and the pauses asked for (:meth:`UpstreamStream.pause_every`), alone
#: or after a chunk (:data:`PausedChunk`). The five are distinct classes, so an ``isinstance`` chain narrows them.
StreamItem = ChunkItem | Pause | PausedChunk


class UpstreamStream(Protocol):
    """An open upstream response: iterate its items (:data:`StreamItem`), then (or on abandon) close."""

    def __iter__(self) -> Iterator[StreamItem]: ...

    def plain_texts(self, *, join: bool = False) -> None:
        """From now on the stream may yield its common chunks light: choice 0's text alone as a
        :data:`PlainText`, choice 0's native call fragments alone as :data:`CallFragments`; with ``join``, a run
        of plain texts that arrived together as one. A stream whose chunks are built anyway (the demo, Codex)
        goes on yielding :class:`UpstreamChunk` objects."""

    def pause_every(self, tick: float | None) -> None:
        """From now on yield :data:`PAUSE` before each wait for the back end (alone, or with the chunk before it
        as a :data:`PausedChunk`) and :data:`IDLE` after every ``tick`` seconds of silence (``None``: no
        ``IDLE``). Without this call a stream yields chunks only."""

    def confirm(self) -> None:
        """Return once the body has begun (``auto`` tool mode: a back end that fails after its headers must fail
        before the client's first byte, so the prompt-mode retry can still answer); a stream whose chunks are
        already there returns at once.

        Raises:
            UpstreamError: the body ended empty, timed out or broke.
        """

    def close(self) -> None: ...


class Upstream(Protocol):
    """A Chat Completions back end that produces text (and maybe native tool calls)."""

    def open(self, body: dict[str, Any], *, request_id: str | None = None) -> UpstreamStream:
        """Send a Chat Completions request (``stream: true``) and return the open stream.

        Raises ``UpstreamError`` when the upstream refuses before streaming.
        """
        ...

    def models(self) -> list[dict[str, Any]]:
        """The upstream's model list in OpenAI shape (``data`` entries)."""
        ...

    def ready(self) -> bool:
        """Whether the upstream answers right now (for ``/readyz``)."""
        ...
