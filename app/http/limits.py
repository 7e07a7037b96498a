"""Request limits: body size (413), nesting depth, messages / tools / tool-schema size (400), concurrent streams (429).

The body-size and stream-cap checks run as Blueprint hooks (see
:func:`install`), so every ``/v1`` route gets them by construction. The
count checks need the parsed body: views call :func:`check_chat_limits` or
:func:`check_responses_limits` on the JSON object before validating it.

Stream cap: every generation (a ``POST`` under ``/v1``, streaming or not —
both hold an upstream stream and a greenlet for their whole length) takes a
slot from a per-worker counter before any upstream call; over
``max_concurrent_streams`` it gets 429 with ``Retry-After`` instead of
slowing every other stream down. The slot of a streamed response is released
when the WSGI server closes its body (stream finished or client gone); any
other response's at request teardown.
"""

from __future__ import annotations

import threading
from typing import Any

import orjson
from flask import Blueprint, Response, g, request

from .errors import ApiError, body_too_large
from ..state import current_state

#: Seconds a client is asked to wait after a 429 for the stream cap.
RETRY_AFTER_SECONDS = 1


class StreamSlots:
    """A per-worker count of generations in flight, with a cap (0 = none).

    Safe under gevent and threads: the check and the increment happen under
    one lock (gevent-patched in the worker).
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.in_use = 0
        self._lock = threading.Lock()

    def try_acquire(self) -> "Slot | None":
        """A :class:`Slot`, or ``None`` when all are taken."""
        with self._lock:
            if self.limit and self.in_use >= self.limit:
                return None
            self.in_use += 1
        return Slot(self)

    def _release(self) -> None:
        with self._lock:
            self.in_use -= 1


class Slot:
    """One taken place in :class:`StreamSlots`; :meth:`release` is idempotent."""

    __slots__ = ("_slots", "_held")

    def __init__(self, slots: StreamSlots):
        self._slots = slots
        self._held = True

    def release(self) -> None:
        """Give the place back (once; later calls do nothing)."""
        if self._held:
            self._held = False
            self._slots._release()


def install(bp: Blueprint) -> None:
    """Add the body-size limit and the stream cap to ``bp`` (after auth, so a refused client takes no slot)."""
    bp.before_request(_admit)
    bp.after_request(_hand_slot_to_response)
    bp.teardown_request(_release_unhanded_slot)


def _admit() -> None:
    """The body-size limit, then (for a ``POST``) a stream slot."""
    state = current_state()
    limit = state.settings.max_body_bytes
    request.max_content_length = limit  # chunked bodies: Werkzeug raises 413 while reading
    if request.content_length is not None and request.content_length > limit:
        raise body_too_large(limit)
    if request.method != "POST":
        return
    slot = state.streams.try_acquire()
    if slot is None:
        raise ApiError(429, "Too many concurrent requests on this server; retry shortly.", type="rate_limit_error",
                       code="concurrency_limit_exceeded", headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    g.toolwire_slot = slot


def _hand_slot_to_response(response: Response) -> Response:
    if response.is_streamed:  # the work happens while the body is sent; a whole body leaves it to teardown
        slot = g.pop("toolwire_slot", None)
        if slot is not None:
            response.call_on_close(slot.release)
    return response


def _release_unhanded_slot(exc: BaseException | None) -> None:
    slot = g.pop("toolwire_slot", None)
    if slot is not None:
        slot.release()


def read_body() -> bytes:
    """The whole request body (not cached).

    Raises:
        ApiError: 413 when a body without ``Content-Length`` (chunked) goes
            past ``max_body_bytes``: Werkzeug stops reading at the limit
            without saying the body was longer.
    """
    data = request.get_data(cache=False)
    limit = request.max_content_length
    if request.content_length is None and limit is not None and len(data) >= limit \
            and request.environ["wsgi.input"].read(1):
        raise body_too_large(limit)
    return data


# count limits on the parsed body ------------------------------------------------------------

def check_chat_limits(body: dict[str, Any]) -> None:
    """Enforce ``max_messages``, ``max_tools`` and ``max_tool_schema_bytes`` on a Chat body.

    Raises:
        ApiError: 400 naming the offending ``param`` (``messages``, ``tools``,
            ``tools[3].function.parameters``, ``functions[0].parameters``).
    """
    settings = current_state().settings
    _check_length(body.get("messages"), "messages", settings.max_messages)
    for key, path in (("tools", "function.parameters"), ("functions", "parameters")):
        _check_tools(body.get(key), key, path, settings.max_tools, settings.max_tool_schema_bytes)


def check_responses_limits(body: dict[str, Any]) -> None:
    """The same limits on a Responses body: ``input`` items, ``tools``, ``tools[i].parameters``, a custom
    tool's ``tools[i].format`` (its grammar), and the same inside a namespace (``tools[i].tools[j]…``).

    Raises:
        ApiError: 400 naming the offending ``param``.
    """
    settings = current_state().settings
    _check_length(body.get("input"), "input", settings.max_messages)
    tools = body.get("tools")
    groups = [("tools", tools)]
    if isinstance(tools, list):
        groups += [(f"tools[{i}].tools", t.get("tools")) for i, t in enumerate(tools)
                   if isinstance(t, dict) and t.get("type") == "namespace"]
    for param, group in groups:
        _check_tools(group, param, "parameters", settings.max_tools, settings.max_tool_schema_bytes)
        _check_tools(group, param, "format", 0, settings.max_tool_schema_bytes)


def _check_length(items: Any, param: str, limit: int) -> None:
    if limit and isinstance(items, list) and len(items) > limit:
        raise ApiError(400, f"Invalid '{param}': array too long. Expected an array with maximum length {limit}, "
                            f"but got an array with length {len(items)} instead.",
                       param=param, code="array_above_max_length")


def _check_tools(tools: Any, param: str, schema_path: str, max_tools: int, max_schema: int) -> None:
    _check_length(tools, param, max_tools)
    if not max_schema or not isinstance(tools, list):
        return
    for i, tool in enumerate(tools):
        schema = _dig(tool, schema_path)
        if schema is None:
            continue
        size = len(orjson.dumps(schema))
        if size > max_schema:
            raise ApiError(400, f"Invalid '{param}[{i}].{schema_path}': the schema is {size} bytes of JSON; "
                                f"the limit is {max_schema}.",
                           param=f"{param}[{i}].{schema_path}", code="tool_schema_too_large")


def _dig(value: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


#: Deepest nesting a body may have: recursive code downstream (pydantic, the JSON writers, the
#: prompt builder) must never meet anything near Python's recursion limit or orjson's 254 levels.
MAX_JSON_DEPTH = 128


def check_nesting(raw: bytes, body: dict[str, Any]) -> None:
    """Refuse a parsed body (``raw`` its bytes) nested deeper than :data:`MAX_JSON_DEPTH`.

    Raises:
        ApiError: 400 ``invalid_json``.
    """
    # Nesting needs an opening bracket per level, so a body with few brackets (most bodies: counting
    # is C-fast) skips the walk, which costs tens of µs per request before the upstream call.
    if raw.count(b"{") + raw.count(b"[") > MAX_JSON_DEPTH and _nests_deeper(body, MAX_JSON_DEPTH):
        raise ApiError(400, f"The request body nests deeper than {MAX_JSON_DEPTH} levels.", code="invalid_json")


def _nests_deeper(value: dict[str, Any], limit: int) -> bool:
    """Whether ``value`` has containers nested more than ``limit`` levels (iteratively: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False
