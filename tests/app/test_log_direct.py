"""The access line written straight to toolwire's own JSON handler (issue 30: a LogRecord, the logger's walk
and the formatter cost a request ~30 µs): the same bytes as through ``logging``, and only where nothing else
(a host's handler, a filter, another format) would see the line."""

from __future__ import annotations

import io
import json
import logging
from contextlib import contextmanager
from typing import Iterator

import pytest

from app.observability import logs
from app.observability.logs import direct_json_handler, make_handler, write_direct
from support.fakes import FakeUpstream, text_chunks

FIELDS = {"method": "POST", "route": "/v1/chat/completions", "status": 200, "model": "m\n\x9b", "stream": True,
          "tool_mode": "prompt", "upstream": "default", "tool_calls": 1, "disconnected": False,
          "outcome": "completed", "ttfb_ms": 1.5, "duration_ms": 20.25}


def standalone(name: str = "toolwire.access") -> tuple[logging.Logger, io.StringIO, logging.Handler]:
    """A logger outside the hierarchy (no root above it) with one ``make_handler`` JSON handler."""
    logger = logging.Logger(name)
    buffer = io.StringIO()
    handler = make_handler("json", buffer)
    logger.addHandler(handler)
    return logger, buffer, handler


def test_a_direct_line_is_the_line_logging_writes(monkeypatch):
    logger, buffer, _ = standalone()
    monkeypatch.setattr(logs.time, "time", lambda: 1764150000.1234567)
    assert write_direct(logger, logging.INFO, "POST /v1/chat/completions 200", "rid-1", FIELDS)
    record = logger.makeRecord(logger.name, logging.INFO, __file__, 0, "%s %s %s",
                               ("POST", "/v1/chat/completions", 200), None, "finish",
                               {"request_id": "rid-1", "fields": FIELDS})
    record.created = 1764150000.1234567
    logger.handle(record)
    direct, through_logging = buffer.getvalue().splitlines(keepends=True)
    assert direct == through_logging and direct.endswith("}\n")
    assert json.loads(direct)["ts"] == "2025-11-26T09:40:00.123+00:00"


def test_the_pid_follows_logging_s_switch(monkeypatch):
    logger, buffer, _ = standalone()
    monkeypatch.setattr(logging, "logMultiprocessing", False)
    assert write_direct(logger, logging.INFO, "m", None, {})
    assert json.loads(buffer.getvalue())["pid"] is None


@pytest.mark.parametrize("change", ["second handler", "logger filter", "handler filter", "plain format",
                                    "handler level", "logger disabled", "no handler"])
def test_anything_else_on_the_way_gets_the_line_through_logging(change):
    logger, buffer, handler = standalone()
    if change == "second handler":
        logger.addHandler(logging.StreamHandler(io.StringIO()))
    elif change == "logger filter":
        logger.addFilter(logging.Filter("nothing"))
    elif change == "handler filter":
        handler.addFilter(logging.Filter("nothing"))
    elif change == "plain format":
        handler.setFormatter(logs.PlainFormatter())
    elif change == "handler level":
        handler.setLevel(logging.WARNING)
    elif change == "logger disabled":
        logger.disabled = True
    else:
        logger.removeHandler(handler)
    assert direct_json_handler(logger, logging.INFO) is None
    assert not write_direct(logger, logging.INFO, "m", "rid", FIELDS) and buffer.getvalue() == ""


def test_a_parent_that_stops_propagation_ends_the_walk():
    parent, buffer, handler = standalone("toolwire")
    child = logging.Logger("toolwire.access")
    child.parent = parent
    assert direct_json_handler(child, logging.INFO) is handler
    parent.propagate = False
    parent.parent = logging.Logger("above")
    parent.parent.addHandler(logging.StreamHandler(io.StringIO()))
    assert direct_json_handler(child, logging.INFO) is handler


@contextmanager
def only_a_json_handler() -> Iterator[io.StringIO]:
    """The root logger as the standalone service sets it up: one JSON handler (pytest's own set aside)."""
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    buffer = io.StringIO()
    root.handlers[:] = [make_handler("json", buffer)]
    root.setLevel(logging.INFO)
    try:
        yield buffer
    finally:
        root.handlers[:] = saved
        root.setLevel(level)


def test_a_served_request_writes_its_access_line_directly(make_app, monkeypatch):
    access = logging.getLogger("toolwire.access")
    monkeypatch.setattr(access, "handle", lambda record: pytest.fail("the access line went through logging"))
    client = make_app(FakeUpstream(text_chunks("Hello."))).test_client()
    with only_a_json_handler() as buffer:
        assert direct_json_handler(access, logging.INFO) is logging.getLogger().handlers[0]
        response = client.post("/v1/chat/completions", headers={"X-Request-Id": "direct-1"}, buffered=True,
                               json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    assert response.status_code == 200
    (line,) = [json.loads(text) for text in buffer.getvalue().splitlines() if '"toolwire.access"' in text]
    assert (line["msg"], line["request_id"], line["status"], line["stream"], line["outcome"]) == \
        ("POST /v1/chat/completions 200", "direct-1", 200, True, "completed")
