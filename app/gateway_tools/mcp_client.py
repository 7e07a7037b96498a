"""A small MCP client (JSON-RPC 2.0): the streamable HTTP transport, the older HTTP+SSE one, and a local command
over stdio. Synchronous and gevent-cooperative (sockets and pipes wait in the hub under gunicorn's gevent
workers), each exchange bounded by a deadline (``time.monotonic()``) and every answer by a size cap.

Only what the gateway needs: ``initialize``, ``tools/list`` (all pages, up to a cap) and ``tools/call``. A
server's own requests (sampling, elicitation, pings) are not served; its notifications are skipped.
"""

from __future__ import annotations

import http.client
import itertools
import os
import shlex
import socket
import ssl
import time
from typing import Any, Iterator, Mapping, Protocol
from urllib.parse import urljoin, urlsplit

import certifi
import gevent
import orjson
from gevent import subprocess  # its pipes wait in the hub, monkey-patched or not

#: The protocol revision asked for (the server answers with the one it speaks).
PROTOCOL_VERSION = "2025-06-18"
#: Most bytes of one answer (a message, an SSE event); past it the exchange fails.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
CLIENT_INFO = {"name": "toolwire", "version": "0.1.0"}


class McpError(Exception):
    """An MCP exchange that failed.

    Attributes:
        kind: ``protocol`` (the server's JSON-RPC error, its ``code``), ``http`` (an HTTP status, in ``code``),
            ``timeout``, or ``transport`` (could not connect, a broken answer).
        code: the JSON-RPC error code or HTTP status, if any.
    """

    def __init__(self, kind: str, message: str, code: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.code = code


class Transport(Protocol):
    """Sends one JSON-RPC message and yields what the server answers to it."""

    def exchange(self, message: dict[str, Any], deadline: float) -> Iterator[dict[str, Any]]:
        """Send ``message``; yield the messages that come back (none for a notification)."""
        ...

    def close(self) -> None:
        """Let the connection (or process) go."""
        ...


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise McpError("timeout", "the MCP server did not answer in time")
    return left


def _connection(url: str, deadline: float, pin: str | None = None) -> http.client.HTTPConnection:
    """A connection to ``url``'s host, or to the address ``pin`` (a checked address of that host: its name is not
    resolved again; TLS still checks the certificate against the name)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port
    if parts.scheme == "https":
        context = ssl.create_default_context(cafile=certifi.where())
        return _PinnedHttps(host, port, timeout=_left(deadline), context=context, pin=pin)
    return http.client.HTTPConnection(pin or host, port, timeout=_left(deadline))


class _PinnedHttps(http.client.HTTPSConnection):
    """HTTPS to a name's checked address, the certificate checked against the name."""

    def __init__(self, host: str, port: int | None, *, timeout: float, context: ssl.SSLContext, pin: str | None):
        super().__init__(host, port, timeout=timeout, context=context)
        self._pin = pin
        self._tls = context

    def connect(self) -> None:
        if self._pin is None:
            super().connect()
            return
        sock = socket.create_connection((self._pin, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)


def _host_header(url: str) -> dict[str, str]:
    """The ``Host`` header of a request to ``url`` (sent as is when the connection goes to a pinned address)."""
    return {"Host": urlsplit(url).netloc.rpartition("@")[2]}


def _target(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def sse_events(response: http.client.HTTPResponse, deadline: float) -> Iterator[tuple[str, str]]:
    """The ``(event, data)`` pairs of an SSE body, each bounded by :data:`MAX_MESSAGE_BYTES`."""
    event, size = "message", 0
    data: list[str] = []
    while True:
        _left(deadline)
        line = response.readline(MAX_MESSAGE_BYTES + 1)
        if not line:
            return
        size += len(line)
        if size > MAX_MESSAGE_BYTES:
            raise McpError("transport", "an event from the MCP server is too large")
        text = line.decode("utf-8", "replace").rstrip("\r\n")
        if not text:
            if data:
                yield event, "\n".join(data)
            event, data, size = "message", [], 0  # (the next event's)
        elif text.startswith(":"):
            continue
        else:
            name, _, value = text.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)


def _decoded(text: str | bytes) -> dict[str, Any]:
    try:
        message = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise McpError("transport", "the MCP server sent something that is not JSON") from None
    if not isinstance(message, dict):
        raise McpError("transport", "the MCP server sent JSON that is not a message")
    return message


def _read_body(response: http.client.HTTPResponse) -> bytes:
    body = response.read(MAX_MESSAGE_BYTES + 1)
    if len(body) > MAX_MESSAGE_BYTES:
        raise McpError("transport", "the MCP server's answer is too large")
    return body


class StreamableHttp:
    """MCP's streamable HTTP transport: each message POSTed; the answer JSON, or an SSE stream of messages."""

    def __init__(self, url: str, headers: Mapping[str, str], pin: str | None = None):
        self._url = url
        self._headers = {**headers, **_host_header(url)}
        self._pin = pin
        self.session_id: str | None = None
        self.protocol_version: str | None = None

    def exchange(self, message: dict[str, Any], deadline: float) -> Iterator[dict[str, Any]]:
        headers = {**self._headers, "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        connection = _connection(self._url, deadline, self._pin)
        try:
            try:
                connection.request("POST", _target(self._url), orjson.dumps(message), headers)
                response = connection.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                raise McpError("timeout" if isinstance(exc, TimeoutError) else "transport",
                               f"the MCP server could not be reached: {exc}") from None
            self.session_id = response.getheader("Mcp-Session-Id") or self.session_id
            if response.status >= 400:
                raise McpError("http", f"the MCP server answered HTTP {response.status}", response.status)
            kind = (response.getheader("Content-Type") or "").split(";")[0].strip().lower()
            if kind == "text/event-stream":
                for event, data in sse_events(response, deadline):
                    if event == "message":
                        yield _decoded(data)
            elif response.status != 202:
                body = _read_body(response)
                if body.strip():
                    yield _decoded(body)
        except TimeoutError:
            raise McpError("timeout", "the MCP server did not answer in time") from None
        finally:
            connection.close()

    def close(self) -> None:
        """Nothing is held between exchanges (the server's session ends by its own timeout)."""


class LegacySse:
    """MCP's older HTTP+SSE transport: a GET stream that first names the URL messages are POSTed to, then
    carries the answers."""

    def __init__(self, url: str, headers: Mapping[str, str], pin: str | None = None):
        self._url = url
        self._headers = {**headers, **_host_header(url)}
        self._pin = pin
        self._connection: http.client.HTTPConnection | None = None
        self._events: Iterator[tuple[str, str]] | None = None
        self._endpoint: str | None = None

    def _open(self, deadline: float) -> Iterator[tuple[str, str]]:
        if self._events is not None:
            return self._events
        connection = self._connection = _connection(self._url, deadline, self._pin)
        try:
            connection.request("GET", _target(self._url), headers={**self._headers, "Accept": "text/event-stream"})
            response = connection.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            raise McpError("transport", f"the MCP server could not be reached: {exc}") from None
        if response.status >= 400:
            raise McpError("http", f"the MCP server answered HTTP {response.status}", response.status)
        events = self._events = sse_events(response, deadline)
        for event, data in events:
            if event == "endpoint":
                endpoint = urljoin(self._url, data.strip())
                if urlsplit(endpoint).netloc != urlsplit(self._url).netloc:
                    raise McpError("transport", "the MCP server named a message endpoint on another host")
                self._endpoint = endpoint
                return events
        raise McpError("transport", "the MCP server's event stream ended before naming its message endpoint")

    def exchange(self, message: dict[str, Any], deadline: float) -> Iterator[dict[str, Any]]:
        events = self._open(deadline)
        assert self._endpoint is not None and self._connection is not None
        if self._connection.sock is not None:  # the stream's reads wait no longer than this exchange may
            self._connection.sock.settimeout(_left(deadline))
        connection = _connection(self._endpoint, deadline, self._pin)  # (the stream's host: the same address)
        try:
            connection.request("POST", _target(self._endpoint), orjson.dumps(message),
                               {**self._headers, "Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            if response.status >= 400:
                raise McpError("http", f"the MCP server answered HTTP {response.status}", response.status)
        except (OSError, http.client.HTTPException) as exc:
            raise McpError("transport", f"the MCP server could not be reached: {exc}") from None
        finally:
            connection.close()
        if "id" not in message:
            return
        try:
            for event, data in events:
                if event == "message":
                    yield _decoded(data)
        except TimeoutError:
            raise McpError("timeout", "the MCP server did not answer in time") from None

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


class Stdio:
    """A local MCP server: a command whose stdin and stdout carry one JSON message a line."""

    def __init__(self, command: str, env: Mapping[str, str] | None = None):
        self._process = subprocess.Popen(shlex.split(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})

    @property
    def alive(self) -> bool:
        """Whether the process still runs."""
        return self._process.poll() is None

    def exchange(self, message: dict[str, Any], deadline: float) -> Iterator[dict[str, Any]]:
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(orjson.dumps(message) + b"\n")
            stdin.flush()
        except OSError as exc:
            raise McpError("transport", f"the MCP server's process is gone: {exc}") from None
        if "id" not in message:
            return
        while True:
            with gevent.Timeout(_left(deadline), McpError("timeout", "the MCP server did not answer in time")):
                line = stdout.readline(MAX_MESSAGE_BYTES + 1)
            if not line:
                raise McpError("transport", "the MCP server's process ended")
            if len(line) > MAX_MESSAGE_BYTES:
                raise McpError("transport", "a message from the MCP server is too large")
            if line.strip():
                yield _decoded(line)

    def close(self) -> None:
        if self.alive:
            self._process.kill()
        self._process.wait()


class McpSession:
    """One MCP session over a :class:`Transport`: initialised on first use."""

    def __init__(self, transport: Transport):
        self._transport = transport
        self._ids = itertools.count(1)
        self._ready = False
        self.server_info: dict[str, Any] = {}

    def request(self, method: str, params: dict[str, Any], deadline: float) -> dict[str, Any]:
        """The ``result`` of one request (the session initialised first).

        Raises:
            McpError: the server's error, a transport failure or the deadline.
        """
        if not self._ready:
            self._initialize(deadline)
        return self._request(method, params, deadline)

    def list_tools(self, deadline: float, limit: int) -> list[dict[str, Any]]:
        """The server's tools (every page), at most ``limit``."""
        tools: list[dict[str, Any]] = []
        cursor = None
        for _ in range(64):  # pages
            result = self.request("tools/list", {"cursor": cursor} if cursor else {}, deadline)
            page = result.get("tools")
            tools += [tool for tool in page if isinstance(tool, dict)] if isinstance(page, list) else []
            cursor = result.get("nextCursor")
            if not cursor or len(tools) >= limit:
                break
        return tools[:limit]

    def call_tool(self, name: str, arguments: dict[str, Any], deadline: float) -> dict[str, Any]:
        """The result of ``tools/call`` (``content``, ``isError``, maybe ``structuredContent``)."""
        return self.request("tools/call", {"name": name, "arguments": arguments}, deadline)

    def close(self) -> None:
        """End the session's transport."""
        self._transport.close()

    def _initialize(self, deadline: float) -> None:
        result = self._request("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                              "clientInfo": CLIENT_INFO}, deadline)
        self.server_info = result.get("serverInfo") or {}
        version = result.get("protocolVersion")
        if isinstance(self._transport, StreamableHttp) and isinstance(version, str):
            self._transport.protocol_version = version
        for _ in self._transport.exchange({"jsonrpc": "2.0", "method": "notifications/initialized"}, deadline):
            pass
        self._ready = True

    def _request(self, method: str, params: dict[str, Any], deadline: float) -> dict[str, Any]:
        request_id = next(self._ids)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        for answer in self._transport.exchange(message, deadline):
            if answer.get("id") != request_id or "method" in answer:
                continue  # a notification, or the server's own request: not served
            error = answer.get("error")
            if isinstance(error, dict):
                raise McpError("protocol", str(error.get("message") or "the MCP server returned an error"),
                               error.get("code") if isinstance(error.get("code"), int) else None)
            result = answer.get("result")
            if not isinstance(result, dict):
                raise McpError("transport", f"the MCP server's answer to {method} has no result")
            return result
        raise McpError("transport", f"the MCP server did not answer {method}")
