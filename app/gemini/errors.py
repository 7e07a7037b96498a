"""Google's error envelope: ``{"error": {"code", "message", "status"}}``, the status named by HTTP status.

Every error of the Gemini surface (refused bodies, keys, limits, back-end failures, and a stream's last
frame) is answered in this shape, as the Gemini API answers them and as the GenAI SDKs and Gemini CLI read
them; the offending parameter, when known, is also given in a ``details`` entry of Google's ``BadRequest``
type (``fieldViolations[0].field``).
"""

from __future__ import annotations

from typing import Any

from ..errors import ApiError

#: Google's canonical status for each HTTP status it answers with; others go by their class.
_STATUSES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
             405: "INVALID_ARGUMENT", 409: "ABORTED", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED",
             499: "CANCELLED", 500: "INTERNAL", 501: "UNIMPLEMENTED", 502: "UNAVAILABLE", 503: "UNAVAILABLE",
             504: "DEADLINE_EXCEEDED"}
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"


def status_name(status: int) -> str:
    """Google's status name of an HTTP status."""
    return _STATUSES.get(status) or ("FAILED_PRECONDITION" if status < 500 else "INTERNAL")


def error_body(error: ApiError) -> dict[str, Any]:
    """``error`` in Google's envelope."""
    inner: dict[str, Any] = {"code": error.status, "message": error.message, "status": status_name(error.status)}
    if error.param is not None:
        inner["details"] = [{"@type": BAD_REQUEST,
                             "fieldViolations": [{"field": error.param, "description": error.message}]}]
    return {"error": inner}
