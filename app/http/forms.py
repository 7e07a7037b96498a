"""The fields of a multipart form a relayed request is routed by (its ``model``, ``stream``): read and replaced in
the form's bytes without parsing the rest, so an uploaded file goes on as it came."""

from __future__ import annotations

import re

from werkzeug.http import parse_options_header


def form_boundary(content_type: str) -> bytes | None:
    """The boundary of a ``multipart/form-data`` body of ``content_type``; ``None`` for any other body."""
    kind, options = parse_options_header(content_type)
    boundary = options.get("boundary")
    return boundary.encode("latin-1") if kind == "multipart/form-data" and boundary else None


def form_field(raw: bytes, boundary: bytes, name: str) -> str | None:
    """The text of the form's field ``name`` (the first, if repeated), or ``None``."""
    span = _field_span(raw, boundary, name)
    return None if span is None else raw[span[0]:span[1]].decode("utf-8", "replace")


def with_form_field(raw: bytes, boundary: bytes, name: str, value: str) -> bytes:
    """The form with its field ``name`` holding ``value`` (unchanged when it has no such field)."""
    span = _field_span(raw, boundary, name)
    return raw if span is None else raw[:span[0]] + value.encode() + raw[span[1]:]


def _field_span(raw: bytes, boundary: bytes, name: str) -> tuple[int, int] | None:
    """Where the value of the form's field ``name`` is in ``raw``: its parts are read by their heads only."""
    delimiter = b"\r\n--" + boundary
    wanted = re.compile(rb'(?im)^content-disposition:\s*form-data\s*;(?:[^\r\n]*;)?\s*name="' + re.escape(name.encode())
                        + rb'"\s*(?:;|$)')
    pos = raw.find(b"--" + boundary)
    while pos != -1:
        head = raw.find(b"\r\n", pos) + 2
        end = raw.find(b"\r\n\r\n", head)
        following = raw.find(delimiter, end) if end != -1 else -1
        if following == -1:
            return None
        if wanted.search(raw, head, end + 2):
            return end + 4, following
        pos = following + 2
    return None
