"""Core benchmark: per-chunk cost of the choice stream, and linearity on long arguments.

Run: ``python bench/core_bench.py`` (``make bench`` runs it too, as section 5 of
``bench/run.py``). Prints one table.
Each figure is compared with a baseline measured in the same run (a loop that
only wraps each chunk in a TextDelta), so the ratios stay meaningful on a
shared, noisy machine; the absolute microseconds are for the issue's targets.
"""

from __future__ import annotations

import json
import time

from statemachine import ChoiceStream, ParserConfig, TextDelta, ToolSpec

TOOLS = ParserConfig.for_tools([ToolSpec("write_file", parameters={
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}})])
PROSE = "The quick brown fox jumps over the lazy dog; if a < b then c > d. "


def chunks_of(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def best_of(runs: int, fn) -> float:
    """The fastest of ``runs`` timings of ``fn()``, in seconds (least disturbed by noise)."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def feed_all(chunks: list[str]) -> None:
    stream = ChoiceStream(TOOLS)
    feed = stream.feed
    for chunk in chunks:
        feed(chunk)
    stream.finish("stop")


def baseline(chunks: list[str]) -> None:
    out = []
    for chunk in chunks:
        out.append(TextDelta(chunk))


def call_text(argument_chars: int) -> str:
    content = ("x" * 63 + "\n") * (argument_chars // 64)
    args = json.dumps({"path": "/tmp/a.txt", "content": content})
    return f'<tool_call>{{"name": "write_file", "arguments": {args}}}</tool_call>'


def format_c_text(value_chars: int) -> str:
    """A Qwen3-Coder style call whose string parameter value is ``value_chars`` long."""
    content = ("x" * 63 + "\n") * (value_chars // 64)
    return ("<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/a.txt\n</parameter>\n"
            f"<parameter=content>\n{content}</parameter>\n</function>\n</tool_call>")


def main() -> None:
    rows = []
    plain = chunks_of(PROSE * 2000, 16)
    t_plain = best_of(5, lambda: feed_all(plain))
    t_base = best_of(5, lambda: baseline(plain))
    rows.append(("plain text, 16-char chunks", t_plain / len(plain) * 1e6, t_base / len(plain) * 1e6, 3.0))

    call = call_text(64_000)
    arg_chunks = chunks_of(call, 16)
    t_args = best_of(5, lambda: feed_all(arg_chunks))
    t_base_args = best_of(5, lambda: baseline(arg_chunks))
    rows.append(("inside arguments, 16-char chunks", t_args / len(arg_chunks) * 1e6,
                 t_base_args / len(arg_chunks) * 1e6, 6.0))

    param_chunks = chunks_of(format_c_text(64_000), 16)
    t_param = best_of(5, lambda: feed_all(param_chunks))
    t_base_param = best_of(5, lambda: baseline(param_chunks))
    rows.append(("format C parameter value, 16-char", t_param / len(param_chunks) * 1e6,
                 t_base_param / len(param_chunks) * 1e6, 6.0))

    small = chunks_of(call_text(100_000), 1)
    large = chunks_of(call_text(1_000_000), 1)
    t_small = best_of(3, lambda: feed_all(small))
    t_large = best_of(2, lambda: feed_all(large))

    print(f"{'scenario':<36} {'µs/chunk':>9} {'baseline':>9} {'ratio':>7} {'target µs':>10}")
    for name, us, base, target in rows:
        print(f"{name:<36} {us:>9.2f} {base:>9.2f} {us / base:>7.1f} {target:>10.1f}")
    print(f"{'1 MB argument, 1-char chunks':<36} {t_large * 1e6 / len(large):>9.2f}")
    print(f"{'100 KB argument, 1-char chunks':<36} {t_small * 1e6 / len(small):>9.2f}")
    ratio = t_large / t_small
    print(f"time ratio 1 MB / 100 KB: {ratio:.1f} (linear ≈ 10, target ≤ 12): {'ok' if ratio <= 12 else 'OVER'}")


if __name__ == "__main__":
    main()
