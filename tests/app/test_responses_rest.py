"""The pieces behind the rest of the Responses API, in process: list pages, toolwire's compaction item, and how
a background response whose runner is gone is settled."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import gevent
import pytest

from app.errors import InputError
from app.prompt_protocol import MANIFEST_HEADING, TOOL_BLOCK_TITLE
from app.responses import background
from app.responses.compaction import compaction_content, compaction_summary
from app.responses.encoder import encode_sse
from app.responses.listing import ListQuery, listed_item, page
from app.store import SQLiteResponseStore, StoredResponse

ITEMS = [{"id": f"msg_{i}", "type": "message", "role": "user", "content": str(i)} for i in range(5)]


def test_pages_walk_by_after_in_either_order() -> None:
    first = page(ITEMS, ListQuery(limit=2, order="asc"))
    assert [i["id"] for i in first["data"]] == ["msg_0", "msg_1"] and first["has_more"]
    last = page(ITEMS, ListQuery(limit=2, order="asc", after="msg_3"))
    assert [i["id"] for i in last["data"]] == ["msg_4"] and not last["has_more"] and last["last_id"] == "msg_4"
    assert [i["id"] for i in page(ITEMS, ListQuery(limit=2))["data"]] == ["msg_4", "msg_3"]
    empty = page([], ListQuery())
    assert empty["data"] == [] and empty["first_id"] is None and not empty["has_more"]


def test_an_unknown_after_is_a_400_naming_it() -> None:
    with pytest.raises(InputError) as caught:
        page(ITEMS, ListQuery(after="msg_nope"))
    assert caught.value.param == "after"


def test_an_item_without_an_id_is_listed_with_the_same_id_every_time() -> None:
    item = {"role": "user", "content": "hi"}
    shown = listed_item(item, "resp_1:0")
    assert shown == listed_item(item, "resp_1:0") and shown["id"].startswith("msg_")
    assert shown["content"] == [{"type": "input_text", "text": "hi"}] and shown["type"] == "message"
    assert listed_item(item, "resp_1:1")["id"] != shown["id"]


def test_a_compaction_item_carries_its_summary_and_a_foreign_one_reads_as_none() -> None:
    assert compaction_summary({"encrypted_content": compaction_content("Trip to Lisbon ✈")}) == "Trip to Lisbon ✈"
    assert compaction_summary({"encrypted_content": "gAAAAABopaque-openai-blob"}) is None
    assert compaction_summary({"encrypted_content": "twc1.!!!"}) is None


def _running(run: dict) -> StoredResponse:
    return StoredResponse({"id": "resp_bg", "status": "in_progress", "background": True, "output": [],
                           background.RUN_KEY: run}, [])


@pytest.fixture
def owned(tmp_path):
    return SQLiteResponseStore(tmp_path / "r.db").for_owner(None)


def test_a_response_whose_worker_process_is_gone_is_settled_failed(owned) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stored = _running({"boot": background.BOOT_ID, "pid": dead.pid, "heartbeat": time.time()})
    settled = background.settled(owned, stored)
    assert settled["status"] == "failed" and "stopped" in settled["error"]["message"]
    assert background.RUN_KEY not in settled and owned.get("resp_bg")["status"] == "failed"


def test_a_response_whose_heartbeat_stopped_on_another_host_is_settled_failed(owned) -> None:
    stale = _running({"boot": "another-host", "pid": 1, "heartbeat": time.time() - background.STALE_SECONDS - 1})
    assert background.settled(owned, stale)["status"] == "failed"


def test_a_response_whose_runner_lives_is_left_as_it_is(owned) -> None:
    alive = _running({"boot": background.BOOT_ID, "pid": os.getppid(), "heartbeat": time.time()})
    assert background.settled(owned, alive) == {k: v for k, v in alive.response.items() if k != background.RUN_KEY}
    elsewhere = _running({"boot": "another-host", "pid": 1, "heartbeat": time.time()})
    assert background.settled(owned, elsewhere)["status"] == "in_progress"
    assert owned.get("resp_bg") is None  # nothing written for a live one


def test_compaction_of_a_codex_history_with_calls_offers_no_tool(make_app) -> None:
    from support.fakes import FakeUpstream, text_chunks

    upstream = FakeUpstream(text_chunks("Listed the files; README.md is next."))
    client = make_app(upstream).test_client()
    shell = {"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {
        "command": {"type": "array", "items": {"type": "string"}}}}}
    answer = client.post("/v1/responses/compact", json={
        "model": "m", "instructions": "You are Codex.", "tools": [shell], "parallel_tool_calls": True,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List files."}]},
                  {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"command":["ls"]}'},
                  {"type": "function_call_output", "call_id": "c1", "output": "README.md"}]})
    assert answer.status_code == 200, answer.data
    body = answer.get_json()
    assert [item["type"] for item in body["output"]] == ["message", "compaction"]
    assert compaction_summary(body["output"][-1]) == "Listed the files; README.md is next."
    sent = "\n".join(str(m["content"]) for m in upstream.bodies[-1]["messages"])
    assert "README.md" in sent and "shell" in sent  # the call shown to the model ...
    assert TOOL_BLOCK_TITLE not in sent and MANIFEST_HEADING not in sent  # ... and no tool offered


def test_a_background_response_asked_about_before_its_runner_runs_is_queued(owned) -> None:
    """A kept-alive connection's next request (a cancel, a poll) can be read before the hub runs the runner: the
    response is this worker's from the moment it is stored, not a dead runner's."""
    class Slow:
        def generate(self, log: background.EventLog) -> dict:
            gevent.sleep(0.2)
            return {"id": "resp_early", "status": "completed", "output": []}

        def failed(self, error: BaseException) -> dict:
            raise AssertionError(error)

    kept, done = [], []
    queued = background.start({"id": "resp_early", "background": True, "output": []}, [], owned, Slow(),
                              kept.append, done.append)
    assert queued["status"] == "queued"
    assert background.settled(owned, owned.load("resp_early"))["status"] == "queued"  # no switch to the runner yet
    assert background.cancel(owned, owned.load("resp_early"))["status"] == "cancelled"
    gevent.sleep(0.5)
    assert done == ["cancelled"] and kept == [] and owned.get("resp_early")["status"] == "cancelled"


def frame(kind: str, sequence: int, **fields: object) -> str:
    return encode_sse({"type": kind, "sequence_number": sequence, **fields}).decode()


def test_a_response_run_by_another_worker_is_followed_from_the_store(owned, monkeypatch) -> None:
    """A stream resumed in a worker that does not run the response reads its events from the store as the runner
    writes them: those after ``starting_after``, then each new one, until the terminal event."""
    monkeypatch.setattr(background, "FLUSH_SECONDS", 0.05)
    marks = {"boot": background.BOOT_ID, "pid": os.getppid(), "heartbeat": time.time()}  # alive, not this worker
    response = {"id": "resp_far", "background": True, "status": "in_progress", "output": [],
                background.RUN_KEY: marks}
    events = [frame("response.created", 0), frame("response.in_progress", 1), frame("response.output_text.delta", 2,
                                                                                     delta="Hel")]
    owned.put({**response, background.EVENTS_KEY: events}, [])

    def runner() -> None:
        gevent.sleep(0.2)
        events.append(frame("response.output_text.delta", 3, delta="lo"))
        owned.put({**response, background.EVENTS_KEY: events}, [])
        gevent.sleep(0.2)
        events.append(frame("response.completed", 4, response={"id": "resp_far"}))
        owned.put({**response, "status": "completed", background.EVENTS_KEY: events}, [])

    far = gevent.spawn(runner)
    followed = [background.sequence_of(item) for item in background.follow(owned, "resp_far", 1)]
    far.join()
    assert followed == [2, 3, 4]
    assert background.EVENTS_KEY not in background.shown(owned.get("resp_far"))


def test_a_followed_response_whose_runner_died_ends_with_response_failed(owned) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    owned.put({"id": "resp_dead", "background": True, "status": "in_progress", "output": [],
               background.RUN_KEY: {"boot": background.BOOT_ID, "pid": dead.pid, "heartbeat": time.time()},
               background.EVENTS_KEY: [frame("response.created", 0)]}, [])
    followed = list(background.follow(owned, "resp_dead", -1))
    assert [background.sequence_of(item) for item in followed] == [0, 1]
    assert followed[-1].startswith(b"event: response.failed\n") and b"stopped before" in followed[-1]


@pytest.mark.parametrize("stream", [False, True])
def test_a_compaction_turn_answers_with_one_compaction_item(make_app, stream: bool) -> None:
    """Codex's remote compaction v2: a Responses request whose input ends with compaction_trigger is answered with
    the summary of the items before it as the one compaction item of the response (streamed: added, done and
    completed after the opening, numbered on)."""
    import json

    from support.fakes import FakeUpstream, text_chunks

    upstream = FakeUpstream(text_chunks("Listed the files."))
    client = make_app(upstream).test_client()
    answer = client.post("/v1/responses", buffered=True, json={
        "model": "m", "stream": stream, "tools": [{"type": "function", "name": "shell", "parameters": {}}],
        "input": [{"role": "user", "content": "List files."}, {"type": "compaction_trigger"}]})
    assert answer.status_code == 200, answer.data
    if stream:
        events = [json.loads(line[6:]) for line in answer.get_data(as_text=True).splitlines()
                  if line.startswith("data: ")]
        assert [event["type"] for event in events] == ["response.created", "response.in_progress",
                                                       "response.output_item.added", "response.output_item.done",
                                                       "response.completed"]
        assert [event["sequence_number"] for event in events] == list(range(5))
        body = events[-1]["response"]
    else:
        body = answer.get_json()
    [item] = body["output"]
    assert body["status"] == "completed" and item["type"] == "compaction"
    assert compaction_summary(item) == "Listed the files."
    sent = upstream.bodies[-1]["messages"]
    assert "Write a summary" in sent[-1]["content"] and "compaction_trigger" not in str(sent)
