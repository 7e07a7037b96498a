"""``GET /models`` as Anthropic's clients read it (``anthropic-version`` sent): ``type``, ``display_name`` and
``created_at`` on each model, and the page fields ``has_more``, ``first_id``, ``last_id``.

Claude Code's gateway model discovery (``CLAUDE_CODE_ENABLE_GATEWAY_MODEL_DISCOVERY``) and the SDK's
``client.models.list()`` read this shape; the OpenAI fields stay, so one body serves both.
"""

from __future__ import annotations

import datetime
from typing import Any

from flask import request


def model_list_for_anthropic_clients(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The model list ``entries`` in Anthropic's shape when the client is Anthropic's (it sends
    ``anthropic-version``), else ``None``."""
    return anthropic_model_list(entries) if request.headers.get("anthropic-version") else None


def anthropic_model_list(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The OpenAI model list ``entries`` (``id``, ``created``…) with Anthropic's fields added."""
    data = [{**entry, "type": "model", "display_name": entry.get("display_name") or entry["id"],
             "created_at": _iso(entry.get("created"))} for entry in entries]
    return {"object": "list", "data": data, "has_more": False,
            "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None}


def _iso(created: Any) -> str:
    seconds = created if isinstance(created, int) else 0
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
