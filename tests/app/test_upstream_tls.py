"""HTTPS upstreams (a throwaway CA from trustme) and upstream proxies from the environment."""

from __future__ import annotations

import socket
import ssl
import threading
import time

import pytest
import trustme

from app.upstreams.base import Pause, UpstreamError
from app.upstreams.http import HttpUpstream
from app.upstreams.transport import Timeouts, proxy_for
from support.loopback import Answer, sse_answer

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY")
STREAM = b'data: {"choices": [{"index": 0, "delta": {"content": "secure"}}]}\n\ndata: [DONE]\n\n'


@pytest.fixture(autouse=True)
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start from an environment without proxies or a CA bundle of their own."""
    for name in (*PROXY_VARIABLES, "SSL_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def server_context(ca: trustme.CA, *names: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    return context


def trust(monkeypatch: pytest.MonkeyPatch, ca: trustme.CA, tmp_path) -> None:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    monkeypatch.setenv("SSL_CERT_FILE", str(path))


def contents(upstream: HttpUpstream) -> list[str]:
    return [d.content for c in upstream.open({"model": "m"}) for d in c.choices]


def test_an_https_upstream_with_a_trusted_certificate_streams(serve, ca, monkeypatch, tmp_path):
    trust(monkeypatch, ca, tmp_path)
    upstream = serve(lambda seen: sse_answer(STREAM), tls=server_context(ca, "127.0.0.1"))
    assert upstream.base_url.startswith("https://")
    assert contents(upstream) == ["secure"]
    assert contents(upstream) == ["secure"]
    ports = [seen.port for seen in upstream.server.seen]
    assert len(ports) == 2 and ports[0] == ports[1]  # the TLS connection was reused


@pytest.mark.parametrize("tls", [False, True])
def test_token_sized_events_written_back_to_back_arrive_without_waiting(serve, ca, monkeypatch, tmp_path, tls):
    """After a token's few bytes the next receive waits for the socket before reading (transport.PACED_READ); a
    TLS connection may hold the next records decrypted while its socket has nothing, so it never waits first."""
    trust(monkeypatch, ca, tmp_path)
    events = [b'data: {"choices": [{"index": 0, "delta": {"content": "%d"}}]}\n\n' % n for n in range(3)]
    upstream = serve(lambda seen: Answer(headers={"Content-Type": "text/event-stream"}, body=events, then="hang",
                                         hang_seconds=8.0),
                     tls=server_context(ca, "127.0.0.1") if tls else None, timeouts=Timeouts(read=10.0))
    stream = upstream.open({"model": "m"})
    stream.pause_every(10.0)
    started, got = time.monotonic(), []
    for item in stream:
        for one in item if isinstance(item, tuple) else (item,):
            if not isinstance(one, Pause):
                got.append(one.choices[0].content)
        if len(got) == 3:
            break
    assert got == ["0", "1", "2"] and time.monotonic() - started < 4.0  # not after the 8 s silence
    stream.close()


def test_an_untrusted_certificate_is_refused(serve, ca):
    upstream = serve(lambda seen: sse_answer(STREAM), tls=server_context(ca, "127.0.0.1"))
    with pytest.raises(UpstreamError) as info:
        upstream.open({})
    assert (info.value.kind, info.value.status) == ("connect", 502)
    assert upstream.server.seen == []


def test_a_certificate_for_another_host_is_refused(serve, ca, monkeypatch, tmp_path):
    trust(monkeypatch, ca, tmp_path)
    upstream = serve(lambda seen: sse_answer(STREAM), tls=server_context(ca, "upstream.example"))
    with pytest.raises(UpstreamError) as info:
        upstream.open({})
    assert info.value.kind == "connect" and upstream.server.seen == []


def test_a_plain_http_upstream_goes_through_http_proxy(serve, monkeypatch):
    proxy = serve(lambda seen: sse_answer(STREAM))  # plays the proxy: it gets the absolute URL
    monkeypatch.setenv("HTTP_PROXY", "http://user:p%40ss@" + proxy.base_url.split("://")[1].removesuffix("/v1"))
    upstream = HttpUpstream("http://upstream.example:8000/v1")
    try:
        assert contents(upstream) == ["secure"]
    finally:
        upstream.close()
    [seen] = proxy.server.seen
    assert seen.path == "http://upstream.example:8000/v1/chat/completions"
    assert seen.headers["host"] == "upstream.example:8000"
    assert seen.headers["proxy-authorization"] == "Basic dXNlcjpwQHNz"  # user:p@ss


def test_an_https_upstream_goes_through_a_connect_tunnel(serve, ca, monkeypatch, tmp_path):
    trust(monkeypatch, ca, tmp_path)
    upstream_server = serve(lambda seen: sse_answer(STREAM), tls=server_context(ca, "127.0.0.1")).server
    with ConnectProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        upstream = HttpUpstream(upstream_server.url)
        try:
            assert contents(upstream) == ["secure"]
        finally:
            upstream.close()
    assert proxy.targets == [upstream_server.url.split("://")[1].removesuffix("/v1")]
    assert len(upstream_server.seen) == 1


def test_no_proxy_bypasses_the_proxy(serve, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    upstream = serve(lambda seen: sse_answer(STREAM))
    assert contents(upstream) == ["secure"]


def test_proxy_choice_follows_the_environment(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "proxy.internal:3128")
    assert proxy_for("https", "api.example") == "http://proxy.internal:3128"
    assert proxy_for("http", "api.example") is None
    monkeypatch.setenv("ALL_PROXY", "http://all.internal:8080")
    assert proxy_for("http", "api.example") == "http://all.internal:8080"
    monkeypatch.setenv("NO_PROXY", ".example")
    assert proxy_for("https", "api.example") is None
    monkeypatch.setenv("HTTPS_PROXY", "socks5://proxy.internal:1080")
    with pytest.raises(ValueError, match="socks5"):
        proxy_for("https", "llm.internal")


class ConnectProxy:
    """A minimal ``CONNECT`` proxy on a free loopback port; ``targets`` lists what it was asked for."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> "ConnectProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            head += client.recv(4096)
        target = head.split(b" ")[1].decode()
        self.targets.append(target)
        host, port = target.rsplit(":", 1)
        server = socket.create_connection((host, int(port)))
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        threading.Thread(target=_pipe, args=(server, client), daemon=True).start()
        _pipe(client, server)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


