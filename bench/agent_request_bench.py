"""The Responses tool and item catalogue's cost: a Codex-shaped request versus its function-only twin, in process.

A Codex CLI turn (measured in ``docs/real-agents.md``) carries ~30 KB of
developer text, function tools, a ``namespace``, the freeform ``apply_patch``
custom tool with its grammar, a client ``tool_search``, a hosted
``web_search``, and a growing history of calls, custom calls, their outputs
and encrypted reasoning items. The baseline is the same information as round 1
could take it: every tool a function tool (the namespace flattened, the custom
tool a one-string function, no hosted tool), every custom call a
``function_call``. Both go through what the Responses endpoint does before the
back end is called: validate the body, choose the offered tools, flatten the
input to Chat messages, plan, and build the prompt (the tool block cache is
cleared each time, as for a new conversation). Figures are this thread's CPU
microseconds (``time.thread_time``) per request, the lowest of ``--rounds``
medians (the two take turns). Target: the catalogue costs at most 1.2x its
twin. Run: ``.venv/bin/python bench/agent_request_bench.py [--turns N] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from app.pipeline import prompt  # noqa: E402
from app.pipeline.plan import build_parser_config, prompt_format  # noqa: E402
from app.profile import model_profile  # noqa: E402
from app.responses.input import to_chat_messages  # noqa: E402
from app.responses.schemas import parse_responses_request  # noqa: E402
from app.responses.tools import offered_tools  # noqa: E402
from app.settings import Settings  # noqa: E402

TARGET = 1.2
GRAMMAR = "start: begin_patch hunk+ end_patch\n" + "\n".join(f'rule_{i}: "line {i}" /[^\\n]*/' for i in range(60))
PATCH = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-old line\n+new line\n*** End Patch"


def _function(name: str, properties: int = 6) -> dict[str, Any]:
    props = {f"p{i}": {"type": "string", "description": f"Parameter {i} of {name}."} for i in range(properties)}
    return {"type": "function", "name": name, "description": f"{name}: does one thing well. " * 4,
            "parameters": {"type": "object", "properties": props, "required": ["p0"]}, "strict": False}


AGENT_FUNCTIONS = ["spawn_agent", "send_input", "wait_agent", "resume_agent", "close_agent"]
FUNCTIONS = [_function(n) for n in ("exec_command", "write_stdin", "request_user_input", "view_image", "get_goal",
                                    "create_goal", "update_goal")]
SEARCH_PARAMETERS = {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}}


def codex_body(turns: int) -> dict[str, Any]:
    """A Codex-shaped request: the catalogue's tools and items."""
    tools = [*FUNCTIONS,
             {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.",
              "tools": [_function(n) for n in AGENT_FUNCTIONS]},
             {"type": "custom", "name": "apply_patch", "description": "Edit files. FREEFORM, not JSON.",
              "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR}},
             {"type": "tool_search", "execution": "client", "description": "Find tools.",
              "parameters": SEARCH_PARAMETERS},
             {"type": "web_search", "external_web_access": True}]
    items: list[dict[str, Any]] = _preamble()
    for t in range(turns):
        items += [
            *_command_turn(t),
            {"type": "custom_tool_call", "id": f"ctc_{t}", "status": "completed", "call_id": f"p{t}",
             "name": "apply_patch", "input": PATCH},
            {"type": "custom_tool_call_output", "call_id": f"p{t}", "output": "Success. Updated 1 file."},
            _assistant(t),
        ]
    return _body(tools, items)


def _command_turn(t: int) -> list[dict[str, Any]]:
    """Turn ``t``'s reasoning, an ``exec_command`` call and its output (both bodies have them)."""
    return [
        {"type": "reasoning", "id": f"rs_{t}", "summary": [], "encrypted_content": "gAAAA" + "x" * 2000},
        {"type": "function_call", "id": f"fc_{t}", "status": "completed", "call_id": f"c{t}",
         "name": "exec_command", "arguments": '{"p0": "ls -la"}'},
        {"type": "function_call_output", "call_id": f"c{t}", "output": "file\n" * 40},
    ]


def twin_body(turns: int) -> dict[str, Any]:
    """The same information with function tools and function calls only (what round 1 took)."""
    patch_tool = {"type": "function", "name": "apply_patch", "description": "Edit files. " + GRAMMAR,
                  "parameters": {"type": "object", "properties": {"patch": {"type": "string"}}}}
    tools = [*FUNCTIONS, *(_function(f"multi_agent_v1__{n}") for n in AGENT_FUNCTIONS), patch_tool,
             {"type": "function", "name": "tool_search", "description": "Find tools.", "parameters": SEARCH_PARAMETERS}]
    items: list[dict[str, Any]] = _preamble()
    for t in range(turns):
        items += [
            *_command_turn(t),
            {"type": "function_call", "id": f"fp_{t}", "status": "completed", "call_id": f"p{t}",
             "name": "apply_patch", "arguments": '{"patch": "' + PATCH.replace("\n", "\\n") + '"}'},
            {"type": "function_call_output", "call_id": f"p{t}", "output": "Success. Updated 1 file."},
            _assistant(t),
        ]
    return _body(tools, items)


def _preamble() -> list[dict[str, Any]]:
    return [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Rules. " * 2200}]},
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "More. " * 2200}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]}]


def _assistant(t: int) -> dict[str, Any]:
    return {"type": "message", "id": f"msg_{t}", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": f"Step {t} done.", "annotations": [], "logprobs": []}]}


def _body(tools: list[dict[str, Any]], items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "gpt-5.5", "stream": True, "store": False, "tool_choice": "auto", "parallel_tool_calls": True,
            "reasoning": {"effort": "medium"}, "include": ["reasoning.encrypted_content"], "tools": tools,
            "input": items}


def plan_request(body: dict[str, Any], settings: Settings) -> list[dict[str, Any]]:
    """What the Responses endpoint does with a body before it calls the back end."""
    req = parse_responses_request(body)
    tools = offered_tools(req, settings)
    messages = to_chat_messages(req, None)
    config = build_parser_config(tools.specs, tools.choice, parallel_tool_calls=req.parallel_tool_calls,
                                 legacy_functions=False, settings=settings, profile=model_profile(settings, req.model))
    prompt._tool_blocks.clear()  # a new conversation: the tool block is rendered, not found
    return prompt.build_upstream_messages(messages, config, prompt_format(config))


def per_request_us(run: Callable[[], object], requests: int) -> float:
    samples = []
    for _ in range(requests):
        start = time.thread_time()
        run()
        samples.append(time.thread_time() - start)
    return statistics.median(samples) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20, help="history turns (6 items each)")
    parser.add_argument("--requests", type=int, default=40, help="requests per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    settings = Settings(_env_file=None)
    bodies = {"codex-shaped (catalogue)": codex_body(args.turns), "function-only twin": twin_body(args.turns)}
    prompts = {name: plan_request(body, settings) for name, body in bodies.items()}  # warm up, and check
    assert any('<custom_tool_call name="apply_patch">' in m["content"] for m in prompts["codex-shaped (catalogue)"])
    best = {name: float("inf") for name in bodies}
    for _ in range(args.rounds):
        for name, body in bodies.items():
            best[name] = min(best[name], per_request_us(lambda b=body: plan_request(b, settings), args.requests))
    ratio = best["codex-shaped (catalogue)"] / best["function-only twin"]
    items = len(bodies["codex-shaped (catalogue)"]["input"])
    print(f"Responses request planning, {items} input items, {len(bodies['codex-shaped (catalogue)']['tools'])} "
          f"tools (CPU µs per request, best of {args.rounds} medians)")
    print(f"{'request':<28}{'µs':>10}")
    for name, value in best.items():
        print(f"{name:<28}{value:>10.0f}")
    print(f"{'ratio':<28}{ratio:>10.2f}   target <= {TARGET}: {'PASS' if ratio <= TARGET else 'FAIL'}")


if __name__ == "__main__":
    main()
