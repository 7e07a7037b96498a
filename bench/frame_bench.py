"""Per-frame cost of a relayed stream on the app side: upstream SSE bytes to client frames, in process.

Run: ``.venv/bin/python bench/frame_bench.py [--script bench-short|bench-text] [--read-bytes N] [--profile]``.

The SSE body ``bench/upstream.py`` sends for the script is handed to a real
:class:`~app.upstreams.http.HttpStream` (over an in-memory response that delivers it in receives of
``--read-bytes``, default the whole body at once, as from a fast upstream), the chunks go through a
:class:`~app.pipeline.driver.ChoiceDriver` and its core, and the events become frames of the Chat and
the Responses encoder, gathered as ``SSEBody`` gathers them. Rows, in CPU microseconds per upstream
frame (``time.thread_time``; the lowest of the rounds' medians, the rows taking turns):

- ``decode``: the stream's chunks only (receive, SSE, JSON, chunk objects);
- ``core``: the same text fed to a bare ``ChoiceStream`` (what the group below does not own);
- ``chat`` / ``responses``: the whole way to the endpoint's frames;
- ``… - core``: the app's own share per frame (decoding, driver, encoder): issue 30's per-frame group.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from app.chat.encoder import ChatEncoder  # noqa: E402
from app.pipeline import driver as driver_module  # noqa: E402
from app.pipeline.driver import ChoiceDriver  # noqa: E402
from app.responses.encoder import ResponsesEncoder, ResponsesWireEncoder  # noqa: E402
from app.upstreams.http import HttpStream  # noqa: E402
from statemachine import ChoiceStream, ParserConfig, ToolSpec  # noqa: E402
import upstream as scripted  # noqa: E402

ROUNDS = 7
WRITE_FILE = ToolSpec("write_file", parameters={"type": "object", "properties": {
    "path": {"type": "string"}, "content": {"type": "string"}}})


class ArrivingResponse:
    """What :class:`HttpStream` reads of a ``BoundedResponse``: a body arriving as ``pieces``, one a receive."""

    read_timeout = 300.0

    def __init__(self, pieces: list[bytes]):
        self._pieces = [piece for piece in pieces if piece] or [b""]
        self._next = 1
        self.unread = len(self._pieces[0])
        self.message_complete = len(self._pieces) == 1

    def get(self, name: str) -> str | None:
        return "text/event-stream" if name == "content-type" else None

    def take(self) -> bytes:
        self.unread = 0
        return self._pieces[self._next - 1]

    def receive(self, timeout: float | None) -> bool:
        self.unread = len(self._pieces[self._next])
        self._next += 1
        self.message_complete = self._next == len(self._pieces)
        return True

    def should_keep_alive(self) -> bool:
        return False

    def release(self) -> None:
        pass


def _body(script: str) -> tuple[bytes, list[str]]:
    pieces = scripted.script(script)["pieces"]
    return b"".join(scripted.stream_frames(pieces)), pieces


def _config() -> ParserConfig:
    return ParserConfig.for_tools([WRITE_FILE])


def _stream(body: bytes, size: int) -> HttpStream:
    pieces = [body[i:i + size] for i in range(0, len(body), size)]
    stream = HttpStream(ArrivingResponse(pieces))  # type: ignore[arg-type]
    stream.pause_every(None)  # as the streaming endpoints ask
    return stream


def decode(body: bytes, size: int) -> Callable[[], Any]:
    def run() -> list[Any]:
        stream = _stream(body, size)
        plain_texts = getattr(stream, "plain_texts", None)
        if plain_texts is not None:  # as the driver asks
            plain_texts()
        return list(stream)
    return run


def core(pieces: list[str]) -> Callable[[], Any]:
    def run() -> None:
        choice = ChoiceStream(_config())
        for piece in pieces:
            choice.feed(piece)
        choice.finish("stop")
    return run


def _relay(driver: ChoiceDriver, frames: Callable[[int, Any], list[bytes]]) -> bytes:
    batch: list[bytes] = []
    for index, item in driver:
        if index is not None:
            batch += frames(index, item)
    return b"".join(batch)


def chat(body: bytes, size: int) -> Callable[[], Any]:
    def run() -> bytes:
        encoder = ChatEncoder("chatcmpl-bench", 1700000000, "bench", include_usage=True)
        return _relay(ChoiceDriver(_stream(body, size), _config()), encoder.frames)
    return run


def responses(body: bytes, size: int) -> Callable[[], Any]:
    def run() -> bytes:
        encoder = ResponsesWireEncoder(ResponsesEncoder("resp_bench", "bench", {}, created_at=1700000000,
                                                        id_factory=lambda prefix: f"{prefix}_bench"))
        encoder.opening({"prompt_tokens": 0, "completion_tokens": 0})
        return _relay(ChoiceDriver(_stream(body, size), _config()), encoder.frames)
    return run


class _Replay:
    """A ``ChoiceStream`` stand-in that answers each feed with the events the real one gave (fresh lists), so a
    row can time the app's share alone."""

    wants_more = True

    def __init__(self, feeds: list[list[Any]], finish: list[Any]):
        self._feeds = iter(feeds)
        self._finish = finish

    def feed(self, text: str) -> list[Any]:
        return list(next(self._feeds))

    def finish(self, reason: str | None) -> list[Any]:
        return list(self._finish)


def app_share(body: bytes, size: int, pieces: list[str], endpoint: Callable[[], Any]) -> Callable[[], Any]:
    """``endpoint``'s row with the core's answers replayed: decoding, driver and encoder alone."""
    choice = ChoiceStream(_config())
    feeds = [choice.feed(piece) for piece in pieces]
    finish = choice.finish("stop")
    real = driver_module.ChoiceStream

    def run() -> Any:
        driver_module.ChoiceStream = lambda config, id_factory: _Replay(feeds, finish)  # type: ignore
        try:
            return endpoint()
        finally:
            driver_module.ChoiceStream = real  # type: ignore[misc]
    return run


def measure(runs: dict[str, Callable[[], Any]], requests: int) -> dict[str, float]:
    """Per run, CPU microseconds per call: the lowest of ``ROUNDS`` rounds' medians, the runs taking turns."""
    clock = time.thread_time
    for run in runs.values():
        for _ in range(50):
            run()
    medians: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(ROUNDS):
        for name, run in runs.items():
            times = []
            for _ in range(requests):
                start = clock()
                run()
                times.append(clock() - start)
            medians[name].append(statistics.median(times) * 1e6)
    return {name: min(values) for name, values in medians.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--script", default="bench-short", choices=("bench-short", "bench-text"))
    parser.add_argument("--read-bytes", type=int, default=1 << 20, help="bytes of the body one receive delivers")
    parser.add_argument("--requests", type=int, default=200, help="calls per round and row")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top entries of the chat row")
    args = parser.parse_args()
    body, pieces = _body(args.script)
    frames = len(pieces) + 3  # role, the pieces, finish, usage ([DONE] not counted)
    runs = {"decode": decode(body, args.read_bytes), "core": core(pieces), "chat": chat(body, args.read_bytes),
            "responses": responses(body, args.read_bytes)}
    runs["chat, core replayed"] = app_share(body, args.read_bytes, pieces, runs["chat"])
    runs["responses, replayed"] = app_share(body, args.read_bytes, pieces, runs["responses"])
    result = {name: us / frames for name, us in measure(runs, args.requests).items()}
    print(f"{args.script}: {frames} frames, {len(body)} bytes, receives of {args.read_bytes} bytes")
    for name in runs:
        print(f"{name:<22}{result[name]:>8.2f} µs/frame")
    for name in ("chat", "responses"):
        print(f"{name + ' - core':<22}{result[name] - result['core']:>8.2f} µs/frame")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(lambda: [runs["chat"]() for _ in range(args.requests)])
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
