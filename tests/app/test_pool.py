"""A pool's choice of member (app/pool.py): weighted rendezvous hashing, the load bound, cooldowns and health;
the affinity key (app/pipeline/affinity.py) and the session signals read from a request."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.http.request import session_signal
from app.pipeline.affinity import affinity_key
from app.pool import Pool, PoolMember, retry_after_seconds
from app.pool_health import PoolHealth
from app.settings import Settings
from statemachine import ParserConfig, ToolSpec

KEYS = [f"conversation-{n}".encode() for n in range(3000)]


@dataclass
class Slots:
    in_use: int = 0

    def try_acquire(self) -> Any:
        self.in_use += 1
        return object()


@dataclass
class Backend:
    name: str
    upstream: Any = None
    settings: Any = None
    slots: Slots = field(default_factory=Slots)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make_pool(*names: str, weights: dict[str, float] | None = None, clock: Clock | None = None, **options: Any
              ) -> Pool:
    members = [PoolMember(Backend(name), (weights or {}).get(name, 1.0)) for name in names]
    return Pool("coder", members, clock=clock or Clock(), **options)


def chosen(pool: Pool, key: bytes) -> str:
    return pool.choose(key)[0][0].name


def test_every_host_ranks_the_members_alike_and_spreads_conversations_by_weight() -> None:
    one, other = make_pool("gpu1", "gpu2", "gpu3"), make_pool("gpu3", "gpu1", "gpu2")  # another host's order
    assert [chosen(one, key) for key in KEYS] == [chosen(other, key) for key in KEYS]
    counts = collections.Counter(chosen(one, key) for key in KEYS)
    assert all(900 < counts[name] < 1100 for name in ("gpu1", "gpu2", "gpu3")), counts
    weighted = collections.Counter(chosen(make_pool("gpu1", "gpu2", "gpu3", weights={"gpu2": 2.0}), key)
                                   for key in KEYS)
    assert 1350 < weighted["gpu2"] < 1650 and 600 < weighted["gpu1"] < 900, weighted


def test_a_member_leaving_moves_only_its_own_conversations_each_to_its_next_member() -> None:
    clock = Clock()
    pool = make_pool("gpu1", "gpu2", "gpu3", clock=clock)
    before = {key: pool.choose(key)[0] for key in KEYS}
    gpu2 = pool.members[1]
    pool.failed(gpu2)
    for key in KEYS:
        order, own = pool.choose(key)
        if before[key][0].name != "gpu2":
            assert order[0].name == before[key][0].name and own
        else:
            assert order[0] is before[key][1]  # its second-ranked member: the retry's
            assert not own
    moved = collections.Counter(before[key][1].name for key in KEYS if before[key][0] is gpu2)
    assert set(moved) == {"gpu1", "gpu3"} and min(moved.values()) > 300  # spread, not all on one
    clock.now += 5.0  # the cooldown is over
    assert all(pool.choose(key)[0][0] is before[key][0] for key in KEYS)


def test_a_request_tries_its_member_then_once_the_next_by_rank() -> None:
    pool = make_pool("gpu1", "gpu2", "gpu3")
    for key in KEYS[:50]:
        order, own = pool.choose(key)
        assert own and [m.name for m in order] == [m.name for m in pool.ranked(key)][:2]


def test_the_load_bound_sends_a_busy_members_new_conversation_to_its_next_member() -> None:
    pool = make_pool("gpu1", "gpu2", "gpu3", load_factor=2.0)
    key = KEYS[0]
    first, second, third = pool.ranked(key)
    first.backend.slots.in_use = 1  # 2 in flight with this one: bound ceil(2 * 2 / 3) = 2
    assert pool.choose(key) == ([first, second], True)
    first.backend.slots.in_use = 2  # 3 with this one: bound 2, reached
    assert pool.choose(key) == ([second, first], False)
    pool.load_factor = 1.0
    second.backend.slots.in_use = 2  # 5 with this one: bound 2; the next under its bound is the third
    assert pool.choose(key)[0][0] is third


def test_least_busy_sends_the_overflow_to_the_member_with_the_fewest_in_flight() -> None:
    pool = make_pool("gpu1", "gpu2", "gpu3", load_factor=1.0, least_busy=True)
    key = KEYS[0]
    first, second, third = pool.ranked(key)
    first.backend.slots.in_use, second.backend.slots.in_use = 2, 1
    assert pool.choose(key)[0][0] is third
    nexts = make_pool("gpu1", "gpu2", "gpu3", load_factor=1.0)
    a, b, c = nexts.ranked(key)
    a.backend.slots.in_use, b.backend.slots.in_use = 2, 0
    assert nexts.choose(key)[0][0] is b


def test_a_429s_retry_after_lengthens_the_cooldown_and_a_refusal_waits_for_the_health_check() -> None:
    clock = Clock()
    pool = make_pool("gpu1", "gpu2", clock=clock, cooldown_seconds=1.0, health_checked=True)
    gpu1, gpu2 = pool.members
    pool.failed(gpu1, retry_after=2.0)
    assert pool.status() == {"gpu1": "cooling", "gpu2": "ok"}
    clock.now += 1.5
    assert all(chosen(pool, key) == "gpu2" for key in KEYS[:100])
    clock.now += 0.6
    assert pool.status()["gpu1"] == "ok"
    pool.failed(gpu2, refused=True)
    clock.now += 10
    assert pool.status()["gpu2"] == "down" and all(chosen(pool, key) == "gpu1" for key in KEYS[:100])
    PoolHealth([pool], 1.0, "/health").mark(gpu2, True)
    assert pool.status()["gpu2"] == "ok"


def test_when_every_member_is_out_the_request_still_tries_them_by_rank() -> None:
    pool = make_pool("gpu1", "gpu2", health_checked=True)
    for member in pool.members:
        pool.failed(member, refused=True)
    order, own = pool.choose(KEYS[0])
    assert order == pool.ranked(KEYS[0]) and own


def test_the_health_check_takes_a_member_out_and_back() -> None:
    class Upstream:
        answer = False

        def healthy(self, path: str) -> bool:
            assert path == "/health"
            return self.answer

    pool = Pool("coder", [PoolMember(Backend("gpu1", Upstream())), PoolMember(Backend("gpu2", Upstream()))])
    health = PoolHealth([pool, pool], 1.0, "/health")
    assert len(health.members) == 2
    health.check_all()
    assert pool.status() == {"gpu1": "down", "gpu2": "down"}
    pool.members[0].backend.upstream.answer = True
    health.check_all()
    assert pool.status() == {"gpu1": "ok", "gpu2": "down"}


def test_retry_after_reads_seconds_only() -> None:
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") is None
    assert retry_after_seconds("inf") is None and retry_after_seconds("nan") is None
    assert retry_after_seconds("86400") == 300.0 and retry_after_seconds("-3") == 0.0


CONFIG = ParserConfig(tools={"read": ToolSpec("read"), "bash": ToolSpec("bash")})


def turn(n: int, task: str = "Fix the bug.") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent. " * 500},
                                      {"role": "user", "content": task}]
    for step in range(n):
        messages += [{"role": "assistant", "content": f"step {step}"}, {"role": "tool", "content": "ok"}]
    return messages


def test_a_conversations_prefix_key_stays_the_same_every_turn_and_differs_between_conversations() -> None:
    keys = {affinity_key(None, turn(n), CONFIG) for n in range(20)}
    assert len(keys) == 1
    assert affinity_key(None, turn(3, "Write the docs."), CONFIG) not in keys
    assert affinity_key(None, turn(3), ParserConfig(tools={"read": ToolSpec("read")})) not in keys
    assert affinity_key("abc", turn(3), CONFIG) == affinity_key("abc", turn(9, "Other."), CONFIG)


def test_the_session_signal_is_the_header_else_a_body_field() -> None:
    settings = Settings()
    assert session_signal({"prompt_cache_key": "k"}, {"HTTP_X_SESSION_ID": " s1 "}, settings) == "s1"
    assert session_signal({"prompt_cache_key": "k", "conversation": "c"}, {}, settings) == "k"
    assert session_signal({"conversation": {"id": "conv_1"}}, {}, settings) == "conv_1"
    assert session_signal({"metadata": {"user_id": "user_x_session_y"}}, {}, settings) == "user_x_session_y"
    assert session_signal({"previous_response_id": "resp_1", "metadata": []}, {}, settings) is None
    custom = Settings(pool_session_header="X-Claude-Code-Session-Id")
    assert session_signal({}, {"HTTP_X_CLAUDE_CODE_SESSION_ID": "cc"}, custom) == "cc"


def upstreams(*names: str) -> dict[str, Any]:
    return {name: {"kind": "openai", "url": f"http://127.0.0.1:{9000 + n}/v1"} for n, name in enumerate(names)}


@pytest.mark.parametrize(("upstream", "fallback", "message"), [
    (["gpu1", "gpu9"], [], "upstream 'gpu9' is not in upstreams"),
    (["gpu1", "gpu1"], [], "a back end repeats"),
    (["gpu1", "gpu2"], ["gpu2"], "a back end repeats"),
    ([], [], "upstream lists no back end"),
])
def test_a_pool_names_known_back_ends_once(upstream: list[str], fallback: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings(upstreams=upstreams("gpu1", "gpu2"),
                 model_map={"coder": {"model": "m", "upstream": upstream, "fallback": fallback}})


def test_readyz_and_the_debug_page_show_each_pool_member_as_this_worker_sees_it(tmp_path: Any) -> None:
    from app import create_app
    from app.http.state import ToolwireState
    from app.loading import load_settings
    from app.routing import pool_members, route, upstream_settings

    settings = load_settings(upstreams={**upstreams("gpu1", "gpu2"), "gpu3": {"kind": "openai", "weight": 2,
                                                                              "url": "http://127.0.0.1:9/v1"}},
                             model_map={"coder": {"model": "qwen3-coder", "upstream": ["gpu1", "gpu2", "gpu3"]}},
                             debug=True, debug_dir=str(tmp_path / "debug"), ready_cache_seconds=0)
    assert route(settings, "coder") == "gpu1" and pool_members(settings, "coder") == ["gpu1", "gpu2", "gpu3"]
    assert all("coder" in upstream_settings(settings, name).model_map for name in ("gpu1", "gpu2", "gpu3"))
    app = create_app(settings)
    state: ToolwireState = app.extensions["toolwire"]["toolwire"].state(app)
    pool = state.pools["coder"]
    assert [(m.name, m.weight) for m in pool.members] == [("gpu1", 1.0), ("gpu2", 1.0), ("gpu3", 2.0)]
    pool.failed(pool.members[1])
    client = app.test_client()
    assert client.get("/readyz").get_json()["pools"] == {"coder": {"gpu1": "ok", "gpu2": "cooling", "gpu3": "ok"}}
    rows = {row["name"]: row for row in client.get("/debug/upstreams").get_json()["data"]}
    assert rows["gpu2"]["pool"] == "cooling" and rows["gpu3"]["models"] == ["coder"] and "pool" not in rows["default"]


def pooled_request(*errors: Any, health_checked: bool = False) -> tuple[Any, Any, list[Any], Clock]:
    """A generation, its context on a pool whose members' upstreams fail to open with ``errors`` (``None``: opens),
    the slots the request held, and the pool's clock."""
    from app.http.state import StreamSlots
    from app.pipeline.context import RequestContext
    from app.pipeline.generate import Generation
    from app.pool import PoolRequest
    from app.profile import model_profile
    from support.fakes import FakeUpstream

    settings = Settings(model_map={"coder": {"model": "m", "tool_mode": "prompt"}})
    members = [PoolMember(Backend(f"gpu{n}", FakeUpstream(open_error=error), settings, StreamSlots(0)))  # type: ignore
               for n, error in enumerate(errors, 1)]
    clock = Clock()
    pool = Pool("coder", members, clock=clock, cooldown_seconds=1.0, health_checked=health_checked)
    held: list[Any] = []
    context = RequestContext(settings=settings, upstream=members[0].backend.upstream, upstream_name="gpu1",
                             pool=PoolRequest(pool, "session-1", held.append))
    generation = Generation(model_profile(settings, "coder"), [{"role": "user", "content": "Hi."}], ParserConfig(),
                            {}, stream=True)
    return generation, context, held, clock


def ranked_names(context: Any) -> list[str]:
    return [member.name for member in context.pool.pool.ranked(affinity_key("session-1", [], ParserConfig()))]


def test_a_429_before_the_first_byte_is_retried_once_on_the_next_member_which_holds_the_slot() -> None:
    from app.pipeline.generate import open_in_pool
    from app.upstreams.base import UpstreamError

    generation, context, held, clock = pooled_request(None, None, None)
    first, second, third = ranked_names(context)
    members = {member.name: member for member in context.pool.pool.members}
    members[first].backend.upstream.open_error = UpstreamError("rate_limited", "busy", status=429, retry_after="2")
    _, attempt, _ = open_in_pool(generation, context)
    assert attempt.upstream_name == second and attempt.pool is None
    assert [len(members[name].backend.upstream.bodies) for name in (first, second, third)] == [1, 1, 0]
    assert len(held) == 1 and members[second].backend.slots.in_use == 1 and members[first].backend.slots.in_use == 0
    clock.now += 1.5  # past the cooldown, not the Retry-After
    assert context.pool.pool.status()[first] == "cooling"


def test_a_client_error_is_not_retried_and_a_second_failure_is_the_answer() -> None:
    from app.pipeline.generate import open_in_pool
    from app.upstreams.base import UpstreamError

    generation, context, held, _ = pooled_request(None, None, None, health_checked=True)
    members = {member.name: member for member in context.pool.pool.members}
    first, second, third = ranked_names(context)
    members[first].backend.upstream.open_error = UpstreamError("client_error", "bad", status=400)
    with pytest.raises(UpstreamError, match="bad"):
        open_in_pool(generation, context)
    assert len(members[second].backend.upstream.bodies) == 0 and context.pool.pool.status()[first] == "ok"
    members[first].backend.upstream.open_error = UpstreamError("connect", "refused")
    members[second].backend.upstream.open_error = UpstreamError("server_error", "boom", status=502)
    with pytest.raises(UpstreamError, match="boom"):
        open_in_pool(generation, context)
    assert len(members[third].backend.upstream.bodies) == 0  # once on the next member, no more
    assert context.pool.pool.status() == {first: "down", second: "cooling", third: "ok"} and held == []
