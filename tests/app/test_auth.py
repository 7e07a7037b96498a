"""Client API keys on /v1, open health routes, and the upstream key never shown."""

from __future__ import annotations

import json
import logging

import pytest

from app.cli import describe
from app.http.auth import KeyRing, load_keyring
from app.settings import Settings
from support.fakes import FakeUpstream, text_chunks
from support.loopback import Answer, Seen, json_answer

USER = [{"role": "user", "content": "hi"}]
BODY = {"model": "m", "messages": USER}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def assert_401(response) -> None:
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    error = response.get_json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "invalid_api_key", None)
    assert response.headers["X-Request-Id"]


@pytest.fixture
def keyed(make_app, upstream):
    return make_app(upstream, api_keys="sk-one, sk-two\nsk-three").test_client()


@pytest.mark.parametrize("headers", [{}, bearer("sk-wrong"), {"Authorization": "Basic sk-one"}, bearer(""),
                                     {"Authorization": "sk-one"}, {"Authorization": "Bearer"},
                                     bearer("sk-one extra"), bearer("SK-ONE")])
def test_missing_or_wrong_key_is_401_before_any_upstream_call(keyed, upstream, headers):
    assert_401(keyed.post("/v1/chat/completions", json=BODY, headers=headers))
    assert_401(keyed.get("/v1/models", headers=headers))
    assert upstream.bodies == []


@pytest.mark.parametrize("key", ["sk-one", "sk-two", "sk-three"])
def test_every_listed_key_works(keyed, upstream, key):
    response = keyed.post("/v1/chat/completions", json=BODY, headers=bearer(key))
    assert response.status_code == 200, response.get_json()
    assert keyed.get("/v1/models", headers={"Authorization": f"bearer {key}"}).status_code == 200
    assert "Authorization" not in str(upstream.bodies)


def test_preflight_is_not_refused_by_auth(keyed):
    assert keyed.options("/v1/chat/completions").status_code != 401


def test_health_stays_open(keyed):
    assert keyed.get("/healthz").status_code == 200
    assert keyed.get("/readyz").status_code == 200


def test_no_keys_means_open_with_one_warning(make_app, upstream, caplog):
    with caplog.at_level(logging.WARNING, logger="toolwire.http.auth"):
        client = make_app(upstream).test_client()
    assert client.post("/v1/chat/completions", json=BODY).status_code == 200
    warnings = [r for r in caplog.records if r.name == "toolwire.http.auth"]
    assert len(warnings) == 1 and "open" in warnings[0].getMessage()


def test_key_file_with_comments(make_app, upstream, tmp_path):
    path = tmp_path / "keys"
    path.write_text("# team keys\nsk-file-a\n\n  # old: sk-revoked\nsk-file-b  \n")
    client = make_app(upstream, api_keys_file=path, api_keys="sk-env").test_client()
    for key in ("sk-file-a", "sk-file-b", "sk-env"):
        assert client.post("/v1/chat/completions", json=BODY, headers=bearer(key)).status_code == 200
    for key in ("sk-revoked", "# old: sk-revoked", "# team keys"):
        assert_401(client.post("/v1/chat/completions", json=BODY, headers=bearer(key)))


@pytest.mark.parametrize("content", [None, "# only a comment\n\n"])
def test_unusable_key_file_refuses_to_start(tmp_path, content):
    path = tmp_path / "keys"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match="TOOLWIRE_API_KEYS_FILE"):
        load_keyring(Settings(api_keys_file=path))


def test_metrics_key_without_any_key_refuses_to_start():
    with pytest.raises(ValueError, match="METRICS_REQUIRE_KEY"):
        load_keyring(Settings(metrics_require_key=True))


def test_keyring_keeps_digests_only():
    ring = KeyRing(["sk-secret-value", ""])
    assert len(ring) == 1 and ring.accepts("sk-secret-value") and not ring.accepts("sk-secret-valu")
    assert "sk-secret-value" not in repr(vars(ring))


@pytest.mark.parametrize("require, key, status", [
    (False, None, 200), (True, None, 401), (True, "sk-m", 200), (True, "sk-bad", 401),
])
def test_metrics_key_follows_the_setting_and_debug_always_needs_one(make_app, upstream, require, key, status):
    client = make_app(upstream, api_keys="sk-m", metrics_require_key=require, debug=True).test_client()
    assert client.get("/metrics", headers=bearer(key) if key else {}).status_code == status
    assert client.get("/debug/requests/nope", headers=bearer("sk-m")).status_code == 404
    assert client.get("/debug/requests/nope").status_code == 401
    assert client.get("/healthz").status_code == 200


def test_client_keys_are_masked_in_settings(monkeypatch, capsys):
    from app.cli import main

    settings = Settings(api_keys="sk-client-1,sk-client-2")
    assert "sk-client-1" not in repr(settings)
    assert dict((n, v) for n, v, _ in describe(settings))["api_keys"] == "**********"
    monkeypatch.setenv("TOOLWIRE_API_KEYS", "sk-client-env")
    assert main(["config"]) == 0
    assert "sk-client-env" not in capsys.readouterr().out


# -- the upstream key ------------------------------------------------------------------------------

UPSTREAM_KEY = "sk-upstream-0123456789abcdef"


@pytest.mark.parametrize("status", [401, 403])
def test_upstream_auth_failure_is_502_without_the_upstream_message(make_app, serve, caplog, status):
    def handler(seen: Seen) -> Answer:
        assert seen.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
        return json_answer(status, json.dumps({"error": {"message": f"Incorrect API key provided: {UPSTREAM_KEY}",
                                                         "code": "invalid_api_key"}}).encode())

    from pydantic import SecretStr

    upstream = serve(handler, api_key=SecretStr(UPSTREAM_KEY))
    client = make_app(upstream, upstream_api_key=UPSTREAM_KEY, api_keys="sk-client").test_client()
    with caplog.at_level(logging.DEBUG):
        for stream in (False, True):
            response = client.post("/v1/chat/completions", json={**BODY, "stream": stream},
                                   headers=bearer("sk-client"))
            assert response.status_code == 502
            error = response.get_json()["error"]
            assert error["code"] == "upstream_auth_failed" and "credentials" in error["message"]
            assert UPSTREAM_KEY not in response.get_data(as_text=True)
        models = client.get("/v1/models", headers=bearer("sk-client"))
        assert models.status_code == 502 and UPSTREAM_KEY not in models.get_data(as_text=True)
    assert UPSTREAM_KEY not in caplog.text
    assert "sk-client" not in caplog.text


def test_upstream_key_is_masked_in_other_upstream_messages(serve):
    def handler(seen: Seen) -> Answer:
        return json_answer(400, json.dumps({"error": {"message": f"bad request from key {UPSTREAM_KEY}!"}}).encode())

    from pydantic import SecretStr

    from app.upstreams.base import UpstreamError

    upstream = serve(handler, api_key=SecretStr(UPSTREAM_KEY))
    with pytest.raises(UpstreamError) as info:
        upstream.open({})
    assert info.value.status == 400
    assert info.value.message == "bad request from key **********!"


def test_unexpected_error_logs_do_not_carry_the_upstream_key(make_app, caplog):
    upstream = FakeUpstream([*text_chunks("hi", finish=None), RuntimeError("kaboom")])
    client = make_app(upstream, upstream_api_key=UPSTREAM_KEY).test_client()
    with caplog.at_level(logging.DEBUG):
        client.post("/v1/chat/completions", json=BODY)
    assert "kaboom" in caplog.text and UPSTREAM_KEY not in caplog.text
