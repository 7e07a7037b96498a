"""Incremental Server-Sent Events decoder: bytes in, ``data`` payloads out.

Sans-IO: feed whatever byte slices the transport delivers (split anywhere,
even inside a UTF-8 sequence or a CRLF pair) and get back the complete
events' data. Handles LF, CR and CRLF line ends, ``data:`` with or without the
space, multi-line data, comments, and ignores ``event:``/``id:``/``retry:``.
``[DONE]`` is returned like any other payload.

Lines are split as bytes (``bytes.split`` over everything received) and only
``data`` values are decoded: a per-line regex over decoded text cost about a
tenth of a worker's CPU on a fast stream.
"""

from __future__ import annotations

_BOM = b"\xef\xbb\xbf"


class SSEDecoder:
    """Decode one SSE stream.

    Raises ``UnicodeDecodeError`` on ``data`` that is not UTF-8.
    """

    __slots__ = ("_pending", "_data", "_started")

    def __init__(self) -> None:
        self._pending: list[bytes] = []  # an unfinished line, in the pieces it arrived in
        self._data: list[str] = []
        self._started = False

    def feed(self, chunk: bytes) -> list[str]:
        """Feed bytes; return the data of every event they complete."""
        if b"\n" not in chunk and b"\r" not in chunk:
            if chunk:
                self._pending.append(chunk)  # no line ends yet: nothing to scan (no quadratic rescans)
            return []
        buffer = b"".join(self._pending) + chunk if self._pending else chunk
        self._pending = []
        return self._drain(buffer, final=False)

    def end(self) -> list[str]:
        """The stream ended: flush a last event that lacked its blank line."""
        buffer = b"".join(self._pending)
        self._pending = []
        out = self._drain(buffer, final=True)
        if self._data:
            out.append("\n".join(self._data))
            self._data = []
        return out

    def _drain(self, buffer: bytes, *, final: bool) -> list[str]:
        if not self._started:
            self._started = True
            buffer = buffer.removeprefix(_BOM)  # a line end arrived, so a BOM is complete by now
        held = b""
        if b"\r" in buffer:
            if buffer.endswith(b"\r") and not final:
                held, buffer = b"\r", buffer[:-1]  # maybe the first half of a CRLF still in flight
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buffer.split(b"\n")
        rest = lines.pop()
        if final:
            lines.append(rest)
        elif rest or held:
            self._pending.append(rest + held)
        out: list[str] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    out.append("\n".join(data))
                    data = self._data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append((value[1:] if value.startswith(b" ") else value).decode())
            elif line == b"data":
                data.append("")
            # comments (":…") and the other fields carry nothing toolwire uses
        return out
