"""Launch llama-cpp-python's OpenAI server with one more chat format, ``gemma3`` (run with the llama venv's
Python by :class:`support.llama_server.LlamaServer`; it imports nothing of toolwire).

llama-cpp-python's own ``gemma`` format drops every system message, and toolwire's tool block is one.
``gemma3`` does what Gemma 3's official template (the one ``llama-server --jinja`` runs) does: the system
text opens the first user turn.
"""

from __future__ import annotations

from typing import Any

from llama_cpp.llama_chat_format import ChatFormatterResponse, register_chat_format
from llama_cpp.server.__main__ import main


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


@register_chat_format("gemma3")
def format_gemma3(messages: list[dict[str, Any]], **_: Any) -> ChatFormatterResponse:
    """Gemma 3's turns; the system messages' text starts the first turn after them."""
    system = "\n\n".join(_text(m.get("content")) for m in messages if m.get("role") == "system")
    prompt = []
    for message in messages:
        if message.get("role") == "system":
            continue
        text = _text(message.get("content"))
        if system:
            text, system = f"{system}\n\n{text}", ""
        turn = "model" if message.get("role") == "assistant" else "user"
        prompt.append(f"<start_of_turn>{turn}\n{text}<end_of_turn>\n")
    prompt.append("<start_of_turn>model\n")
    return ChatFormatterResponse(prompt="".join(prompt), stop=["<end_of_turn>"])


if __name__ == "__main__":
    main()
