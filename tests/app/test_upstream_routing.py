"""Named back ends (``upstreams``): their settings, the routing of client models, and what the app makes of them."""

from __future__ import annotations

import pytest

from app import create_app
from app.cli import main
from app.profile import model_profile
from app.routing import fallbacks, route, upstream_names, upstream_settings
from app.loading import load_settings
from app.settings import Settings, SettingsError
from app.upstreams.demo import DemoUpstream


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os

    for key in list(os.environ):
        if key.startswith("TOOLWIRE_"):
            monkeypatch.delenv(key)


UPSTREAMS = {
    "vllm": {"kind": "openai", "url": "http://127.0.0.1:9/v1", "api_key": "sk-vllm-secret", "models": ["gpt-oss"],
             "tool_mode": "native", "read_timeout": 7, "opens_reasoning": True},
    "lab": {"kind": "demo", "demo_model": "lab-demo"},
}
MODEL_MAP = {"coder": {"model": "qwen3-coder", "upstream": "vllm", "tool_mode": "auto"}, "small": "qwen3:0.6b"}


def settings(**extra) -> Settings:
    return load_settings(upstream_url="http://127.0.0.1:8/v1", upstreams=UPSTREAMS, model_map=MODEL_MAP, **extra)


def test_routing_follows_the_map_then_the_back_ends_lists_then_the_default():
    s = settings()
    assert upstream_names(s) == ["default", "vllm", "lab"]
    assert [route(s, m) for m in ("coder", "gpt-oss", "lab-demo", "small", "other", None)] == \
        ["vllm", "vllm", "lab", "default", "default", "default"]


def test_a_back_end_sees_its_own_keys_over_the_top_level_settings():
    vllm = upstream_settings(settings(tool_format="use_tool"), "vllm")
    gpt_oss, coder = model_profile(vllm, "gpt-oss"), model_profile(vllm, "coder")
    assert (vllm.backend, vllm.upstream_url, vllm.upstream_api_key.get_secret_value()) == \
        ("openai", "http://127.0.0.1:9/v1", "sk-vllm-secret")
    assert vllm.upstream_read_timeout == 7 and vllm.upstream_connect_timeout == 10  # unset: the top level's
    assert gpt_oss.tool_mode == "native" and coder.tool_mode == "auto"
    assert gpt_oss.opens_reasoning and coder.tool_format == "use_tool"
    assert coder.upstream_model == "qwen3-coder" and set(vllm.model_map) == {"coder", "gpt-oss"}
    default = upstream_settings(settings(), "default")
    assert default.upstream_url == "http://127.0.0.1:8/v1" and set(default.model_map) == {"small"}
    assert upstream_settings(settings(), "lab").backend == "demo"


def test_a_fallback_back_end_sees_the_models_that_fall_back_to_it():
    s = load_settings(upstreams={"a": {"kind": "demo"}, "b": {"kind": "openai", "url": "http://127.0.0.1:9/v1"}},
                      model_map={"m": {"model": "big", "upstream": "a", "fallback": ["b", "default"]}})
    assert route(s, "m") == "a" and fallbacks(s, "m") == ["b", "default"] and fallbacks(s, "other") == []
    assert model_profile(upstream_settings(s, "b"), "m").upstream_model == "big" == \
        model_profile(upstream_settings(s, "default"), "m").upstream_model


def test_a_single_back_end_is_the_settings_themselves():
    s = load_settings(upstream_url="http://127.0.0.1:8/v1")
    assert upstream_settings(s, "default") is s and upstream_names(s) == ["default"]


@pytest.mark.parametrize("upstreams, model_map, named", [
    ({"default": {"kind": "demo"}}, {}, "upstreams"),
    ({"a b": {"kind": "demo"}}, {}, "upstreams"),
    ({"x": {"kind": "demo", "read_timeout": -1}}, {}, "upstreams.x: upstream_read_timeout"),
    ({"x": {"kind": "demo", "tool_format": "nope"}}, {}, "upstreams.x: tool_format"),
    ({"x": {"kind": "demo", "colour": "red"}}, {}, "colour"),
    ({}, {"m": {"upstream": "nowhere"}}, "model_map.m"),
    ({}, {"m": {"fallback": ["nowhere"]}}, "model_map.m"),
    ({"x": {"kind": "demo"}}, {"m": {"upstream": "x", "fallback": ["x"]}}, "repeats"),
    ({"x": {"kind": "demo"}}, {"m": {"fallback": ["x", "x"]}}, "repeats"),
    ({"9": {"kind": "demo"}}, {}, "a name is a letter"),
    ({"x": {"kind": "demo", "models": ["m"]}, "y": {"kind": "demo", "models": ["m"]}}, {}, "both x and y"),
])
def test_unusable_back_ends_are_refused_at_start_in_one_line(upstreams, model_map, named):
    with pytest.raises(SettingsError) as caught:
        load_settings(upstreams=upstreams, model_map=model_map)
    message = str(caught.value)
    assert "TOOLWIRE_" in message and named in message and "\n" not in message


def test_back_ends_from_json_in_the_environment_and_tables_in_the_file(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLWIRE_UPSTREAMS", '{"ollama": {"kind": "openai", "url": "http://127.0.0.1:11434/v1"}}')
    assert upstream_settings(load_settings(), "ollama").upstream_url == "http://127.0.0.1:11434/v1"
    monkeypatch.delenv("TOOLWIRE_UPSTREAMS")
    path = tmp_path / "toolwire.toml"
    path.write_text('[model_map]\nbig = { model = "qwen3:32b", upstream = "ollama" }\n\n'
                    '[upstreams.ollama]\nkind = "openai"\nurl = "http://127.0.0.1:11434/v1"\nmodels = ["llama3"]\n')
    monkeypatch.setenv("TOOLWIRE_CONFIG_FILE", str(path))
    s = load_settings()
    assert route(s, "big") == route(s, "llama3") == "ollama"


def test_cli_config_masks_the_back_ends_keys_and_prints_the_routing_table(monkeypatch, capsys):
    monkeypatch.setenv("TOOLWIRE_UPSTREAMS", '{"vllm": {"kind": "openai", "url": "http://u:pw@127.0.0.1:9/v1", '
                                             '"api_key": "sk-vllm-secret", "models": ["gpt-oss"]}}')
    monkeypatch.setenv("TOOLWIRE_MODEL_MAP", '{"coder": {"model": "q", "upstream": "vllm"}}')
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert "sk-vllm-secret" not in out and ":pw@" not in out and "**********" in out
    assert "  vllm (openai http://u:**********@127.0.0.1:9/v1): coder, gpt-oss" in out
    assert "  default (demo): -" in out


def test_each_back_end_gets_its_own_upstream_and_requests_go_to_the_routed_one(tmp_path):
    app = create_app(load_settings(upstreams={"lab": {"kind": "demo", "demo_model": "lab-demo"}},
                                   response_store_path=str(tmp_path / "r.sqlite3")))
    state = app.extensions["toolwire"]["toolwire"].state(app)
    default, lab = state.upstreams["default"].upstream, state.upstreams["lab"].upstream
    assert isinstance(lab, DemoUpstream) and lab is not default and lab.model == "lab-demo"
    client = app.test_client()
    for model, served in (("lab-demo", "lab-demo"), ("toolwire-demo", "toolwire-demo")):
        reply = client.post("/v1/chat/completions", json={"model": model, "messages": [
            {"role": "user", "content": "hi"}]})
        assert reply.status_code == 200 and reply.get_json()["model"] == served
    models = {m["id"] for m in client.get("/v1/models").get_json()["data"]}
    assert models == {"lab-demo", "toolwire-demo"}
    assert client.get("/readyz").get_json()["upstreams"] == {"default": "ok", "lab": "ok"}


def test_a_back_end_at_its_concurrency_limit_refuses_only_its_own_models(tmp_path):
    app = create_app(load_settings(upstreams={"lab": {"kind": "demo", "demo_model": "lab-demo", "max_concurrent": 1}},
                                   response_store_path=str(tmp_path / "r.sqlite3")))
    state = app.extensions["toolwire"]["toolwire"].state(app)
    held = state.upstreams["lab"].slots.try_acquire()
    client = app.test_client()
    body = {"messages": [{"role": "user", "content": "hi"}]}
    refused = client.post("/v1/chat/completions", json={"model": "lab-demo", **body})
    assert refused.status_code == 429 and "(lab)" in refused.get_json()["error"]["message"]
    assert client.post("/v1/chat/completions", json={"model": "toolwire-demo", **body}).status_code == 200
    held.release()
    assert client.post("/v1/chat/completions", json={"model": "lab-demo", **body}).status_code == 200
    assert state.upstreams["lab"].slots.in_use == 0


def test_the_debug_page_shows_the_back_ends_and_each_requests_back_end(tmp_path):
    app = create_app(load_settings(
        upstreams={"lab": {"kind": "demo", "demo_model": "lab-demo"},
                   "vllm": {"kind": "openai", "url": "http://u:pw@127.0.0.1:9/v1", "models": ["gpt-oss"]}},
        model_map={"coder": {"model": "q", "upstream": "vllm"}}, debug=True, debug_dir=str(tmp_path / "debug"),
        response_store_path=str(tmp_path / "r.sqlite3")))
    client = app.test_client()
    assert client.get("/debug/upstreams").get_json()["data"] == [
        {"name": "default", "kind": "demo", "url": "", "models": []},
        {"name": "lab", "kind": "demo", "url": "", "models": ["lab-demo"]},
        {"name": "vllm", "kind": "openai", "url": "http://u:**********@127.0.0.1:9/v1", "models": ["coder", "gpt-oss"]}]
    reply = client.post("/v1/chat/completions", json={"model": "lab-demo", "messages": [{"role": "user", "content": "hi"}]},
                        buffered=True)
    view = client.get(f"/debug/requests/{reply.headers['X-Request-Id']}").get_json()
    assert view["upstream"] == "lab"
    page = client.get("/debug/").get_data(as_text=True)
    assert 'id="upstreams"' in page
