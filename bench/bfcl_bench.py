"""``make bench-bfcl``: toolwire on the Berkeley Function Calling Leaderboard's own cases and checker.

BFCL's data, tool conversion, prompting handler, decoders and AST checker are imported from PyPI
``bfcl-eval`` (its own venv, ``.venv-bfcl``: the package pins vendor SDKs the checker never uses, so it is
installed ``--no-deps`` with the few modules it needs). Qwen2.5-Coder-0.5B-Instruct Q4_K_M on llama.cpp's
``llama-server`` (``tests/support/llama_cpp_server.py``); the non-live categories simple (python), multiple,
parallel, parallel_multiple and irrelevance, 12 cases each drawn by ``random.Random(f"20261128:{category}")``
(BFCL's category names); Chat Completions, non-streamed, ``temperature: 0``, ``max_tokens: 256``, one request
at a time, a UUID ``X-Request-Id`` each. Modes:

- ``bfcl-prompt``: BFCL's prompting system prompt and its ``[f(a=1)]`` decoder, no tools, straight to
  ``llama-server --no-jinja`` (the baseline);
- ``native``: BFCL's OpenAI tools to ``llama-server --jinja`` (the model's own template and tool-call parser);
- ``toolwire``: toolwire's defaults (prompt mode) in front of ``llama-server --no-jinja``: ``constrain_calls: auto``
  sends llama-server a GBNF grammar of the calls (each record's ``constrained`` says the tap saw it);
- ``toolwire-unconstrained``: the same without the grammar (``constrain_calls: off``);
- ``toolwire-pythonic``: the same taught BFCL's own call syntax (``tool_format: pythonic``);
- ``toolwire-compact``: the same with the signature manifest (``tool_manifest: compact``);
- ``toolwire-small``: docs/backends.md's settings for a small model (``tool_manifest: compact``,
  ``stop_after_tools: first``, ``constrain_calls``; its ``example_exchange`` names tools BFCL does not offer).

Each mode's answers go to ``bench/out/bfcl/MODE.json`` (per case: the verdict, BFCL's error, the status,
prompt tokens, the client's answer and the model's raw text, read by a recording tap between toolwire and
the model); ``--report`` prints k/n per category and mode, prompt tokens per request, HTTP errors, calls whose
arguments are not JSON, and the paired wins and losses against ``bfcl-prompt`` (exact McNemar p), and writes
``bench/out/bfcl/losses-MODE.md``: the model's raw text for every case the mode lost. ``--check-scorer``
first feeds every possible answer of the categories through both decoders and the checker (0 failures).
A benchmark, not a test: it never fails on a rate. About 5-30 s a case on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shutil
import sys
import time
import types
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from support.llama_cpp_server import LlamaCppServer  # noqa: E402
from support.model_tap import ModelTap  # noqa: E402
from support.server import run_toolwire  # noqa: E402

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
CASES_PER_CATEGORY = 12
SEED = "20261128"
MODEL = "qwen-coder"
MAX_TOKENS = 256
N_CTX = 8192
OUT = ROOT / "bench" / "out" / "bfcl"
GUNICORN = ROOT / ".venv" / "bin" / "gunicorn"
# The checker's model names: it reads only whether a call's name had its dots written as underscores (the
# tools modes: OpenAI names allow no dot) or kept them (BFCL's prompt: Python names in a list).
FC_NAME, PROMPT_NAME = "toolwire-fc", "bfcl-prompting"


@dataclass(frozen=True)
class Mode:
    """One way of asking the model.

    Fields:
        jinja: the model server renders the GGUF's template and reads tool calls itself.
        tools: the request offers BFCL's tools converted to OpenAI's shape (else BFCL's system prompt).
        toolwire: the request goes through toolwire, with these ``model_map`` settings (``None``: direct).
    """

    jinja: bool
    tools: bool
    toolwire: dict[str, Any] | None = None


MODES = {
    "bfcl-prompt": Mode(jinja=False, tools=False),
    "native": Mode(jinja=True, tools=True),
    "toolwire": Mode(jinja=False, tools=True, toolwire={}),
    "toolwire-unconstrained": Mode(jinja=False, tools=True, toolwire={"constrain_calls": False}),
    "toolwire-pythonic": Mode(jinja=False, tools=True, toolwire={"tool_format": "pythonic"}),
    "toolwire-compact": Mode(jinja=False, tools=True, toolwire={"tool_manifest": "compact"}),
    "toolwire-small": Mode(jinja=False, tools=True, toolwire={"tool_manifest": "compact", "stop_after_tools": "first",
                                                              "constrain_calls": True}),
}


# --- BFCL's pieces -----------------------------------------------------------------------------------------


class Bfcl:
    """BFCL's data, tool conversion, prompting system prompt, decoders and AST checker, imported."""

    def __init__(self) -> None:
        # ast_checker imports the model registry, which imports every vendor SDK: a stand-in holds the one
        # value the checker reads (the package's gpt-4o-2024-11-20-FC / gpt-4o-2024-11-20 entries say these).
        stub = types.ModuleType("bfcl_eval.constants.model_config")
        stub.MODEL_CONFIG_MAPPING = {FC_NAME.replace("_", "/"): types.SimpleNamespace(underscore_to_dot=True),  # type: ignore[attr-defined]
                                     PROMPT_NAME.replace("_", "/"): types.SimpleNamespace(underscore_to_dot=False)}
        sys.modules["bfcl_eval.constants.model_config"] = stub
        os.environ.setdefault("OPENAI_API_KEY", "unused")  # the handler makes an OpenAI client it never uses
        from bfcl_eval import utils
        from bfcl_eval.constants.enums import Language, ModelStyle, ReturnFormat
        from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
        from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler
        from bfcl_eval.model_handler.utils import convert_to_tool, system_prompt_pre_processing_chat_model

        self.utils, self.checker, self.language, self.format = utils, ast_checker, Language.PYTHON, ReturnFormat.PYTHON
        self._to_tool = lambda functions: convert_to_tool(functions, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)
        self._system_prompt = system_prompt_pre_processing_chat_model
        self.handlers = {fc: OpenAICompletionsHandler(model_name=MODEL, temperature=0, registry_name=MODEL,
                                                      is_fc_model=fc) for fc in (True, False)}

    def cases(self, category: str, count: int = CASES_PER_CATEGORY) -> list[dict[str, Any]]:
        """``count`` seeded cases of ``category``, each with its ``ground_truth`` (none for irrelevance)."""
        entries = self.utils.load_dataset_entry(category)
        if category != "irrelevance":
            truths = {t["id"]: t["ground_truth"] for t in self.utils.load_ground_truth_entry(category)}
            entries = [{**e, "ground_truth": truths[e["id"]]} for e in entries]
        chosen = entries if count <= 0 else random.Random(f"{SEED}:{category}").sample(entries, count)
        return [{**e, "category": category} for e in chosen]

    def tools(self, case: dict[str, Any]) -> list[dict[str, Any]]:
        """The case's functions as BFCL's OpenAI handler sends them (``a.b`` -> ``a_b``, ``dict`` -> ``object``)."""
        return self._to_tool(json.loads(json.dumps(case["function"])))

    def prompt_messages(self, case: dict[str, Any]) -> list[dict[str, Any]]:
        """BFCL's prompting messages: its system prompt (the functions as JSON, the ``[f(a=1)]`` format), then the question."""
        question = json.loads(json.dumps(case["question"][0]))
        return self._system_prompt(question, case["function"], case["id"])

    def score(self, case: dict[str, Any], answer: str | list[dict[str, str]], fc: bool) -> tuple[bool, str]:
        """BFCL's verdict on an answer (text, or ``[{name: arguments JSON}]`` for tool calls) and its error."""
        handler = self.handlers[fc]
        try:
            decoded = handler.decode_ast(answer, self.format, False)
        except Exception as error:  # noqa: BLE001 - BFCL's own rule: an answer it cannot decode holds no call
            if case["category"] == "irrelevance":
                return True, ""
            return False, f"decoder failed: {error}"
        if case["category"] == "irrelevance":
            return (True, "") if self.utils.is_empty_output(decoded) else (False, f"a call: {decoded}")
        if not self.utils.is_function_calling_format_output(decoded):
            return False, f"not calls: {decoded!r}"
        verdict = self.checker(case["function"], decoded, case["ground_truth"], self.language, case["category"],
                               FC_NAME if fc else PROMPT_NAME)
        return bool(verdict["valid"]), "" if verdict["valid"] else "; ".join(map(str, verdict.get("error", [])))


def check_scorer(bfcl: Bfcl) -> int:
    """Every possible answer of the AST categories, written as the model would (a ``[f(a=1)]`` list, OpenAI tool
    calls), through both decoders and the checker; an irrelevance text answer too. Returns the failures.

    A possible answer lists each parameter's acceptable values (``""``: it may be left out); it is written with
    every parameter that has a value, else with the optional ones left out (BFCL's data names a parameter
    its function lacks a few times, always as optional)."""
    failures = checked = 0
    for category in CATEGORIES:
        for case in bfcl.cases(category, count=0):
            checked += 1
            if category == "irrelevance":
                answers = [("I cannot answer that with these functions.", False), ("No call is needed.", True)]
                failed = [error for answer, fc in answers for ok, error in [bfcl.score(case, answer, fc)] if not ok]
            else:
                failed = [error for fc in (False, True) for ok, error in
                          [max((bfcl.score(case, _written(case, fc, full), fc) for full in (True, False)),
                               key=lambda verdict: verdict[0])] if not ok]
            if failed:
                failures += 1
                print(f"scorer: {case['id']} failed: {failed[0][:300]}", file=sys.stderr)
    print(f"scorer check: {checked - failures}/{checked} cases' possible answers accepted, {failures} failures")
    return failures


def _written(case: dict[str, Any], fc: bool, full: bool) -> str | list[dict[str, str]]:
    """The case's first possible answer as the model would write it (tool calls when ``fc``); ``full``: with
    every parameter that has a value, else without the optional ones."""
    calls = [(name, _arguments(params, full)) for call in case["ground_truth"] for name, params in call.items()]
    if fc:
        return [{name.replace(".", "_"): json.dumps(args)} for name, args in calls]
    return "[" + ", ".join(f"{name}({', '.join(f'{p}={v!r}' for p, v in args.items())})" for name, args in calls) + "]"


def _arguments(params: dict[str, list[Any]], full: bool) -> dict[str, Any]:
    """One call's arguments: each parameter's first acceptable value (``""`` means it may be left out)."""
    args = {}
    for param, values in params.items():
        concrete = [v for v in values if v != ""]
        if concrete and (full or "" not in values):
            args[param] = _value(concrete[0])
    return args


def _value(value: Any) -> Any:
    """A possible value with the acceptable-values lists of a dict inside it unwrapped."""
    if isinstance(value, dict):
        return _arguments(value, full=True)
    if isinstance(value, list):
        return [_value(item) for item in value]
    return value


# --- running a mode ----------------------------------------------------------------------------------------


@dataclass
class Answer:
    """What one request got back."""

    status: int
    answer: str | list[dict[str, str]] = ""
    prompt_tokens: int = 0
    raw: str = ""
    non_json: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def ask(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST a Chat Completions body; the status and the JSON answer (or the error text)."""
    reply = httpx.post(url + "/chat/completions", json=body, headers={"X-Request-Id": str(uuid.uuid4())},
                       timeout=httpx.Timeout(10, read=600))
    try:
        return reply.status_code, reply.json()
    except ValueError:
        return reply.status_code, {"error": reply.text}


def read_answer(status: int, payload: dict[str, Any]) -> Answer:
    """The answer as BFCL's OpenAI handler reads it: tool calls as ``[{name: arguments}]``, else the content."""
    if status != 200:
        return Answer(status, raw=json.dumps(payload)[:2000])
    message = payload["choices"][0]["message"]
    calls = message.get("tool_calls") or []
    non_json = 0
    for call in calls:
        try:
            json.loads(call["function"]["arguments"])
        except ValueError:
            non_json += 1
    answer: str | list[dict[str, str]] = ([{c["function"]["name"]: c["function"]["arguments"]} for c in calls]
                                          if calls else message.get("content") or "")
    raw = (message.get("content") or "") + "".join(f"\n[tool_call] {c['function']['name']} {c['function']['arguments']}"
                                                   for c in calls)
    return Answer(status, answer, (payload.get("usage") or {}).get("prompt_tokens", 0), raw, non_json,
                  {"finish_reason": payload["choices"][0].get("finish_reason")})


def tapped_text(recordings: list[tuple[dict[str, Any], list[str]]]) -> tuple[str, int]:
    """The model's own text (and prompt tokens) in the tap's recordings of one toolwire request."""
    texts, tokens = [], 0
    for _, payloads in recordings:
        text = []
        for payload in payloads:
            if payload.strip() == "[DONE]":
                continue
            chunk = json.loads(payload)
            for choice in chunk.get("choices") or []:
                text.append((choice.get("delta") or {}).get("content") or "")
            tokens += ((chunk.get("usage") or {}).get("prompt_tokens") or 0)
        texts.append("".join(text))
    return "\n--- next upstream request ---\n".join(texts), tokens


def request_body(bfcl: Bfcl, mode: Mode, case: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "temperature": 0, "max_tokens": MAX_TOKENS, "stream": False}
    if mode.tools:
        body.update(messages=json.loads(json.dumps(case["question"][0])), tools=bfcl.tools(case))
    else:
        body["messages"] = bfcl.prompt_messages(case)
    return body


def run_mode(bfcl: Bfcl, name: str, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ask every case in mode ``name``; one record per case."""
    mode = MODES[name]
    records = []
    with LlamaCppServer(MODEL, jinja=mode.jinja, n_ctx=N_CTX) as server, _front(server, mode, name) as (url, tap):
        for number, case in enumerate(cases, 1):
            started = time.monotonic()
            seen = len(tap.answers) if tap else 0
            got = read_answer(*ask(url, request_body(bfcl, mode, case)))
            if tap is not None:
                got.raw, tokens = tapped_text(tap.answers[seen:])
                got.prompt_tokens = tokens or got.prompt_tokens
                got.extra["constrained"] = any("grammar" in body for body, _ in tap.answers[seen:])
            ok, error = bfcl.score(case, got.answer, mode.tools) if got.status == 200 else (False, f"HTTP {got.status}")
            records.append({"id": case["id"], "category": case["category"], "ok": ok, "error": error,
                            "status": got.status, "prompt_tokens": got.prompt_tokens, "non_json": got.non_json,
                            "seconds": round(time.monotonic() - started, 1), "answer": got.answer, "raw": got.raw,
                            **got.extra})
            print(f"  {name} {number}/{len(cases)} {case['id']}: {'ok' if ok else 'miss'} "
                  f"({records[-1]['seconds']} s, {got.prompt_tokens} prompt tokens) {error[:100]}"
                  f"{'' if ok else ' ' + repr(got.raw[:200])}",
                  file=sys.stderr, flush=True)
    return records


@contextlib.contextmanager
def _front(server: LlamaCppServer, mode: Mode, name: str) -> Iterator[tuple[str, ModelTap | None]]:
    """The URL the mode's requests go to, and the tap that records the model's text behind toolwire (whose
    gunicorn output is kept as ``bench/out/bfcl/gunicorn-MODE.log``)."""
    if mode.toolwire is None:
        yield server.v1_url, None
        return
    with ModelTap(server.v1_url) as tap:
        env = {"TOOLWIRE_UPSTREAM_URL": tap.v1_url, "TOOLWIRE_UPSTREAM_READ_TIMEOUT": "600"}
        if mode.toolwire:
            env["TOOLWIRE_MODEL_MAP"] = json.dumps({MODEL: {"model": MODEL, **mode.toolwire}})
        with run_toolwire(env, launcher=(str(GUNICORN), "-c", "gunicorn.conf.py", "wsgi:app")) as toolwire:
            try:
                yield toolwire.v1_url, tap
            finally:
                shutil.copyfile(toolwire.log_path, OUT / f"gunicorn-{name}.log")


# --- the report --------------------------------------------------------------------------------------------


def mcnemar_p(wins: int, losses: int) -> float:
    """The exact two-sided McNemar p-value of ``wins`` against ``losses`` (a binomial test at 1/2)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(wins, losses) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def report(results: dict[str, list[dict[str, Any]]]) -> str:
    """The table (k/n per category, total, prompt tokens a request, HTTP errors, non-JSON arguments, the cases whose
    request to the model carried a grammar, paired wins/losses against ``bfcl-prompt``), and each mode's losses with the model's raw text in OUT."""
    short = {"simple_python": "simple", "multiple": "multiple", "parallel": "parallel",
             "parallel_multiple": "par. multiple", "irrelevance": "irrelevance"}
    lines = ["| mode | " + " | ".join(short[c] for c in CATEGORIES) + " | total | prompt tokens / request "
             "| HTTP errors | non-JSON arguments | grammar sent | vs bfcl-prompt: won / lost (p) |",
             "|---" * (len(CATEGORIES) + 7) + "|"]
    baseline = {r["id"]: r["ok"] for r in results.get("bfcl-prompt", [])}
    for name, records in results.items():
        cells = [f"{sum(r['ok'] for r in records if r['category'] == c)}/"
                 f"{sum(r['category'] == c for r in records)}" for c in CATEGORIES]
        tokens = sum(r["prompt_tokens"] for r in records) / max(len(records), 1)
        errors = sum(r["status"] != 200 for r in records)
        non_json = sum(r["non_json"] for r in records)
        grammar = (f"{sum(bool(r.get('constrained')) for r in records)}/{len(records)}"
                   if any("constrained" in r for r in records) else "—")
        won = [r for r in records if r["id"] in baseline and r["ok"] and not baseline[r["id"]]]
        lost = [r for r in records if r["id"] in baseline and not r["ok"] and baseline[r["id"]]]
        paired = "—" if name == "bfcl-prompt" else f"{len(won)} / {len(lost)} (p = {mcnemar_p(len(won), len(lost)):.3f})"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | **{sum(r['ok'] for r in records)}/{len(records)}** "
                     f"| {tokens:.0f} | {errors} | {non_json} | {grammar} | {paired} |")
        _write_losses(name, records, {r["id"] for r in lost})
    return "\n".join(lines)


def _write_losses(name: str, records: list[dict[str, Any]], paired: set[str]) -> None:
    """``losses-MODE.md``: every case the mode got wrong, the ones ``bfcl-prompt`` won first, with the raw text."""
    failed = sorted((r for r in records if not r["ok"]), key=lambda r: (r["id"] not in paired, r["id"]))
    parts = [f"# {name}: {len(failed)} cases lost ({len(paired)} of them won by bfcl-prompt)\n"]
    for r in failed:
        mark = " (bfcl-prompt won it)" if r["id"] in paired else ""
        parts.append(f"## {r['id']}{mark}\n\nerror: {r['error']}\n\nanswer: `{json.dumps(r['answer'])[:600]}`\n\n"
                     f"raw model text:\n\n```text\n{r['raw']}\n```\n")
    (OUT / f"losses-{name}.md").write_text("\n".join(parts))


def load_results(names: list[str]) -> dict[str, list[dict[str, Any]]]:
    return {n: json.loads((OUT / f"{n}.json").read_text()) for n in names if (OUT / f"{n}.json").exists()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", action="append", choices=MODES, help="run this mode (repeatable; default all)")
    parser.add_argument("--report", action="store_true", help="only print the table of the saved results")
    parser.add_argument("--check-scorer", action="store_true", help="only check the scorer on BFCL's answers")
    parser.add_argument("--cases", type=int, default=CASES_PER_CATEGORY, help="cases per category")
    parser.add_argument("--category", action="append", choices=CATEGORIES,
                        help="only this category (repeatable; the mode's saved answers of the others are kept)")
    args = parser.parse_args()
    bfcl = Bfcl()
    if args.check_scorer:
        sys.exit(1 if check_scorer(bfcl) else 0)
    OUT.mkdir(parents=True, exist_ok=True)
    if not args.report:
        cases = [case for category in args.category or CATEGORIES for case in bfcl.cases(category, args.cases)]
        for name in args.mode or list(MODES):
            records = run_mode(bfcl, name, cases)
            ran = {case["category"] for case in cases}
            kept = [r for r in load_results([name]).get(name, []) if r["category"] not in ran]  # other categories
            (OUT / f"{name}.json").write_text(json.dumps(kept + records, indent=1, ensure_ascii=False))
    table = report(load_results(list(MODES)))
    (OUT / "report.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
