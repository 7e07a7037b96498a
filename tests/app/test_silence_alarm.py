"""The one alarm a response's waits share (app/upstreams/silence.py), on a gevent socket pair."""

from __future__ import annotations

import time

import gevent
import gevent.socket
import pytest

from app.upstreams.silence import Silence, SilenceAlarm


@pytest.fixture
def pair():
    a, b = gevent.socket.socketpair()
    yield a, b
    a.close()
    b.close()


def receive(alarm: SilenceAlarm, sock, timeout: float) -> bytes | None:
    """As ``BoundedResponse.receive`` waits: the bytes, or ``None`` when the wait outlived ``timeout``."""
    try:
        alarm.expect(timeout)
        data = sock.recv(100)
        alarm.waiting = None
        return data
    except Silence:
        alarm.waiting = None
        return None


def test_a_wait_longer_than_its_timeout_ends_silent_and_the_socket_still_reads(pair):
    a, b = pair
    alarm = SilenceAlarm()
    started = time.monotonic()
    assert receive(alarm, b, 0.1) is None
    assert 0.09 <= time.monotonic() - started < 5.0  # (the bound: only that it ends, however loaded the machine)
    a.send(b"x")
    assert receive(alarm, b, 0.1) == b"x"
    alarm.close()


def test_each_wait_has_its_own_deadline_while_one_timer_is_moved_on(pair):
    """Bytes every 40 ms for 1.2 s against a 0.5 s timeout: no wait is silent, though the first deadline passed
    long ago; then the silence after the last bytes ends one timeout later."""
    a, b = pair
    alarm = SilenceAlarm()

    def drip():
        for _ in range(30):
            gevent.sleep(0.04)
            a.send(b"x")

    writer = gevent.spawn(drip)
    got = b""
    while len(got) < 30:
        data = receive(alarm, b, 0.5)
        assert data is not None, f"silent after {len(got)} bytes"
        got += data
    writer.join()
    started = time.monotonic()
    assert receive(alarm, b, 0.5) is None
    assert 0.49 <= time.monotonic() - started < 5.0
    alarm.close()


def test_a_shorter_timeout_after_a_longer_one_is_kept(pair):
    _, b = pair
    alarm = SilenceAlarm()
    alarm.expect(10.0)  # a long wait that got its bytes at once: the timer is set 10 s out
    alarm.waiting = None
    started = time.monotonic()
    assert receive(alarm, b, 0.1) is None  # an earlier deadline sets the timer again
    assert time.monotonic() - started < 5.0
    alarm.close()


def test_a_greenlet_not_waiting_is_never_interrupted(pair):
    """The deadline passes while the greenlet does something else (here a sleep, as a slow client's write):
    nothing is thrown into it, and its next wait starts a deadline of its own."""
    a, b = pair
    alarm = SilenceAlarm()
    a.send(b"x")
    assert receive(alarm, b, 0.05) == b"x"  # the deadline is set, the wait over at once
    gevent.sleep(0.2)  # the timer fires meanwhile: not waiting, so nothing is thrown
    gevent.spawn_later(0.05, a.send, b"y")
    assert receive(alarm, b, 5.0) == b"y"
    alarm.close()


def test_a_closed_alarm_throws_nothing(pair):
    a, b = pair
    alarm = SilenceAlarm()
    alarm.expect(0.05)
    alarm.close()
    gevent.spawn_later(0.2, a.send, b"z")
    assert b.recv(100) == b"z"  # waited past the old deadline, undisturbed


def test_a_wait_after_work_that_did_not_yield_still_gets_its_whole_timeout(pair):
    """The loop's clock stands still while code runs without yielding; a deadline taken from it would be past."""
    _, b = pair
    alarm = SilenceAlarm()
    gevent.sleep(0.01)
    time.sleep(0.3)  # blocking: the loop does not turn
    started = time.monotonic()
    assert receive(alarm, b, 0.1) is None
    assert time.monotonic() - started >= 0.09
    alarm.close()
