"""Prompt tokens per tool under a model family's own chat template, for ``make bench-model``.

Run by ``bench/model_bench.py`` with the llama.cpp venv's Python (it imports nothing of toolwire): reads one
JSON object on stdin, ``{"model": GGUF path, "templates": {label: jinja text or null for the GGUF's own},
"tools": [OpenAI tool objects], "question": text}``, and prints ``{label: [tokens per tool, tokens per further
tool]}`` (``null`` for a GGUF without a template of its own). Each template is rendered as transformers and
llama.cpp's ``--jinja`` render one (a sandboxed Jinja environment with ``trim_blocks``/``lstrip_blocks``,
``tojson``, ``raise_exception``, ``strftime_now``) for the question with every tool, with the first tool only,
and without tools, and counted by the model's own tokenizer (``Llama(vocab_only=True)``, special tokens
parsed). Tokens per tool: (every tool - none) / tools, the fixed teaching text included; per further tool:
(every tool - the first) / (tools - 1), what one more tool costs.
"""

from __future__ import annotations

import datetime
import json
import sys
from typing import Any

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
from llama_cpp import Llama


def _raise(message: str) -> None:
    raise ValueError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def render(template: str, question: str, tools: list[dict[str, Any]] | None, bos: str, eos: str) -> str:
    """The prompt ``template`` makes of one user ``question`` (and ``tools``), generation prompt included."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.datetime(2026, 1, 1).strftime(fmt)
    return env.from_string(template).render(messages=[{"role": "user", "content": question}], tools=tools,
                                            add_generation_prompt=True, bos_token=bos, eos_token=eos)


def main() -> None:
    job = json.load(sys.stdin)
    model = Llama(model_path=job["model"], vocab_only=True, verbose=False)
    vocab = model._model  # noqa: SLF001 - the only way to the token texts of bos/eos

    def token_text(token: int) -> str:
        return vocab.token_get_text(token) if token >= 0 else ""

    bos, eos = token_text(model.token_bos()), token_text(model.token_eos())
    own = model.metadata.get("tokenizer.chat_template")
    tools = job["tools"]
    per_tool: dict[str, list[float] | None] = {}
    for label, template in job["templates"].items():
        template = template or own
        if not template:
            per_tool[label] = None
            continue
        every, first, none = (len(model.tokenize(render(template, job["question"], offered, bos, eos).encode(),
                                                 add_bos=False, special=True))
                              for offered in (tools, tools[:1], None))
        per_tool[label] = [(every - none) / len(tools), (every - first) / (len(tools) - 1)]
    print(json.dumps(per_tool))


if __name__ == "__main__":
    main()
