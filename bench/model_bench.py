"""``make bench-model``: how well small real models follow toolwire's teaching, and what the teaching costs.

Runs a fixed prompt set (tests/support/real_model.py's tools plus a calculator) against SmolLM2-135M-Instruct
and Gemma 3 270M served by llama.cpp (built and cached by ``tests/support/llama_server.py``), through
toolwire in prompt mode, non-streamed Chat, temperature 0, and prints per model and teaching variant:

- the success rate: the expected tool called with the expected argument, or text when no tool fits;
- prompt tokens per tool: the prompt tokens of the body toolwire sent with the three tools minus those of
  the same request without tools, over three (counted by the model server itself, ``max_tokens: 1``).

Variants: ``plain`` (the question alone), ``example`` (one example exchange in the transcript first),
``example+first`` (the same with the model's ``stop_after_tools: first``), ``plain+constrain`` (the model's
``constrain_calls``: a forced tool_choice becomes llama.cpp's JSON-schema grammar). A benchmark, not a
test: it never fails on a rate. About eight minutes on 2 cores once the build is cached.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.llama_server import LlamaServer  # noqa: E402
from support.model_tap import ModelTap  # noqa: E402
from support.real_model import HISTORY, TOOLS  # noqa: E402
from support.server import run_toolwire  # noqa: E402

CALCULATOR = {"name": "calculator", "description": "Evaluate an arithmetic expression.",
              "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                             "required": ["expression"]}}
BENCH_TOOLS = [*TOOLS, CALCULATOR]
# (name, question, tool_choice, expected: (tool, argument) or None for a text answer)
CASES = [
    ("weather_paris", "What's the weather in Paris?", None, ("get_weather", "city")),
    ("weather_madrid", "Is it raining in Madrid right now?", None, ("get_weather", "city")),
    ("time_tokyo", "What time is it in Tokyo?", None, ("get_time", "tz")),
    ("time_london", "Tell me the current time in London.", None, ("get_time", "tz")),
    ("calc_mul", "Use the calculator: what is 17 * 23?", None, ("calculator", "expression")),
    ("calc_sum", "Compute 1234 + 4321 with the calculator.", None, ("calculator", "expression")),
    ("no_tool_poem", "Write a two-line poem about rain.", None, None),
    ("no_tool_hello", "Hello! Who are you?", None, None),
    ("required_choice", "Check the weather in Oslo.", "required", ("get_weather", "city")),
    ("named_choice", "What time is it?", {"type": "function", "function": {"name": "get_time"}}, ("get_time", "tz")),
]
VARIANTS = {"plain": ({}, False), "example": ({}, True), "example+first": ({"stop_after_tools": "first"}, True),
            "plain+constrain": ({"constrain_calls": True}, False)}
MODELS = {"smollm2": "tool_call", "gemma3": "gemma"}
MAX_TOKENS = 64


def chat_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "function": tool} for tool in BENCH_TOOLS]


def ask(base: str, model: str, question: str, choice: Any, example: bool, *, tools: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "temperature": 0, "max_tokens": MAX_TOKENS,
                            "messages": [*(HISTORY if example else []), {"role": "user", "content": question}]}
    if tools:
        body["tools"] = chat_tools()
    if choice is not None:
        body["tool_choice"] = choice
    answer = httpx.post(base + "/chat/completions", json=body, timeout=300)
    return answer.json()


def succeeded(answer: dict[str, Any], expected: tuple[str, str] | None) -> bool:
    choices = answer.get("choices") or []
    if not choices:
        return False
    calls = choices[0]["message"].get("tool_calls") or []
    if expected is None:
        return not calls and bool(choices[0]["message"].get("content"))
    if not calls or calls[0]["function"]["name"] != expected[0]:
        return False
    try:
        arguments = json.loads(calls[0]["function"]["arguments"])
    except ValueError:
        return False
    return isinstance(arguments, dict) and bool(arguments.get(expected[1]))


def prompt_tokens(server: LlamaServer, body: dict[str, Any]) -> int:
    """What the model server counts for ``body`` (asked for one token, not streamed)."""
    body = {**body, "stream": False, "max_tokens": 1}
    body.pop("stream_options", None)
    answer = httpx.post(server.v1_url + "/chat/completions", json=body, timeout=300)
    return answer.json()["usage"]["prompt_tokens"]


def run_model(model: str, tool_format: str) -> list[str]:
    lines = []
    with LlamaServer(model) as server, ModelTap(server.v1_url) as tap:
        for variant, (options, example) in VARIANTS.items():
            route = json.dumps({model: {"model": model, "tool_format": tool_format, **options}})
            env = {"TOOLWIRE_UPSTREAM_URL": tap.v1_url, "TOOLWIRE_MODEL_MAP": route,
                   "TOOLWIRE_UPSTREAM_READ_TIMEOUT": "300"}
            with run_toolwire(env) as toolwire:
                hits = []
                for name, question, choice, expected in CASES:
                    ok = succeeded(ask(toolwire.v1_url, model, question, choice, example), expected)
                    hits.append(name if ok else f"-{name}")
                    print(f"  {model} {variant} {name}: {'ok' if ok else 'miss'}", file=sys.stderr, flush=True)
                if variant == "plain":
                    taught = next(body for body, _ in tap.answers if body["messages"][-1]["content"] == CASES[0][1])
                    ask(toolwire.v1_url, model, CASES[0][1], None, False, tools=False)
                    bare = tap.answers[-1][0]
                    per_tool = (prompt_tokens(server, taught) - prompt_tokens(server, bare)) / len(BENCH_TOOLS)
                    lines.append(f"{model:8} prompt tokens per tool: toolwire {per_tool:.0f}")
            rate = sum(not h.startswith("-") for h in hits)
            lines.append(f"{model:8} {variant:14} {rate:2}/{len(CASES)}  {' '.join(hits)}")
    return lines


def main() -> None:
    report = []
    for model, tool_format in MODELS.items():
        report += run_model(model, tool_format)
    print("\n".join(report))


if __name__ == "__main__":
    main()
