"""What an open stream holds while it waits for its back end (issue 30: RSS per open stream).

Each generator between the server's write loop and the socket read is a frame and ~400 bytes of C stack that
the stream's greenlet keeps (gevent copies its suspended stack to the heap) through every wait: an open stream
waits for the back end in the SSE body's own frame, which the server's loop iterates directly.
"""

from __future__ import annotations

import gevent
import orjson
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
