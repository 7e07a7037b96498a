"""Fuzz pass, in process: thousands of malformed and hostile bodies through the Flask test client.

The app answers with the embedded demo back end, so a body that happens to be valid gets a real
answer. Every answer must be below 500 and well formed (``support.fuzz_bodies.judge``); the
counts are printed (run with ``-s``) for the report.
"""

from __future__ import annotations

import pytest

from app import create_app
from app.settings import Settings
from support.fuzz_bodies import fuzz_cases, judge
from support.invariants import check_error_envelope

CASES_PER_ENDPOINT = 2000
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


@pytest.fixture(scope="module")
def client():
    """A test client of toolwire on the demo back end, without a response store."""
    app = create_app(Settings(upstream_url=None, response_store_path="", log_level="CRITICAL"))
    return app.test_client()


@pytest.mark.parametrize("endpoint", ["chat", "responses", "messages"])
def test_hostile_bodies_never_get_a_5xx_or_a_malformed_answer(client, endpoint: str, caplog: pytest.LogCaptureFixture) -> None:
    cases = fuzz_cases(endpoint, seed=1, count=CASES_PER_ENDPOINT)
    failures = []
    statuses: dict[int, int] = {}
    for case in cases:
        headers = {"Content-Type": case.content_type} if case.content_type else {}
        response = client.post(PATHS[endpoint], data=case.body, headers=headers)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        problem = judge(endpoint, response.status_code, response.content_type, response.get_data())
        if problem:
            failures.append(f"{case.id}: {problem}")
    logged = [r.getMessage() for r in caplog.records if r.exc_info]
    print(f"\nfuzz in-process {endpoint}: {len(cases)} cases, {len(failures)} failures, statuses {dict(sorted(statuses.items()))}")
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(failures[:30])
    assert not logged, f"exceptions were logged: {logged[:5]}"


# ---- regressions the fuzz pass found -------------------------------------------------------------


def test_a_body_nested_deeper_than_the_limit_is_a_400(client) -> None:
    from app.http.limits import MAX_JSON_DEPTH

    deep = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH  # one level too deep inside the body object
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "metadata": ' + deep.encode() + b"}"
    response = client.post(PATHS["chat"], data=body, content_type="application/json")
    assert response.status_code == 400
    assert "nests deeper" in check_error_envelope(400, response.get_data())["message"]
    ok = body.replace(deep.encode(), ("[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)).encode())
    assert client.post(PATHS["chat"], data=ok, content_type="application/json").status_code == 200


@pytest.mark.parametrize("parameters", [
    {"type": "object", "properties": [1], "required": True},
    {"type": "object", "properties": "x", "required": [{}]},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": "x"}}, "required": [["n"]]},
])  # fmt: skip
def test_a_malformed_tool_schema_still_gets_a_prompt(client, parameters: dict) -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": parameters}}
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [tool]}
    assert client.post(PATHS["chat"], json=body).status_code == 200
