"""Conversations count in the response store's byte quotas (issue 40): a conversation write no eviction of
responses makes room for is a 400 naming the parameter, and a conversation created so is not left behind."""

from __future__ import annotations

from typing import Any


def test_a_conversation_past_the_quota_is_a_400_naming_its_items(make_app: Any, upstream: Any) -> None:
    client = make_app(upstream, response_store_max_bytes=4000).test_client()
    big = [{"role": "user", "content": "x" * 5000}]
    refused = client.post("/v1/conversations", json={"items": big})
    assert refused.status_code == 400
    error = refused.get_json()["error"]
    assert error["param"] == "items" and error["code"] == "store_quota_exceeded" and "quota" in error["message"]
    created = client.post("/v1/conversations", json={"items": [{"role": "user", "content": "hi"}]}).get_json()
    added = client.post(f"/v1/conversations/{created['id']}/items", json={"items": big})
    assert added.status_code == 400 and added.get_json()["error"]["param"] == "items"
    listed = client.get(f"/v1/conversations/{created['id']}/items").get_json()
    assert [item["content"][0]["text"] for item in listed["data"]] == ["hi"]
    assert client.post(f"/v1/conversations/{created['id']}/items",
                       json={"items": [{"role": "user", "content": "more"}]}).status_code == 200
