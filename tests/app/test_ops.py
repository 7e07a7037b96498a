"""/healthz, /readyz and /v1/models."""

from __future__ import annotations

from support.fakes import FakeUpstream


def test_healthz_is_cheap(make_app):
    upstream = FakeUpstream()
    upstream.ready = None  # would raise if called
    response = make_app(upstream).test_client().get("/healthz")
    assert response.status_code == 200 and response.get_json() == {"status": "ok"}


def test_readyz_follows_the_upstream(make_app):
    upstream = FakeUpstream()
    client = make_app(upstream, ready_cache_seconds=0).test_client()
    assert client.get("/readyz").status_code == 200
    upstream.is_ready = False
    response = client.get("/readyz")
    assert response.status_code == 503 and response.get_json() == {"status": "unavailable", "upstream": "unavailable",
                                                               "store": "ok", "upstreams": {"default": "unavailable"}}


def test_readyz_asks_the_upstream_at_most_once_a_second(make_app):
    """A flood of probes (``/readyz`` is open even with client keys) costs the upstream one call per worker
    and second (issue 17 #15)."""
    upstream = FakeUpstream()
    calls = []
    upstream.ready = lambda: calls.append(1) or True
    client = make_app(upstream, ready_cache_seconds=60).test_client()
    assert all(client.get("/readyz").status_code == 200 for _ in range(50))
    assert len(calls) == 1


def test_models_lists_upstream_models_and_mapped_names(make_app):
    client = make_app(FakeUpstream(), model_map={"gpt-4o": "fake-model"}).test_client()
    response = client.get("/v1/models")
    assert response.status_code == 200
    body = response.get_json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["fake-model", "gpt-4o"]
    for model in body["data"]:
        assert model["object"] == "model" and isinstance(model["created"], int) and model["owned_by"]


def test_request_id_is_echoed_or_generated(make_app):
    client = make_app(FakeUpstream()).test_client()
    assert client.get("/v1/models", headers={"X-Request-Id": "abc-123"}).headers["X-Request-Id"] == "abc-123"
    generated = client.get("/v1/models", headers={"X-Request-Id": "bad id <script>"}).headers["X-Request-Id"]
    assert len(generated) == 32


def test_a_slow_older_readyz_check_does_not_replace_a_newer_answer(make_app):
    """A check that began while the store (or upstream) was down and ended after a newer check saw it back
    used to overwrite the cache with its stale 503, stamped as fresh."""
    import threading

    upstream = FakeUpstream()
    release, entered = threading.Event(), threading.Event()
    answers = iter([False, True])

    def ready() -> bool:
        answer = next(answers, True)
        if not answer:  # the first, older check: slow, and it saw the outage
            entered.set()
            release.wait(10)
        return answer

    upstream.ready = ready
    client = make_app(upstream, ready_cache_seconds=60).test_client()
    older = []
    probe = threading.Thread(target=lambda: older.append(client.get("/readyz").status_code))
    probe.start()
    assert entered.wait(10)
    assert client.get("/readyz").status_code == 200  # the newer check: back
    release.set()
    probe.join(10)
    assert older == [503]
    assert client.get("/readyz").status_code == 200
