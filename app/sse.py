"""Incremental Server-Sent Events decoder: bytes in, ``data`` payloads out.

Sans-IO: feed whatever byte slices the transport delivers (split anywhere,
even inside a UTF-8 sequence or a CRLF pair) and get back the complete
events' data. Handles LF, CR and CRLF line ends, ``data:`` with or without the
space, multi-line data, comments, and ignores ``event:``/``id:``/``retry:``.
``[DONE]`` is returned like any other payload.
"""

from __future__ import annotations

import codecs
import re

_LINE_END = re.compile(r"\r\n|\r|\n")


class SSEDecoder:
    """Decode one SSE stream.

    Raises ``UnicodeDecodeError`` on bytes that are not UTF-8.
    """

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._buffer = ""
        self._data: list[str] = []
        self._started = False

    def feed(self, chunk: bytes) -> list[str]:
        """Feed bytes; return the data of every event they complete."""
        text = self._utf8.decode(chunk)
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        self._buffer += text
        return self._drain(final=False)

    def end(self) -> list[str]:
        """The stream ended: flush a last event that lacked its blank line."""
        self._buffer += self._utf8.decode(b"", final=True)
        out = self._drain(final=True)
        if self._buffer:
            self._line(self._buffer, out)
            self._buffer = ""
        if self._data:
            out.append("\n".join(self._data))
            self._data = []
        return out

    def _drain(self, *, final: bool) -> list[str]:
        out: list[str] = []
        buffer = self._buffer
        pos = 0
        for match in _LINE_END.finditer(buffer):
            # A trailing CR may be the first half of a CRLF still in flight.
            if match.group() == "\r" and match.end() == len(buffer) and not final:
                break
            self._line(buffer[pos:match.start()], out)
            pos = match.end()
        self._buffer = buffer[pos:]
        return out

    def _line(self, line: str, out: list[str]) -> None:
        if not line:
            if self._data:
                out.append("\n".join(self._data))
                self._data = []
            return
        if line.startswith(":"):
            return
        field, _, value = line.partition(":")
        if field == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
