"""A stopping worker ends its open streams (:func:`app.pipeline.streaming.end_open_streams`): a stream waiting
on its upstream is woken and ends with the error frame; one stopped while its frames are written ends with the
error frame once that write returns, and nothing is thrown into the code that writes."""

from __future__ import annotations

import weakref

import gevent
import pytest
from gevent.event import Event

from app.pipeline import streaming
from app.pipeline.streaming import end_open_streams, sse_body
from app.upstreams.base import PAUSE


@pytest.fixture(autouse=True)
def no_other_streams(monkeypatch):
    """Only this test's streams are open (other tests' clients may leave theirs unclosed)."""
    monkeypatch.setattr(streaming, "_open", weakref.WeakSet())


class LineEncoder:
    """Each event a line; the error frame names the error's code."""

    keepalive = b": keep-alive\n\n"

    def opening(self, usage):
        return [b"open\n"]

    def frames(self, index, event):
        return [f"{event}\n".encode()]

    def closing(self, usage):
        return [b"done\n"]

    def error_frames(self, error, usage):
        return f"error {error.status} {error.code}\n".encode()


def upstream(answered: Event):
    """One event, then a silent upstream until ``answered`` is set, then another."""
    yield 0, "a"
    yield None, PAUSE
    answered.wait()
    yield 0, "b"
    yield None, PAUSE


def body_of(answered: Event):
    return sse_body(upstream(answered), LineEncoder(), lambda: {}, heartbeat_seconds=None, on_abandon=lambda: None)


def test_a_stream_waiting_on_its_upstream_is_ended_with_the_error_frame() -> None:
    answered = Event()
    reader = gevent.spawn(list, body_of(answered))
    gevent.sleep(0.01)  # the stream sent its first frame and waits on the upstream
    assert end_open_streams() == 1
    assert reader.get(timeout=2) == [b"open\na\n", b"error 503 server_shutting_down\n"]
    assert end_open_streams() == 0, "an ended stream is no longer open"


def test_a_stream_stopped_while_its_frames_are_written_ends_once_the_write_returns() -> None:
    answered = Event()
    frames = iter(body_of(answered))
    assert next(frames) == b"open\na\n"  # the server holds this frame: the body waits at its yield
    assert end_open_streams() == 1
    gevent.sleep(0.01)  # nothing is thrown into the writer (this greenlet)
    assert list(frames) == [b"error 503 server_shutting_down\n"]
    assert not answered.is_set()
