"""A Gemini request's ``systemInstruction`` and ``contents`` → the Chat messages the shared pipeline flattens.

- ``systemInstruction``'s text parts are the first system message.
- A ``model`` turn's text parts are its content and its ``functionCall`` parts its ``tool_calls`` (``args`` as
  the arguments' JSON); text after a call starts a new assistant message, so the order is kept. ``thought``
  parts are not shown to the model again.
- A ``user`` (or ``function``) turn's ``functionResponse`` parts are ``role: "tool"`` messages, each paired
  with the earlier call of its ``id``, else with the first unanswered call of its ``name`` (Gemini's calls
  may carry no id). Its other parts are a user message: an image's ``inlineData`` or ``fileData`` as a Chat
  ``image_url`` part (read as ``[image]`` by a text model), other media as a ``[file]``.
- A call without an ``id`` gets ``call_N``, N its place among the transcript's calls, so a request names the
  same calls the same way every time (the prompt's cache sees the same transcript).
"""

from __future__ import annotations

import json
from typing import Any

from .schemas import Content, CountTokensRequest, FunctionCall, FunctionResponse, Part


def to_chat_messages(req: CountTokensRequest) -> list[dict[str, Any]]:
    """The request's ``systemInstruction`` and ``contents`` as Chat messages, in order."""
    out: list[dict[str, Any]] = []
    system = system_text(req.system_instruction)
    if system:
        out.append({"role": "system", "content": system})
    calls = _Calls()
    for content in req.contents:
        if content.role == "model":
            out += _model_messages(content.parts, calls)
        else:
            out += _user_messages(content.parts, calls)
    return out


def system_text(instruction: Content | None) -> str:
    """``systemInstruction`` as one text (its text parts joined by blank lines)."""
    if instruction is None:
        return ""
    return "\n\n".join(part.text for part in instruction.parts if part.text)


class _Calls:
    """The transcript's calls so far: each one's id, and those not answered yet."""

    def __init__(self) -> None:
        self.count = 0
        self.open: list[tuple[str, str]] = []  # (id, name), in order

    def made(self, call: FunctionCall) -> str:
        self.count += 1
        call_id = call.id or f"call_{self.count}"
        self.open.append((call_id, call.name))
        return call_id

    def answered(self, response: FunctionResponse) -> str:
        """The id of the call ``response`` answers: the open call of its ``id``, else the first of its ``name``."""
        matches = [n for n, (call_id, _) in enumerate(self.open) if call_id == response.id] or \
            [n for n, (_, name) in enumerate(self.open) if name == response.name]
        if not matches:
            return response.id or f"call_{response.name}"
        return self.open.pop(matches[0])[0]


def _model_messages(parts: list[Part], calls: _Calls) -> list[dict[str, Any]]:
    """One assistant message per run of text followed by calls."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    tool_calls: list[dict[str, Any]] = []
    for part in parts:
        if part.function_call is not None:
            call = part.function_call
            tool_calls.append({"id": calls.made(call), "type": "function", "function": {
                "name": call.name, "arguments": json.dumps(call.args or {}, ensure_ascii=False)}})
        elif part.text and not part.thought:
            if tool_calls:  # text after a call: the calls end this message
                out.append(_assistant(texts, tool_calls))
                texts, tool_calls = [], []
            texts.append(part.text)
    if texts or tool_calls:
        out.append(_assistant(texts, tool_calls))
    return out


def _assistant(texts: list[str], tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def _user_messages(parts: list[Part], calls: _Calls) -> list[dict[str, Any]]:
    """Call results as ``tool`` messages and the other parts as user messages, in their order."""
    out: list[dict[str, Any]] = []
    chat_parts: list[dict[str, Any]] = []
    for part in parts:
        if part.function_response is not None:
            if chat_parts:
                out.append(_user(chat_parts))
                chat_parts = []
            response = part.function_response
            out.append({"role": "tool", "tool_call_id": calls.answered(response),
                        "content": result_text(response.response)})
        elif part.text is not None and not part.thought:
            chat_parts.append({"type": "text", "text": part.text})
        elif part.inline_data is not None or part.file_data is not None:
            chat_parts.append(_media_part(part.inline_data or part.file_data or {}))
    if chat_parts:
        out.append(_user(chat_parts))
    return out


def _user(parts: list[dict[str, Any]]) -> dict[str, Any]:
    if all(part["type"] == "text" for part in parts):
        return {"role": "user", "content": "".join(part["text"] for part in parts)}
    return {"role": "user", "content": parts}


def result_text(response: dict[str, Any] | None) -> str:
    """A ``functionResponse``'s ``response`` as the model reads it: the text of an ``output`` (Gemini CLI's
    shape) alone, an ``error`` as ``Error: …``, anything else as its JSON."""
    response = response or {}
    if set(response) == {"output"} and isinstance(response["output"], str):
        return response["output"]
    if set(response) == {"error"} and isinstance(response["error"], str):
        return "Error: " + response["error"]
    return json.dumps(response, ensure_ascii=False)


def _media_part(data: dict[str, Any]) -> dict[str, Any]:
    mime = str(data.get("mimeType") or data.get("mime_type") or "")
    if not mime.startswith("image/"):
        return {"type": "file"}
    if "data" in data:
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data['data']}"}}
    return {"type": "image_url", "image_url": {"url": str(data.get("fileUri") or data.get("file_uri") or "")}}
