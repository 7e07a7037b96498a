"""Settings from the environment and a TOML file, masking, and the ``toolwire`` CLI."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app import create_app
from app.cli import describe, main
from app.profile import model_profile
from app.store import store_url
from app.loading import load_settings
from app.settings import Settings, SettingsError, mask_url


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os

    for key in list(os.environ):
        if key.startswith("TOOLWIRE_"):
            monkeypatch.delenv(key)


def test_defaults():
    settings = Settings()
    assert settings.upstream_url is None and settings.upstream_api_key is None
    assert settings.heartbeat_seconds == 10 and settings.tool_format == "tool_call"
    assert model_profile(settings, "anything").upstream_model == "anything"


def test_environment_parsing(monkeypatch):
    monkeypatch.setenv("TOOLWIRE_UPSTREAM_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("TOOLWIRE_UPSTREAM_API_KEY", "sk-secret")
    monkeypatch.setenv("TOOLWIRE_UPSTREAM_READ_TIMEOUT", "42.5")
    monkeypatch.setenv("TOOLWIRE_MODEL_MAP", '{"gpt-4o": "qwen2.5:7b"}')
    monkeypatch.setenv("TOOLWIRE_DEFAULT_UPSTREAM_MODEL", "llama3")
    monkeypatch.setenv("TOOLWIRE_HEARTBEAT_SECONDS", "3")
    monkeypatch.setenv("TOOLWIRE_TOOL_FORMAT", "use_tool")
    monkeypatch.setenv("TOOLWIRE_UNKNOWN_TOOL", "fail")
    monkeypatch.setenv("TOOLWIRE_SUPPRESS_TAIL_AFTER_TOOLS", "true")
    monkeypatch.setenv("TOOLWIRE_STOP_AFTER_TOOLS", "first")
    monkeypatch.setenv("TOOLWIRE_MAX_TOOL_CALLS", "2")
    settings = Settings()
    assert settings.upstream_url == "http://127.0.0.1:11434/v1"
    assert settings.upstream_api_key.get_secret_value() == "sk-secret"
    assert settings.upstream_read_timeout == 42.5 and settings.heartbeat_seconds == 3
    assert model_profile(settings, "gpt-4o").upstream_model == "qwen2.5:7b"
    assert model_profile(settings, "other").upstream_model == "llama3"
    policy = model_profile(settings, "other").policy
    assert (policy.unknown_tool, policy.text_after_calls, policy.stop_after_first_call, policy.max_tool_calls) == \
        ("fail", "suppress", True, 2)


@pytest.mark.parametrize("key, value", [
    ("TOOLWIRE_TOOL_FORMAT", "smoke_signals"),
    ("TOOLWIRE_STOP_AFTER_TOOLS", "sometimes"),
    ("TOOLWIRE_MAX_TOOL_CALLS", "-1"),
    ("TOOLWIRE_HEARTBEAT_SECONDS", "soon"),
])
def test_invalid_values_are_rejected(monkeypatch, key, value):
    monkeypatch.setenv(key, value)
    with pytest.raises(ValidationError):
        Settings()


def test_toml_file_with_env_taking_precedence(monkeypatch, tmp_path):
    config = tmp_path / "toolwire.toml"
    config.write_text('upstream_url = "http://file:8000/v1"\nheartbeat_seconds = 7\n'
                      '[model_map]\n"gpt-4o" = "from-file"\n')
    monkeypatch.setenv("TOOLWIRE_CONFIG_FILE", str(config))
    monkeypatch.setenv("TOOLWIRE_HEARTBEAT_SECONDS", "2")
    settings = Settings()
    assert settings.upstream_url == "http://file:8000/v1"
    assert settings.heartbeat_seconds == 2
    assert model_profile(settings, "gpt-4o").upstream_model == "from-file"
    sources = {name: source for name, _, source in describe(settings)}
    assert sources["upstream_url"] == "file" and sources["heartbeat_seconds"] == "env"
    assert sources["log_level"] == "default"


def test_describe_names_only_the_variables_pydantic_reads(monkeypatch):
    monkeypatch.setenv("TOOLWIRE_DEBUG_DIR", "/tmp/x")  # not TOOLWIRE_DEBUG, though it starts so
    monkeypatch.setenv("TOOLWIRE_API_KEYS_FILE", "/dev/null")
    monkeypatch.setenv("toolwire_log_level", "debug")  # names are read in any case
    monkeypatch.setenv("TOOLWIRE_MODEL_MAP__gpt-4o", "qwen")  # a nested value
    settings = Settings()
    assert settings.log_level == "DEBUG" and settings.model_map == {"gpt-4o": "qwen"}
    sources = {name: source for name, _, source in describe(settings)}
    assert (sources["debug_dir"], sources["debug"]) == ("env", "default")
    assert (sources["api_keys_file"], sources["api_keys"]) == ("env", "default")
    assert sources["log_level"] == sources["model_map"] == "env"


def test_secrets_are_masked_everywhere():
    settings = Settings(upstream_api_key="sk-very-secret", upstream_url="http://user:pw123@host:9000/v1")
    assert "sk-very-secret" not in repr(settings) and "sk-very-secret" not in str(settings.model_dump())
    shown = dict((name, value) for name, value, _ in describe(settings))
    assert shown["upstream_api_key"] == "**********"
    assert "pw123" not in shown["upstream_url"] and "host:9000" in shown["upstream_url"]
    assert mask_url("http://h/v1") == "http://h/v1"


def test_cli_config_masks_secrets(monkeypatch, capsys):
    monkeypatch.setenv("TOOLWIRE_UPSTREAM_API_KEY", "sk-cli-secret")
    monkeypatch.setenv("TOOLWIRE_UPSTREAM_URL", "http://u:hunter2@up:1/v1")
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert "sk-cli-secret" not in out and "hunter2" not in out
    assert "upstream_api_key" in out and "**********" in out and "[env]" in out


def test_cli_config_reports_invalid_settings_in_one_line_naming_the_variable(monkeypatch, capsys):
    monkeypatch.setenv("TOOLWIRE_MAX_TOOL_CALLS", "many")
    monkeypatch.setenv("TOOLWIRE_MODEL_MAP", '{"gpt-4o": {"tool_mode": "sometimes"}}')
    assert main(["config"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("toolwire config: invalid settings: ")
    assert "TOOLWIRE_MAX_TOOL_CALLS: Input should be a valid integer" in err
    assert "TOOLWIRE_MODEL_MAP (gpt-4o.ModelRoute.tool_mode): Input should be 'prompt'" in err
    assert "max_tool_calls" not in err


def test_a_value_from_the_config_file_is_named_as_its_key_there(monkeypatch, tmp_path):
    config = tmp_path / "toolwire.toml"
    config.write_text("max_body_bytes = 0\n")
    monkeypatch.setenv("TOOLWIRE_CONFIG_FILE", str(config))
    with pytest.raises(SettingsError, match=f"^invalid settings: max_body_bytes in {config}: Input should be"):
        load_settings()
    monkeypatch.setenv("TOOLWIRE_MAX_BODY_BYTES", "-1")  # the environment's value is the one read
    with pytest.raises(SettingsError, match="^invalid settings: TOOLWIRE_MAX_BODY_BYTES: "):
        load_settings()


@pytest.mark.parametrize("make, reason", [
    (lambda path: None, "No such file or directory"),
    (lambda path: path.mkdir(), "Is a directory"),
    (lambda path: path.write_text("heartbeat_seconds = = 3\n"), "is not TOML"),
])
def test_a_named_config_file_that_cannot_be_read_is_an_error(monkeypatch, tmp_path, capsys, make, reason):
    """A typo in the path must not start an open API on the demo back end with the defaults."""
    config = tmp_path / "toolwire.toml"
    make(config)
    monkeypatch.setenv("TOOLWIRE_CONFIG_FILE", str(config))
    with pytest.raises(SettingsError, match=f"^TOOLWIRE_CONFIG_FILE '{config}'.*{reason}"):
        Settings()
    assert main(["config"]) == 2
    assert f"TOOLWIRE_CONFIG_FILE '{config}'" in capsys.readouterr().err


def test_cli_diagram(tmp_path, capsys):
    assert main(["diagram", "--format", "mermaid", "--state", "in_tool_call"]) == 0
    assert "stateDiagram" in capsys.readouterr().out
    target = tmp_path / "fsm.dot"
    assert main(["diagram", "--format", "dot", "-o", str(target)]) == 0
    assert "digraph" in target.read_text()
    assert main(["diagram", "--state", "nowhere"]) == 2


@pytest.mark.parametrize("env, url", [
    ({}, "sqlite:///var/responses.sqlite3"),
    ({"TOOLWIRE_RESPONSE_STORE_PATH": "/srv/tw/r.db"}, "sqlite:////srv/tw/r.db"),
    ({"TOOLWIRE_RESPONSE_STORE_PATH": ""}, ""),
    ({"TOOLWIRE_RESPONSE_STORE_URL": "redis://cache:6379/2", "TOOLWIRE_RESPONSE_STORE_PATH": "x.db"},
     "redis://cache:6379/2"),
    ({"TOOLWIRE_RESPONSE_STORE_URL": "", "TOOLWIRE_RESPONSE_STORE_PATH": "x.db"}, ""),
    ({"TOOLWIRE_RESPONSE_STORE_URL": " rediss://:pw@cache:6380/0 "}, "rediss://:pw@cache:6380/0"),
])
def test_the_store_url_and_the_old_path_setting(monkeypatch, env, url):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert store_url(Settings()) == url


@pytest.mark.parametrize("url", ["postgres://db/x", "sqlite://relative.db", "sqlite:///", "cache:6379"])
def test_unknown_store_urls_are_rejected(monkeypatch, capsys, url):
    monkeypatch.setenv("TOOLWIRE_RESPONSE_STORE_URL", url)
    with pytest.raises(SettingsError, match="TOOLWIRE_RESPONSE_STORE_URL: (the response store URL|a SQLite store URL)"):
        store_url(Settings())
    with pytest.raises(SettingsError, match="TOOLWIRE_RESPONSE_STORE_URL"):
        create_app()
    assert main(["check"]) == main(["config"]) == 2
    assert capsys.readouterr().err.count("TOOLWIRE_RESPONSE_STORE_URL") == 2


def test_cli_config_shows_the_store_with_its_password_masked(monkeypatch, capsys):
    assert main(["config"]) == 0
    assert "sqlite:///var/responses.sqlite3 (from response_store_path)" in capsys.readouterr().out
    monkeypatch.setenv("TOOLWIRE_RESPONSE_STORE_URL", "redis://:hunter2@cache:6379/0")
    monkeypatch.setenv("TOOLWIRE_RESPONSE_STORE_SHARED", "true")
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert "hunter2" not in out and "redis://:**********@cache:6379/0" in out
    assert any(line.startswith("response_store_shared") and "True" in line for line in out.splitlines())


@pytest.mark.parametrize(("upstream_model", "fmt"), [
    ("gemma3:270m", "gemma"), ("gemma3-270m", "gemma"), ("granite3.3:8b", "pythonic"), ("phi-4", "tool_call")])
def test_auto_tool_format_reads_ollama_and_llama_cpp_names(upstream_model, fmt):
    """Issue 31, fault 8: these names fell back to tool_call."""
    settings = Settings(tool_format="auto", model_map={"m": upstream_model})
    assert model_profile(settings, "m").tool_format == fmt


def test_cli_check_says_in_one_line_what_stops_the_start(monkeypatch, tmp_path, capsys):
    assert main(["check"]) == 0
    monkeypatch.setenv("TOOLWIRE_API_KEYS_FILE", str(tmp_path / "keys"))
    assert main(["check"]) == 2
    err = capsys.readouterr().err
    assert err == f"toolwire cannot start: TOOLWIRE_API_KEYS_FILE '{tmp_path / 'keys'}': No such file or directory\n"


def test_a_derived_value_is_built_once_per_settings_and_their_number_is_bounded():
    from app.settings import DERIVED_KEPT

    settings, other = Settings(response_store_path=""), Settings(response_store_path="")
    built: list[str] = []

    def build() -> int:
        built.append("x")
        return len(built)

    assert [settings.derived("k", build), settings.derived("k", build), other.derived("k", build)] == [1, 1, 2]
    for model in range(DERIVED_KEPT + 5):  # keys a client can vary (its model name) cannot grow the cache
        settings.derived(("parsing", model), build)
    assert len(settings._derived) == DERIVED_KEPT
    assert settings.derived(("parsing", DERIVED_KEPT + 1), build) != settings.derived(("parsing", DERIVED_KEPT + 1),
                                                                                     build)
