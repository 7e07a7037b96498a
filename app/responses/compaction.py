"""toolwire's compaction items: the summary a ``POST /responses/compact`` made, carried by the client in a
``compaction`` item's ``encrypted_content`` and shown to the model when a later request's input holds it.

The content is toolwire's own (``twc1.`` and the summary as base64url JSON), not encrypted: it holds nothing the
client could not send as text, so there is nothing to hide from it. A compaction item another server made (an
OpenAI one) cannot be read here and stays unseen, as before.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Mapping

import orjson

__all__ = ["SUMMARY_HEADING", "compaction_content", "compaction_summary"]

_PREFIX = "twc1."
#: The line before a summary where the model reads it.
SUMMARY_HEADING = "Summary of the conversation so far (earlier turns were compacted into it):"


def compaction_content(summary: str) -> str:
    """The ``encrypted_content`` of a compaction item holding ``summary``."""
    return _PREFIX + base64.urlsafe_b64encode(orjson.dumps({"summary": summary})).decode()


def compaction_summary(item: Mapping[str, Any]) -> str | None:
    """The summary a toolwire compaction item holds; ``None`` for another server's or a malformed one."""
    content = item.get("encrypted_content")
    if not isinstance(content, str) or not content.startswith(_PREFIX):
        return None
    try:
        summary = orjson.loads(base64.urlsafe_b64decode(content[len(_PREFIX):])).get("summary")
    except (binascii.Error, ValueError, AttributeError):
        return None
    return summary if isinstance(summary, str) else None
