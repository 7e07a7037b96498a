"""``bench/template_tokens.py`` (``make bench-model``'s tokens per tool under a family's own chat template):
rendered with Jinja and counted by the model's own tokenizer, in the cached llama.cpp venv."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.llama_server import ensure_llama, ensure_model
from support.real_model import TOOLS

pytestmark = pytest.mark.e2e

TEST_TIME_LIMIT = 120.0
SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "template_tokens.py"
MESSAGES = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
ONCE = "{% for t in tools or [] %}{{ t.function | tojson }}\n{% endfor %}" + MESSAGES
TWICE = "{% for t in tools or [] %}{{ t.function | tojson }}\n{{ t.function | tojson }}\n{% endfor %}" + MESSAGES


def per_tool(model: str, templates: dict[str, Any]) -> dict[str, Any]:
    job = {"model": str(ensure_model(model)), "templates": templates, "question": "Weather in Paris?",
           "tools": [{"type": "function", "function": tool} for tool in TOOLS]}
    done = subprocess.run([str(ensure_llama()), str(SCRIPT)], input=json.dumps(job), capture_output=True, text=True,
                          check=True, timeout=100)
    return json.loads(done.stdout)


def test_tokens_per_tool_follow_what_the_template_writes_for_the_tools():
    counts = per_tool("smollm2", {"own": None, "once": ONCE, "twice": TWICE})
    assert counts["own"] == [0, 0]  # SmolLM2's own template ignores tools
    assert counts["once"][0] > 20  # a tool's JSON is tens of tokens, not characters or nothing
    assert counts["twice"] == [2 * counts["once"][0], 2 * counts["once"][1]]
    assert counts["once"][1] != counts["once"][0]  # the further tool (get_time) is not the first (get_weather)


def test_a_gguf_without_a_chat_template_has_no_own_count():
    assert per_tool("gemma3", {"own": None, "once": ONCE})["own"] is None
