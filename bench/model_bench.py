"""``make bench-model``: how well small real models follow toolwire's teaching, and what the teaching costs.

Runs a fixed prompt set (tests/support/real_model.py's tools plus a calculator) against SmolLM2-135M-Instruct
and Gemma 3 270M served by llama.cpp (built and cached by ``tests/support/llama_server.py``), through
toolwire in prompt mode, non-streamed Chat, temperature 0, and prints per model and teaching variant:

- the success rate: the expected tool called with the expected value in the expected argument (``Paris``
  for the weather in Paris; any value but a copied placeholder when the question names none), or text
  when no tool fits;
- prompt tokens per tool: the prompt tokens of toolwire's messages with the three tools minus those of the
  question alone, over three (the fixed teaching text included), and per further tool: three tools minus
  the first alone, over two (counted by the model server itself, ``max_tokens: 1``), per manifest; the same
  for the model family's own chat template (``bench/template_tokens.py``); and each variant's whole prompt
  for the first question.

Variants (the model's ``model_map`` settings): ``json`` (the JSON Schema manifest and guide, the default),
``compact`` (``tool_manifest: compact``), ``+example`` (``example_exchange``: one exchange in the taught
format before the conversation; ``+examples``: one per tool), ``+first`` (``stop_after_tools: first``), ``+constrain``
(``constrain_calls``: a forced tool_choice becomes llama.cpp's JSON-schema grammar), ``+first_user``
(``system_in: first_user``: the tool block opens the first user turn). A benchmark, not a
test: it never fails on a rate. About twenty minutes on 2 cores once the build is cached; ``--tokens`` counts
the tokens only (a minute), ``--model`` and ``--variant`` pick some.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from app.pipeline.prompt import build_upstream_messages  # noqa: E402
from statemachine import ParserConfig, ToolSpec, get_format  # noqa: E402
from support.llama_server import CACHE_ROOT, LLAMA_VERSION, LlamaServer, ensure_llama  # noqa: E402
from support.model_tap import ModelTap  # noqa: E402
from support.real_model import EXAMPLE_EXCHANGE as EXAMPLE, TOOLS  # noqa: E402
from support.server import run_toolwire  # noqa: E402

CALCULATOR = {"name": "calculator", "description": "Evaluate an arithmetic expression.",
              "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                             "required": ["expression"]}}
BENCH_TOOLS = [*TOOLS, CALCULATOR]
# (name, question, tool_choice, expected: (tool, argument, text the value holds or "" for any) or None for text)
CASES = [
    ("weather_paris", "What's the weather in Paris?", None, ("get_weather", "city", "paris")),
    ("weather_madrid", "Is it raining in Madrid right now?", None, ("get_weather", "city", "madrid")),
    ("time_tokyo", "What time is it in Tokyo?", None, ("get_time", "tz", "tokyo")),
    ("time_london", "Tell me the current time in London.", None, ("get_time", "tz", "london")),
    ("calc_mul", "Use the calculator: what is 17 * 23?", None, ("calculator", "expression", "17")),
    ("calc_sum", "Compute 1234 + 4321 with the calculator.", None, ("calculator", "expression", "1234")),
    ("no_tool_poem", "Write a two-line poem about rain.", None, None),
    ("no_tool_hello", "Hello! Who are you?", None, None),
    ("required_choice", "Check the weather in Oslo.", "required", ("get_weather", "city", "oslo")),
    ("named_choice", "What time is it?", {"type": "function", "function": {"name": "get_time"}}, ("get_time", "tz", "")),
]
# What the manifests' worked calls put where the schema gives no value: copied, it is not an answer.
PLACEHOLDERS = ("example", "<")
# The real-model tests' example exchange (tests/support/real_model.py), then one per tool.
EXAMPLES = [EXAMPLE,
            {"user": "What time is it in Sydney?", "tool": "get_time", "arguments": {"tz": "Australia/Sydney"},
             "result": '{"time": "09:30"}', "answer": "It is 09:30 in Sydney."},
            {"user": "Use the calculator: what is 12 + 30?", "tool": "calculator", "arguments": {"expression": "12 + 30"},
             "result": "42", "answer": "12 + 30 = 42."}]
COMPACT = {"tool_manifest": "compact"}
VARIANTS = {"json": {}, "json+example": {"example_exchange": EXAMPLE},
            "compact": COMPACT, "compact+example": {**COMPACT, "example_exchange": EXAMPLE},
            "compact+examples": {**COMPACT, "example_exchange": EXAMPLES},
            "compact+examples+first": {**COMPACT, "example_exchange": EXAMPLES, "stop_after_tools": "first"},
            "compact+examples+constrain": {**COMPACT, "example_exchange": EXAMPLES, "constrain_calls": True},
            "compact+examples+first_user": {**COMPACT, "example_exchange": EXAMPLES, "system_in": "first_user"}}
MANIFESTS = ("json", "compact")
MODELS = {"smollm2": "tool_call", "gemma3": "gemma"}
MAX_TOKENS = 64
# The model families' own chat templates with tools, from llama.cpp's models/templates (in the pinned sdist):
# SmolLM2's GGUF template ignores tools and the Gemma 3 270M GGUF has none, so the families' nearest.
FAMILY_TEMPLATES = {"smollm2": {"own": None, "qwen2.5 (hermes <tool_call>)": "Qwen-Qwen2.5-7B-Instruct.jinja"},
                    "gemma3": {"own": None, "gemma 4": "google-gemma-4-31B-it.jinja"}}


def chat_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "function": tool} for tool in BENCH_TOOLS]


def ask(base: str, model: str, question: str, choice: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "temperature": 0, "max_tokens": MAX_TOKENS,
                            "messages": [{"role": "user", "content": question}], "tools": chat_tools()}
    if choice is not None:
        body["tool_choice"] = choice
    answer = httpx.post(base + "/chat/completions", json=body, timeout=300)
    return answer.json()


def succeeded(answer: dict[str, Any], expected: tuple[str, str, str] | None) -> bool:
    choices = answer.get("choices") or []
    if not choices:
        return False
    calls = choices[0]["message"].get("tool_calls") or []
    if expected is None:
        return not calls and bool(choices[0]["message"].get("content"))
    tool, argument, holds = expected
    if not calls or calls[0]["function"]["name"] != tool:
        return False
    try:
        arguments = json.loads(calls[0]["function"]["arguments"])
    except ValueError:
        return False
    value = str(arguments.get(argument) or "").lower() if isinstance(arguments, dict) else ""
    return bool(value) and holds in value and not value.startswith(PLACEHOLDERS)


def summary(answer: dict[str, Any]) -> str:
    """What the model answered, in one short line (for the log)."""
    message = ((answer.get("choices") or [{}])[0]).get("message") or {}
    calls = [f"{c['function']['name']}({c['function']['arguments']})" for c in message.get("tool_calls") or []]
    return " ".join(calls) or repr((message.get("content") or "")[:80])


def prompt_tokens(server: LlamaServer, body: dict[str, Any]) -> int:
    """What the model server counts for ``body`` (asked for one token, not streamed)."""
    body = {**body, "stream": False, "max_tokens": 1}
    body.pop("stream_options", None)
    answer = httpx.post(server.v1_url + "/chat/completions", json=body, timeout=300)
    return answer.json()["usage"]["prompt_tokens"]


def family_templates() -> dict[str, str]:
    """The chat templates :data:`FAMILY_TEMPLATES` names, taken once from the pinned llama-cpp-python sdist."""
    folder = CACHE_ROOT / f"templates-{LLAMA_VERSION}"
    names = {name for templates in FAMILY_TEMPLATES.values() for name in templates.values() if name}
    if not all((folder / name).exists() for name in names):
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="toolwire-sdist-") as scratch:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
                            "-d", scratch, f"llama-cpp-python=={LLAMA_VERSION}"], check=True, timeout=900)
            with tarfile.open(next(Path(scratch).glob("*.tar.gz"))) as sdist:
                for member in sdist.getmembers():
                    if member.name.endswith(tuple(f"/models/templates/{name}" for name in names)):
                        (folder / Path(member.name).name).write_bytes(sdist.extractfile(member).read())
    return {name: (folder / name).read_text() for name in names}


def template_tokens(model: str, path: Path) -> dict[str, float | None]:
    """Prompt tokens per tool under each of the model family's templates (``bench/template_tokens.py``)."""
    texts = family_templates()
    job = {"model": str(path), "tools": chat_tools(), "question": CASES[0][1],
           "templates": {label: texts[name] if name else None for label, name in FAMILY_TEMPLATES[model].items()}}
    done = subprocess.run([str(ensure_llama()), str(ROOT / "bench" / "template_tokens.py")], input=json.dumps(job),
                          capture_output=True, text=True, check=True, timeout=300)
    return json.loads(done.stdout)


def toolwire_tokens(server: LlamaServer, tool_format: str, manifest: str) -> tuple[float, float]:
    """Prompt tokens per tool and per further tool (as :mod:`template_tokens` counts them) of toolwire's
    tool block for the bench's tools in ``manifest``, counted by the model server."""
    specs = [ToolSpec(tool["name"], tool["description"], tool["parameters"]) for tool in BENCH_TOOLS]
    question = [{"role": "user", "content": CASES[0][1]}]

    def count(tools: list[ToolSpec]) -> int:
        config = ParserConfig.for_tools(tools, formats=(tool_format,))
        messages = build_upstream_messages(question, config, get_format(tool_format), manifest=manifest)
        return prompt_tokens(server, {"model": server.model.name, "messages": messages if tools else question})

    every, first, none = count(specs), count(specs[:1]), count([])
    return (every - none) / len(specs), (every - first) / (len(specs) - 1)


def token_lines(server: LlamaServer, model: str, tool_format: str) -> list[str]:
    """Tokens per tool (and per further tool) of toolwire's manifests and of the family's own templates."""
    counts = {f"toolwire {manifest}": toolwire_tokens(server, tool_format, manifest) for manifest in MANIFESTS}
    for label, pair in template_tokens(model, server.model.path).items():
        counts[f"template {label}"] = pair
    return [f"{model:8} prompt tokens per tool, per further tool: {label}: "
            + ("none in the GGUF" if pair is None else "no tools in it" if pair == [0, 0]
               else f"{pair[0]:.0f}, {pair[1]:.0f}") for label, pair in counts.items()]


def run_model(model: str, tool_format: str, variants: list[str]) -> list[str]:
    tokens: dict[str, int] = {}  # the first question's prompt per variant
    with LlamaServer(model) as server, ModelTap(server.v1_url) as tap:
        lines = token_lines(server, model, tool_format)
        for variant in variants:
            options = VARIANTS[variant]
            route = json.dumps({model: {"model": model, "tool_format": tool_format, **options}})
            env = {"TOOLWIRE_UPSTREAM_URL": tap.v1_url, "TOOLWIRE_MODEL_MAP": route,
                   "TOOLWIRE_UPSTREAM_READ_TIMEOUT": "300"}
            with run_toolwire(env) as toolwire:
                hits = []
                for name, question, choice, expected in CASES:
                    answer = ask(toolwire.v1_url, model, question, choice)
                    ok = succeeded(answer, expected)
                    hits.append(name if ok else f"-{name}")
                    print(f"  {model} {variant} {name}: {'ok' if ok else 'miss'}  {summary(answer)}",
                          file=sys.stderr, flush=True)
                taught = next(body for body, _ in reversed(tap.answers) if body["messages"][-1]["content"] == CASES[0][1])
                tokens[variant] = prompt_tokens(server, taught)
            rate = sum(not h.startswith("-") for h in hits)
            lines.append(f"{model:8} {variant:26} {rate:2}/{len(CASES)}  {' '.join(hits)}  "
                         f"(prompt {tokens[variant]} tokens)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", action="store_true", help="count the tokens only (a minute), no prompt set")
    parser.add_argument("--model", action="append", choices=MODELS, help="this model only (repeatable)")
    parser.add_argument("--variant", action="append", choices=VARIANTS, help="this variant only (repeatable)")
    args = parser.parse_args()
    variants = [] if args.tokens else args.variant or list(VARIANTS)
    report = []
    for model in args.model or MODELS:
        report += run_model(model, MODELS[model], variants)
    print("\n".join(report))


if __name__ == "__main__":
    main()
