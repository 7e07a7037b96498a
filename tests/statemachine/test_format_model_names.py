"""``tool_format = auto``: each format claims the model names it is the family's own for."""

from __future__ import annotations

import pytest

from statemachine import TextFormat, register_format, registered_formats
from statemachine.formats import format_for_model, get_format


@pytest.mark.parametrize(("model", "fmt"), [
    # Ollama and llama.cpp spell the family without separators or with a tag (issue 31, fault 8).
    ("gemma3:270m", "gemma"), ("gemma3-270m", "gemma"), ("hf.co/unsloth/gemma-3-270m-it-GGUF:Q4_K_M", "gemma"),
    ("granite3.3:8b", "pythonic"), ("llama3.1:8b", "llama3"), ("gpt-oss:20b", "harmony"), ("qwen3-coder:30b", "function"),
    ("olmo3:7b", "olmo3"), ("gemma4:e4b", "gemma4"), ("functiongemma:270m", "functiongemma"),
    # The longest fragment found wins over a shorter one of another format.
    ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek_v32"), ("deepseek-v3.1:671b", "deepseek"),
    ("meetkai/functionary-small-v3.1", "functionary"), ("meetkai/functionary-small-v3.2", "functionary_v3_2"),
])
def test_a_model_name_picks_its_family_format(model, fmt):
    assert format_for_model(model) == fmt


@pytest.mark.parametrize("model", ["phi-4", "qwen2.5:7b", "gemma2:9b", "granite3.2:8b", "smollm2:135m"])
def test_a_name_no_format_claims_has_none(model):
    assert format_for_model(model) is None


def test_a_registered_format_claims_names_too():
    class SmokeFormat(TextFormat):
        name = "test_smoke_signals"
        openers = ("<smoke>",)
        model_names = ("smoke-lm",)

        def render_call(self, name: str, arguments: str) -> str:
            return f"<smoke>{name} {arguments}"

        def new_body(self, opener, sink):
            raise NotImplementedError

    if SmokeFormat.name not in registered_formats():
        register_format(SmokeFormat())
    assert format_for_model("acme/Smoke_LM-2B:q4") == "test_smoke_signals"


def test_every_built_in_family_format_claims_a_name():
    families = {"deepseek", "deepseek_v32", "deepseek_v4", "kimi_k2", "mistral", "function", "llama3", "glm",
                "seed_oss", "minimax", "harmony", "pythonic", "olmo3", "gemma", "functiongemma", "gemma4",
                "functionary", "functionary_v3_2"}
    assert {name for name in registered_formats() if get_format(name).model_names} >= families
