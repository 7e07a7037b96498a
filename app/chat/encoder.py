"""Core events → Chat Completions chunks (streaming) and the non-streaming body.

:class:`ChatEncoder` is the endpoint's :class:`~app.pipeline.encoder.Encoder`:
:class:`ChatChunker` builds its ``chat.completion.chunk`` dicts, one per visible
event; :class:`ChatAccumulator` folds the same events into a
``chat.completion`` (in linear time: argument fragments are joined once). Both follow wire-contract section 3: role once per choice
in its first delta, tool-call headers then argument fragments, a single finish
chunk with an empty delta, the legacy ``function_call`` shape for requests that
used ``functions``, a custom (freeform) tool's call as ``type: "custom"`` with
``custom.name`` and ``custom.input`` (streamed as ``custom.input`` fragments),
and no null-valued delta keys (except the first delta's
``content: null`` when a message starts with a call, as OpenAI sends it).
The model's reasoning goes out as ``delta.reasoning_content`` (non-streamed:
``message.reasoning_content``), the field DeepSeek's API defined and vLLM,
SGLang and llama.cpp's server send; a message without reasoning has no such key.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, assert_never

import orjson

from statemachine import (
    ChoiceFinished,
    Event,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnded,
    ToolCallInputDelta,
    ToolCallNote,
    ToolCallStarted,
)

from ..errors import ApiError
from ..pipeline.encoder import Usage, usage_object
from ..pipeline.streaming import DONE_FRAME, KEEPALIVE, data_frame

CHUNK = "chat.completion.chunk"
COMPLETION = "chat.completion"


class ChatEncoder:
    """The Chat Completions :class:`~app.pipeline.encoder.Encoder` of one completion.

    Args:
        completion_id: the ``chatcmpl-…`` id.
        created: unix seconds.
        model: the model name shown to the client.
        legacy_functions: answer in the legacy ``function_call`` shape.
        include_usage: a streamed answer ends with a usage chunk (``stream_options.include_usage``).
    """

    __slots__ = ("_include_usage", "_chunker", "_accumulator", "one_frame")

    def __init__(self, completion_id: str, created: int, model: str, *, legacy_functions: bool = False,
                 include_usage: bool = False):
        self._include_usage = include_usage
        self._chunker = ChatChunker(completion_id, created, model, legacy_functions=legacy_functions,
                                    include_usage=include_usage)
        self._accumulator: ChatAccumulator | None = None  # made by the first add: a stream never needs one
        #: The one frame of a text or argument fragment, or ``None`` (see ``Encoder.frames``): the chunker's own.
        self.one_frame: Callable[[int, Event], bytes | None] = self._chunker.delta_frame

    keepalive = KEEPALIVE

    def opening(self, usage: Usage) -> list[bytes]:
        """Nothing: a Chat stream starts with its first event."""
        return []

    def frames(self, index: int, event: Event) -> list[bytes]:
        """One ``data:`` frame per chunk that carries ``event``."""
        frame = self._chunker.delta_frame(index, event)
        if frame is not None:
            return [frame]
        return [data_frame(chunk) for chunk in self._chunker.chunks(index, event)]

    def closing(self, usage: Usage) -> list[bytes]:
        """The usage chunk (when asked for), then ``[DONE]``."""
        if not self._include_usage:
            return [DONE_FRAME]
        return [data_frame(self._chunker.usage_chunk(_chat_usage(usage))), DONE_FRAME]

    def error_frames(self, error: ApiError, usage: Usage) -> bytes:
        """One error frame, then ``[DONE]``."""
        return data_frame(error.body()) + DONE_FRAME

    def add(self, index: int, event: Event) -> None:
        """Fold one event into the ``chat.completion`` body."""
        self._folding().add(index, event)

    def body(self, usage: Usage) -> dict[str, Any]:
        """The ``chat.completion`` body."""
        return self._folding().body(_chat_usage(usage))

    def _folding(self) -> "ChatAccumulator":
        if self._accumulator is None:
            chunker = self._chunker  # the same id, time and model
            self._accumulator = ChatAccumulator(chunker.completion_id, chunker.created, chunker.model,
                                                legacy_functions=chunker._legacy)
        return self._accumulator


def _chat_usage(usage: Usage) -> dict[str, int]:
    """The three Chat counts (the total their sum)."""
    return usage_object(usage["prompt_tokens"], usage["completion_tokens"])


class ChatChunker:
    """Builds the chunks of one streamed completion.

    Args:
        completion_id: the ``chatcmpl-…`` id shared by every chunk.
        created: unix seconds, shared by every chunk.
        model: the model name shown to the client.
        legacy_functions: answer in the ``delta.function_call`` shape.
        include_usage: every chunk carries ``usage: null``; see :meth:`usage_chunk`.
    """

    __slots__ = ("completion_id", "created", "model", "_legacy", "_include_usage", "_role_sent",
                 "_opened_below", "_frame_heads", "_text_end", "_call_end")

    def __init__(self, completion_id: str, created: int, model: str, *, legacy_functions: bool = False,
                 include_usage: bool = False):
        self.completion_id, self.created, self.model = completion_id, created, model
        self._legacy = legacy_functions
        self._include_usage = include_usage
        self._role_sent: tuple[int, ...] = ()  # a few indexes at most: a set would cost 216 bytes an open stream
        self._opened_below = 0
        # per choice, its fragment frames' bytes up to the delta (made at its first fragment); what follows the
        # delta's key is the same for every stream, so it is shared (kept per open stream it cost ~1 KiB)
        self._frame_heads: tuple[bytes, ...] = ()
        self._text_end = _FRAGMENT_ENDS[include_usage, False]
        self._call_end = _FRAGMENT_ENDS[include_usage, True]

    def delta_frame(self, index: int, event: Event) -> bytes | None:
        """The ``data:`` frame of a text or argument fragment once its choice is open, else ``None``.

        This is a stream's hot path: the frame is the JSON of the chunk :meth:`chunks` would build, byte
        for byte, written from the fixed bytes before and after the one encoded string (the choice's head made
        once, the delta's key and the frame's end shared by every stream), with no chunk dict built or dumped.
        """
        if isinstance(event, TextDelta):  # isinstance: as fast as a class check for these final classes
            key, fragment, end = _CONTENT_KEY, event.text, self._text_end
        elif isinstance(event, ToolCallArgumentsDelta):  # (before reasoning: most frames of a tool-call stream)
            if self._legacy:
                return None
            key, fragment, end = _arguments_key(event.index), event.fragment, self._call_end
        elif isinstance(event, ReasoningDelta):
            key, fragment, end = _REASONING_KEY, event.text, self._text_end
        else:
            return None
        if index not in self._role_sent or index > self._opened_below:
            return None
        heads = self._frame_heads
        head = heads[index] if index < len(heads) else self._frame_head(index)
        return b"".join((head, key, orjson.dumps(fragment), end))

    def _frame_head(self, index: int) -> bytes:
        """Choice ``index``'s fragment frames up to their delta's value (made once per choice)."""
        heads = self._frame_heads
        start = b"data: " + orjson.dumps(self._head())[:-1] + b',"choices":[{"index":'  # the object left open
        self._frame_heads = heads + tuple(start + b'%d,"delta":' % i for i in range(len(heads), index + 1))
        return self._frame_heads[index]

    def chunks(self, index: int, event: Event) -> list[dict[str, Any]]:
        """The chunks that carry ``event`` for choice ``index`` (none for invisible events)."""
        out = self._open_earlier(index) if index > self._opened_below else []
        out += self._event_chunks(index, event)
        return out

    def _open_earlier(self, index: int) -> list[dict[str, Any]]:
        """Role-only chunks for lower choices not seen yet: choices must first appear in index order."""
        out = []
        for earlier in range(self._opened_below, index):
            if earlier not in self._role_sent:
                self._role_sent += (earlier,)
                out.append(self._chunk(earlier, {"role": "assistant"}))
        self._opened_below = index
        return out

    def _event_chunks(self, index: int, event: Event) -> list[dict[str, Any]]:
        if isinstance(event, TextDelta):
            return [self._chunk(index, self._with_role(index, {"content": event.text}))]
        if isinstance(event, ReasoningDelta):
            return [self._chunk(index, self._with_role(index, {"reasoning_content": event.text}))]
        if isinstance(event, ToolCallStarted):
            delta: dict[str, Any]
            if self._legacy:
                if event.index:
                    return []
                delta = {"function_call": {"name": event.name, "arguments": ""}}
            else:
                delta = {"tool_calls": [{"index": event.index, "id": event.call_id, **_call_head(event)}]}
            return [self._chunk(index, self._with_role(index, delta))]
        if isinstance(event, ToolCallInputDelta):
            delta = {"tool_calls": [{"index": event.index, "custom": {"input": event.fragment}}]}
            return [self._chunk(index, delta)]
        if isinstance(event, ToolCallArgumentsDelta):
            if self._legacy:
                if event.index:
                    return []
                delta = {"function_call": {"arguments": event.fragment}}
            else:
                delta = {"tool_calls": [{"index": event.index, "function": {"arguments": event.fragment}}]}
            return [self._chunk(index, delta)]
        if isinstance(event, ChoiceFinished):
            out: list[dict[str, Any]] = []
            if index not in self._role_sent:
                out.append(self._chunk(index, self._with_role(index, {})))
            out.append(self._chunk(index, {}, event.finish_reason))
            return out
        if isinstance(event, (ToolCallEnded, ToolCallNote)):
            return []  # a call ends with its last fragment; notes are not part of the Chat wire
        assert_never(event)

    def usage_chunk(self, usage: dict[str, Any]) -> dict[str, Any]:
        """The final ``choices: []`` chunk carrying ``usage``."""
        return {**self._head(), "choices": [], "usage": usage}

    def _head(self) -> dict[str, Any]:
        """The fields every chunk opens with: made when a chunk is (a dict kept per open stream is ~180 bytes)."""
        return {"id": self.completion_id, "object": CHUNK, "created": self.created, "model": self.model}

    def _with_role(self, index: int, delta: dict[str, Any]) -> dict[str, Any]:
        """Prefix the choice's first delta with the role (and ``content`` as OpenAI sends it)."""
        if index in self._role_sent:
            return delta
        self._role_sent += (index,)
        if "content" in delta or "reasoning_content" in delta:
            return {"role": "assistant", **delta}
        # A message that starts with a call has content null; an empty one has "".
        return {"role": "assistant", "content": None if delta else "", **delta}

    def _chunk(self, index: int, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        chunk = {**self._head(), "choices": [{"index": index, "delta": delta, "logprobs": None,
                                            "finish_reason": finish_reason}]}
        if self._include_usage:
            chunk["usage"] = None
        return chunk


_CONTENT_KEY = b'{"content":'
_REASONING_KEY = b'{"reasoning_content":'


@functools.lru_cache(maxsize=256)
def _arguments_key(call_index: int) -> bytes:
    """An argument fragment's delta up to its string: a few calls' worth, shared by every stream."""
    return b'{"tool_calls":[{"index":%d,"function":{"arguments":' % call_index


def _fragment_end(include_usage: bool, call: bool) -> bytes:
    """A fragment frame's bytes after its string."""
    end = b'},"logprobs":null,"finish_reason":null}]' + (b',"usage":null' if include_usage else b"") + b"}\n\n"
    return b"}}]" + end if call else end


#: by (include_usage, is a call's arguments)
_FRAGMENT_ENDS = {(usage, call): _fragment_end(usage, call) for usage in (False, True) for call in (False, True)}


def _call_head(event: ToolCallStarted) -> dict[str, Any]:
    """A call's ``type`` and its empty ``function`` (``name``, ``arguments``) or ``custom`` (``name``, ``input``)."""
    if event.kind == "custom":
        return {"type": "custom", "custom": {"name": event.name, "input": ""}}
    return {"type": "function", "function": {"name": event.name, "arguments": ""}}


class _Call:
    """A tool call being accumulated: its header, and its argument (or custom input) fragments, joined once."""

    __slots__ = ("call_id", "name", "kind", "fragments")

    def __init__(self, call_id: str, name: str, kind: str):
        self.call_id = call_id
        self.name = name
        self.kind = kind
        self.fragments: list[str] = []

    def function(self) -> dict[str, str]:
        return {"name": self.name, "arguments": "".join(self.fragments)}

    def tool_call(self) -> dict[str, Any]:
        """The ``tool_calls`` entry: a function call, or a custom tool's with ``custom.input``."""
        if self.kind == "custom":
            return {"id": self.call_id, "type": "custom", "custom": {"name": self.name,
                                                                   "input": "".join(self.fragments)}}
        return {"id": self.call_id, "type": "function", "function": self.function()}


class _Message:
    __slots__ = ("text", "reasoning", "calls", "finish_reason")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, _Call] = {}
        self.finish_reason: str | None = None


class ChatAccumulator:
    """Folds events into a non-streaming ``chat.completion`` body.

    Args:
        completion_id: the ``chatcmpl-…`` id.
        created: unix seconds.
        model: the model name shown to the client.
        legacy_functions: answer with ``message.function_call``.
    """

    def __init__(self, completion_id: str, created: int, model: str, *, legacy_functions: bool = False):
        self._head = {"id": completion_id, "object": COMPLETION, "created": created, "model": model}
        self._legacy = legacy_functions
        self._messages: dict[int, _Message] = {}

    def add(self, index: int, event: Event) -> None:
        """Take one event of choice ``index``."""
        message = self._messages.get(index)
        if message is None:
            message = self._messages[index] = _Message()
        if isinstance(event, TextDelta):
            message.text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            message.reasoning.append(event.text)
        elif isinstance(event, ToolCallStarted):
            message.calls[event.index] = _Call(event.call_id, event.name, event.kind)
        elif isinstance(event, (ToolCallArgumentsDelta, ToolCallInputDelta)):
            message.calls[event.index].fragments.append(event.fragment)
        elif isinstance(event, ChoiceFinished):
            message.finish_reason = event.finish_reason
        elif not isinstance(event, (ToolCallEnded, ToolCallNote)):  # the call is its fragments; notes are no body
            assert_never(event)

    def body(self, usage: dict[str, Any]) -> dict[str, Any]:
        """The ``chat.completion`` body, choices in index order."""
        choices = []
        for index in sorted(self._messages):
            message = self._messages[index]
            out: dict[str, Any] = {"role": "assistant", "content": "".join(message.text) or None,
                                   "refusal": None, "annotations": []}
            if message.reasoning:
                out["reasoning_content"] = "".join(message.reasoning)
            calls = [message.calls[i] for i in sorted(message.calls)]
            if calls and self._legacy:
                out["function_call"] = calls[0].function()
            elif calls:
                out["tool_calls"] = [call.tool_call() for call in calls]
            choices.append({"index": index, "message": out, "logprobs": None,
                            "finish_reason": message.finish_reason})
        return {**self._head, "choices": choices, "usage": usage}
