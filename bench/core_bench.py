"""Core benchmark: per-chunk cost of the choice stream, and linearity on long arguments.

Run: ``python bench/core_bench.py`` (``make bench`` runs it too, as section 5 of
``bench/run.py``). Prints one table.
Each figure is compared with a baseline measured in the same run (a loop that
only wraps each chunk in a TextDelta), so the ratios stay meaningful on a
shared, noisy machine; the absolute microseconds are for the issue's targets.

``--against REV`` also loads the core as it is at git revision ``REV`` (its
``statemachine/`` files, from ``git show``, imported under another package
name from a temporary directory) and times it beside this one, scenario by
scenario and alternating, so a refactor's cost is measured in one run:
``python bench/core_bench.py --against main``.

The load bench's short streams (``bench/upstream.py``'s ``bench-short`` and ``bench-text``, fed piece by
piece as that upstream sends them, then ``finish()``) are timed whole with the gateway's config, in µs per
stream (issue 30: the core's share of a short request).

The second table prices ``TOOLWIRE_ACCEPT_FORMATS``: the same text read with
``tool_call`` alone, with the default formats and with every registered format,
the three runs interleaved round by round; each ratio is the median of the
rounds' ratios (issue 18: ``all`` may be the default at <= 1.2x per chunk). The third prices the
costliest inputs found under ``all`` against prose in the same run (issue 30: within ~10x per character).
"""

from __future__ import annotations

import argparse
import importlib
import json
import pathlib
import subprocess
import sys
import statistics
import tempfile
import time
from types import ModuleType

import statemachine
import upstream  # bench/upstream.py: the scripts the load bench's upstream sends

ROOT = pathlib.Path(__file__).resolve().parents[1]
WRITE_FILE_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}
PROSE = "The quick brown fox jumps over the lazy dog; if a < b then c > d. "


def chunks_of(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def best_of(runs: int, fn) -> float:
    """The fastest of ``runs`` timings of ``fn()``, in seconds of this process's CPU time (on a shared
    machine, wall time also counts the waits for a core; the fastest run is the least disturbed)."""
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def tools_of(core: ModuleType, **config):
    return core.ParserConfig.for_tools([core.ToolSpec("write_file", parameters=WRITE_FILE_SCHEMA)], **config)


def feed_all(core: ModuleType, config, chunks: list[str]) -> None:
    stream = core.ChoiceStream(config)
    feed = stream.feed
    for chunk in chunks:
        feed(chunk)
    stream.finish("stop")


def baseline(chunks: list[str]) -> None:
    out = []
    for chunk in chunks:
        out.append(statemachine.TextDelta(chunk))


def load_core_at(rev: str, into: pathlib.Path) -> ModuleType:
    """The ``statemachine`` package as it is at git revision ``rev``, imported as ``statemachine_at_rev``."""
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "statemachine/"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for name in names:
        if name.endswith(".py"):
            target = into / "statemachine_at_rev" / pathlib.Path(name).relative_to("statemachine")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(subprocess.run(["git", "show", f"{rev}:{name}"], cwd=ROOT, capture_output=True,
                                              check=True).stdout)
    sys.path.insert(0, str(into))
    return importlib.import_module("statemachine_at_rev")  # its imports are relative: it loads its own modules


def call_text(argument_chars: int) -> str:
    content = ("x" * 63 + "\n") * (argument_chars // 64)
    args = json.dumps({"path": "/tmp/a.txt", "content": content})
    return f'<tool_call>{{"name": "write_file", "arguments": {args}}}</tool_call>'


def format_c_text(value_chars: int, line: str = "x" * 63 + "\n") -> str:
    """A Qwen3-Coder style call whose string parameter value is ``value_chars`` long, made of ``line``."""
    content = line * (value_chars // len(line))
    return ("<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/a.txt\n</parameter>\n"
            f"<parameter=content>\n{content}</parameter>\n</function>\n</tool_call>")


#: Prose with the characters family openers start with: markdown links and tables, html, code.
MARKDOWN = ("See [the guide](https://example.com/a?b=1) and <b>bold</b> or <i>it</i> text; a < b.\n"
            "| name | value |\n|---|---|\n| `x[0]` | [1, 2] |\n"
            "```python\nif a[i] < b[j]: print(f\"<{i}>\")\n```\n")


def markdown_call_text(argument_chars: int) -> str:
    """A call whose long argument is JSON full of brackets, ``<`` and ``[``, in strings and out of them."""
    rows = [{"id": i, "tags": ["a", "b"], "html": "<td>[x](y) a[i] < b</td>", "pos": [i, i + 1]}
            for i in range(argument_chars // 80)]
    args = json.dumps({"path": "/tmp/a.txt", "rows": rows})
    return f'<tool_call>{{"name": "write_file", "arguments": {args}}}</tool_call>'


def format_sets(core: ModuleType) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``tool_call`` alone, the default formats, and every registered format (as ``accept_formats=all``)."""
    every = tuple(f for f in core.registered_formats() if f != "custom_tool_call")
    return (("tool_call", ("tool_call",)), ("default", core.ParserConfig().formats), ("all", every))


FORMAT_SCENARIOS = (
    ("markdown prose, 16-char chunks", lambda: chunks_of(MARKDOWN * 600, 16)),
    ("inside a JSON argument, 16-char", lambda: chunks_of(markdown_call_text(64_000), 16)),
    ("format C value with html, 16-char", lambda: chunks_of(format_c_text(64_000, MARKDOWN), 16)),
)
FORMAT_ROUNDS = 9

#: The costliest texts found for the scanner under ``accept_formats=all`` (a fuzz of every sentinel, its
#: prefixes and its repetition with and without text after it), each repeated to ``WORST_CHARS`` and fed in
#: 16-character chunks. An opener that opens a block and has it disproved costs two ``transitions`` triggers
#: (~14 µs here); the formats that can tell from the next characters refute it without a block.
WORST_INPUTS = (">>>", ">", ">>> x = 1\n", "<xml>", "<tool> x", "<response>\n  <b>", "<tool_call>", "<use_tool ",
                "<function=", "<|tool_call>", "```tool_code", "[TOOL_CALLS] x", "<think>", "</tool_call>")
WORST_CHARS = 16_000


#: The model families' own readers (not on the rows above): a reply that opens with one call in the family's
#: format, as the format renders it (a 16 KB string argument), then prose; ``--against`` times both cores.
FAMILY_FORMATS = ("glm", "harmony", "pythonic", "gemma", "functiongemma", "deepseek_v32", "minimax")


def family_text(core: ModuleType, name: str) -> str:
    content = ("x" * 63 + "\n") * 256
    call = core.get_format(name).render_call("write_file", json.dumps({"path": "/tmp/a.txt", "content": content}))
    return call + "\n" + PROSE * 20


SCENARIOS = (
    ("plain text, 16-char chunks", lambda: chunks_of(PROSE * 2000, 16), 3.0),
    ("inside <think>, 16-char chunks", lambda: chunks_of("<think>" + PROSE * 2000 + "</think>Done.", 16), 3.0),
    ("inside arguments, 16-char chunks", lambda: chunks_of(call_text(64_000), 16), 6.0),
    ("format C parameter value, 16-char", lambda: chunks_of(format_c_text(64_000), 16), 6.0),
    ("100 KB argument, 1-char chunks", lambda: chunks_of(call_text(100_000), 1), 6.0),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", metavar="REV", help="also time the core at this git revision (e.g. main)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = load_core_at(args.against, pathlib.Path(tmp)) if args.against else None
        run(old, args.against)


def run(old: ModuleType | None, rev: str | None) -> None:
    config = tools_of(statemachine)
    old_config = tools_of(old) if old else None
    rows = []
    for name, make, target in SCENARIOS:
        chunks = make()
        t_new = t_old = float("inf")
        for _ in range(7):  # alternate, so both cores see the same machine load
            t_new = min(t_new, best_of(1, lambda: feed_all(statemachine, config, chunks)))
            if old:
                t_old = min(t_old, best_of(1, lambda: feed_all(old, old_config, chunks)))
        t_base = best_of(5, lambda: baseline(chunks))
        rows.append((name, t_new / len(chunks) * 1e6, t_base / len(chunks) * 1e6, target,
                     t_old / len(chunks) * 1e6 if old else None))

    small = chunks_of(call_text(100_000), 1)
    large = chunks_of(call_text(1_000_000), 1)
    t_small = best_of(3, lambda: feed_all(statemachine, config, small))
    t_large = best_of(2, lambda: feed_all(statemachine, config, large))

    against = f" {'at ' + rev:>9} {'new/old':>7}" if old else ""
    print(f"{'scenario':<36} {'µs/chunk':>9} {'baseline':>9} {'ratio':>7} {'target µs':>10}{against}")
    for name, us, base, target, old_us in rows:
        versus = f" {old_us:>9.2f} {us / old_us:>7.2f}" if old_us is not None else ""
        print(f"{name:<36} {us:>9.2f} {base:>9.2f} {us / base:>7.1f} {target:>10.1f}{versus}")
    print(f"{'1 MB argument, 1-char chunks':<36} {t_large * 1e6 / len(large):>9.2f}")
    print(f"{'100 KB argument, 1-char (linearity)':<36} {t_small * 1e6 / len(small):>9.2f}")
    ratio = t_large / t_small
    print(f"time ratio 1 MB / 100 KB: {ratio:.1f} (linear ≈ 10, target ≤ 12): {'ok' if ratio <= 12 else 'OVER'}")
    short_table(old)
    family_table(old)
    format_table()
    worst_table()


def family_table(old: ModuleType | None) -> None:
    """µs per 16-character chunk of each of ``FAMILY_FORMATS``' replies, with only that format accepted, beside
    the core at ``--against``'s revision (alternating, best of 7)."""
    print(f"{'family reply, 16-char chunks':<36} {'µs/chunk':>9}" + (f" {'old':>9} {'new/old':>7}" if old else ""))
    for name in FAMILY_FORMATS:
        chunks = chunks_of(family_text(statemachine, name), 16)
        config = tools_of(statemachine, formats=(name,))
        old_config = tools_of(old, formats=(name,)) if old else None
        t_new = t_old = float("inf")
        for _ in range(7):
            t_new = min(t_new, best_of(1, lambda: feed_all(statemachine, config, chunks)))
            if old:
                t_old = min(t_old, best_of(1, lambda: feed_all(old, old_config, chunks)))
        us = t_new / len(chunks) * 1e6
        versus = f" {t_old / len(chunks) * 1e6:>9.2f} {t_new / t_old:>7.2f}" if old else ""
        print(f"{name:<36} {us:>9.2f}{versus}")


#: The load bench's short streams (bench/upstream.py), fed piece by piece as its upstream sends them.
SHORT_SCRIPTS = ("bench-short", "bench-text")
SHORT_REPEATS = 20  # streams per timing: one is ~0.5 ms, too short to time alone


def app_config(core: ModuleType):
    """The gateway's config for the load bench's request: ``write_file`` offered, ``tool_call`` taught and
    every other registered format accepted (the default ``accept_formats=all``)."""
    every = dict(format_sets(core))["all"]
    return tools_of(core, formats=("tool_call", *(f for f in every if f != "tool_call")))


def short_table(old: ModuleType | None) -> None:
    """µs per whole stream (pieces fed, then ``finish()``) of ``SHORT_SCRIPTS`` with the gateway's config,
    beside the core at ``--against``'s revision (alternating, best of 9)."""
    print(f"{'load bench stream, app config':<36} {'µs/stream':>9}" + (f" {'old':>9} {'new/old':>7}" if old else ""))
    cores = [(statemachine, app_config(statemachine))] + ([(old, app_config(old))] if old else [])
    for name in SHORT_SCRIPTS:
        pieces = upstream.script(name)["pieces"]
        best = [float("inf")] * len(cores)
        for _ in range(9):
            for i, (core, config) in enumerate(cores):
                best[i] = min(best[i], best_of(1, lambda: [feed_all(core, config, pieces)
                                                           for _ in range(SHORT_REPEATS)]))
        us = [t / SHORT_REPEATS * 1e6 for t in best]
        versus = f" {us[1]:>9.1f} {us[0] / us[1]:>7.2f}" if old else ""
        print(f"{name + f' ({len(pieces)} pieces)':<36} {us[0]:>9.1f}{versus}")


def worst_table() -> None:
    """µs per character of each of ``WORST_INPUTS`` under ``accept_formats=all``, and its ratio to prose
    (markdown prose, same config) measured in the same round; medians over the rounds (target: ~10x)."""
    every = dict(format_sets(statemachine))["all"]
    config = tools_of(statemachine, formats=every)
    prose = chunks_of((MARKDOWN * (WORST_CHARS // len(MARKDOWN) + 1))[:WORST_CHARS], 16)
    print(f"{'worst inputs, accept_formats=all':<36} {'µs/char':>9} {'x prose':>9}")
    for text in WORST_INPUTS:
        chunks = chunks_of((text * (WORST_CHARS // len(text) + 1))[:WORST_CHARS], 16)
        ratios, times = [], []
        for _ in range(5):
            t_prose = best_of(1, lambda: feed_all(statemachine, config, prose))
            times.append(best_of(1, lambda: feed_all(statemachine, config, chunks)))
            ratios.append(times[-1] / t_prose)
        ratio = statistics.median(ratios)
        print(f"{repr(text) + ' repeated':<36} {statistics.median(times) / WORST_CHARS * 1e6:>9.3f} {ratio:>9.1f}"
              f"{'' if ratio <= 10 else '  OVER'}")


def format_table() -> None:
    """µs per chunk with each set of formats, and ``all``'s same-run ratios (medians over the rounds)."""
    sets = [(label, tools_of(statemachine, formats=formats)) for label, formats in format_sets(statemachine)]
    print(f"{'formats (median of ' + str(FORMAT_ROUNDS) + ' rounds)':<36} {'tool_call':>9} {'default':>9} "
          f"{'all':>9} {'all/default':>11} {'all/tool_call':>13} {'target':>7}")
    for name, make in FORMAT_SCENARIOS:
        chunks = make()
        times: dict[str, list[float]] = {label: [] for label, _ in sets}
        for _ in range(FORMAT_ROUNDS):
            for label, config in sets:  # interleaved: each round sees the three under the same load
                times[label].append(best_of(1, lambda: feed_all(statemachine, config, chunks)))
        us = {label: statistics.median(t) / len(chunks) * 1e6 for label, t in times.items()}
        versus_default = statistics.median(a / d for a, d in zip(times["all"], times["default"]))
        versus_one = statistics.median(a / d for a, d in zip(times["all"], times["tool_call"]))
        print(f"{name:<36} {us['tool_call']:>9.2f} {us['default']:>9.2f} {us['all']:>9.2f} "
              f"{versus_default:>11.2f} {versus_one:>13.2f} {'<= 1.2':>7} "
              f"{'ok' if versus_default <= 1.2 else 'OVER'}")


if __name__ == "__main__":
    main()
