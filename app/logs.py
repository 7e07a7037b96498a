"""Log lines as JSON objects (or plain text), each carrying the request id.

Structured values go in ``extra={"fields": {...}}``: the JSON formatter
merges them into the object, the plain one appends ``key=value`` pairs.
Nothing here logs prompt text: what a line holds is up to its caller.
"""

from __future__ import annotations

import logging
import sys
from datetime import datetime, timezone
from typing import IO, Any

import orjson

from .observe import current_request_id


class RequestIdFilter(logging.Filter):
    """Sets ``record.request_id`` from the current request (``None`` outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id()
        return True


class JsonFormatter(logging.Formatter):
    """One compact JSON object per line: ``ts``, ``level``, ``logger``, ``msg``, ``request_id``, ``pid``
    (the gunicorn worker), then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "request_id": getattr(record, "request_id", None),
            "pid": record.process,
        }
        fields = getattr(record, "fields", None)
        if fields:
            line.update(fields)
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


class PlainFormatter(logging.Formatter):
    """``time LEVEL logger [request_id] message key=value…``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if not hasattr(record, "request_id"):
            record.request_id = None
        text = super().format(record)
        fields = getattr(record, "fields", None)
        if fields:
            text += " " + " ".join(f"{key}={value}" for key, value in fields.items())
        return text


def make_handler(fmt: str = "json", stream: IO[str] | None = None) -> logging.Handler:
    """A stream handler (default stderr) writing ``json`` or ``plain`` lines with request ids."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else PlainFormatter())
    return handler


def configure_logging(level: str, fmt: str = "json") -> None:
    """Root logging at ``level`` in ``fmt`` (unless the host configured it); ``init_app`` quiets ``transitions``."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(make_handler(fmt))
        root.setLevel(level)
    logging.getLogger("app").setLevel(level)
