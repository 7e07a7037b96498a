"""The OpenAI Chat Completions wire dialect: ``chat.completion.chunk`` events (SSE, ended by ``[DONE]``) as stream
items, the first :class:`~app.upstreams.dialect.WireDialect` (:data:`OPENAI_CHAT`).

Servers differ in the details (reasoning under three names, the stop sequence that matched under two, the legacy
``function_call``, a whole completion where a stream was asked for); they are read here, so the stream and the
pipeline see one shape.
"""

from __future__ import annotations

from typing import Any, Iterator

from pydantic import SecretStr

from .base import ChoiceDelta, ChunkItem, UpstreamChunk, UpstreamError, error_message, redact
from .dialect import WireDialect
from .sse import SSEDecoder

#: The delta keys of a chunk that carries text at most (the quick path of ``read_chunk`` and ``parse_chunk``).
_TEXT_ONLY = frozenset({"content", "role"})
#: … and of one that carries native calls at most.
_CALLS_ONLY = frozenset({"content", "role", "tool_calls"})


def read_chunk(obj: Any, secret: SecretStr | None = None) -> ChunkItem:
    """:func:`parse_chunk`'s reading of ``obj``, except that the common chunks are read alone, with no objects
    built for them: choice 0's text and nothing else (no finish reason, usage, calls or reasoning) as that text,
    and choice 0's native call fragments and nothing else (no text, finish reason, usage or reasoning) as their
    ``tool_calls`` list. Other delta keys that are empty (SGLang's ``reasoning_content: null`` and
    ``tool_calls: null`` on every chunk, an empty ``tool_calls`` list) leave a chunk on this path."""
    if obj.__class__ is dict and obj.get("usage") is None:
        choices = obj.get("choices")
        if choices.__class__ is list and len(choices) == 1 and not obj.get("error"):
            choice = choices[0]
            if choice.__class__ is dict and not choice.get("index") and choice.get("finish_reason") is None:
                delta = choice.get("delta")
                if delta.__class__ is dict:
                    text = delta.get("content")
                    if text.__class__ is str and (len(delta) == 1 or delta.keys() <= _TEXT_ONLY
                                                  or _empty_beyond(delta, _TEXT_ONLY)):
                        return text
                    calls = delta.get("tool_calls")
                    if calls.__class__ is list and calls and text is None and (delta.keys() <= _CALLS_ONLY or
                                                                               _empty_beyond(delta, _CALLS_ONLY)):
                        return calls
    return parse_chunk(obj, secret)


def _empty_beyond(delta: dict[str, Any], keys: frozenset[str]) -> bool:
    """Whether every key of ``delta`` outside ``keys`` is empty (``None``, ``""``, ``[]``...)."""
    for key, value in delta.items():
        if value and key not in keys:
            return False
    return True


def parse_chunk(obj: Any, secret: SecretStr | None = None) -> UpstreamChunk:
    """One ``chat.completion.chunk`` dict as an :class:`UpstreamChunk`.

    Raises:
        UpstreamError: the chunk is an error object (its message quoted with ``secret`` masked out)
            or not a chunk at all.
    """
    if not isinstance(obj, dict):
        raise UpstreamError("protocol", "The upstream sent a malformed stream chunk.")
    if obj.get("error"):
        raise UpstreamError("server_error", f"The upstream failed mid-stream: {redact(error_message(obj), secret)}")
    choices = []
    for choice in obj.get("choices") or ():
        delta = choice.get("delta") or {}
        finish = choice.get("finish_reason")
        stop = None if finish is None else _stop_sequence(choice)
        if delta.keys() <= _TEXT_ONLY:  # most chunks of a stream: no calls or reasoning to look for
            choices.append(ChoiceDelta(choice.get("index") or 0, delta.get("content"), None, finish, None, stop))
            continue
        choices.append(ChoiceDelta(choice.get("index") or 0, delta.get("content"), _native_calls(delta), finish,
                                   _reasoning_of(delta), stop))
    usage = obj.get("usage")
    return UpstreamChunk(choices, usage if isinstance(usage, dict) else None)


def _stop_sequence(choice: dict[str, Any]) -> str | None:
    """The stop sequence that ended a choice, where the server names it: vLLM's ``stop_reason``, SGLang's
    ``matched_stop`` (a number there is a stop token, no sequence)."""
    value = choice.get("stop_reason") or choice.get("matched_stop")
    return value if isinstance(value, str) and choice.get("finish_reason") == "stop" else None


def _reasoning_of(delta: dict[str, Any]) -> str | None:
    """A delta's (or message's) reasoning under any of the names servers use: ``reasoning_content`` (DeepSeek,
    vLLM, SGLang, llama.cpp), ``reasoning`` (newer vLLM, OpenRouter, Ollama's /v1), ``thinking`` (Ollama)."""
    text = delta.get("reasoning_content") or delta.get("reasoning") or delta.get("thinking")
    return text if isinstance(text, str) and text else None


def _native_calls(delta: dict[str, Any]) -> list[Any] | None:
    """A delta's (or message's) ``tool_calls``, or its legacy ``function_call`` as the one entry."""
    calls = delta.get("tool_calls")
    if calls and isinstance(calls, list):
        return calls
    function_call = delta.get("function_call")
    return [{"function": function_call}] if isinstance(function_call, dict) else None


def whole_completion(obj: Any, secret: SecretStr | None) -> Iterator[UpstreamChunk]:
    if not isinstance(obj, dict) or obj.get("error"):
        yield parse_chunk(obj, secret)
        return
    choices = []
    for choice in obj.get("choices") or ():
        message = choice.get("message") or {}
        calls = _native_calls(message)
        if calls:  # whole calls: each its own index, whatever the server wrote
            calls = [{**call, "index": i} if isinstance(call, dict) else call for i, call in enumerate(calls)]
        choices.append(ChoiceDelta(index=choice.get("index") or 0, content=message.get("content"),
                                   tool_calls=calls, finish_reason=choice.get("finish_reason"),
                                   reasoning=_reasoning_of(message), stop_sequence=_stop_sequence(choice)))
    usage = obj.get("usage")
    yield UpstreamChunk(choices=choices, usage=usage if isinstance(usage, dict) else None)


#: OpenAI's Chat Completions, as OpenAI-compatible servers (vLLM, SGLang, llama.cpp, Ollama's /v1, LM Studio…)
#: stream it.
OPENAI_CHAT = WireDialect(name="openai-chat", path="/chat/completions", accept="text/event-stream",
                          framing=SSEDecoder, done=b"[DONE]", read=read_chunk, parse=parse_chunk,
                          whole=whole_completion)
