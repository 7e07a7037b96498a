"""A back end's own prompt template and tokenizer, for exact token counts.

llama.cpp's ``llama-server`` renders a Chat request with its model's template (``POST /apply-template``) and
tokenizes the text (``POST /tokenize``); vLLM tokenizes a Chat request at once (``POST /tokenize`` with
``messages``). Both live at the server's root, beside its ``/v1`` API. :func:`count_prompt_tokens` asks them in
turn (:func:`count_usage` also counts a completion's text), within a time bound, and raises
:class:`TokenizerUnavailable` when neither answers (a server that has neither is not asked again for
:data:`UNSUPPORTED_SECONDS`): the caller falls back to its estimate.
"""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

import gevent
import orjson
from geventhttpclient.response import HTTPParseError

from .http import HttpUpstream
from .transport import BufferLimitExceeded, UpstreamConnection

__all__ = ["TokenizerUnavailable", "count_prompt_tokens", "count_usage", "may_count"]

#: The longest the two round trips of a count may take, seconds.
TIMEOUT_SECONDS = 2.0
#: How long a server found without either way is not asked again, seconds.
UNSUPPORTED_SECONDS = 600.0
#: The largest tokenizer answer read (the token list of a long prompt).
_MAX_ANSWER_BYTES = 32 * 1024 * 1024
_Count = TypeVar("_Count")
_JSON = {"Accept": "application/json", "Content-Type": "application/json"}


class TokenizerUnavailable(Exception):
    """The back end could not count: ``reason`` is a metric label (``unsupported``, ``timeout``, ``error``)."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(detail or reason)
        self.reason = reason


def count_prompt_tokens(upstream: object, body: dict[str, Any], timeout: float = TIMEOUT_SECONDS) -> int:
    """The tokens the prompt of the Chat request ``body`` (``model``, ``messages``, ``tools``…) takes for the back
    end ``upstream``, by its own template and tokenizer.

    Raises:
        TokenizerUnavailable: the back end is not an HTTP one, offers neither way, failed or took longer than
            ``timeout`` seconds.
    """
    return _counted(upstream, timeout, lambda connection: _prompt_tokens(connection, body))


def count_usage(upstream: object, body: dict[str, Any], completion: str,
                timeout: float = TIMEOUT_SECONDS) -> tuple[int, int]:
    """The prompt tokens of the Chat request ``body`` and the tokens of the ``completion`` text the back end made
    for it, both by ``upstream``'s own tokenizer within ``timeout`` seconds.

    Raises:
        TokenizerUnavailable: as :func:`count_prompt_tokens`.
    """
    def count(connection: UpstreamConnection) -> tuple[int, int]:
        return _prompt_tokens(connection, body), _text_tokens(connection, str(body.get("model", "")), completion)
    return _counted(upstream, timeout, count)


def may_count(upstream: object) -> bool:
    """Whether ``upstream`` may have a tokenizer: an HTTP back end not found without one lately."""
    return isinstance(upstream, HttpUpstream) and _UNSUPPORTED.get(upstream.base_url, 0.0) <= time.monotonic()


class _NoTokenizer(Exception):
    """The back end answered neither way of counting (``status``: its last answer)."""

    def __init__(self, status: int):
        super().__init__(f"the back end answered {status} to its tokenizer's routes")


def _counted(upstream: object, timeout: float, count: Callable[[UpstreamConnection], _Count]) -> _Count:
    """``count`` on ``upstream``'s connections within ``timeout`` seconds, its failures as TokenizerUnavailable."""
    if not isinstance(upstream, HttpUpstream):
        raise TokenizerUnavailable("unsupported", "the back end is not an HTTP server")
    if not may_count(upstream):
        raise TokenizerUnavailable("unsupported", "the back end offered no tokenizer lately")
    try:
        with gevent.Timeout(timeout):
            return count(upstream.connection)
    except gevent.Timeout:
        raise TokenizerUnavailable("timeout", f"no count within {timeout:g} s") from None
    except (OSError, HTTPParseError, BufferLimitExceeded) as exc:
        raise TokenizerUnavailable("error", str(exc)) from None
    except (_NoTokenizer, orjson.JSONDecodeError) as exc:  # (a 200 that is not JSON: not a tokenizer either)
        _UNSUPPORTED[upstream.base_url] = time.monotonic() + UNSUPPORTED_SECONDS
        raise TokenizerUnavailable("unsupported", str(exc)) from None


def _prompt_tokens(connection: UpstreamConnection, body: dict[str, Any]) -> int:
    """llama-server's template then tokenizer over ``body``, else vLLM's tokenizer of the Chat request itself."""
    status, answer = _post(connection, "/apply-template", body)
    if status == 200 and isinstance(answer.get("prompt"), str):
        status, answer = _post(connection, "/tokenize", {"content": answer["prompt"], "add_special": True,
                                                         "parse_special": True})
        if status == 200 and isinstance(answer.get("tokens"), list):
            return len(answer["tokens"])
    status, answer = _post(connection, "/tokenize", body)  # vLLM's: the Chat request itself
    if status == 200 and isinstance(answer.get("count"), int):
        return int(answer["count"])
    raise _NoTokenizer(status)


def _text_tokens(connection: UpstreamConnection, model: str, text: str) -> int:
    """The tokens of ``text`` alone (no special tokens added): llama-server's ``/tokenize``, else vLLM's."""
    if not text:
        return 0
    status, answer = _post(connection, "/tokenize", {"content": text, "add_special": False, "parse_special": True})
    if status == 200 and isinstance(answer.get("tokens"), list):
        return len(answer["tokens"])
    status, answer = _post(connection, "/tokenize", {"model": model, "prompt": text, "add_special_tokens": False})
    if status == 200 and isinstance(answer.get("count"), int):
        return int(answer["count"])
    raise _NoTokenizer(status)


def _post(connection: UpstreamConnection, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST ``body`` to ``path`` at the root of the back end's server (on its own connections and key)."""
    response = connection.request("POST", path, body, headers=_JSON, max_buffer=_MAX_ANSWER_BYTES, at_root=True)
    content = response.read_body()
    if response.status_code != 200:
        return response.status_code, {}
    answer = orjson.loads(content)
    return 200, answer if isinstance(answer, dict) else {}


_UNSUPPORTED: dict[str, float] = {}  # base URL -> until when it is not asked
