"""Mounting toolwire into a host Flask app with the Toolwire extension."""

from __future__ import annotations

import logging

import pytest
from flask import Flask

from app import Toolwire, create_app, create_debug_blueprint, create_ops_blueprint
from app.http.extension import UnpatchedSocketWarning
from app.http.state import current_state
from app.settings import Settings
from support.fakes import FakeUpstream, text_chunks


def host_app() -> Flask:
    host = Flask("host")

    @host.get("/")
    def index():
        return "host home"

    @host.get("/api/ping")
    def ping():
        return {"pong": True}

    return host


def test_mounts_beside_host_routes_with_custom_prefix_and_name():
    host = host_app()
    upstream = FakeUpstream(text_chunks("Hello from the host."))
    ext = Toolwire(settings=Settings(), upstream=upstream)
    ext.init_app(host, url_prefix="/llm/v1", name="llm")
    client = host.test_client()

    assert client.get("/").data == b"host home"
    assert client.get("/api/ping").get_json() == {"pong": True}
    response = client.post("/llm/v1/chat/completions",
                           json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 200
    assert response.get_json()["choices"][0]["message"]["content"] == "Hello from the host."
    assert client.get("/llm/v1/models").get_json()["data"][0]["id"] == "fake-model"
    assert client.post("/v1/chat/completions", json={}).status_code == 404
    assert {r.endpoint for r in host.url_map.iter_rules() if r.rule.startswith("/llm/")} == \
        {"llm.chat.chat_completions", "llm.responses.create_response", "llm.responses.get_response",
         "llm.responses.delete_response", "llm.responses.unsupported_subpath",
         *(f"llm.responses.{name}" for name in (
             "count_input_tokens", "compact_response", "list_input_items", "cancel_response", "create_conversation",
             "get_conversation", "update_conversation", "delete_conversation", "list_conversation_items",
             "add_conversation_items", "get_conversation_item", "delete_conversation_item")),
         "llm.messages.create_message", "llm.messages.count_message_tokens", "llm.messages.unrouted",
         "llm.chat.unrouted", "llm.responses.unrouted", "llm.list_models", "llm.passthrough.embeddings",
         "llm.passthrough.completions", "llm.passthrough.rerank", "llm.passthrough.audio", "llm.passthrough.unrouted"}
    assert host.extensions["toolwire"] == {"llm": ext}
    assert ext.state(host).upstream is upstream


def test_errors_from_its_views_use_the_envelope_in_the_host():
    host = host_app()
    Toolwire(host, settings=Settings(), upstream=FakeUpstream())
    response = host.test_client().post("/v1/chat/completions", json={"model": "m"})
    assert response.status_code == 400
    assert response.get_json()["error"]["param"] == "messages"


def test_registering_twice_raises():
    host = host_app()
    Toolwire(host, settings=Settings(), upstream=FakeUpstream())
    with pytest.raises(RuntimeError, match="already registered"):
        Toolwire(host, settings=Settings(), upstream=FakeUpstream())


def test_two_mounts_on_one_app_each_with_its_prefix_name_and_settings():
    host = host_app()
    local = Toolwire(host, url_prefix="/local/v1", name="local", settings=Settings(max_messages=1),
                     upstream=FakeUpstream(text_chunks("From the local model.")))
    remote = Toolwire(host, url_prefix="/remote/v1", name="remote", settings=Settings(),
                      upstream=FakeUpstream(text_chunks("From the remote model.")))
    client = host.test_client()
    one = [{"role": "user", "content": "hi"}]
    for prefix, text in (("/local/v1", "From the local model."), ("/remote/v1", "From the remote model.")):
        response = client.post(f"{prefix}/chat/completions", json={"model": "m", "messages": one})
        assert response.get_json()["choices"][0]["message"]["content"] == text
    two = client.post("/local/v1/chat/completions", json={"model": "m", "messages": one * 2})
    assert two.status_code == 400 and two.get_json()["error"]["param"] == "messages"  # local's own limit
    assert client.post("/remote/v1/chat/completions", json={"model": "m", "messages": one * 2}).status_code == 200
    assert host.extensions["toolwire"] == {"local": local, "remote": remote}
    assert {r.endpoint.split(".")[0] for r in host.url_map.iter_rules() if r.endpoint != "static"} >= \
        {"local", "remote"}
    with host.test_request_context("/healthz"):
        assert current_state() is local.state(host)  # outside a mount's routes: the first mount
    with host.test_request_context("/remote/v1/models"):
        assert current_state() is remote.state(host)


def test_a_second_mount_of_the_same_name_raises():
    host = host_app()
    ext = Toolwire(host, url_prefix="/a/v1", name="a", settings=Settings(), upstream=FakeUpstream())
    with pytest.raises(RuntimeError, match="already registered"):
        Toolwire(host, url_prefix="/b/v1", name="a", settings=Settings(), upstream=FakeUpstream())
    with pytest.raises(RuntimeError, match="already registered"):
        ext.init_app(host, url_prefix="/c/v1", name="c")


def test_one_extension_serves_several_apps():
    ext = Toolwire(settings=Settings(), upstream=FakeUpstream())
    first, second = host_app(), host_app()
    ext.init_app(first)
    ext.init_app(second, url_prefix="/other")
    assert ext.state(first) is not ext.state(second)


def test_unregistered_access_is_a_clear_error():
    ext = Toolwire(settings=Settings(), upstream=FakeUpstream())
    with pytest.raises(RuntimeError, match="init_app"):
        ext.state(host_app())
    with host_app().app_context(), pytest.raises(RuntimeError, match="init_app"):
        current_state()


def test_warns_when_gevent_has_not_patched_socket():
    with pytest.warns(UnpatchedSocketWarning, match="gevent"):
        Toolwire(host_app(), settings=Settings(), upstream=FakeUpstream())


def test_create_app_uses_the_demo_back_end_without_configuration(monkeypatch):
    monkeypatch.delenv("TOOLWIRE_UPSTREAM_URL", raising=False)
    app = create_app(Settings(upstream_url=None))
    models = app.test_client().get("/v1/models").get_json()
    assert models["object"] == "list" and models["data"][0]["id"] == "toolwire-demo"


def test_init_app_reads_toolwire_keys_from_the_host_config_over_the_environment(monkeypatch):
    monkeypatch.setenv("TOOLWIRE_DEMO_MODEL", "from-env")
    monkeypatch.setenv("TOOLWIRE_MAX_TOOLS", "7")
    host = host_app()
    host.config.update(TOOLWIRE_DEMO_MODEL="from-host-config", TOOLWIRE_RESPONSE_STORE_PATH="",
                       TOOLWIRE_CONFIG_FILE="ignored.toml", OTHER_SETTING="not toolwire's")
    ext = Toolwire(host, upstream=FakeUpstream())
    settings = ext.state(host).settings
    assert settings.demo_model == "from-host-config"  # the host's config wins over the environment
    assert settings.max_tools == 7  # keys the host does not set still come from the environment
    assert settings.response_store_path == "" and ext.state(host).store is None


def test_an_explicit_settings_object_wins_over_the_host_config():
    host = host_app()
    host.config["TOOLWIRE_DEMO_MODEL"] = "from-host-config"
    ext = Toolwire(host, settings=Settings(demo_model="explicit"), upstream=FakeUpstream())
    assert ext.state(host).settings.demo_model == "explicit"


def test_init_app_leaves_the_hosts_logging_levels_alone():
    names = ("", "transitions", "httpx", "toolwire", "app")
    before = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        Toolwire(host_app(), settings=Settings(response_store_path=""), upstream=FakeUpstream())
        assert {name: logging.getLogger(name).level for name in names} == dict.fromkeys(names, logging.DEBUG)
    finally:
        for name, level in before.items():
            logging.getLogger(name).setLevel(level)


def test_ops_and_debug_blueprints_serve_the_mount_they_are_bound_to():
    host = host_app()
    down = FakeUpstream()
    down.is_ready = False
    Toolwire(host, url_prefix="/local/v1", name="local", settings=Settings(debug=True), upstream=FakeUpstream())
    remote = Toolwire(host, url_prefix="/remote/v1", name="remote", settings=Settings(debug=False), upstream=down)
    host.register_blueprint(create_ops_blueprint("local_ops"), url_prefix="/local")
    host.register_blueprint(create_ops_blueprint("remote_ops", mount="remote"), url_prefix="/remote")
    host.register_blueprint(create_debug_blueprint("local_debug", guard=None), url_prefix="/local")
    host.register_blueprint(create_debug_blueprint("remote_debug", guard=None, mount="remote"),
                            url_prefix="/remote")
    client = host.test_client()

    assert client.get("/local/readyz").status_code == 200  # unbound: the first mount
    assert client.get("/remote/readyz").status_code == 503  # bound: the remote mount's own back end
    assert client.get("/local/debug/requests").status_code == 200
    assert client.get("/remote/debug/requests").status_code == 404  # the remote mount has debug off
    with host.test_request_context("/remote/readyz"):
        host.preprocess_request()
        assert current_state() is remote.state(host)


def test_ops_and_debug_refusals_in_a_host_app_are_envelopes():
    host = host_app()
    Toolwire(host, settings=Settings(api_keys="sk-one", metrics_require_key=True), upstream=FakeUpstream())
    host.register_blueprint(create_ops_blueprint())
    host.register_blueprint(create_debug_blueprint())
    client = host.test_client()

    for path in ("/metrics", "/debug/requests"):
        response = client.get(path)
        assert response.status_code == 401, path
        assert response.get_json()["error"]["type"] == "invalid_request_error"
