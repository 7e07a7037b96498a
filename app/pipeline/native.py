"""Tool modes: how a request's tools reach the back end (docs/tool-modes.md).

- ``prompt``: the tools become a manifest in the system prompt and the
  transcript is flattened to text (:mod:`app.pipeline.prompt`); calls are parsed
  from the model's text.
- ``native``: the back end gets the tools as Chat ``tools`` / ``tool_choice`` /
  ``parallel_tool_calls`` (legacy ``functions`` and Responses tools converted to
  that shape) and the transcript keeps real ``tool_calls`` and ``role: "tool"``
  messages. Its ``delta.tool_calls`` go through the same state machine as parsed
  calls (:class:`statemachine.NativeCalls`), and its text is still scanned for
  call blocks.
- ``auto``: native; when the back end refuses tools (llama.cpp without
  ``--jinja``, an Ollama model without tool support, vLLM without a tool parser)
  the same request is sent once more in prompt mode, and once that is taken, that
  (upstream, model) stays in prompt mode for ``tool_mode_fallback_seconds`` in this
  worker.

:func:`~app.pipeline.generate.generate` opens the back end in the model's mode;
this module holds what that needs: the native request's tools and transcript,
the refusal test and the fallback memory.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Iterable

from statemachine import ParserConfig, ToolSpec

from ..upstreams.base import UpstreamError

#: What a back end says when it cannot take tools. Seen in the wild: llama.cpp ``tools param requires
#: --jinja flag`` (500) and, older, ``Unsupported param: tools``; Ollama ``<model> does not support tools``
#: (400); vLLM ``"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`` (400).
REFUSES_TOOLS = re.compile(
    r"(?:tools?|functions?|tool[_ ]choice|tool[_ ]calls?|function[_ ]call(?:ing)?)\b[^.\n]{0,60}?"
    r"\b(?:not supported|unsupported|requires? --|not (?:enabled|available|allowed))"
    r"|(?:does not|doesn't|do not|cannot|can't) (?:support|handle|accept) (?:tools|functions|tool|function)"
    r"|unsupported (?:param(?:eter)?|field|argument)s?:? ['\"]?(?:tools|functions|tool_choice)"
    r"|--jinja|--enable-auto-tool-choice|--tool-call-parser",
    re.IGNORECASE)
#: Text a back end quotes, often from the request (pydantic's ``input_value='…'``, a JSON ``"…"``): a quote
#: mark that opens after a non-word character and closes before one (an apostrophe inside a word is none).
QUOTED = re.compile(r"""(?<!\w)(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`[^`]*`)(?!\w)""")
#: The upstream statuses a back end refuses tools with as a client error (Ollama and vLLM: 400; FastAPI
#: validation: 422); a 404 (no such model) or 413 is something else.
REFUSAL_STATUSES = frozenset({400, 422})
#: The ``param`` a tools refusal may name; an error naming another parameter is about that one.
TOOL_PARAMS = frozenset({None, "tools", "tool_choice", "functions", "function_call", "parallel_tool_calls"})
#: (upstream, model) pairs remembered at most; past it the oldest is forgotten.
FALLBACK_MEMORY_SIZE = 1024


class FallbackMemory:
    """When each (upstream, model) last refused tools, in this worker."""

    def __init__(self, size: int = FALLBACK_MEMORY_SIZE):
        self._size = size
        self._refused: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def prompt_only(self, key: tuple[str, str], seconds: float, now: float | None = None) -> bool:
        """Whether ``key`` refused tools less than ``seconds`` ago."""
        refused = self._refused.get(key)
        if refused is None:
            return False
        if (time.monotonic() if now is None else now) - refused < seconds:
            return True
        with self._lock:
            self._refused.pop(key, None)
        return False

    def remember(self, key: tuple[str, str], now: float | None = None) -> None:
        """``key`` refused tools just now."""
        with self._lock:
            self._refused.pop(key, None)
            if len(self._refused) >= self._size:
                del self._refused[next(iter(self._refused))]
            self._refused[key] = time.monotonic() if now is None else now

    def clear(self) -> None:
        """Forget every refusal."""
        with self._lock:
            self._refused.clear()


FALLBACKS = FallbackMemory()
#: The code of a 200 stream that ended before its first event: a back end that cannot stream tool calls.
EMPTY_STREAM = "upstream_empty_stream"


def refuses_tools(error: UpstreamError) -> bool:
    """Whether an upstream error is the back end saying it cannot take tools.

    Decided from the error's structure first: a client error of status 400 or 422 whose ``param`` is unset or
    a tools parameter, or a server error (llama.cpp answers 500); never an auth, rate-limit, connection or
    timeout failure. Then from the back end's own words only: quoted text is left out before
    :data:`REFUSES_TOOLS` is looked for, since a back end quotes the request's values there (a client could
    otherwise send "tools not supported" in a field the back end echoes, and put its model in prompt mode for
    every client of the worker). A 200 stream that ended empty is one too (llama-cpp-python fails after its
    headers when it cannot stream a tool choice).
    """
    if error.code == EMPTY_STREAM:
        return True
    if error.kind == "client_error":
        if error.status not in REFUSAL_STATUSES or error.param not in TOOL_PARAMS:
            return False
    elif error.kind != "server_error":
        return False
    return REFUSES_TOOLS.search(QUOTED.sub(" ", error.message)) is not None


def native_tools(config: ParserConfig) -> dict[str, Any]:
    """The request's tools as Chat Completions parameters for a tool-capable back end.

    Legacy ``functions`` go as ``tools`` too (every tool-capable server takes ``tools``; few still take
    ``functions``); the client still gets ``function_call`` back.
    """
    if not config.tools:
        return {}
    fields: dict[str, Any] = {"tools": [_chat_tool(spec) for spec in config.tools.values()],
                              "tool_choice": _chat_tool_choice(config)}
    if not config.parallel_tool_calls:
        fields["parallel_tool_calls"] = False
    return fields


def native_messages(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A Chat transcript for a tool-capable back end.

    Calls and results stay real ``tool_calls`` and ``role: "tool"`` messages;
    legacy ``function_call`` / ``role: "function"`` become those too (each
    result answers the latest call of its name), ``developer`` messages
    become ``system`` (most open servers know no ``developer`` role), and an
    assistant message with calls has ``content: ""`` rather than ``null`` or none
    (valid OpenAI; llama-cpp-python's server and templates refuse the others).
    """
    out: list[dict[str, Any]] = []
    open_calls: dict[str, list[str]] = {}  # name -> ids of legacy calls still unanswered
    for message in messages:
        role = message.get("role")
        if role == "developer":
            message = {**message, "role": "system"}
        elif role == "assistant" and isinstance(message.get("function_call"), dict):
            call = message["function_call"]
            call_id = f"call_legacy_{len(out)}"
            open_calls.setdefault(str(call.get("name")), []).append(call_id)
            message = {k: v for k, v in message.items() if k != "function_call"}
            message["tool_calls"] = [{"id": call_id, "type": "function",
                                      "function": {"name": call.get("name"), "arguments": call.get("arguments")}}]
        elif role == "function":
            ids = open_calls.get(str(message.get("name")))
            message = {"role": "tool", "tool_call_id": ids.pop() if ids else f"call_legacy_{len(out)}",
                       "content": message.get("content")}
        if role == "assistant" and message.get("tool_calls") and message.get("content") is None:
            message = {**message, "content": ""}
        out.append(message)
    return out


def _chat_tool(spec: ToolSpec) -> dict[str, Any]:
    if spec.kind == "custom":
        custom: dict[str, Any] = {"name": spec.name}
        if spec.description:
            custom["description"] = spec.description
        if spec.input_format:
            custom["format"] = _chat_custom_format(spec.input_format)
        return {"type": "custom", "custom": custom}
    function: dict[str, Any] = {"name": spec.name}
    if spec.description:
        function["description"] = spec.description
    if spec.parameters is not None:
        function["parameters"] = spec.parameters
    if spec.strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _chat_custom_format(fmt: Any) -> Any:
    """A custom tool's ``format`` in the Chat shape: a grammar nests under ``grammar`` (the core keeps
    the flat Responses shape, ``{"type": "grammar", "syntax", "definition"}``)."""
    if isinstance(fmt, dict) and fmt.get("type") == "grammar" and "grammar" not in fmt:
        return {"type": "grammar", "grammar": {k: v for k, v in fmt.items() if k != "type"}}
    return fmt


def _chat_tool_choice(config: ParserConfig) -> Any:
    choice = config.tool_choice
    if choice.allowed is None:
        return choice.mode

    def named(name: str) -> dict[str, Any]:
        spec = config.tools.get(name)
        kind = "custom" if spec is not None and spec.kind == "custom" else "function"
        return {"type": kind, kind: {"name": name}}

    forced = choice.forced_name
    if forced is not None:
        return named(forced)
    return {"type": "allowed_tools", "allowed_tools": {
        "mode": choice.mode, "tools": [named(n) for n in sorted(choice.allowed)]}}


def upstream_name(upstream: Any) -> str:
    """What tells back ends apart in the fallback memory: the base URL (two names for one server share what it
    refused), or the identity of an in-process one (two Codex back ends may use two providers)."""
    return getattr(upstream, "base_url", None) or f"{type(upstream).__name__}@{id(upstream):x}"
