"""A pool's routing decision: what choosing a member costs a request.

Run: ``python bench/pool_bench.py`` (``make bench`` runs it in section 11 of ``bench/run.py``). Prints one table.

The decision is the affinity key (:func:`app.pipeline.affinity.affinity_key`) and the pool's choice
(:meth:`app.pool.Pool.choose`: each member's rendezvous score, the load bound) for a pool of three members, on
an agent's request of Claude Code's size (a 24 KB system prompt, 20 tools, 40 messages): keyed by its prompt's
prefix, and by a session signal. The target is the issue's: at most 20 µs a request.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.pipeline.affinity import affinity_key  # noqa: E402
from app.pool import Pool, PoolMember  # noqa: E402
from statemachine import ParserConfig, ToolSpec  # noqa: E402

TARGET_US = 20.0
RUNS = 20_000


@dataclass
class _Slots:
    in_use: int = 0

    def try_acquire(self) -> Any:
        return self


@dataclass
class _Backend:
    name: str
    upstream: Any = None
    settings: Any = None
    slots: _Slots = field(default_factory=_Slots)


def agent_request() -> tuple[list[dict[str, Any]], ParserConfig]:
    """The messages and tools of an agent's request of Claude Code's size, 20 turns in."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent. " * 1000},
                                      {"role": "user", "content": "Fix the failing test in tests/app/test_pool.py."}]
    for turn in range(19):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
                         {"id": f"call_{turn}", "type": "function",
                          "function": {"name": "Read", "arguments": '{"file_path": "app/pool.py"}'}}]},
                     {"role": "tool", "tool_call_id": f"call_{turn}", "content": "line\n" * 200}]
    config = ParserConfig(tools={f"Tool{n}": ToolSpec(f"Tool{n}") for n in range(20)})
    return messages, config


def per_request_us(session: str | None, pool: Pool, messages: list[dict[str, Any]], config: ParserConfig) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(RUNS):
            pool.choose(affinity_key(session, messages, config))
        best = min(best, (time.perf_counter() - started) / RUNS * 1e6)
    return best


def main() -> int:
    pool = Pool("coder", [PoolMember(_Backend(f"gpu{n}")) for n in (1, 2, 3)])
    messages, config = agent_request()
    print(f"{'routing decision, pool of 3, agent request (24 KB system, 20 tools)':<72} {'µs/request':>10}")
    worst = 0.0
    for label, session in (("keyed by the prompt's stable prefix", None), ("keyed by a session signal", "s-1")):
        us = per_request_us(session, pool, messages, config)
        worst = max(worst, us)
        print(f"{label:<72} {us:>10.2f}")
    print(f"routing decision: {worst:.2f} µs/request (target <= {TARGET_US:g}): "
          f"{'ok' if worst <= TARGET_US else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
