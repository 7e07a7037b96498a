"""The Codex back end's pure parts: stop/max_tokens emulation, transcript split, error mapping, the generated
home, binary lookup and the settings. The app-server itself is exercised on the real binary in
``tests/e2e/test_codex_e2e.py``."""

from __future__ import annotations

import base64
import json
import os
import re
import tomllib
from pathlib import Path

import pytest

from app.http.extension import configured_models
from app.settings import Settings
from app.upstreams.base import MASK, redact
from app.upstreams.codex.emulation import StopRules
from app.upstreams.codex.home import (
    CONTEXT_WINDOW,
    PROVIDER_KEY_ENV,
    CodexSetupError,
    app_server_env,
    preflight,
    resolve_command,
    write_home,
)
from app.upstreams.codex.errors import codex_error
from app.upstreams.kinds import make_upstream
from app.upstreams.codex.transcript import split_transcript


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("TOOLWIRE_"):
            monkeypatch.delenv(key)


# --- stop / max_tokens ---------------------------------------------------------------------------------


def feed_all(rules: StopRules, deltas: list[str]) -> tuple[str, str | None]:
    out = ""
    for delta in deltas:
        text, reason = rules.feed(delta)
        out += text
        if reason:
            return out, reason
    return out + rules.flush(), None


def test_stop_sequence_split_across_deltas_is_cut_before_it():
    assert feed_all(StopRules(("END",)), ["one E", "N", "D two"]) == ("one ", "stop")


def test_a_near_miss_is_held_back_then_released():
    rules = StopRules(("END",))
    assert rules.feed("one EN") == ("one ", None)  # "EN" may begin END
    assert rules.feed("X") == ("ENX", None)
    assert feed_all(StopRules(("END",)), ["tail E"]) == ("tail E", None)  # released at the natural end


def test_earliest_of_several_stops_wins():
    rules = StopRules(("zz", "b"))
    assert feed_all(rules, ["a b zz"]) == ("a ", "stop")
    assert rules.matched == "b"  # what /v1/messages reports as its stop_sequence


def test_max_tokens_counts_deltas():
    assert feed_all(StopRules(max_tokens=2), ["ab", "cd", "ef"]) == ("abcd", "length")


def test_rules_from_a_chat_body():
    assert StopRules.from_body({"stop": "x"}).stops == ("x",)
    assert StopRules.from_body({"stop": ["a", "", 3]}).stops == ("a",)
    assert StopRules.from_body({"max_tokens": 5}).max_tokens == 5
    assert StopRules.from_body({"max_completion_tokens": 7, "max_tokens": 5}).max_tokens == 7
    assert StopRules.from_body({}) == StopRules()


# --- transcript -----------------------------------------------------------------------------------------


def test_system_becomes_base_instructions_history_is_injected_last_user_starts_the_turn():
    system, items, turn = split_transcript([
        {"role": "system", "content": "SYS"}, {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}])
    assert system == "SYS"
    assert items == [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q1"}]},
                     {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a1"}]}]
    assert turn == [{"type": "text", "text": "q2", "text_elements": []}]


def test_a_trailing_assistant_message_is_injected_and_the_turn_input_is_empty():
    system, items, turn = split_transcript([{"role": "user", "content": [{"type": "text", "text": "q"}]},
                                             {"role": "assistant", "content": "partial"}])
    assert system == "" and turn == []
    assert [item["role"] for item in items] == ["user", "assistant"]
    assert items[0]["content"][0]["text"] == "q"


# --- errors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("error, kind, status", [
    ({"message": "unexpected status 401", "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 401}}},
     "auth", 502),
    ({"message": "x", "codexErrorInfo": {"responseTooManyFailedAttempts": {"httpStatusCode": 429}}},
     "rate_limited", 429),
    ({"message": "unexpected status 404", "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 404}}},
     "client_error", 404),
    ({"message": "unexpected status 503", "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 503}}},
     "server_error", 502),
    ({"message": "Connection failed", "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": None}}},
     "connect", 502),
    ({"message": "stream disconnected before completion: idle timeout waiting for SSE", "codexErrorInfo": "other"},
     "timeout", 504),
    ({"message": "We're currently experiencing high demand", "codexErrorInfo": "internalServerError"},
     "server_error", 502),
    (None, "server_error", 502),
])
def test_codex_turn_errors_map_like_http_upstream_errors(error, kind, status):
    mapped = codex_error(error)
    assert (mapped.kind, mapped.status) == (kind, status)


def test_a_400_body_quoted_by_codex_keeps_its_message_and_param():
    body = {"error": {"message": "bad temperature", "type": "invalid_request_error", "param": "temperature",
                      "code": "invalid_value"}}
    mapped = codex_error({"message": json.dumps(body), "codexErrorInfo": "other"})
    assert (mapped.kind, mapped.status, mapped.message, mapped.param, mapped.code) == (
        "client_error", 400, "bad temperature", "temperature", "invalid_value")


def leaks_in_base64(text: str, secret: str) -> bool:
    """Whether any base64 run in ``text``, read at any alignment, decodes to 8 bytes of ``secret`` in a row."""
    pieces = [secret.encode()[i:i + 8] for i in range(len(secret) - 7)]
    for run in re.findall(r"[A-Za-z0-9+/_-]{8,}", text):
        run = run.replace("-", "+").replace("_", "/")
        for shift in range(4):
            data = base64.b64decode(run[shift:][:(len(run) - shift) // 4 * 4])
            if any(piece in data for piece in pieces):
                return True
    return False


@pytest.mark.parametrize("around", [("", ""), ("a", "b"), ("Bearer ", ""), ("user:", "!?"), ("xyz", "12")])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_a_key_is_masked_in_base64_too_wherever_it_sits(around, encode):
    key = "sk-proj-A1b2C3d4E5f6G7h8"
    before, after = around
    page = f"<html>Authorization: Basic {encode(f'{before}{key}{after}'.encode()).decode()}</html>"
    assert leaks_in_base64(page, key)
    masked = redact(page, key)
    assert MASK in masked and not leaks_in_base64(masked, key)


def test_provider_error_pages_are_not_quoted_to_the_client():
    page = ("unexpected status 404 Not Found: <html>nginx at gw-3.corp.internal</html>, "
            "url: http://10.0.0.8:8443/v1/responses")
    mapped = codex_error({"message": page, "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 404}}},
                         "req-1")
    assert (mapped.kind, mapped.status) == ("client_error", 404)
    assert "corp.internal" not in mapped.message and "10.0.0.8" not in mapped.message
    assert "req-1" in mapped.message


def test_auth_errors_never_quote_the_provider():
    mapped = codex_error({"message": "unexpected status 401: key sk-leak",
                          "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 401}}})
    assert "sk-leak" not in mapped.message


# --- the private home -----------------------------------------------------------------------------------


def test_generated_config_overrides_every_dangerous_default(tmp_path: Path):
    home = write_home(tmp_path / "home", models=["m1", "m2"], provider_url="http://127.0.0.1:9/v1/",
                      provider_key=True, user_home=tmp_path / "user")
    config = tomllib.loads((home.path / "config.toml").read_text())
    assert config["model"] == "m1" and config["model_provider"] == "toolwire"
    provider = config["model_providers"]["toolwire"]
    assert provider == {"name": "toolwire provider", "base_url": "http://127.0.0.1:9/v1", "wire_api": "responses",
                        "request_max_retries": 0, "stream_max_retries": 0, "stream_idle_timeout_ms": 300000,
                        "env_key": PROVIDER_KEY_ENV}
    features = config["features"]
    assert features["unbounded_connection_retries"] is False and features["shell_snapshot"] is False
    assert features["shell_tool"] is False and features["plugins"] is False
    assert config["thread_unload_delay_secs"] == 0 and config["allow_login_shell"] is False
    assert config["include_environment_context"] is False and config["project_doc_max_bytes"] == 0
    catalog = json.loads(Path(config["model_catalog_json"]).read_text())["models"]
    assert [m["slug"] for m in catalog] == ["m1", "m2"]
    assert {m["context_window"] for m in catalog} == {CONTEXT_WINDOW}
    assert home.models == ("m1", "m2")


def test_no_key_means_no_env_key_and_the_login_is_linked_read_only(tmp_path: Path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "auth.json").write_text('{"tokens": {}}')
    home = write_home(tmp_path / "home", models=["m"], provider_url=None, provider_key=False, user_home=user)
    config = tomllib.loads((home.path / "config.toml").read_text())
    assert "model_providers" not in config and "model_provider" not in config
    assert (home.path / "auth.json").resolve() == (user / "auth.json").resolve()
    assert sorted(p.name for p in user.iterdir()) == ["auth.json"]  # nothing written in the user's home
    provider_home = write_home(tmp_path / "home", models=["m"], provider_url="http://x/v1", provider_key=False,
                               user_home=user)
    assert not (provider_home.path / "auth.json").exists()  # a custom provider never sees the login
    assert "env_key" not in tomllib.loads((provider_home.path / "config.toml").read_text())["model_providers"]["toolwire"]


def test_app_server_environment_has_codex_home_and_the_key_but_no_toolwire_settings(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("TOOLWIRE_CODEX_PROVIDER_API_KEY", "secret")
    env = app_server_env(tmp_path, "k")
    assert env["CODEX_HOME"] == str(tmp_path) and env[PROVIDER_KEY_ENV] == "k"
    assert not any(key.startswith("TOOLWIRE_") and key != PROVIDER_KEY_ENV for key in env)


# --- the binary -------------------------------------------------------------------------------------------


def test_a_missing_binary_is_named(tmp_path: Path):
    with pytest.raises(CodexSetupError, match="was not found.*TOOLWIRE_CODEX_COMMAND"):
        resolve_command(str(tmp_path / "nope"))


def test_the_npm_launcher_resolves_to_the_native_binary(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    modules = tmp_path / "node_modules" / "@openai"
    launcher = modules / "codex" / "bin" / "codex.js"
    native = modules / "codex-linux-x64" / "vendor" / "x86_64-unknown-linux-musl" / "bin" / "codex"
    for path in (launcher, native):
        path.parent.mkdir(parents=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    link = tmp_path / "codex"
    link.symlink_to(launcher)
    assert resolve_command(str(link)) == str(native)


def test_preflight_quotes_what_codex_refused(tmp_path: Path):
    fake = tmp_path / "codex"
    fake.write_text("#!/bin/sh\necho 'unknown configuration field `features.bogus`' >&2\nexit 1\n")
    fake.chmod(0o755)
    home = write_home(tmp_path / "home", models=["m"], provider_url=None, provider_key=False, user_home=tmp_path)
    with pytest.raises(CodexSetupError, match="refused toolwire's generated config.*features.bogus"):
        preflight(str(fake), home)


# --- settings -----------------------------------------------------------------------------------------------


def test_backend_follows_kind_then_url(monkeypatch):
    assert Settings().backend == "demo"
    assert Settings(upstream_url="http://x/v1").backend == "openai"
    assert Settings(upstream_url="http://x/v1", upstream_kind="codex").backend == "codex"
    monkeypatch.setenv("TOOLWIRE_UPSTREAM_KIND", "codex")
    assert Settings().backend == "codex"
    assert configured_models(Settings(default_upstream_model="m")) == {"m"}  # no demo model on codex


def test_openai_kind_without_a_url_is_refused():
    with pytest.raises(ValueError, match="TOOLWIRE_UPSTREAM_URL"):
        make_upstream(Settings(upstream_kind="openai"))


def test_codex_secrets_are_masked_in_config_output(monkeypatch, capsys):
    from app.cli import main

    monkeypatch.setenv("TOOLWIRE_CODEX_PROVIDER_API_KEY", "sk-codex-secret")
    monkeypatch.setenv("TOOLWIRE_CODEX_PROVIDER_URL", "http://user:pw-secret@127.0.0.1:9/v1")
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert "sk-codex-secret" not in out and "pw-secret" not in out
    assert "TOOLWIRE_CODEX_PROVIDER_API_KEY" in out and "TOOLWIRE_UPSTREAM_KIND" in out
