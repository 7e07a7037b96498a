"""Codex turn errors as the :class:`~app.upstreams.base.UpstreamError` an HTTP upstream's failure would be.

A failed turn carries ``{message, codexErrorInfo, …}``: the provider's HTTP status when Codex kept it
(401/403, 429, other 4xx, 5xx), a refused connection, an idle stream, or, for a 400, the provider's raw
error body as the message.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..base import UpstreamError


def codex_error(error: Any) -> UpstreamError:
    """The :class:`UpstreamError` for a Codex turn error (``{message, codexErrorInfo, …}``)."""
    error = error if isinstance(error, dict) else {}
    message = str(error.get("message") or "The Codex turn failed.")
    info = error.get("codexErrorInfo")
    status = None
    if isinstance(info, dict):
        detail = next(iter(info.values()), None)
        status = detail.get("httpStatusCode") if isinstance(detail, dict) else None
        if "httpConnectionFailed" in info and status is None:
            return UpstreamError("connect", "Codex could not reach its model provider.")
    if status in (401, 403):
        return UpstreamError("auth", f"Codex's model provider refused its credentials (HTTP {status}).",
                             code="upstream_auth_failed")
    if status == 429:
        return UpstreamError("rate_limited", "Codex's model provider is rate limited.", status=429)
    if isinstance(status, int) and 400 <= status < 500:
        return UpstreamError("client_error", message, status=status)
    if "idle timeout" in message:
        return UpstreamError("timeout", "Codex's model provider went silent.", status=504)
    body = _json_error(message)
    if body is not None:  # a 400 arrives as the provider's raw error body
        return UpstreamError("client_error", str(body.get("message") or message), status=400,
                             param=body.get("param") if isinstance(body.get("param"), str) else None,
                             code=str(body["code"]) if body.get("code") is not None else None)
    return UpstreamError("server_error", f"Codex's model provider failed: {message}")


def _json_error(message: str) -> dict[str, Any] | None:
    try:
        body = orjson.loads(message)
    except orjson.JSONDecodeError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else None
