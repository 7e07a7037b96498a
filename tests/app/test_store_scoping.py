"""Stored responses through the API: scoped to the client key that made them, shared when configured, a store that
is down answered with 503 ``store_unavailable``, ``/readyz`` naming the store, and ids nobody can guess."""

from __future__ import annotations

import re

import pytest

from app.http.auth import owner_digest
from app.responses.encoder import new_item_id, new_response_id
from support.fakes import FakeUpstream, assert_envelope, text_chunks

KEYS = "sk-alice,sk-bob"
ALICE = {"Authorization": "Bearer sk-alice"}
BOB = {"Authorization": "Bearer sk-bob"}


def answering(text="Stored answer."):
    return FakeUpstream(text_chunks(text))  # every request gets the same answer


def create(client, headers, **body):
    body = {"model": "m", "input": "hello", **body}
    return client.post("/v1/responses", json=body, headers=headers)


@pytest.fixture
def keyed(make_app):
    return make_app(answering(), api_keys=KEYS).test_client()


def test_another_key_gets_404_on_every_use_of_a_stored_response(keyed):
    mine = create(keyed, ALICE).get_json()
    item_id = mine["output"][0]["id"]
    unknown = keyed.get("/v1/responses/resp_" + "0" * 32, headers=BOB).get_json()["error"]
    stranger = assert_envelope(keyed.get(f"/v1/responses/{mine['id']}", headers=BOB), 404, "response_id")
    assert (stranger["type"], stranger["code"]) == (unknown["type"], unknown["code"])
    assert_envelope(keyed.delete(f"/v1/responses/{mine['id']}", headers=BOB), 404, "response_id")
    assert_envelope(create(keyed, BOB, previous_response_id=mine["id"]), 404, "previous_response_id",
                    "previous_response_not_found")
    assert_envelope(create(keyed, BOB, input=[{"type": "item_reference", "id": item_id}]), 404, "input[0].id",
                    "item_not_found")
    assert keyed.get(f"/v1/responses/{mine['id']}", headers=ALICE).status_code == 200
    assert create(keyed, ALICE, previous_response_id=mine["id"]).status_code == 200
    assert create(keyed, ALICE, input=[{"type": "item_reference", "id": item_id}]).status_code == 200
    assert keyed.delete(f"/v1/responses/{mine['id']}", headers=ALICE).status_code == 200


def test_a_shared_store_lets_every_key_continue(make_app):
    client = make_app(answering(), api_keys=KEYS, response_store_shared=True).test_client()
    mine = create(client, ALICE).get_json()
    assert create(client, BOB, previous_response_id=mine["id"]).status_code == 200
    assert client.get(f"/v1/responses/{mine['id']}", headers=BOB).status_code == 200


def test_the_owner_is_a_digest_of_the_key(make_app):
    app = make_app(answering(), api_keys=KEYS)
    mine = create(app.test_client(), ALICE).get_json()
    from app.http.state import current_state

    with app.app_context():
        store = current_state().store
    assert store.get(mine["id"], owner=owner_digest("sk-alice")) is not None
    assert store.get(mine["id"], owner=None) is None
    row = store._connection().execute("SELECT owner FROM responses WHERE id = ?", (mine["id"],)).fetchone()
    assert row[0] == owner_digest("sk-alice") and "sk-alice" not in row[0]
    assert re.fullmatch(r"[0-9a-f]{64}", row[0]) and owner_digest("sk-alice") != owner_digest("sk-bob")


def test_without_keys_anyone_may_continue(make_app):
    client = make_app(answering()).test_client()
    mine = create(client, {}).get_json()
    assert create(client, {}, previous_response_id=mine["id"]).status_code == 200


def test_a_store_that_is_down_is_a_503_for_lookups_and_a_warning_for_writes(make_app, tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    client = make_app(answering(), response_store_url=f"sqlite:///{blocker}/r.db",
                      response_store_timeout=0.2).test_client()
    written = create(client, {})
    assert written.status_code == 200 and written.get_json()["status"] == "completed"
    assert "was answered but not stored" in caplog.text
    for response in (create(client, {}, previous_response_id="resp_x"),
                     create(client, {}, input=[{"type": "item_reference", "id": "msg_x"}]),
                     client.get("/v1/responses/resp_x"), client.delete("/v1/responses/resp_x")):
        error = assert_envelope(response, 503, None, "store_unavailable")
        assert error["type"] == "server_error" and response.headers["Retry-After"] == "1"
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.get_json()["store"] == "unavailable"


def test_readyz_names_the_store(make_app):
    assert make_app(answering()).test_client().get("/readyz").get_json() == \
        {"status": "ready", "upstream": "ok", "store": "ok", "upstreams": {"default": "ok"}}
    assert make_app(answering(), response_store_url="").test_client().get("/readyz").get_json() == \
        {"status": "ready", "upstream": "ok", "store": "off", "upstreams": {"default": "ok"}}


def test_ids_carry_122_random_bits_as_uuid4s_do():
    ids = {new_response_id() for _ in range(2000)} | {new_item_id("msg") for _ in range(2000)}
    assert len(ids) == 4000
    hexes = [value.split("_", 1)[1] for value in ids]
    for value in ids:
        assert re.fullmatch(r"(resp|msg)_[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}", value)  # uuid4().hex's form
    # the other 30 digits are random: each hex digit about as often as any other (the expected count is 7,500 of
    # 120,000, its standard deviation 84: 10 % off would be 9 of them)
    digits = "".join(value[:12] + value[13:16] + value[17:] for value in hexes)
    assert all(digits.count(d) > len(digits) / 16 * 0.9 for d in "0123456789abcdef")
