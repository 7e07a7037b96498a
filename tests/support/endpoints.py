"""One adapter per toolwire endpoint, so a test can be written once and run against both.

An ``Endpoint`` builds a request body from a prompt and function tools, and turns what a client
received into an ``Outcome`` after running the wire-contract checker that applies
(``check_chat_stream`` / ``check_responses_stream`` / ``check_chat_completion`` /
``check_error_envelope``). ``send()`` does the request with plain httpx and never hangs: it gives
up after ``within`` seconds and reports a connection the server broke off as ``kind == "broken"``.
``Endpoint.sdk()`` makes the same request with the openai SDK.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai

from .invariants import (
    SESSION_CALL_IDS,
    check_chat_completion,
    check_chat_stream,
    check_error_envelope,
    check_responses_stream,
)

MODEL = "scripted-model"


@dataclass
class Outcome:
    """What a client saw for one request.

    Fields:
        kind: ``completed`` (a whole answer), ``envelope`` (an HTTP error envelope),
            ``stream_error`` (a stream that ended with its endpoint's failure event) or ``broken``
            (the connection ended before the body did; nothing is checked then).
        status, headers: the HTTP status and headers (``None`` if no status line arrived).
        body: every byte of the body received.
        error: the error object of an envelope or of the stream's failure event.
        calls: ``(name, parsed arguments)`` of every complete tool call delivered, in order.
        text: the visible text delivered.
        comments: the SSE comment lines (keep-alives) received.
    """

    kind: str
    status: int | None = None
    headers: httpx.Headers | None = None
    body: bytes = b""
    error: dict[str, Any] | None = None
    calls: list[tuple[str, Any]] = field(default_factory=list)
    text: str = ""
    comments: list[str] = field(default_factory=list)


class Endpoint:
    """The per-endpoint part of a test: request shape, checker, SDK call."""

    name = ""
    path = ""

    def body(self, prompt: str, tools: list[dict[str, Any]], *, stream: bool) -> dict[str, Any]:
        """A request body; ``tools`` are ``{"name", "description", "parameters"}`` dicts."""
        raise NotImplementedError

    def outcome(self, status: int, headers: httpx.Headers, body: bytes, *, stream: bool) -> Outcome:
        """Check a complete answer against the contract and summarise it (raises on a violation)."""
        if status != 200:
            return Outcome("envelope", status, headers, body, error=check_error_envelope(status, body))
        return self._success(status, headers, body, stream=stream)

    def _success(self, status: int, headers: httpx.Headers, body: bytes, *, stream: bool) -> Outcome:
        raise NotImplementedError

    def sdk(self, client: openai.OpenAI, prompt: str, tools: list[dict[str, Any]], *, stream: bool) -> list[tuple[str, Any]]:
        """Run the request through the openai SDK (its stream helper when streaming); return the
        complete tool calls. Failures surface as the SDK's own exceptions."""
        raise NotImplementedError


class ChatEndpoint(Endpoint):
    """``POST /v1/chat/completions``."""

    name = "chat"
    path = "/chat/completions"

    def body(self, prompt: str, tools: list[dict[str, Any]], *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": prompt}], "stream": stream}
        if tools:
            body["tools"] = [{"type": "function", "function": tool} for tool in tools]
        return body

    def _success(self, status: int, headers: httpx.Headers, body: bytes, *, stream: bool) -> Outcome:
        if not stream:
            message = check_chat_completion(body, legacy=False, seen_call_ids=SESSION_CALL_IDS)["choices"][0]["message"]
            calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls") or ()]
            return Outcome("completed", status, headers, body, calls=calls, text=message.get("content") or "")
        summary = check_chat_stream(body, legacy=False, status=status, content_type=headers.get("content-type"),
                                    seen_call_ids=SESSION_CALL_IDS)
        choice = summary.choices.get(0)
        calls = [(c.name, c.args) for c in choice.tool_calls if c.complete] if choice else []
        return Outcome("stream_error" if summary.error else "completed", status, headers, body, error=summary.error,
                       calls=calls, text=choice.content if choice else "", comments=summary.comments)

    def sdk(self, client: openai.OpenAI, prompt: str, tools: list[dict[str, Any]], *, stream: bool) -> list[tuple[str, Any]]:
        kwargs = {k: v for k, v in self.body(prompt, tools, stream=stream).items() if k != "stream"}
        if stream:
            with client.chat.completions.stream(**kwargs) as events:
                for _ in events:
                    pass
                message = events.get_final_completion().choices[0].message
        else:
            message = client.chat.completions.create(**kwargs).choices[0].message
        return [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or ()]


class ResponsesEndpoint(Endpoint):
    """``POST /v1/responses``: a failed stream ends with ``response.failed`` (or an ``error`` event)."""

    name = "responses"
    path = "/responses"

    def body(self, prompt: str, tools: list[dict[str, Any]], *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": MODEL, "input": prompt, "stream": stream, "store": False}
        if tools:
            body["tools"] = [{"type": "function", **tool} for tool in tools]
        return body

    def _success(self, status: int, headers: httpx.Headers, body: bytes, *, stream: bool) -> Outcome:
        if stream:
            summary = check_responses_stream(body, status=status, content_type=headers.get("content-type"),
                                             seen_call_ids=SESSION_CALL_IDS)
            response = summary.response or {}
            error = summary.error or response.get("error")
            outcome = Outcome("stream_error" if error else "completed", status, headers, body, error=error,
                              comments=summary.comments)
            items = summary.items
        else:
            response = json.loads(body)
            error = response.get("error")
            finished = "incomplete" if response.get("incomplete_details") else "completed"  # (cut by max tokens)
            assert response.get("status") == ("failed" if error else finished), response
            outcome = Outcome("stream_error" if error else "completed", status, headers, body, error=error)
            items = response.get("output") or []
        outcome.calls = [(i["name"], json.loads(i["arguments"])) for i in items
                         if i.get("type") == "function_call" and i.get("status", "completed") == "completed"]
        outcome.text = "".join(c.get("text", "") for i in items if i.get("type") == "message" for c in i.get("content") or ())
        return outcome

    def sdk(self, client: openai.OpenAI, prompt: str, tools: list[dict[str, Any]], *, stream: bool) -> list[tuple[str, Any]]:
        kwargs = {k: v for k, v in self.body(prompt, tools, stream=stream).items() if k != "stream"}
        if stream:
            with client.responses.stream(**kwargs) as events:
                # The helper yields ``response.failed`` as an event; only ``get_final_response()``
                # would raise (a RuntimeError), so take the failed Response from the event.
                failed = [e.response for e in events if e.type == "response.failed"]
                response = failed[0] if failed else events.get_final_response()
        else:
            response = client.responses.create(**kwargs)
        if response.error:
            raise openai.APIError(response.error.message, httpx.Request("POST", self.path), body=None)
        return [(i.name, json.loads(i.arguments)) for i in response.output if i.type == "function_call"]


CHAT = ChatEndpoint()
RESPONSES = ResponsesEndpoint()


def send(base_url: str, endpoint: Endpoint, body: dict[str, Any], *, within: float = 30.0,
         headers: dict[str, str] | None = None) -> Outcome:
    """POST ``body`` to ``endpoint`` with plain httpx, read the whole answer and check it.

    Fails (``AssertionError``) if the body has not ended ``within`` seconds — keep-alives would
    otherwise hold a stuck stream open forever (a hang guard: a byte-by-byte stream took over 8 s at load 16). A connection broken off by the server yields
    ``kind == "broken"`` with the bytes read so far.
    """
    deadline = time.monotonic() + within
    raw = bytearray()
    stream = bool(body.get("stream"))
    response: httpx.Response | None = None
    with httpx.Client(timeout=within) as client:
        try:
            with client.stream("POST", base_url + endpoint.path, json=body, headers=headers) as response:
                for piece in response.iter_raw():
                    raw += piece
                    if time.monotonic() > deadline:
                        raise AssertionError(f"{endpoint.name} answer still open after {within} s; "
                                             f"received so far:\n{bytes(raw).decode(errors='replace')[-1500:]}")
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            return Outcome("broken", response.status_code if response else None, response.headers if response else None,
                           bytes(raw), error={"message": f"{type(exc).__name__}: {exc}"})
    return endpoint.outcome(response.status_code, response.headers, bytes(raw), stream=stream)
