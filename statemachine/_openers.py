"""Where a call opener interrupts a body being read (case 14)."""

from __future__ import annotations


def opener_at(buf: str, i: int, openers: tuple[str, ...]) -> str | None:
    """``"opener"`` if one of ``openers`` starts at ``buf[i]``, ``"partial"`` if ``buf[i:]``
    is a proper prefix of one (the chunk ended inside it), else ``None``."""
    for opener in openers:
        if buf.startswith(opener, i):
            return "opener"
    if len(buf) - i < max(map(len, openers), default=0):
        tail = buf[i:]
        if any(opener.startswith(tail) for opener in openers):
            return "partial"
    return None
