"""``GET /v1/models`` says what each model serves here (issue 40): chat with tools for every model a back end
generates with, the passed-through endpoints only where known, and an embedding model as one."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from app import create_app
from app.capabilities import capabilities
from app.settings import Settings
from support.relay_backend import RelayBackend


@pytest.fixture
def backend() -> Iterator[RelayBackend]:
    with RelayBackend() as server:
        yield server


def listed(client: Any) -> dict[str, list[str]]:
    return {entry["id"]: entry["capabilities"] for entry in client.get("/v1/models").get_json()["data"]}


def test_the_demo_serves_chat_with_tools_and_nothing_passed_through() -> None:
    app = create_app(Settings(model_map={"mapped": "demo"}))
    assert set(map(tuple, listed(app.test_client()).values())) == {("chat", "tools")}


def test_an_http_back_ends_models_by_what_its_list_says(backend: RelayBackend) -> None:
    backend.models = [
        {"id": "plain", "object": "model"},
        {"id": "nomic-embed", "object": "model", "type": "embeddings"},  # LM Studio's
        {"id": "coder", "object": "model", "capabilities": ["completion", "tools", "insert"]},  # Ollama's words
        {"id": "both", "object": "model", "capabilities": ["completion", "embedding"]},
        {"id": "bge", "object": "model", "capabilities": ["embedding"]}]
    app = create_app(Settings(upstream_url=backend.v1_url,
                              model_map={"reranker": {"model": "bge-rerank", "capabilities": ["rerank"]}}))
    assert listed(app.test_client()) == {
        "plain": ["chat", "tools"], "nomic-embed": ["embeddings"], "coder": ["chat", "tools", "completions"],
        "both": ["chat", "tools", "completions", "embeddings"], "bge": ["embeddings"], "reranker": ["rerank"]}


def test_a_declaration_wins_over_the_list_but_not_over_the_kind() -> None:
    settings = Settings(model_map={"e": {"capabilities": ["embeddings"]}, "c": {"capabilities": ["chat", "rerank"]}})
    assert capabilities(settings, "e", {"type": "llm"}, relays=True) == ["embeddings"]
    assert capabilities(settings, "e", {}, relays=False) == []  # the demo or Codex: it cannot embed
    assert capabilities(settings, "c", {}, relays=False) == ["chat"]
    assert capabilities(settings, "other", {"type": "embeddings"}, relays=False) == ["chat", "tools"]
