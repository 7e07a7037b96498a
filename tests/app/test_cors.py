"""Opt-in CORS (issue 40, ``TOOLWIRE_CORS_ORIGINS``): a listed origin's preflight is answered and every answer it
gets (streams and errors too) lets its page read it; an origin not listed, or no list at all, gets no CORS
headers."""

from __future__ import annotations

from typing import Any

import pytest

from support.fakes import FakeUpstream, text_chunks

PAGE = "app://obsidian.md"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def cors_client(make_app: Any) -> Any:
    return make_app(FakeUpstream(text_chunks("Hello there.")), cors_origins=f"{PAGE}, http://localhost:3000",
                    api_keys="sk-1").test_client()


def preflight(client: Any, origin: str, path: str = "/v1/chat/completions") -> Any:
    return client.options(path, headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                                         "Access-Control-Request-Headers": "authorization, content-type"})


def test_a_listed_origins_preflight_is_answered(cors_client: Any) -> None:
    answer = preflight(cors_client, PAGE)
    assert answer.status_code == 204 and answer.data == b""
    assert answer.headers["Access-Control-Allow-Origin"] == PAGE
    assert "POST" in answer.headers["Access-Control-Allow-Methods"]
    assert answer.headers["Access-Control-Allow-Headers"] == "authorization, content-type"
    assert int(answer.headers["Access-Control-Max-Age"]) > 0
    assert "Origin" in answer.headers["Vary"]
    assert preflight(cors_client, "http://localhost:3000", "/tokenize").status_code == 204  # a root route too


@pytest.mark.parametrize("stream", [False, True])
def test_every_answer_to_a_listed_origin_carries_the_headers(cors_client: Any, stream: bool) -> None:
    answer = cors_client.post("/v1/chat/completions", json={**CHAT, "stream": stream},
                              headers={"Origin": PAGE, "Authorization": "Bearer sk-1"})
    assert answer.status_code == 200
    assert answer.headers["Access-Control-Allow-Origin"] == PAGE
    assert answer.headers["Access-Control-Expose-Headers"] == "X-Request-Id" and "Origin" in answer.headers["Vary"]


@pytest.mark.parametrize("path, status", [("/v1/chat/completions", 401), ("/v1/no-such-thing", 404)])
def test_error_answers_carry_them_too(cors_client: Any, path: str, status: int) -> None:
    answer = cors_client.post(path, json=CHAT, headers={"Origin": PAGE})
    assert answer.status_code == status and answer.get_json()["error"]
    assert answer.headers["Access-Control-Allow-Origin"] == PAGE


def test_an_origin_not_listed_gets_none(cors_client: Any) -> None:
    refused = preflight(cors_client, "https://evil.example")
    assert "Access-Control-Allow-Origin" not in refused.headers
    answer = cors_client.post("/v1/chat/completions", json=CHAT,
                              headers={"Origin": "https://evil.example", "Authorization": "Bearer sk-1"})
    assert not [name for name in answer.headers.keys() if name.startswith("Access-Control-")]


def test_off_by_default(make_app: Any) -> None:
    client = make_app(FakeUpstream(text_chunks("Hello."))).test_client()
    assert "Access-Control-Allow-Origin" not in preflight(client, PAGE).headers
    assert "Access-Control-Allow-Origin" not in client.post("/v1/chat/completions", json=CHAT,
                                                             headers={"Origin": PAGE}).headers


def test_any_origin_with_a_star(make_app: Any) -> None:
    client = make_app(FakeUpstream(text_chunks("Hello.")), cors_origins="*").test_client()
    assert preflight(client, "http://anything.test").headers["Access-Control-Allow-Origin"] == "http://anything.test"
