"""Tool modes: how a request's tools reach the back end (README, "Tool modes").

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
  the same request is sent once more in prompt mode, and that (upstream, model)
  stays in prompt mode for ``tool_mode_fallback_seconds`` in this worker.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from typing import Any, Iterable, NamedTuple

from statemachine import ParserConfig, ToolChoice, ToolSpec

from ..http.request import open_upstream
from ..observability import metrics
from ..observability import record as observe
from ..state import current_state
from ..upstreams.base import UpstreamError, UpstreamStream
from .plan import prompt_format
from .prompt import build_upstream_messages

log = logging.getLogger(__name__)

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
#: (upstream, model) pairs remembered at most; past it the oldest is forgotten.
FALLBACK_MEMORY_SIZE = 1024


class Opened(NamedTuple):
    """An open upstream answer and how it was asked for.

    Fields:
        stream: the upstream's answer.
        config: the parser configuration for it (no marker in native mode: the model never saw one).
        messages: the messages sent (for a usage estimate).
        mode: ``native`` or ``prompt``: the mode actually used.
    """

    stream: UpstreamStream
    config: ParserConfig
    messages: list[dict[str, Any]]
    mode: str


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


def refuses_tools(error: UpstreamError) -> bool:
    """Whether an upstream error is the back end saying it cannot take tools (a 4xx or 5xx answer;
    never an auth, rate-limit, connection or timeout failure)."""
    return error.kind in ("client_error", "server_error") and REFUSES_TOOLS.search(error.message) is not None


def open_with_tools(model: str, config: ParserConfig, messages: list[dict[str, Any]],
                    fields: dict[str, Any]) -> Opened:
    """Open the upstream for a request in ``model``'s tool mode.

    Args:
        model: the client's model.
        config: the request's parser configuration (tools, choice, policy).
        messages: the Chat transcript, with ``tool_calls`` and ``role: "tool"`` messages as the client
            (or the Responses input conversion) wrote them.
        fields: the other request parameters for the back end.
    Raises:
        UpstreamError: the upstream refused (in ``auto`` mode: anything but a tools refusal, or
            the prompt-mode retry's refusal).
    """
    state = current_state()
    settings = state.settings
    mode = settings.tool_mode_for(model)
    if mode != "prompt":
        key = (_upstream_name(state.upstream), settings.upstream_model(model))
        if mode == "native" or not FALLBACKS.prompt_only(key, settings.tool_mode_fallback_seconds):
            native_config = dataclasses.replace(config, marker=None) if config.marker else config
            sent = native_messages(messages)
            try:
                return Opened(open_upstream(model, sent, {**fields, **native_tools(config)}), native_config,
                              sent, "native")
            except UpstreamError as exc:
                if mode == "native" or not refuses_tools(exc):
                    raise
                FALLBACKS.remember(key)
                record = observe.current()
                metrics.child(metrics.TOOL_MODE_FALLBACKS, record.model_label if record else "other").inc()
                log.warning("the back end refused tools; prompt mode for %s", key[1],
                            extra={"fields": {"upstream_model": key[1], "status": exc.status}})
    sent = build_upstream_messages(messages, config, prompt_format(config))
    return Opened(open_upstream(model, sent, fields), config, sent, "prompt")


def native_tools(config: ParserConfig) -> dict[str, Any]:
    """The request's tools as Chat Completions parameters for a tool-capable back end.

    Legacy ``functions`` go as ``tools`` too (every tool-capable server takes ``tools``; few still take
    ``functions``); the client still gets ``function_call`` back.
    """
    if not config.tools:
        return {}
    fields: dict[str, Any] = {"tools": [_chat_tool(spec) for spec in config.tools.values()],
                              "tool_choice": _chat_tool_choice(config.tool_choice)}
    if not config.parallel_tool_calls:
        fields["parallel_tool_calls"] = False
    return fields


def native_messages(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A Chat transcript for a tool-capable back end.

    Calls and results stay real ``tool_calls`` and ``role: "tool"`` messages;
    legacy ``function_call`` / ``role: "function"`` become those too (each
    result answers the latest call of its name), and ``developer`` messages
    become ``system`` (most open servers know no ``developer`` role).
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
        out.append(message)
    return out


def _chat_tool(spec: ToolSpec) -> dict[str, Any]:
    if spec.kind == "custom":
        custom: dict[str, Any] = {"name": spec.name}
        if spec.description:
            custom["description"] = spec.description
        if spec.input_format:
            custom["format"] = spec.input_format
        return {"type": "custom", "custom": custom}
    function: dict[str, Any] = {"name": spec.name}
    if spec.description:
        function["description"] = spec.description
    if spec.parameters is not None:
        function["parameters"] = spec.parameters
    if spec.strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _chat_tool_choice(choice: ToolChoice) -> Any:
    if choice.allowed is None:
        return choice.mode
    forced = choice.forced_name
    if forced is not None:
        return {"type": "function", "function": {"name": forced}}
    return {"type": "allowed_tools", "allowed_tools": {
        "mode": choice.mode, "tools": [{"type": "function", "function": {"name": n}} for n in sorted(choice.allowed)]}}


def _upstream_name(upstream: Any) -> str:
    return getattr(upstream, "base_url", None) or type(upstream).__name__
