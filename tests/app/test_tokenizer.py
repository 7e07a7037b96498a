"""The back end's tokenizer for exact counts (:mod:`app.upstreams.tokenizer`): bounded in time, and remembered
when a server has none."""

from __future__ import annotations

import socket
import time

import pytest

from app.upstreams.http import HttpUpstream
from app.upstreams.tokenizer import TokenizerUnavailable, count_prompt_tokens

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_a_silent_server_is_given_up_within_the_bound() -> None:
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        upstream = HttpUpstream(f"http://127.0.0.1:{silent.getsockname()[1]}/v1")
        started = time.monotonic()
        with pytest.raises(TokenizerUnavailable) as caught:
            count_prompt_tokens(upstream, BODY, timeout=0.3)
        assert caught.value.reason == "timeout" and time.monotonic() - started < 2.0


def test_a_refused_connection_is_an_error_not_a_count() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(TokenizerUnavailable) as caught:
        count_prompt_tokens(HttpUpstream(f"http://127.0.0.1:{port}/v1"), BODY, timeout=2.0)
    assert caught.value.reason == "error"


def test_a_back_end_that_is_not_an_http_server_has_no_tokenizer() -> None:
    with pytest.raises(TokenizerUnavailable) as caught:
        count_prompt_tokens(object(), BODY)
    assert caught.value.reason == "unsupported"
