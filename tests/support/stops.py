"""The bounds on a request's stop sequences (at most 4, of at most 256 characters each), checked alike on each
API that takes them: a list past them is refused and never reaches the back end; the largest allowed list is
sent on as it is."""

from __future__ import annotations

from typing import Any, Callable

from .fakes import FakeUpstream, text_chunks

#: Stop lists past the bounds: the list, where in the parameter the error points, the error message's words.
BEYOND = [
    (["a", "b", "c", "d", "e"], "", "at most 4 stop sequences"),
    ([f"s{i:07}" for i in range(100_000)], "", "at most 4 stop sequences"),
    (["ok", "x" * 257], "[1]", "at most 256 characters"),
    (["x" * 1000], "[0]", "at most 256 characters"),
]
BEYOND_IDS = ["five", "100k", "long", "1000-chars"]
#: The largest list allowed.
LARGEST = ["a", "b", "c", "x" * 256]

#: ``send(client, stops)``: a request of one API with ``stops`` as its stop parameter.
Send = Callable[[Any, Any], Any]


def refused_unsent(make_app: Callable[..., Any], send: Send, stops: Any) -> Any:
    """The answer to a request with ``stops``, having checked that nothing reached the back end."""
    upstream = FakeUpstream(text_chunks("never"))
    response = send(make_app(upstream).test_client(), stops)
    assert upstream.bodies == []
    return response


def sent_on(make_app: Callable[..., Any], send: Send, key: str) -> None:
    """The largest allowed list goes to the back end as it is (as ``stop``), and the request succeeds."""
    upstream = FakeUpstream(text_chunks("Hello."))
    assert send(make_app(upstream).test_client(), LARGEST).status_code == 200
    assert upstream.bodies[0][key] == LARGEST
