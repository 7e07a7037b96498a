"""What an open stream holds while it waits for its back end (issue 30: RSS per open stream).

Each generator between the server's write loop and the socket read is a frame and ~400 bytes of C stack that
the stream's greenlet keeps (gevent copies its suspended stack to the heap) through every wait: an open stream
waits for the back end in the SSE body's own frame, which the server's loop iterates directly.

Each greenlet also has its own Python data stack (CPython 3.11+ keeps frames there), a 16 KiB mapping whose
pages stay resident once the request's deepest call touched them: a request that goes one byte past 4 KiB
costs each open stream another 4 KiB page (docs/upstream-client.md).
"""

from __future__ import annotations

import mmap
import sys
from types import CodeType

import gevent
import orjson
import pytest
from werkzeug.test import EnvironBuilder

from app.upstreams.http import HttpUpstream
from support.fakes import chunk, sse
from support.loopback import sse_answer

BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Write a.txt."}]}


def frames_of(greenlet: gevent.Greenlet) -> list[str]:
    """The names of a suspended greenlet's frames, innermost first."""
    names, frame = [], greenlet.gr_frame
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return names


def test_an_open_stream_waits_for_its_back_end_in_the_body_s_own_frame(make_app, serve) -> None:
    upstream: HttpUpstream = serve(lambda seen: sse_answer(sse(chunk("Hello")), then="hang", hang_seconds=2.0))
    app = make_app(upstream)
    environ = EnvironBuilder(path="/v1/chat/completions", method="POST", data=orjson.dumps(BODY),
                             content_type="application/json").get_environ()
    result = app(environ, lambda status, headers, exc_info=None: None)

    def serve_body() -> None:  # as a WSGI server's write loop does
        for _ in result:
            pass

    server = gevent.spawn(serve_body)
    try:
        gevent.sleep(0.3)  # the first frame went out; the stream waits for the back end's next bytes
        assert not server.dead
        stack = frames_of(server)
        assert stack[stack.index("receive") + 1:stack.index("serve_body")] == ["wait", "_relay"]
    finally:
        server.kill()
        result.close()


#: CPython's frame on the data stack (3.11+): 9 words of header, then its locals, cells, free variables and
#: value stack (``co_framesize``, which Python does not show).
FRAME_HEADER_WORDS = 9
#: The data stack's chunk header (the previous chunk, the size, the top) before the first frame.
CHUNK_HEADER_BYTES = 3 * 8
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # a generator's or coroutine's frame lives in its object, not the stack

TOOLS = [{"type": "function", "function": {"name": "write_file", "description": "Write a file.", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}]
ENDPOINTS = {
    "chat": ("/v1/chat/completions", {**BODY, "tools": TOOLS}),
    "responses": ("/v1/responses", {"model": "m", "stream": True, "input": "Write a.txt.",
                                    "tools": [{"type": "function", **TOOLS[0]["function"]}]}),
    "messages": ("/v1/messages", {"model": "m", "stream": True, "max_tokens": 100, "messages": BODY["messages"],
                                  "tools": [{"name": "write_file", "description": "Write a file.",
                                             "input_schema": TOOLS[0]["function"]["parameters"]}]}),
    "ollama": ("/api/chat", {"model": "m", "messages": BODY["messages"], "tools": TOOLS}),  # streams by default
}
CALL = '<tool_call>{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}</tool_call>'


def frame_bytes(code: CodeType) -> int:
    """The bytes a running function's frame takes on the data stack."""
    slots = code.co_nlocals + len(code.co_cellvars) + len(code.co_freevars) + code.co_stacksize
    return (slots + FRAME_HEADER_WORDS) * 8


def gunicorn_handler_bytes() -> int:
    """The frames a gunicorn gevent worker's connection greenlet holds below the WSGI app it calls."""
    from gevent import baseserver
    from gunicorn.workers import base_async, ggevent

    return sum(frame_bytes(function.__code__) for function in (
        baseserver._handle_and_close_when_done, ggevent.GeventWorker.handle, base_async.AsyncWorker.handle,
        ggevent.GeventWorker.handle_request, base_async.AsyncWorker.handle_request))


def deepest_stack(app, path: str, body: dict) -> tuple[int, list[str]]:
    """A request served in its own greenlet, as a gunicorn worker serves it (the app called, then its body
    iterated to the end): the most bytes its frames took on the data stack at once, and those frames."""
    deepest: list = [0, []]
    environ = EnvironBuilder(path=path, method="POST", data=orjson.dumps(body),
                             content_type="application/json").get_environ()

    def serve() -> None:
        result = app(environ, lambda status, headers, exc_info=None: None)
        try:
            for _ in result:
                pass
        finally:
            result.close()

    def on_call(frame, event: str, arg) -> None:
        if event != "call" or gevent.getcurrent() is not server:
            return
        total, names = 0, []
        while frame is not None and frame.f_code is not serve.__code__:
            if not frame.f_code.co_flags & _GENERATOR_FLAGS:
                total += frame_bytes(frame.f_code)
                names.append(f"{frame_bytes(frame.f_code):5} {frame.f_code.co_filename.rsplit('/', 2)[-2:]} "
                             f"{frame.f_code.co_name}")
            frame = frame.f_back
        if total > deepest[0]:
            deepest[:] = [total, names]

    server = gevent.Greenlet(serve)
    sys.setprofile(on_call)
    try:
        server.start()
        server.get(timeout=10)
    finally:
        sys.setprofile(None)
    return deepest[0], deepest[1]


@pytest.mark.parametrize("endpoint, host", [(endpoint, "127.0.0.1") for endpoint in ENDPOINTS] + [("chat", "localhost")])
def test_a_request_s_deepest_python_stack_fits_one_page_of_its_greenlet_s_data_stack(make_app, serve, endpoint: str,
                                                                                       host: str) -> None:
    # the back end is a real loopback socket and the request takes a new connection: connecting is the deepest
    # point of a request (a pooled connection skips it), then the wait for the answer's head; a back end named by
    # its host name is looked up first
    answer = sse(chunk("I will write it. "), chunk(CALL), chunk(finish="stop"), b"[DONE]")
    server = serve(lambda seen: sse_answer(answer)).server
    upstream = HttpUpstream(server.url.replace("127.0.0.1", host))
    app = make_app(upstream)
    path, body = ENDPOINTS[endpoint]
    deepest_stack(app, path, body)  # the first request's one-time work (the tools' prompt block, the pool)
    upstream.connection.pool.close()  # its idle connection: the next request connects
    upstream.connection._pool = None
    depth, frames = deepest_stack(app, path, body)
    upstream.close()
    used = CHUNK_HEADER_BYTES + gunicorn_handler_bytes() + depth
    # (and the one GET /models: constrain_calls, and the first answer's look for a tokenizer to count its usage)
    assert [seen.path for seen in server.seen if seen.method == "POST"].count("/v1/chat/completions") == 2
    assert used <= mmap.PAGESIZE, (f"{used} bytes: one more page per open stream; deepest frames:\n"
                                   + "\n".join(frames))
