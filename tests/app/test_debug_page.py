"""The debug page's routes through Flask's test client: the list, the machine with edge counts, the
per-choice details (reasoning, calls, notes, finish reason), the ETag that makes polling cheap, the page's own
files with their Content-Security-Policy, and the key as a Basic password for a browser.
"""

from __future__ import annotations

import base64

import pytest

from statemachine import TRANSITIONS
from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks

USER = [{"role": "user", "content": "Weather in Paris?"}]
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
REJECTED = '<tool_call>{"name": "launch_rocket", "arguments": {}}</tool_call>'


@pytest.fixture
def debug_app(make_app, tmp_path):
    def build(**settings):
        return make_app(FakeUpstream(text_chunks("hi")), debug=True, debug_dir=str(tmp_path), **settings)

    return build


def send(app, request_id: str, text: str, **body):
    """One chat completion whose model output is ``text``."""
    app.extensions["toolwire"]["toolwire"].state(app).upstream.script = text_chunks(text, size=6)
    body = {"model": "m", "messages": USER, "tools": [WEATHER_TOOL], **body}
    response = app.test_client().post("/v1/chat/completions", json=body, headers={"X-Request-Id": request_id},
                                      buffered=True)
    assert response.status_code == 200, response.get_data(as_text=True)


def test_the_list_is_newest_first_with_summaries_only(debug_app):
    app = debug_app()
    send(app, "one", CALL)
    send(app, "two", "Just text.", stream=True)
    listing = app.test_client().get("/debug/requests").get_json()
    assert [line["request_id"] for line in listing["data"]] == ["two", "one"]
    two, one = listing["data"]
    assert (one["route"], one["method"], one["status"], one["model"]) == ("/v1/chat/completions", "POST", 200, "m")
    assert one["tool_calls"] == {"emitted": 1} and two["tool_calls"] == {}
    assert (one["stream"], two["stream"]) == (False, True)
    assert one["choices"] == 1 and one["duration_ms"] > 0 and one["started_at"] <= two["started_at"]
    assert 0 < one["ttfb_ms"] <= one["duration_ms"]


def test_a_choice_carries_its_calls_notes_and_finish_reason(debug_app):
    app = debug_app()
    send(app, "call", CALL)
    send(app, "rejected", "Let me see. " + REJECTED)
    client = app.test_client()
    [call] = client.get("/debug/requests/call").get_json()["choices"]
    assert call["finish_reason"] == "tool_calls" and call["notes"] == []
    [made] = call["calls"]
    assert (made["name"], made["arguments"], made["valid"], made["kind"]) == \
        ("get_weather", '{"city": "Paris"}', True, "function")
    assert made["call_id"].startswith("call_")
    [rejected] = client.get("/debug/requests/rejected").get_json()["choices"]
    assert rejected["finish_reason"] == "stop" and rejected["calls"] == []
    [note] = rejected["notes"]
    assert (note["kind"], note["index"]) == ("unknown_tool", None) and "launch_rocket" in note["message"]
    assert [step["trigger"] for step in rejected["path"]] == ["tool_open_seen", "tool_open_disproved",
                                                               "upstream_finished"]
    times = [step["at_ms"] for step in rejected["path"]]  # when each transition fired, since arrival
    assert 0 < times[0] <= times[1] <= times[2] <= client.get("/debug/requests/rejected").get_json()["duration_ms"]


@pytest.mark.parametrize("mode", ["show", "inline"])
def test_a_choice_shows_its_reasoning_spans_where_they_fell_in_the_path(debug_app, mode):
    app = debug_app(reasoning=mode)
    send(app, "thinking", "<think>Paris, so the tool.</think>" + CALL + "<think>Done.</think>Asked.", stream=True)
    [choice] = app.test_client().get("/debug/requests/thinking").get_json()["choices"]
    first, second = choice["reasoning"]
    assert (first["text"], first["step"]) == ("Paris, so the tool.", 0)  # before the call opened
    opened = [step["trigger"] for step in choice["path"]].index("tool_close_seen")
    assert second["text"] == "Done." and second["step"] > opened  # after the call closed
    assert 0 < first["at_ms"] <= second["at_ms"]


def test_the_machine_counts_every_edge_across_the_kept_requests(debug_app):
    app = debug_app()
    for index, text in enumerate([CALL, CALL, REJECTED, "plain"]):
        send(app, f"r{index}", text)
    machine = app.test_client().get("/debug/machine").get_json()
    assert machine["initial"] == "text" and machine["requests"] == 4
    assert machine["states"] == [{"name": "text", "terminal": False}, {"name": "in_tool_call", "terminal": False},
                                 {"name": "args_streaming", "terminal": False}, {"name": "done", "terminal": True}]
    assert [(e["source"], e["trigger"], e["dest"]) for e in machine["edges"]] == \
        [(t.source.value, t.trigger, t.dest.value) for t in TRANSITIONS]  # the table, in its order
    counts = {(e["source"], e["dest"]): e["count"] for e in machine["edges"]}
    assert counts == {("text", "in_tool_call"): 3, ("in_tool_call", "args_streaming"): 2,
                      ("in_tool_call", "text"): 1, ("args_streaming", "text"): 2, ("text", "text"): 0,
                      ("text", "done"): 4,
                      ("in_tool_call", "done"): 0, ("args_streaming", "done"): 0}
    assert all(e["observed"] for e in machine["edges"])


def test_polling_an_unchanged_list_is_a_304(debug_app):
    app = debug_app()
    client = app.test_client()
    empty = client.get("/debug/requests")
    assert empty.status_code == 200 and empty.get_json()["data"] == [] and empty.headers["ETag"]
    send(app, "first", "hello")
    first = client.get("/debug/requests")
    assert first.status_code == 200 and first.headers["ETag"] != empty.headers["ETag"]
    again = client.get("/debug/requests", headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304 and again.get_data() == b""
    machine = client.get("/debug/machine", headers={"If-None-Match": first.headers["ETag"]})
    assert machine.status_code == 304  # the same records, the same counts
    send(app, "second", "hello")
    assert client.get("/debug/requests", headers={"If-None-Match": first.headers["ETag"]}).status_code == 200


def test_the_page_and_its_files_are_served_with_a_strict_policy(debug_app):
    client = debug_app().test_client()
    page = client.get("/debug/")
    assert page.status_code == 200 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert '<script src="page.js"' in html and '<link rel="stylesheet" href="page.css">' in html
    assert "http://" not in html and "https://" not in html  # nothing from elsewhere: works offline
    policy = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy and "unsafe-inline" not in policy
    script = client.get("/debug/page.js")
    assert script.mimetype == "text/javascript" and b"textContent" in script.get_data()
    assert b"innerHTML" not in script.get_data()  # model text only ever becomes text nodes
    assert client.get("/debug/page.css").mimetype == "text/css"
    assert client.get("/debug/favicon.svg").mimetype == "image/svg+xml"
    assert client.get("/debug").status_code == 308  # to /debug/
    assert client.get("/debug/other.js").status_code == 404


def test_every_debug_route_is_404_while_debug_is_off(make_app, tmp_path):
    client = make_app(FakeUpstream(text_chunks("hi")), debug_dir=str(tmp_path)).test_client()
    for path in ("/debug/", "/debug/page.js", "/debug/requests", "/debug/machine"):
        response = client.get(path)
        assert response.status_code == 404 and response.get_json()["error"]["code"] == "not_found", path


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.mark.parametrize("headers, status", [
    ({}, 401),
    ({"Authorization": "Bearer sk-debug"}, 200),
    (basic("anyone", "sk-debug"), 200),
    (basic("", "sk-debug"), 200),
    (basic("sk-debug", ""), 401),  # the key is the password, not the user name
    (basic("anyone", "sk-wrong"), 401),
])
def test_a_browser_may_send_the_key_as_a_basic_password(debug_app, headers, status):
    client = debug_app(api_keys="sk-debug").test_client()
    for path in ("/debug/", "/debug/requests", "/debug/machine"):
        response = client.get(path, headers=headers)
        assert response.status_code == status, path
        if status == 401:
            assert response.headers["WWW-Authenticate"].startswith('Basic realm="toolwire debug"')
            assert response.get_json()["error"]["code"] == "invalid_api_key"
    # The API itself still wants a Bearer token.
    api = client.post("/v1/chat/completions", json={"model": "m", "messages": USER}, headers=basic("u", "sk-debug"))
    assert api.status_code == 401 and api.headers["WWW-Authenticate"] == "Bearer"


def test_each_record_is_read_once_per_worker_and_forgotten_once_pruned(debug_app, monkeypatch):
    from app.observability import debug

    monkeypatch.setattr(debug, "_digests", {})
    reads = []
    real = debug.Digest.of
    monkeypatch.setattr(debug.Digest, "of", classmethod(lambda cls, view: reads.append(view["request_id"])
                                                          or real(view)))
    app = debug_app(debug_keep=2)
    client = app.test_client()
    send(app, "a", CALL)
    send(app, "b", "text")
    assert [line["request_id"] for line in client.get("/debug/requests").get_json()["data"]] == ["b", "a"]
    assert client.get("/debug/machine").get_json()["requests"] == 2
    assert sorted(reads) == ["a", "b"]  # the machine reused what the list read
    send(app, "a", "now plain text")  # the same id written again: read again
    assert client.get("/debug/requests").get_json()["data"][0]["tool_calls"] == {}
    send(app, "c", "text")  # prunes b
    assert [line["request_id"] for line in client.get("/debug/requests").get_json()["data"]] == ["c", "a"]
    assert reads == ["b", "a", "a", "c"] and len(debug._digests) == 2


def test_debug_records_are_the_key_s_own_and_never_overwritten_by_another(debug_app):
    """Scoped like stored responses: another key neither sees a record nor replaces it by reusing its
    request id (``X-Request-Id`` is the client's to choose)."""
    app = debug_app(api_keys="key-a,key-b")
    client = app.test_client()

    def as_key(key, text):
        app.extensions["toolwire"]["toolwire"].state(app).upstream.script = text_chunks(text, size=6)
        response = client.post("/v1/chat/completions", buffered=True,
                               json={"model": "m", "messages": USER, "tools": [WEATHER_TOOL]},
                               headers={"X-Request-Id": "same-id", "Authorization": f"Bearer {key}"})
        assert response.status_code == 200

    as_key("key-a", CALL)
    as_key("key-b", "Just text.")
    view = {key: client.get("/debug/requests/same-id", headers={"Authorization": f"Bearer {key}"}).get_json()
            for key in ("key-a", "key-b")}
    assert view["key-a"]["tool_calls"] == {"emitted": 1} and view["key-b"]["tool_calls"] == {}
    for key in ("key-a", "key-b"):
        listing = client.get("/debug/requests", headers={"Authorization": f"Bearer {key}"}).get_json()["data"]
        assert [line["request_id"] for line in listing] == ["same-id"]
        assert listing[0]["tool_calls"] == view[key]["tool_calls"]


def test_one_key_s_requests_never_prune_another_key_s_records(debug_app):
    """Each key keeps its own newest ``debug_keep``: a busy (or hostile) key cannot evict the others'."""
    app = debug_app(api_keys="key-a,key-b", debug_keep=2)
    client = app.test_client()

    def as_key(key, request_id):
        app.extensions["toolwire"]["toolwire"].state(app).upstream.script = text_chunks("hi", size=6)
        response = client.post("/v1/chat/completions", buffered=True, json={"model": "m", "messages": USER},
                               headers={"X-Request-Id": request_id, "Authorization": f"Bearer {key}"})
        assert response.status_code == 200

    as_key("key-a", "a-1")
    for i in range(5):
        as_key("key-b", f"b-{i}")

    def listed(key):
        listing = client.get("/debug/requests", headers={"Authorization": f"Bearer {key}"}).get_json()["data"]
        return [line["request_id"] for line in listing]

    assert listed("key-a") == ["a-1"]
    assert listed("key-b") == ["b-4", "b-3"]
    assert client.get("/debug/requests/a-1", headers={"Authorization": "Bearer key-a"}).status_code == 200
