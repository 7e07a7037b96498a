"""Client regexes (custom tool grammars, strict schemas' ``pattern``) on RE2, a linear-time engine.

Python's ``re`` backtracks: ``(a+)+$`` against 31 characters takes half a minute. RE2 (``google-re2``,
imported on first use) matches in time linear in the input, and refuses what it cannot do in linear time
(backreferences, lookaround), so a pattern is checked once, when the request comes in (:func:`regex_problem`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

#: Memory one compiled pattern may use (RE2's program and DFA cache; a larger pattern does not compile,
#: a search that fills the DFA cache falls back to RE2's slower, still linear, engine).
MAX_REGEX_MEMORY = 1024 * 1024


class RegexError(ValueError):
    """A pattern RE2 cannot compile; the message says why."""


@lru_cache(maxsize=64)  # at most 64 MiB of compiled patterns per process
def compile_regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (an object with ``search`` and ``fullmatch``; cached).

    Raises:
        RegexError: RE2 cannot compile it (a backreference, lookaround, a repeat over 1000…).
    """
    import re2  # lazy: keeps importing the core cheap

    options = re2.Options()
    options.log_errors = False  # the reason is in the exception; the client's pattern is not the server's log
    options.max_mem = MAX_REGEX_MEMORY
    try:
        return re2.compile(pattern, options=options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "not a valid pattern"
        raise RegexError(reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)) from None
    except UnicodeEncodeError:
        raise RegexError("the pattern holds a lone surrogate") from None


def regex_matches(pattern: str, text: str, *, whole: bool = False) -> bool:
    """Whether RE2 finds ``pattern`` in ``text`` (all of ``text`` when ``whole``). A lone surrogate in
    ``text`` (a ``\\ud800`` escape in the model's JSON: UTF-8 cannot hold it) is matched as ``?``.

    Raises:
        RegexError: see :func:`compile_regex`.
    """
    compiled = compile_regex(pattern)
    match = compiled.fullmatch if whole else compiled.search
    try:
        return match(text) is not None
    except UnicodeEncodeError:
        return match(text.encode("utf-8", "replace").decode()) is not None


def regex_problem(pattern: Any) -> str | None:
    """Why ``pattern`` cannot be used as a client regex, or ``None`` when RE2 compiles it."""
    if not isinstance(pattern, str):
        return "the pattern is not a string"
    try:
        compile_regex(pattern)
    except RegexError as exc:
        return f"RE2 (a linear-time regex engine) cannot use the pattern: {exc}"
    return None
