"""The upstream transport's idle-connection check: right answers, and no trip through the gevent hub."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading
from http.server import ThreadingHTTPServer

from app.upstreams.http import HttpUpstream
from app.upstreams.transport import socket_readable
from support.fakes import KeepAliveSSE


def test_socket_readable_answers_like_a_poll():
    a, b = socket.socketpair()
    try:
        assert socket_readable(a) is False
        b.sendall(b"x")
        assert socket_readable(a) is True
        a.recv(1)
        assert socket_readable(a) is False
        b.close()
        assert socket_readable(a) is True  # EOF: the server closed an idle connection
    finally:
        a.close()
    assert socket_readable(None) is True


def test_socket_readable_does_not_switch_greenlets_under_the_gevent_patch():
    """gevent's patched ``poll`` yields to the hub (a full loop turn per idle connection); this must not."""
    code = textwrap.dedent("""
        from gevent import monkey
        monkey.patch_all()
        import socket, gevent
        from app.upstreams.transport import socket_readable
        ran = []
        gevent.spawn(ran.append, 1)
        a, b = socket.socketpair()
        for _ in range(10):
            socket_readable(a)
        assert not ran, "socket_readable switched to the hub"
        gevent.sleep(0)
        assert ran
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


class _ClosingSSE(KeepAliveSSE):
    """Answers one request, then closes the connection without saying so."""

    closed = threading.Event()

    def do_POST(self):
        super().do_POST()
        self.close_connection = True

    def finish(self):
        super().finish()
        self.connection.close()
        type(self).closed.set()


def test_a_connection_the_server_closed_is_not_reused():
    _ClosingSSE.ports = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ClosingSSE)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = HttpUpstream(f"http://127.0.0.1:{server.server_port}/v1")
    try:
        for _ in range(2):
            _ClosingSSE.closed.clear()
            stream = client.open({"model": "m", "messages": [], "stream": True})
            assert [d.content for c in stream for d in c.choices] == ["hi"]
            stream.close()
            assert _ClosingSSE.closed.wait(10)
    finally:
        client.close()
        server.shutdown()
        server.server_close()
    assert len(_ClosingSSE.ports) == 2 and _ClosingSSE.ports[0] != _ClosingSSE.ports[1]
