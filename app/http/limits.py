"""Request limits: body size (413), nesting depth, messages / tools / tool-schema size (400), concurrent streams (429).

The declared body size (:func:`check_declared_size`) and the early-refusal close
(:func:`after_response`) run in the API Blueprint's hooks, so every ``/v1`` route
gets them by construction; the stream slot is taken by :func:`read_body`, once
the body is in. The count
checks need the parsed body: they are part of the validation layer
(:mod:`app.validation`).

Stream cap: every generation (a ``POST`` under ``/v1``, streaming or not —
both hold an upstream stream and a greenlet for their whole length) takes a
slot from a per-worker counter once its body is in (:func:`read_body`: a slow
upload holds no slot) and before any upstream call; over
``max_concurrent_streams`` it gets 429 with ``Retry-After`` instead of
slowing every other stream down. The slot of a streamed response is released
when the WSGI server closes its body (stream finished or client gone); any
other response's at request teardown.

Early refusals: after a response sent before the request body was read (401,
413, …) toolwire reads and drops the rest itself, yielding to other greenlets,
for at most :data:`LINGER_SECONDS` and :data:`LINGER_BODY_LIMITS` body-size
limits, and closes the connection past either (a declared body larger than
that at once); gunicorn would drain any declared body, however large, without
yielding.
"""

from __future__ import annotations

import errno
import socket
from array import array
from itertools import accumulate
from typing import Any, Iterable, Iterator

import gevent
from flask import Request, Response, g, has_request_context, request
from werkzeug.wsgi import get_content_length

from ..errors import ApiError, body_too_large
from .state import Backend, Slot, current_state

#: Seconds a client is asked to wait after a 429 for the stream cap.
RETRY_AFTER_SECONDS = 1
#: After an early refusal, how long and how much (in body-size limits) of the unread rest of the body is read
#: and dropped before the connection is closed instead: enough for an honest client's upload to finish (it
#: then reads the answer, not a reset, and keeps its connection), a bound for a hostile one.
LINGER_SECONDS = 2.0
LINGER_BODY_LIMITS = 4



def check_declared_size(req: Request, limit: int) -> None:
    """Refuse the request ``req`` when its declared body is over ``limit`` bytes (413); a chunked one is
    refused while it is read (Werkzeug raises 413 past ``max_content_length``)."""
    req.max_content_length = limit
    declared = get_content_length(req.environ)  # req.content_length, without EnvironHeaders' lookups
    if declared is not None and declared > limit:
        raise body_too_large(limit)


def _take_stream_slot(method: str, request_globals: Any) -> None:
    """A stream slot for a ``POST`` (a generation), or 429."""
    if method != "POST":
        return
    slot = current_state().streams.try_acquire()
    if slot is None:
        raise ApiError(429, "Too many concurrent requests on this server; retry shortly.", type="rate_limit_error",
                       code="concurrency_limit_exceeded", headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    request_globals.toolwire_slot = slot


def after_response(req: Request, response: Response) -> Response:
    """``response`` to ``req`` as the limits send it: after a response that left a declared body unread,
    the body is finished cooperatively or the connection closed (see the module docstring); a streamed
    response takes the request's slots along (released when its body closes, any other's at teardown)."""
    request_globals = g._get_current_object()  # once: each proxy access resolves it
    environ = req.environ
    client = environ.get("gunicorn.socket")
    if client is not None and not request_globals.get("toolwire_body_read"):
        declared = get_content_length(environ)
        if declared or "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            budget = LINGER_BODY_LIMITS * current_state().settings.max_body_bytes
            if declared and declared > budget:
                budget = 0
            response.response = _then_finish_body(response.response, client, environ["wsgi.input"], budget)
    if response.is_streamed:  # the work happens while the body is sent; a whole body leaves it to teardown
        for key in _SLOT_KEYS:
            slot = request_globals.pop(key, None)
            if slot is not None:
                response.call_on_close(slot.release)
    return response


def _then_finish_body(answer: Iterable[Any], client: socket.socket, body: Any, budget: int) -> Iterator[Any]:
    """``answer``, then the rest of the request ``body`` read and dropped, yielding to other greenlets after every
    read, so the connection stays usable for the client's next request. Past :data:`LINGER_SECONDS` or
    ``budget`` bytes the connection is shut down instead, and the error this raises after the answer went out
    tells gunicorn (which ignores a reset quietly) to close it rather than drain the body itself."""
    yield from answer
    try:
        with gevent.Timeout(LINGER_SECONDS):
            while budget > 0:
                chunk = body.read(65536)
                if not chunk:
                    return
                budget -= len(chunk)
                gevent.sleep(0)
    except (gevent.Timeout, OSError):
        pass
    try:
        client.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    raise ConnectionResetError(errno.ECONNRESET, "the rest of the request body was refused")


def take_backend_slot(backend: Backend) -> None:
    """A slot among the generations in flight to ``backend`` (its ``upstream_max_concurrent``), or 429: a slow
    back end holds its own slots, never the others'."""
    slot = backend.slots.try_acquire()
    if slot is None:
        raise ApiError(429, f"Too many concurrent requests to this model's back end ({backend.name}); retry "
                            "shortly.", type="rate_limit_error", code="concurrency_limit_exceeded",
                       headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    g.toolwire_backend_slot = slot


def hold_backend_slot(slot: Slot) -> None:
    """Keep ``slot`` (a pool member's, taken when the generation chose it) as the request's back-end slot: released
    with the response. A generation outliving its request (a background response) gives it back at once."""
    if not has_request_context():
        slot.release()
        return
    held = g.pop("toolwire_backend_slot", None)
    if held is not None:
        held.release()
    g.toolwire_backend_slot = slot


#: Where a request keeps its slots: the worker's stream slot and its back end's.
_SLOT_KEYS = ("toolwire_slot", "toolwire_backend_slot")


def release_unhanded_slots(exc: BaseException | None) -> None:
    """Teardown: give back the slots a response did not take along (:func:`after_response`)."""
    for key in _SLOT_KEYS:
        slot = g.pop(key, None)
        if slot is not None:
            slot.release()


def read_body() -> bytes:
    """The whole request body (not cached); then, for a ``POST``, a stream slot.

    Raises:
        ApiError: 413 when a body without ``Content-Length`` (chunked) goes
            past ``max_body_bytes``: Werkzeug stops reading at the limit
            without saying the body was longer; 408 when the whole body took longer than
            ``body_timeout_seconds``; 429 when every stream slot is taken.
    """
    req = request._get_current_object()  # type: ignore[attr-defined]  # once: each proxy access resolves it
    try:
        with gevent.Timeout(current_state().settings.body_timeout_seconds or None):
            data = req.get_data(cache=False)
    except gevent.Timeout:
        raise ApiError(408, "The request body did not arrive in time.", code="request_timeout") from None
    limit = req.max_content_length
    if limit is not None and len(data) >= limit and get_content_length(req.environ) is None \
            and req.environ["wsgi.input"].read(1):
        raise body_too_large(limit)
    request_globals = g._get_current_object()
    request_globals.toolwire_body_read = True
    _take_stream_slot(req.method, request_globals)
    return data


#: Deepest nesting a body may have: recursive code downstream (pydantic, the JSON writers, the
#: prompt builder) must never meet anything near Python's recursion limit or orjson's 254 levels.
MAX_JSON_DEPTH = 128


def check_nesting(raw: bytes) -> None:
    """Refuse a body (``raw``, bytes that parsed as JSON) nested deeper than :data:`MAX_JSON_DEPTH`.

    Linear in the body (at most ``MAX_JSON_DEPTH`` C-speed passes over its brackets) and bounded in memory (a
    few copies of the bytes, never an object per value): 16 MiB of ``[],`` would otherwise cost seconds and a
    gigabyte.

    Raises:
        ApiError: 400 ``invalid_json``.
    """
    # Nesting needs an opening bracket per level, so a body with few brackets (most bodies: counting
    # is C-fast) needs no scan at all.
    if raw.count(b"{") + raw.count(b"[") > MAX_JSON_DEPTH and nests_deeper(raw, MAX_JSON_DEPTH):
        raise ApiError(400, f"The request body nests deeper than {MAX_JSON_DEPTH} levels.", code="invalid_json")


#: Most arrays and objects a body may hold, and most values in all: the body is parsed by one C call the
#: event loop cannot interrupt, and every container is an object the garbage collector walks again and
#: again while the parse goes on (16 MiB of ``[],``: 5.6 million lists, seconds of a stalled worker; 100,000
#: take well under a tenth of a second). A real request holds a few thousand.
MAX_JSON_CONTAINERS = 100_000
MAX_JSON_VALUES = 1_000_000


def check_breadth(raw: bytes) -> None:
    """Refuse a body (``raw``, not parsed yet) holding more than :data:`MAX_JSON_CONTAINERS` arrays and
    objects or :data:`MAX_JSON_VALUES` values, before it is parsed.

    Brackets and commas are counted at C speed; only a body with more of them than the limits (inside
    strings too) is counted again without its strings, so a real body costs two ``bytes.count`` passes.

    Raises:
        ApiError: 400 ``invalid_json``.
    """
    containers, values = _containers_and_values(raw)
    if containers <= MAX_JSON_CONTAINERS and values <= MAX_JSON_VALUES:
        return
    containers, values = 0, 1
    for part in _outside_strings(raw):
        more, commas = _containers_and_values(part)
        containers, values = containers + more, values + commas - 1
        if containers > MAX_JSON_CONTAINERS or values > MAX_JSON_VALUES:
            break
    if containers > MAX_JSON_CONTAINERS:
        raise ApiError(400, f"The request body holds more than {MAX_JSON_CONTAINERS} arrays and objects.",
                       code="invalid_json")
    if values > MAX_JSON_VALUES:
        raise ApiError(400, f"The request body holds more than {MAX_JSON_VALUES} values.", code="invalid_json")


def _containers_and_values(raw: bytes) -> tuple[int, int]:
    containers = raw.count(b"[") + raw.count(b"{")
    return containers, containers + raw.count(b",") + 1


#: How much of a body is read for its strings at once. Stripping the strings with one ``re.sub`` over the
#: whole body held every piece between two of them as an object until it joined them (15 MB of ``"",``: five
#: million pieces, 894 MB); a window's pieces are a window's worth.
_WINDOW = 1 << 16


def _outside_strings(raw: bytes) -> Iterator[bytes]:
    """What of JSON ``raw`` stands outside its strings, a window at a time.

    Escaped backslashes and quotes are blanked first, so every quote left opens or closes a string and the
    text between quotes alternates: outside, inside, outside… A window never ends inside a run of
    backslashes or right after one (the escaped character stays with it).
    """
    inside, pos = 0, 0
    while pos < len(raw):
        end = pos + _WINDOW
        while end < len(raw) and raw[end - 1] == 0x5C:  # a backslash: take what it escapes too
            end += 1
        pieces = raw[pos:end].replace(b"\\\\", b"__").replace(b'\\"', b"__").split(b'"')
        yield b"".join(pieces[inside::2])
        inside = (inside + len(pieces) - 1) % 2
        pos = end


#: Every bracket as ``[`` or ``]`` (depth does not care which kind), everything else deleted.
_AS_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
#: ``[`` and ``]`` as signed steps, +1 and -1.
_AS_STEPS = bytes.maketrans(b"[]", b"\x01\xff")


def nests_deeper(raw: bytes, limit: int) -> bool:
    """Whether the containers of valid JSON ``raw`` nest more than ``limit`` levels deep.

    Only the brackets outside strings count. Peeling the empty containers (``[]``) off, one level a pass, is
    C-fast while a pass removes much (wide, shallow bodies); once one removes less than half, the rest is
    measured in one pass instead (the highest running sum of its signed steps), so every body costs a few
    passes over its bytes and a few copies of them.
    """
    brackets = b"".join(part.translate(_AS_BRACKETS, _NOT_BRACKETS) for part in _outside_strings(raw))
    peeled = 0
    while brackets and peeled <= limit:
        inner = brackets.replace(b"[]", b"")
        peeled += 1
        if len(inner) * 2 > len(brackets):
            return peeled + max(accumulate(array("b", inner.translate(_AS_STEPS))), default=0) > limit
        brackets = inner
    return peeled > limit
