"""A generation's affinity key: what keeps one conversation on one member of a pool (:mod:`app.pool`).

The client's own session signal when it sent one; else the prompt's stable prefix as toolwire builds it: the
offered tools (the tool block toolwire writes from them) and the messages up to the first user message (the
system text, the task). Every turn of an agent's conversation resends that prefix unchanged, a chain of
``previous_response_id`` included (its transcript is rebuilt from the store), so every turn gets the same key;
the prefix is cut at :data:`PREFIX_BYTES` per message, which bounds the key's cost.
"""

from __future__ import annotations

from typing import Any

import orjson

from statemachine import ParserConfig

#: The most bytes of one message's content that go into a prefix key.
PREFIX_BYTES = 4096


def affinity_key(session: str | None, messages: list[dict[str, Any]], config: ParserConfig) -> bytes:
    """The key of a generation of ``messages`` offering ``config``'s tools: its ``session`` signal, else its
    prompt's stable prefix."""
    if session is not None:
        return b"session\x00" + session.encode()
    parts = [b"prefix", ",".join(sorted(config.tools)).encode()]
    for message in messages:
        role, content = message.get("role"), message.get("content")
        text = content[:PREFIX_BYTES].encode() if isinstance(content, str) else orjson.dumps(content)[:PREFIX_BYTES]
        parts.append(f"{role}".encode() + b"\x00" + text)
        if role == "user":
            break
    return b"\x1e".join(parts)
