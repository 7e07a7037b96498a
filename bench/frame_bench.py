"""Per-frame cost of a relayed stream on the app side: upstream SSE bytes to client frames, in process.

Run: ``.venv/bin/python bench/frame_bench.py [--script bench-short|bench-text] [--read-bytes N] [--against REV]
[--profile]``.

The SSE body ``bench/upstream.py`` sends for the script is handed to a real
:class:`~app.upstreams.http.HttpStream` (over an in-memory response that delivers it in receives of
``--read-bytes``, default the whole body at once, as from a fast upstream), the chunks go through a
:class:`~app.pipeline.driver.ChoiceDriver` and its core, and the events become frames of the Chat and
the Responses encoder, gathered as ``SSEBody`` gathers them. Rows, in CPU microseconds per upstream
frame (``time.thread_time``; the lowest of the rounds' medians, the rows taking turns):

- ``decode``: the stream's chunks only (receive, SSE, JSON, chunk objects);
- ``core``: the same text fed to a bare ``ChoiceStream``;
- ``chat`` / ``responses``: the whole way to the endpoint's frames;
- ``…, core replayed``: the same with the core's answers replayed (a stand-in returns the events the real
  choice gave): the app's own share per frame (decoding, driver, encoder), issue 30's per-frame group.

``--against REV`` also loads the group's modules (the SSE decoder, ``HttpStream``, the driver, both
encoders) as they are at git revision ``REV`` (from ``git show``, imported beside this tree's under other
names) and times their rows too, the two taking turns in one process: a change's before and after in one
run, far steadier on a shared machine than two runs.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from app.chat import encoder as chat_module  # noqa: E402
from app.pipeline import driver as driver_module  # noqa: E402
from app.responses import encoder as responses_module  # noqa: E402
from app.upstreams import http as http_module  # noqa: E402
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


@dataclass(frozen=True)
class Group:
    """The modules of the per-frame path, as one tree or revision has them."""

    label: str
    http: ModuleType
    driver: ModuleType
    chat: ModuleType
    responses: ModuleType


THIS = Group("", http_module, driver_module, chat_module, responses_module)
#: The group's modules by name, each path's package (for its relative imports) and the name it is loaded as.
_GROUP_FILES = {"sse": "app/upstreams/sse.py", "http": "app/upstreams/http.py", "driver": "app/pipeline/driver.py",
                "chat": "app/chat/encoder.py", "responses": "app/responses/encoder.py"}


def group_at(rev: str, into: Path) -> Group:
    """The group's modules as they are at git revision ``rev``, imported beside this tree's.

    Each is loaded under another name in its own package (so its relative imports find this tree's other
    modules), and the revision's ``HttpStream`` is given the revision's SSE decoder.
    """
    modules: dict[str, ModuleType] = {}
    for name, path in _GROUP_FILES.items():
        source = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout
        file = into / f"{name}_at_rev.py"
        file.write_text(source)
        package = path.rsplit("/", 1)[0].replace("/", ".")
        spec = importlib.util.spec_from_file_location(f"{package}.{name}_at_rev", file)
        assert spec is not None and spec.loader is not None
        module = modules[name] = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    modules["http"].SSEDecoder = modules["sse"].SSEDecoder  # type: ignore[attr-defined]
    return Group(f" @{rev}", modules["http"], modules["driver"], modules["chat"], modules["responses"])


def _body(script: str) -> tuple[bytes, list[str]]:
    pieces = scripted.script(script)["pieces"]
    return b"".join(scripted.stream_frames(pieces)), pieces


def _config() -> ParserConfig:
    return ParserConfig.for_tools([WRITE_FILE])


def _stream(group: Group, body: bytes, size: int) -> Any:
    pieces = [body[i:i + size] for i in range(0, len(body), size)]
    stream = group.http.HttpStream(ArrivingResponse(pieces))
    stream.pause_every(None)  # as the streaming endpoints ask
    return stream


def decode(group: Group, body: bytes, size: int) -> Callable[[], Any]:
    def run() -> list[Any]:
        stream = _stream(group, body, size)
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


def _relay(driver: Any, frames: Callable[[int, Any], list[bytes]]) -> bytes:
    batch: list[bytes] = []
    for index, item in driver:
        if index is not None:
            batch += frames(index, item)
    return b"".join(batch)


def chat(group: Group, body: bytes, size: int) -> Callable[[], Any]:
    def run() -> bytes:
        encoder = group.chat.ChatEncoder("chatcmpl-bench", 1700000000, "bench", include_usage=True)
        return _relay(group.driver.ChoiceDriver(_stream(group, body, size), _config()), encoder.frames)
    return run


def responses(group: Group, body: bytes, size: int) -> Callable[[], Any]:
    def run() -> bytes:
        encoder = group.responses.ResponsesWireEncoder(group.responses.ResponsesEncoder(
            "resp_bench", "bench", {}, created_at=1700000000, id_factory=lambda prefix: f"{prefix}_bench"))
        encoder.opening({"prompt_tokens": 0, "completion_tokens": 0})
        return _relay(group.driver.ChoiceDriver(_stream(group, body, size), _config()), encoder.frames)
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


def replayed(group: Group, pieces: list[str], endpoint: Callable[[], Any]) -> Callable[[], Any]:
    """``endpoint``'s row with the core's answers replayed: decoding, driver and encoder alone."""
    choice = ChoiceStream(_config())
    feeds = [choice.feed(piece) for piece in pieces]
    finish = choice.finish("stop")
    module = group.driver

    def run() -> Any:
        module.ChoiceStream = lambda config, id_factory: _Replay(feeds, finish)
        try:
            return endpoint()
        finally:
            module.ChoiceStream = ChoiceStream
    return run


def rows(group: Group, body: bytes, size: int, pieces: list[str]) -> dict[str, Callable[[], Any]]:
    """The group's rows, named with its label."""
    out = {"decode": decode(group, body, size), "chat": chat(group, body, size),
           "responses": responses(group, body, size)}
    out["chat, core replayed"] = replayed(group, pieces, out["chat"])
    out["responses, core replayed"] = replayed(group, pieces, out["responses"])
    return {name + group.label: run for name, run in out.items()}


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
    parser.add_argument("--against", metavar="REV", help="also time the group's modules as they are at REV")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top entries of the chat row")
    args = parser.parse_args()
    body, pieces = _body(args.script)
    frames = len(pieces) + 3  # role, the pieces, finish, usage ([DONE] not counted)
    runs = {"core": core(pieces), **rows(THIS, body, args.read_bytes, pieces)}
    with tempfile.TemporaryDirectory() as into:
        if args.against:
            runs.update(rows(group_at(args.against, Path(into)), body, args.read_bytes, pieces))
        result = {name: us / frames for name, us in measure(runs, args.requests).items()}
    print(f"{args.script}: {frames} frames, {len(body)} bytes, receives of {args.read_bytes} bytes")
    width = max(map(len, runs)) + 2
    for name in runs:
        ratio = ""
        if args.against and name != "core" and not name.endswith(f" @{args.against}"):
            ratio = f"   {result[name] / result[f'{name} @{args.against}']:.2f}x of @{args.against}"
        print(f"{name:<{width}}{result[name]:>8.2f} µs/frame{ratio}")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(lambda: [runs["chat"]() for _ in range(args.requests)])
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
