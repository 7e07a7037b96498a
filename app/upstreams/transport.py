"""HTTP/1.1 to the upstream over geventhttpclient's connection pool and C response parser.

Chosen by measurement (``docs/upstream-client.md``): under gevent it costs a
fraction of httpx per request, and its pool hands out an idle connection after
one non-blocking check of that connection alone (httpcore checked every idle
connection, through the hub, on every request). Only public classes are used:
``ConnectionPool`` / ``SSLConnectionPool`` for sockets and
``HTTPSocketPoolResponse`` to parse an answer and give its socket back once
the body is complete. The request head is written here (fixed headers built
once), which is what lets connect, write and read timeouts differ.

Proxies come from the environment as httpx took them: ``HTTPS_PROXY`` /
``HTTP_PROXY`` / ``ALL_PROXY`` (``http://[user:pass@]host:port``; HTTPS goes
through a ``CONNECT`` tunnel), unless ``NO_PROXY`` names the host. Server
certificates and host names are checked against ``SSL_CERT_FILE`` when set,
else certifi's bundle (as httpx did).
"""

from __future__ import annotations

import _socket
import base64
import os
import urllib.request
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping
from urllib.parse import unquote, urlsplit

import certifi
import orjson
import gevent
import gevent.socket
import gevent.ssl
from geventhttpclient.connectionpool import ConnectionPool, SSLConnectionPool
from geventhttpclient.response import HTTPConnectionClosed, HTTPSocketPoolResponse, HTTPSocketResponse

from .silence import Silence, SilenceAlarm

#: Bytes asked of one receive.
READ_BYTES = 65536
#: A read shorter than this is a back end writing as it generates (a token an event): the next receive waits for
#: the socket to be readable before reading, rather than reading, failing with ``EAGAIN``, then waiting (a system
#: call and an exception a chunk fewer). A longer read may have left more behind: the next one reads at once.
PACED_READ = 4096
#: Connections one process may hold open to the upstream. Far above gunicorn's ``worker_connections``:
#: a stream never waits for a connection (as with round 1's uncapped httpx pool).
MAX_CONNECTIONS = 100_000
#: Unread body bytes a response may hold unless the caller says otherwise.
DEFAULT_MAX_BUFFER = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds allowed to connect (TCP and TLS), to write the request, and between received bytes."""

    connect: float = 10.0
    read: float = 300.0
    write: float = 30.0


class BufferLimitExceeded(Exception):
    """More body bytes arrived than the response may hold at once (see :class:`BoundedResponse`)."""


class BoundedResponse(HTTPSocketPoolResponse):
    """A pooled response whose body toolwire receives itself, holding at most ``max_buffer`` unread bytes.

    geventhttpclient's ``readline`` and ``read`` wait for a separator or a length, and give the
    connection up on any exception, a timeout included. Here the parser is fed one receive at a
    time: :meth:`receive` waits at most a given time and, when nothing came, leaves the response as
    it was (a stream can send a keep-alive and go on waiting); :meth:`take` hands over what was
    parsed. More than ``max_buffer`` unread body bytes drop the buffer and raise
    :class:`BufferLimitExceeded` (which closes the connection).

    Args:
        sock: the pooled socket the request went out on; the status and headers are read here.
        pool: the pool it came from; a complete body gives the socket back to it.
        max_buffer: the most unread body bytes held.
        read_timeout: the longest silence :meth:`read_body` waits through.
    """

    def __init__(self, sock: Any, pool: ConnectionPool, *, max_buffer: int, read_timeout: float, **kw: Any):
        self.max_buffer = max_buffer
        self.read_timeout = read_timeout
        self._unread: list[bytearray] = []  # the parser's pieces (a bytearray would keep its buffer between reads)
        self.unread = 0  # body bytes parsed and not taken yet (an attribute: read every receive)
        self._socket = sock
        self._timeout = sock.gettimeout()  # the head is read with it, the body with the alarm
        self._alarm = SilenceAlarm()
        self._plain = type(sock) is gevent.socket.socket  # (TLS may hold decrypted bytes while the socket has none)
        self._paced = False  # the last read was small: wait for the next before reading
        super().__init__(sock, pool, **kw)

    def _read_headers(self, pre_buffered: bytes = b"") -> None:
        """Nothing while the response is made: :meth:`UpstreamConnection.request` reads the head right after,
        with :meth:`read_head`, from its own frame. The wait for the back end's answer is the deepest point of
        a request, and three constructors' frames below it would grow every open stream's data stack by a
        page (docs/upstream-client.md)."""

    #: Read the status and headers (geventhttpclient's own reader); on failure the socket is given up.
    read_head = HTTPSocketResponse._read_headers

    def _on_body(self, buf: bytearray) -> None:
        self.unread += len(buf)
        if self.unread > self.max_buffer:
            self._unread.clear()
            raise BufferLimitExceeded(f"more than {self.max_buffer} bytes")
        self._unread.append(buf)

    def release(self) -> None:
        """Stop the alarm, then give the socket back to the pool (or close it, when it cannot be reused)."""
        self._alarm.close()
        super().release()

    def take(self) -> bytes:
        """The body bytes parsed and not taken yet."""
        data = b"".join(self._unread)
        self._unread.clear()
        self.unread = 0
        return data

    def receive(self, timeout: float | None) -> bool:
        """Wait at most ``timeout`` seconds for more of the body and parse what comes.

        Returns ``False`` when nothing came in time (the response can still be read), ``True``
        otherwise; once the body is complete the socket is back in the pool (or closed, when the
        server ends its bodies by closing) and this is not called.

        Raises:
            OSError, HTTPParseError, BufferLimitExceeded: the connection failed or the body broke the
                protocol or the bound; the connection is closed.
        """
        sock, alarm = self._socket, self._alarm
        try:
            if self._timeout is not None:  # the body's waits are timed by the alarm (silence.py), not the socket
                sock.settimeout(None)
                self._timeout = None
            if timeout is not None:
                alarm.expect(timeout)
            if self._paced:  # the last read was a token's few bytes: the next is far off, so wait before asking
                sock._wait(sock._read_event)  # (gevent's own wait, which its recv makes after an EAGAIN)
            data = sock.recv(READ_BYTES)
            alarm.waiting = None
            self._paced = self._plain and len(data) < PACED_READ
        except Silence:
            alarm.waiting = None
            return False
        except BaseException:
            self.release()
            raise
        try:
            # An empty read is the close: the parser decides whether that ended the body (a body
            # without Content-Length or chunked coding is delimited by the close, RFC 9112 6.3) or cut it.
            self.feed(data)  # the body's end gives the socket back to the pool (a closed one is dropped)
            if not data and not self.message_complete:
                raise HTTPConnectionClosed("the connection closed before the body ended")
        except BaseException:
            self.release()
            raise
        return True

    def read_body(self, *, keep: bool = True) -> bytes:
        """The rest of the body (a non-streamed answer), at most ``max_buffer`` bytes; with ``keep=False``
        it is read to its end and dropped as it comes (only a complete response gives its socket back).

        Raises:
            TimeoutError: nothing came for ``read_timeout`` seconds (the connection is closed).
            OSError, HTTPParseError, BufferLimitExceeded: as :meth:`receive`.
        """
        while not self.message_complete:
            if not self.receive(self.read_timeout):
                self.release()
                raise TimeoutError("the upstream body timed out")
            if not keep:
                self.take()
        return self.take()


class UpstreamConnection:
    """Requests to one base URL (scheme, host, port and path prefix), over pooled keep-alive connections.

    Args:
        base_url: e.g. ``https://llm.internal:8443/v1``.
        timeouts: per-phase timeouts.
        headers: sent with every request (e.g. ``Authorization``).
    """

    def __init__(self, base_url: str, *, timeouts: Timeouts, headers: Mapping[str, str]):
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.tls = url.scheme == "https"
        self.host = url.hostname
        self.port = url.port or (443 if self.tls else 80)
        self.prefix = url.path.rstrip("/")
        self.timeouts = timeouts
        host = f"[{self.host}]" if ":" in self.host else self.host
        authority = host if self.port == (443 if self.tls else 80) else f"{host}:{self.port}"
        self.proxy = proxy_for(url.scheme, self.host)
        # A plain-HTTP proxy takes the absolute URL; through a CONNECT tunnel the path is enough.
        origin = f"{url.scheme}://{authority}" if self.proxy and not self.tls else ""
        self._target = origin + self.prefix
        # The server's root: where llama.cpp and vLLM serve what is not OpenAI's (``/tokenize``) beside ``/v1``.
        self._root_target = origin + self.prefix.removesuffix("/v1")
        fixed = {"Host": authority, "User-Agent": "toolwire", **headers}
        proxy = urlsplit(self.proxy) if self.proxy else None
        if proxy is not None and not self.tls and proxy.username:  # a CONNECT tunnel sends them itself
            credentials = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}"
            fixed["Proxy-Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
        self._fixed = "".join(f"{name}: {value}\r\n" for name, value in fixed.items())
        self._pool: ConnectionPool | None = None
        self._pid: int | None = None
        self._used: weakref.WeakSet[Any] = weakref.WeakSet()  # the connections that carried a request already

    @property
    def pool(self) -> ConnectionPool:
        """This process's pool (a forked worker makes its own)."""
        if self._pool is None or self._pid != os.getpid():
            self._pool = self._new_pool()
            self._pid = os.getpid()
        return self._pool

    def request(self, method: str, path: str, body: bytes | dict[str, Any] = b"", *,
                headers: Mapping[str, str] | None = None, read_timeout: float | None = None,
                max_buffer: int = DEFAULT_MAX_BUFFER, at_root: bool = False) -> BoundedResponse:
        """Send one request and return the response once its headers are in (``path`` under the base URL, or with
        ``at_root`` under the server's root: the base URL without a last ``/v1``).

        The body is then received with :meth:`BoundedResponse.receive` (or ``read_body``); the
        connection goes back to the pool when the body is complete, and is closed by ``release()``
        before that. At most ``max_buffer`` body bytes are held unread.

        A ``dict`` body is sent as JSON, written once the connection is had: a burst of requests waiting
        for their connections (a resolver thread, the connect) holds none of their bytes, and each
        request's bytes are let go once written, before the wait for the answer. An ``orjson.dumps``
        result keeps its whole growth buffer (16 KiB for a 2 KiB prompt with one non-ASCII character);
        held through those waits, a burst of streams leaves such buffers as holes in the heap
        (docs/upstream-client.md).

        Raises:
            OSError: connect, TLS, write or read failure (``TimeoutError`` for timeouts).
            geventhttpclient.response.HTTPParseError: the answer is not HTTP.
        """
        pool, used = self.pool, self._used
        read_timeout = read_timeout or self.timeouts.read
        while True:  # (inline, not a helper: the wait for the head is the deepest point of a request)
            try:
                sock = pool.get_socket()
            except RuntimeError as exc:  # a refused proxy CONNECT, or a closed pool
                raise ConnectionError(str(exc)) from None
            reused = sock in used  # a kept-alive connection the server may have closed while it idled
            used.add(sock)
            try:
                sock.settimeout(self.timeouts.write)
                sock.sendall(self._message(method, (self._root_target if at_root else self._target) + path, body,
                                           headers))
                sock.settimeout(read_timeout)
            except BaseException as exc:
                pool.release_socket(sock)
                if reused and isinstance(exc, ConnectionError):
                    continue
                raise
            response = BoundedResponse(sock, pool, max_buffer=max_buffer, read_timeout=read_timeout,
                                       block_size=READ_BYTES, method=method)
            try:
                response.read_head()  # on failure it closes the socket and gives its slot back
            except HTTPConnectionClosed:  # closed before any byte of an answer: sent again if it was kept alive
                if reused:
                    continue
                raise
            return response

    def _message(self, method: str, target: str, body: bytes | dict[str, Any],
                 headers: Mapping[str, str] | None) -> bytes:
        """The request's bytes: its head and ``body`` (a ``dict`` as JSON), exactly their size."""
        content = orjson.dumps(body) if isinstance(body, dict) else body
        head = f"{method} {target} HTTP/1.1\r\n{self._fixed}"
        for name, value in (headers or {}).items():
            head += f"{name}: {value}\r\n"
        if content or method == "POST":
            head += f"Content-Length: {len(content)}\r\n"
        return head.encode("latin-1") + b"\r\n" + content

    def close(self) -> None:
        """Close this process's idle connections."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _new_pool(self) -> ConnectionPool:
        proxy = urlsplit(self.proxy) if self.proxy else None
        options: dict[str, Any] = dict(size=MAX_CONNECTIONS, connection_timeout=self.timeouts.connect,
                                       network_timeout=self.timeouts.read)
        if proxy is not None:
            options.update(use_proxy=True, proxy_user=unquote(proxy.username) if proxy.username else None,
                           proxy_password=unquote(proxy.password) if proxy.password else None)
        address = (proxy.hostname or "", proxy.port or 80) if proxy is not None else (self.host, self.port)
        pool = ConnectionPool(*address, self.host, self.port, **options) if not self.tls else SSLConnectionPool(
            *address, self.host, self.port, ssl_options={"ca_certs": ca_bundle()},
            ssl_context_factory=gevent.ssl.create_default_context, **options)
        # geventhttpclient looks the host up for each new connection, on a resolver thread (a hand-off and a wait,
        # deep in the request's stack); the pool's lookup step is replaced (it has no option for it): an IP
        # address needs no lookup, and a name's runs beside the requests that need it.
        numeric = numeric_address_info(*address)
        pool._resolve = (lambda: numeric) if numeric else SharedLookup(pool._resolve)  # type: ignore[method-assign]
        return pool


class SharedLookup:
    """A host name's address lookup, run in a greenlet of its own and shared by the new connections that need it
    while it runs.

    A lookup goes to a resolver thread; from the request's own stack that hand-off was the deepest point of a
    request, a page of every open stream's data stack (docs/upstream-client.md). In a greenlet of its own its
    frames go with that greenlet, the requests wait for the answer in a shallow frame, and a burst of new
    connections makes one lookup, not one each. A request that leaves while it waits (the client left, the
    time limit) ends no lookup. Nothing is kept after one: the next connection looks up again.

    Args:
        lookup: the pool's own lookup (``getaddrinfo``'s answer for its host and port).
    """

    __slots__ = ("_lookup", "_running")

    def __init__(self, lookup: Callable[[], list[tuple[Any, ...]]]):
        self._lookup = lookup
        self._running: gevent.Greenlet | None = None

    def __call__(self) -> list[tuple[Any, ...]]:
        running = self._running
        if running is None:
            running = self._running = gevent.spawn(self._look_up)
        answer, error = running.get()
        if error is not None:
            raise error  # the name's failure: the same for every connection that waited on it
        return answer

    def _look_up(self) -> tuple[list[tuple[Any, ...]], Exception | None]:
        try:
            return self._lookup(), None
        except Exception as exc:  # returned, not raised: gevent would print a failed greenlet's traceback
            return [], exc
        finally:
            self._running = None


def numeric_address_info(host: str, port: int) -> list[tuple[Any, ...]]:
    """``getaddrinfo``'s answer for ``host`` when it is an IP address (made without a lookup); else empty."""
    try:  # _socket's own: a numeric host never blocks (gevent patches socket's, which takes a resolver thread)
        return _socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM, _socket.SOL_TCP, _socket.AI_NUMERICHOST)
    except _socket.gaierror:
        return []


def proxy_for(scheme: str, host: str) -> str | None:
    """The proxy URL the environment sets for ``scheme`` (``ALL_PROXY`` as a fallback), unless
    ``NO_PROXY`` covers ``host``.

    Raises:
        ValueError: the proxy is not an ``http://`` URL (https and SOCKS proxies are not supported).
    """
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(scheme) or proxies.get("all")
    # proxy_bypass_environment: CPython's own NO_PROXY check, not in typeshed's stubs
    if not proxy or urllib.request.proxy_bypass_environment(host, proxies):  # type: ignore[attr-defined]
        return None
    if "://" not in proxy:
        proxy = "http://" + proxy
    if not proxy.startswith("http://"):
        raise ValueError(f"unsupported upstream proxy {urlsplit(proxy).scheme}:// (only http:// proxies)")
    return proxy


def ca_bundle() -> str:
    """The CA certificates upstream TLS is checked against: ``SSL_CERT_FILE``, else certifi's."""
    return os.environ.get("SSL_CERT_FILE") or certifi.where()
