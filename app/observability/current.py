"""The record of the request the running code serves, in a context variable (each greenlet has its own):
:mod:`~app.observability.record` keeps it, log lines read its id from it."""

from __future__ import annotations

import contextvars
from typing import Any

#: The current request's :class:`~app.observability.record.RequestRecord`, if any.
current_record: contextvars.ContextVar[Any] = contextvars.ContextVar("toolwire_request", default=None)


def current_request_id() -> str | None:
    """The current request's id, for log lines."""
    record = current_record.get()
    return record.request_id if record is not None else None
