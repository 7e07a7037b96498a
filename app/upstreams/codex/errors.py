"""Codex turn errors as the :class:`~app.upstreams.base.UpstreamError` an HTTP upstream's failure would be.

A failed turn carries ``{message, codexErrorInfo, …}``: the provider's HTTP status when Codex kept it
(401/403, 429, other 4xx, 5xx), a refused connection, an idle stream, or, for a 400, the provider's raw
error body as the message. Codex's message quotes the provider verbatim (an HTML error page naming
internal hosts, the provider URL, an echoed key): the client is told what kind of failure it was and the
request id; the message goes to toolwire's log. Only a provider's JSON error object (a 400) is quoted,
as the HTTP upstream quotes one.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..base import UpstreamError


def codex_error(error: Any, request_id: str | None = None) -> UpstreamError:
    """The :class:`UpstreamError` for a Codex turn error (``{message, codexErrorInfo, …}``) of ``request_id``."""
    error = error if isinstance(error, dict) else {}
    message = str(error.get("message") or "")
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
    if "idle timeout" in message:
        return UpstreamError("timeout", "Codex's model provider went silent.", status=504)
    body = _json_error(message)
    if body is not None:  # a 400 arrives as the provider's raw error body
        return UpstreamError("client_error", str(body.get("message") or "The model provider refused the request."),
                             status=400, param=body.get("param") if isinstance(body.get("param"), str) else None,
                             code=str(body["code"]) if body.get("code") is not None else None)
    where = f"request {request_id}: " if request_id else ""
    if isinstance(status, int) and 400 <= status < 500:
        return UpstreamError("client_error", f"Codex's model provider rejected the request (HTTP {status}); "
                                             f"{where}the details are in toolwire's log.", status=status)
    http = f" (HTTP {status})" if isinstance(status, int) else ""
    return UpstreamError("server_error", f"Codex's model provider failed{http}; {where}the details are in "
                                         "toolwire's log.")


def codex_refusal(method: str, message: str, data: dict[str, Any]) -> UpstreamError:
    """The :class:`UpstreamError` for Codex's JSON-RPC error answer to ``method``: an input over Codex's limit
    (``turn/start``: ``input_error_code`` ``input_too_large``, 1,048,576 characters in 0.169) is the client's
    (400, ``messages``); anything else is Codex's failure (502)."""
    if data.get("input_error_code") == "input_too_large":
        limit, size = data.get("max_chars"), data.get("actual_chars")
        known = isinstance(limit, int) and isinstance(size, int)
        numbers = f" ({size:,} characters; at most {limit:,})" if known else ""
        return UpstreamError("client_error", f"The input is too long for the Codex back end{numbers}.", status=400,
                             param="messages", code="input_too_large")
    return UpstreamError("server_error", f"Codex refused {method}: {message}")


def _json_error(message: str) -> dict[str, Any] | None:
    try:
        body = orjson.loads(message)
    except orjson.JSONDecodeError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else None
