"""The registry of back-end kinds (``app.upstreams.kinds``): a kind registered outside ``app/`` serves the models
routed to it, and a back end whose kind or section is unusable is refused at start in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest
from pydantic import BaseModel, ConfigDict

from app import create_app
from app.cli import main
from app.loading import load_settings
from app.settings import Settings, SettingsError
from app.upstreams import kinds
from app.upstreams.base import ChoiceDelta, UpstreamChunk
from app.upstreams.kinds import BackendKind, register_kind, registered_kinds


@pytest.fixture(autouse=True)
def clean(monkeypatch, tmp_path):
    """No ``TOOLWIRE_*`` from the environment, the responses stored under tmp, and the registry restored after."""
    import os

    for key in list(os.environ):
        if key.startswith("TOOLWIRE_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("TOOLWIRE_RESPONSE_STORE_PATH", str(tmp_path / "r.sqlite3"))
    monkeypatch.setattr(kinds, "_KINDS", dict(kinds._KINDS))


class EchoSection(BaseModel):
    """The toy kind's settings section: what it says, and how many times."""

    model_config = ConfigDict(extra="forbid")

    greeting: str = "hello"
    times: int = 1


class EchoUpstream:
    """A toy back end: every answer is its greeting, repeated, then the model's name it was asked for."""

    def __init__(self, section: EchoSection):
        self.section = section

    def open(self, body: dict[str, Any], *, request_id: str | None = None) -> "_Played":
        text = " ".join([self.section.greeting] * self.section.times) + f" from {body['model']}"
        return _Played([UpstreamChunk([ChoiceDelta(0, text)]), UpstreamChunk([ChoiceDelta(0, finish_reason="stop")])])

    def models(self) -> list[dict[str, Any]]:
        return [{"id": "echo-1", "object": "model", "created": 0, "owned_by": "echo"}]

    def ready(self) -> bool:
        return True


class _Played:
    def __init__(self, chunks: list[UpstreamChunk]):
        self.chunks = chunks

    def __iter__(self) -> Iterator[UpstreamChunk]:
        return iter(self.chunks)

    def plain_texts(self, *, join: bool = False) -> None:
        pass  # its chunks are built already

    def pause_every(self, tick: float | None) -> None:
        pass  # every chunk is there

    def confirm(self) -> None:
        pass

    def close(self) -> None:
        pass


def echo_kind() -> BackendKind[EchoSection]:
    return BackendKind("echo", EchoSection, lambda settings, section: EchoUpstream(section))


def answer(app, model: str) -> str:
    reply = app.test_client().post("/v1/chat/completions", json={"model": model, "messages": [
        {"role": "user", "content": "hi"}]})
    assert reply.status_code == 200, reply.data
    return reply.get_json()["choices"][0]["message"]["content"]


def test_a_kind_registered_outside_app_serves_the_models_routed_to_it():
    register_kind(echo_kind())
    app = create_app(load_settings(
        upstreams={"toy": {"kind": "echo", "options": {"greeting": "hi", "times": 2}, "models": ["echo-1"]}},
        model_map={"friendly": {"model": "echo-1", "upstream": "toy"}}))
    state = app.extensions["toolwire"]["toolwire"].state(app)
    assert isinstance(state.upstreams["toy"].upstream, EchoUpstream)
    assert answer(app, "friendly") == "hi hi from echo-1" and answer(app, "echo-1") == "hi hi from echo-1"
    assert answer(app, "toolwire-demo") != "hi hi from toolwire-demo"  # the default back end: still the demo


def test_a_registered_kind_may_be_the_default_back_ends_with_its_options_from_the_environment(monkeypatch):
    register_kind(echo_kind())
    monkeypatch.setenv("TOOLWIRE_UPSTREAM_KIND", "echo")
    monkeypatch.setenv("TOOLWIRE_UPSTREAM_OPTIONS", '{"greeting": "hey"}')
    assert answer(create_app(load_settings()), "anything") == "hey from anything"


def test_the_built_in_kinds_are_registered_and_a_name_is_taken_once():
    assert registered_kinds() == ("openai", "codex", "demo")
    register_kind(echo_kind())
    with pytest.raises(ValueError, match="'echo'"):
        register_kind(echo_kind())
    register_kind(echo_kind(), replace=True)


@pytest.mark.parametrize("settings, named", [
    ({"upstream_kind": "nope"}, "TOOLWIRE_UPSTREAM_KIND: no back-end kind named 'nope'; registered: openai, codex, "
                                "demo, echo"),
    ({"upstreams": {"x": {"kind": "nope"}}}, "TOOLWIRE_UPSTREAMS (x): no back-end kind named 'nope'"),
    ({"upstreams": {"x": {"kind": "openai"}}}, "TOOLWIRE_UPSTREAMS (x): upstream_url: needs a url"),
    ({"upstream_kind": "openai"}, "TOOLWIRE_UPSTREAM_KIND=openai: upstream_url: needs a url"),
    ({"upstreams": {"x": {"kind": "echo", "options": {"colour": "red"}}}},
     "TOOLWIRE_UPSTREAMS (x): options: colour: not a key of kind 'echo'"),
    ({"upstreams": {"x": {"kind": "demo", "options": {"greeting": "hi"}}}},
     "TOOLWIRE_UPSTREAMS (x): options: greeting: not a key of kind 'demo'"),
    ({"upstream_kind": "echo", "upstream_options": {"times": "twice"}}, "TOOLWIRE_UPSTREAM_KIND=echo: times: Input should be a valid integer"),
    ({"upstream_kind": "demo", "upstream_options": {"demo_model": "x"}},
     "TOOLWIRE_UPSTREAM_KIND=demo: options: demo_model: a setting of its own"),
])
def test_an_unusable_kind_or_section_is_refused_at_start_in_one_line(settings, named, monkeypatch, capsys):
    register_kind(echo_kind())
    with pytest.raises(SettingsError) as caught:
        create_app(Settings(**settings))
    assert named in str(caught.value) and "\n" not in str(caught.value)
    for key, value in settings.items():  # toolwire check (gunicorn's master, before it binds): the same line
        monkeypatch.setenv(f"TOOLWIRE_{key.upper()}", value if isinstance(value, str) else json.dumps(value))
    assert main(["check"]) == 2
    assert capsys.readouterr().err == f"toolwire cannot start: {caught.value}\n"


def test_a_kind_lives_in_app_upstreams_and_its_section_beside_the_other_back_ends():
    """A new kind touches only ``app/upstreams/`` and its settings section: each registered kind's section is
    declared with the back ends' settings (or its kind), and ``app/settings.py`` only composes the sections."""
    import app.settings

    for name in registered_kinds():
        section = kinds._KINDS[name].section
        assert section.__module__ == "app.upstream_settings" or section.__module__.startswith("app.upstreams."), name
    source = Path(app.settings.__file__).read_text()
    assert not re.search(r"\b(codex|openai)\b", source, re.IGNORECASE)
    assert len(source.splitlines()) <= 450
