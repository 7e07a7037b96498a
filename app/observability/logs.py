"""Log lines as JSON objects (or plain text), each carrying the request id.

toolwire's loggers are ``toolwire.*`` (``toolwire.access`` the access line); a
host app's own ``app`` package cannot collide with them.

Structured values go in ``extra={"fields": {...}}``: the JSON formatter
merges them into the object, the plain one appends ``key=value`` pairs.
Nothing here logs prompt text: what a line holds is up to its caller.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from typing import IO, Any

import orjson

from .current import current_request_id


class RequestIdFilter(logging.Filter):
    """Sets ``record.request_id`` from the current request (``None`` outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id()
        return True


_second: tuple[float, str] = (-1.0, "")


def utc_timestamp(created: float) -> str:
    """``created`` as ``datetime.fromtimestamp(created, timezone.utc).isoformat(timespec="milliseconds")``
    writes it (microseconds rounded half to even first, then cut to milliseconds), at a fraction of the cost:
    the text of the second is kept while lines keep coming within it."""
    global _second
    fraction, whole = math.modf(created)
    micros = round(fraction * 1e6)
    if micros >= 1_000_000:
        whole += 1
        micros -= 1_000_000
    elif micros < 0:  # before 1970: modf keeps the sign
        whole -= 1
        micros += 1_000_000
    if _second[0] != whole:
        _second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    return f"{_second[1]}.{micros // 1000:03d}+00:00"


class JsonFormatter(logging.Formatter):
    """One compact JSON object per line: ``ts``, ``level``, ``logger``, ``msg``, ``request_id``, ``pid``
    (the gunicorn worker), then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        return json_line(record.created, record.levelname, record.name, record.getMessage(),
                         getattr(record, "request_id", None), record.process, getattr(record, "fields", None),
                         self.formatException(record.exc_info) if record.exc_info else None)


def json_line(created: float, level: str, logger: str, msg: str, request_id: str | None, pid: int | None,
              fields: dict[str, Any] | None, exc_text: str | None = None) -> str:
    """One line as :class:`JsonFormatter` writes it (without its newline)."""
    line: dict[str, Any] = {"ts": utc_timestamp(created), "level": level, "logger": logger, "msg": msg,
                            "request_id": request_id, "pid": pid}
    if fields:
        line.update(fields)
    if exc_text:
        line["exc_info"] = exc_text
    return orjson.dumps(line, default=str).decode()


def direct_json_handler(logger: logging.Logger, level: int) -> logging.StreamHandler | None:
    """The handler a ``level`` line of ``logger`` reaches when it is the only one, and a :func:`make_handler`
    JSON handler nobody changed (no other filter, no other formatter), with no logger filter on the way: that
    line can then be written to it directly (:func:`write_direct`). ``None`` otherwise (a host's or a test's
    handlers: they get the line through ``logging``)."""
    if logger.disabled or logger.filters:
        return None
    found = None
    node: logging.Logger | None = logger
    while node is not None:
        for handler in node.handlers:
            if level >= handler.level:
                if found is not None:
                    return None
                found = handler
        node = node.parent if node.propagate else None
    if type(found) is not logging.StreamHandler or type(found.formatter) is not JsonFormatter \
            or any(type(f) is not RequestIdFilter for f in found.filters):
        return None
    return found


def write_direct(logger: logging.Logger, level: int, msg: str, request_id: str | None,
                 fields: dict[str, Any]) -> bool:
    """Write a log line of ``logger`` straight to its one JSON handler (:func:`direct_json_handler`): the bytes
    ``logger.log(level, msg, extra={"request_id": …, "fields": …})`` would write, without a ``LogRecord``, the
    logger's walk and the formatter (the access line: once a request). Whether it was written (if not, log it
    the ordinary way; a write that fails is left to that way's error handling)."""
    handler = direct_json_handler(logger, level)
    if handler is None:
        return False
    text = json_line(time.time(), logging.getLevelName(level), logger.name, msg, request_id,
                     os.getpid() if logging.logMultiprocessing else None, fields)
    try:
        with handler.lock:  # type: ignore[union-attr]  # a handler's lock exists from its creation
            stream = handler.stream
            stream.write(text + handler.terminator)
            if hasattr(stream, "flush"):  # as StreamHandler.flush, inside the lock already held
                stream.flush()
    except RecursionError:
        raise
    except Exception:
        return False
    return True


#: C0 and C1 control characters (newlines, ESC, CSI…) as visible escapes: a client-chosen value (a model or
#: tool name) can neither start a forged log line nor drive the terminal that shows the log.
_ESCAPE_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))}
_ESCAPE_CONTROLS.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})
#: JSON strings escape C0 controls but leave DEL and C1 as they are.
_JSON_ESCAPE_C1 = {code: f"\\u{code:04x}" for code in range(0x7F, 0xA0)}


def _plain_value(value: Any) -> str:
    """A field value for a ``key=value`` pair: as is when it is one plain word, else a JSON string
    (quoted, controls escaped), so a value cannot pose as further pairs."""
    text = str(value)
    if text and text.isprintable() and not any(c in text for c in ' "=\\'):
        return text
    return orjson.dumps(text).decode().translate(_JSON_ESCAPE_C1)


class PlainFormatter(logging.Formatter):
    """``time LEVEL logger [request_id] message key=value…``, one line per record (a traceback follows
    on its own lines); control characters in the message are escaped, odd field values quoted."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        return super().formatMessage(record).translate(_ESCAPE_CONTROLS)

    def format(self, record: logging.LogRecord) -> str:
        if not hasattr(record, "request_id"):
            record.request_id = None
        text = super().format(record)
        fields = getattr(record, "fields", None)
        if fields:
            pairs = " ".join(f"{key}={_plain_value(value)}" for key, value in fields.items())
            head, newline, traceback = text.partition("\n")  # the pairs belong on the record's own line
            text = f"{head} {pairs}{newline}{traceback}"
        return text


def make_handler(fmt: str = "json", stream: IO[str] | None = None) -> logging.Handler:
    """A stream handler (default stderr) writing ``json`` or ``plain`` lines with request ids."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else PlainFormatter())
    return handler


#: Libraries whose INFO lines the standalone service drops: ``transitions`` logs every state change of
#: the parser, ``httpx`` every upstream request (a second line per request, before its first byte).
QUIET_LIBRARIES = ("transitions", "httpx")


def configure_logging(level: str, fmt: str = "json") -> None:
    """The standalone service's logging (``create_app``; the embedding ``init_app`` leaves the host's alone).

    Root logging at ``level`` in ``fmt`` (unless already configured), ``toolwire.*`` at ``level``, and
    :data:`QUIET_LIBRARIES` at WARNING.
    """
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(make_handler(fmt))
        root.setLevel(level)
    logging.getLogger("toolwire").setLevel(level)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
