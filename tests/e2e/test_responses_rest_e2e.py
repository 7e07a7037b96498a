"""The rest of the Responses API end to end, through openai-python's own ``client.responses.*`` and
``client.conversations.*`` (each answer parsed by the SDK's types) against toolwire under gunicorn+gevent and a
scripted text model: input items, background responses and cancel, input token counts, compaction, the
Conversations API and the ``conversation`` parameter, per-key isolation, and the Agents SDK's
``OpenAIConversationsSession`` example."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import openai
import pytest

from support.invariants import check_error_envelope
from support.scripted_upstream import Script, ScriptedUpstream
from support.server import ToolwireServer
from support.tools import STRICT_WEATHER as WEATHER

pytestmark = pytest.mark.e2e

MODEL = "scripted-model"
ALICE, BOB = "sk-alice-0123456789", "sk-bob-0123456789"
DATA = Path(__file__).parent / "data"


def upstream_text(upstream: ScriptedUpstream) -> str:
    """Everything the back end was shown in its last request."""
    return "\n".join(str(m.get("content")) for m in upstream.chat_requests[-1].body["messages"])


def until(check: Callable[[], Any], seconds: float = 20.0) -> Any:
    deadline = time.monotonic() + seconds
    while not (value := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return value


@pytest.fixture
def keyed(toolwire_factory: Callable[..., ToolwireServer], make_openai_client) -> tuple[openai.OpenAI, openai.OpenAI]:
    """Clients of two keys on one keyed toolwire."""
    server = toolwire_factory(TOOLWIRE_API_KEYS=f"{ALICE},{BOB}")
    return (make_openai_client(server).with_options(api_key=ALICE),
            make_openai_client(server).with_options(api_key=BOB))


# -- input items ------------------------------------------------------------------------------------------------

def test_input_items_page_as_openai_pages_them(upstream: ScriptedUpstream, openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text="Noted."))
    turns = [{"role": "user", "content": f"line {i}"} for i in range(5)]
    response = openai_client.responses.create(model=MODEL, input=turns)
    newest_first = openai_client.responses.input_items.list(response.id, limit=2)
    assert [item.content[0].text for item in newest_first.data] == ["line 4", "line 3"]
    assert newest_first.has_more and newest_first.last_id == newest_first.data[-1].id
    every = [item.content[0].text for item in openai_client.responses.input_items.list(response.id, order="asc",
                                                                                         limit=2)]
    assert every == [f"line {i}" for i in range(5)]  # the SDK walked three pages by `after`
    assert all(item.type == "message" and item.id.startswith("msg_")
               for item in openai_client.responses.input_items.list(response.id))


def test_input_items_refuse_a_bad_limit_naming_it(openai_client: openai.OpenAI, upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text="Noted."))
    response = openai_client.responses.create(model=MODEL, input="hi")
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.responses.input_items.list(response.id, limit=500)
    assert caught.value.body["param"] == "limit"


# -- background responses ---------------------------------------------------------------------------------------

def test_a_background_response_is_queued_then_polled_to_completed(upstream: ScriptedUpstream,
                                                                  openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text="Done in the background.", chunks=4, delay_after_headers=0.5))
    queued = openai_client.responses.create(model=MODEL, input="Work on it.", background=True)
    assert queued.status in ("queued", "in_progress") and queued.background is True
    done = until(lambda: (r := openai_client.responses.retrieve(queued.id)).status == "completed" and r)
    assert done.output_text == "Done in the background." and done.background is True
    assert "_toolwire_run" not in openai_client.responses.with_raw_response.retrieve(queued.id).http_response.text


def test_a_background_response_is_cancelled_and_stays_so(upstream: ScriptedUpstream,
                                                         openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text="Too late.", chunks=1, delay_after_headers=2.0))
    queued = openai_client.responses.create(model=MODEL, input="Work slowly.", background=True)
    cancelled = openai_client.responses.cancel(queued.id)
    assert cancelled.status == "cancelled"
    assert openai_client.responses.cancel(queued.id).status == "cancelled"  # idempotent, as OpenAI's
    time.sleep(3.0)  # past the time the model would have answered
    assert openai_client.responses.retrieve(queued.id).status == "cancelled"


def test_only_a_running_background_response_can_be_cancelled(upstream: ScriptedUpstream,
                                                              openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text="Sync."), Script(text="Quick."))
    synchronous = openai_client.responses.create(model=MODEL, input="hi")
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.responses.cancel(synchronous.id)
    assert "synchronous" in caught.value.message
    quick = openai_client.responses.create(model=MODEL, input="hi", background=True)
    until(lambda: openai_client.responses.retrieve(quick.id).status == "completed")
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.responses.cancel(quick.id)
    assert "completed" in caught.value.message
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.cancel("resp_" + "0" * 32)


def test_background_needs_store(openai_client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.responses.create(model=MODEL, input="hi", background=True, store=False)
    assert caught.value.body["param"] == "background"


TEXT = "One, two, three, four, five, six, seven, eight."


def test_a_background_stream_is_left_and_resumed_after_a_sequence_number(
        upstream: ScriptedUpstream, toolwire_factory: Callable[..., ToolwireServer], make_openai_client) -> None:
    """As OpenAI's: ``background`` with ``stream`` streams the response's events with their sequence numbers; a
    client that leaves does not stop it, and ``GET …?stream=true&starting_after=N`` goes on from event N + 1 (the
    events since replayed, then the live ones), in whichever of the two workers it lands; the runner writes an
    access line of its own when it ends."""
    server = toolwire_factory(WEB_CONCURRENCY="2")
    client = make_openai_client(server)
    upstream.enqueue(Script(text=TEXT, chunks=4, delay_between_chunks=0.15))
    first = []
    with client.responses.create(model=MODEL, input="Count.", background=True, stream=True,
                                 extra_headers={"X-Request-Id": "bg-stream-1"}) as events:
        for event in events:
            first.append(event)
            if event.type == "response.output_text.delta" and len(first) > 5:
                break  # the client leaves
    left_at = first[-1].sequence_number
    assert [event.sequence_number for event in first] == list(range(len(first)))
    assert first[0].type == "response.created" and first[0].response.background is True
    resumed = list(client.responses.retrieve(first[0].response.id, stream=True, starting_after=left_at))
    assert [event.sequence_number for event in resumed] == list(range(left_at + 1, left_at + 1 + len(resumed)))
    assert resumed[-1].type == "response.completed" and resumed[-1].response.output_text == TEXT
    deltas = [event.delta for event in first + resumed if event.type == "response.output_text.delta"]
    assert "".join(deltas) == TEXT and len(deltas) > 2
    again = list(client.responses.retrieve(first[0].response.id, stream=True))  # ended: the whole stream again
    assert [event.sequence_number for event in again] == list(range(len(again)))
    assert [event.type for event in again] == [event.type for event in first + resumed]
    line = until(lambda: next((json.loads(text) for text in server.log().splitlines()
                               if '"toolwire.access"' in text and '"bg-stream-1"' in text and "background" in text),
                              None))
    assert line["outcome"] == "completed" and line["route"].endswith("background") and line["status"] == 200


def test_a_background_stream_is_streamed_to_its_end_and_refusals_name_their_parameter(
        upstream: ScriptedUpstream, openai_client: openai.OpenAI, toolwire_server: ToolwireServer) -> None:
    upstream.enqueue(Script(text="All of it.", chunks=3), Script(text="Sync."))
    events = list(openai_client.responses.create(model=MODEL, input="Go.", background=True, stream=True))
    assert events[-1].type == "response.completed" and events[-1].response.output_text == "All of it."
    synchronous = openai_client.responses.create(model=MODEL, input="hi")
    for query, param in ((f"{synchronous.id}?stream=true", "stream"),
                         (f"{events[0].response.id}?stream=true&starting_after=x", "starting_after")):
        response = httpx.get(f"{toolwire_server.v1_url}/responses/{query}", timeout=15,
                             headers={"Authorization": "Bearer t"})
        assert response.status_code == 400 and response.json()["error"]["param"] == param
        check_error_envelope(response.status_code, response.json())


def test_a_background_response_whose_worker_died_ends_failed(upstream: ScriptedUpstream,
                                                             toolwire_factory: Callable[..., ToolwireServer],
                                                             make_openai_client) -> None:
    server = toolwire_factory(WEB_CONCURRENCY="1", TOOLWIRE_TEST_HOST="background-death")
    client = make_openai_client(server)
    upstream.enqueue(Script(text="Never.", hang_after_chunks=0))
    queued = client.responses.create(model=MODEL, input="Run long.", background=True)
    until(lambda: client.responses.retrieve(queued.id).status == "in_progress")
    (worker,) = server.worker_pids()
    os.kill(worker, signal.SIGKILL)  # the worker this test's server started
    until(lambda: server.worker_pids() and server.worker_pids() != [worker])
    failed = until(lambda: (r := client.responses.retrieve(queued.id)).status != "in_progress" and r)
    assert failed.status == "failed" and "stopped" in failed.error.message


# -- input token counts -----------------------------------------------------------------------------------------

def test_input_tokens_count_the_prompt_with_its_tool_block(openai_client: openai.OpenAI) -> None:
    bare = openai_client.responses.input_tokens.count(model=MODEL, input="What's the weather in SF?")
    with_tools = openai_client.responses.input_tokens.count(model=MODEL, input="What's the weather in SF?",
                                                            tools=[WEATHER])
    assert bare.object == "response.input_tokens" and 0 < bare.input_tokens < with_tools.input_tokens


def test_input_tokens_name_a_bad_parameter(openai_client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.responses.input_tokens.count(model=MODEL, input=[{"type": 7}])
    assert caught.value.body["param"].startswith("input[0]")


# -- compaction -------------------------------------------------------------------------------------------------

def test_compaction_summarises_and_a_later_request_carries_it(upstream: ScriptedUpstream,
                                                              openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text="The user is planning a trip to Lisbon in May; flights are booked."),
                     Script(text="Pack for warm days."))
    history = [{"role": "user", "content": "I am going to Lisbon in May."},
               {"role": "assistant", "content": "Nice. Shall I book flights?"},
               {"role": "user", "content": "Yes, book them."}]
    compacted = openai_client.responses.compact(model=MODEL, input=history, instructions="Be helpful.")
    assert compacted.object == "response.compaction" and compacted.usage.input_tokens > 0
    *kept, compaction = compacted.output
    assert [item.content[0].text for item in kept] == ["I am going to Lisbon in May.", "Yes, book them."]
    assert compaction.type == "compaction" and compaction.encrypted_content
    asked = upstream_text(upstream)
    assert "Be helpful." in asked and "Answer with the summary alone." in asked and "tool" not in asked.lower()
    answer = openai_client.responses.create(model=MODEL, input=[*(i.model_dump(exclude_none=True)
                                                                   for i in compacted.output),
                                                                 {"role": "user", "content": "What should I pack?"}])
    assert answer.output_text == "Pack for warm days."
    assert "planning a trip to Lisbon in May; flights are booked." in upstream_text(upstream)


# -- conversations ----------------------------------------------------------------------------------------------

def test_the_conversations_api_round_trips(openai_client: openai.OpenAI) -> None:
    conversations = openai_client.conversations
    created = conversations.create(items=[{"role": "user", "content": "first"}], metadata={"topic": "demo"})
    assert created.object == "conversation" and created.id.startswith("conv_") and created.metadata == {"topic": "demo"}
    assert conversations.retrieve(created.id).metadata == {"topic": "demo"}
    assert conversations.with_raw_response.retrieve(created.id).headers.get("x-request-id")
    assert conversations.update(created.id, metadata={"topic": "other"}).metadata == {"topic": "other"}
    added = conversations.items.create(created.id, items=[{"role": "assistant", "content": "second"},
                                                          {"type": "message", "role": "user", "content": "third"}])
    assert [item.content[0].text for item in added.data] == ["second", "third"]
    listed = [item.content[0].text for item in conversations.items.list(created.id, order="asc", limit=1)]
    assert listed == ["first", "second", "third"]  # paged one at a time
    one = conversations.items.retrieve(added.data[0].id, conversation_id=created.id)
    assert one.id == added.data[0].id and one.role == "assistant"
    assert conversations.items.delete(added.data[0].id, conversation_id=created.id).id == created.id
    assert [item.content[0].text for item in conversations.items.list(created.id)] == ["third", "first"]
    deleted = conversations.delete(created.id)
    assert deleted.deleted and deleted.object == "conversation.deleted"
    with pytest.raises(openai.NotFoundError):
        conversations.retrieve(created.id)


def test_a_response_in_a_conversation_reads_it_and_adds_its_turn(upstream: ScriptedUpstream,
                                                                 openai_client: openai.OpenAI) -> None:
    upstream.enqueue(Script(text="Your number is 42."), Script(text="Still 42."))
    conversation = openai_client.conversations.create(items=[{"role": "user", "content": "My number is 42."}])
    first = openai_client.responses.create(model=MODEL, conversation=conversation.id, input="What is my number?")
    assert first.conversation.id == conversation.id
    assert "My number is 42." in upstream_text(upstream)
    second = openai_client.responses.create(model=MODEL, conversation={"id": conversation.id}, input="Again?")
    assert second.output_text == "Still 42." and "Your number is 42." in upstream_text(upstream)
    items = list(openai_client.conversations.items.list(conversation.id, order="asc"))
    assert [(item.role, item.content[0].text) for item in items] == [
        ("user", "My number is 42."), ("user", "What is my number?"), ("assistant", "Your number is 42."),
        ("user", "Again?"), ("assistant", "Still 42.")]


def test_the_conversation_parameter_refuses_what_openai_refuses(openai_client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        openai_client.responses.create(model=MODEL, conversation="conv_" + "0" * 32, input="hi")
    assert caught.value.body["param"] == "conversation"
    conversation = openai_client.conversations.create()
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.responses.create(model=MODEL, conversation=conversation.id, input="hi",
                                       previous_response_id="resp_" + "0" * 32)
    assert caught.value.body["param"] == "conversation"
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.conversations.create(metadata={"k": "v" * 600})
    assert caught.value.body["param"].startswith("metadata")


# -- per-key isolation ------------------------------------------------------------------------------------------

def test_another_keys_responses_and_conversations_are_404(upstream: ScriptedUpstream, keyed) -> None:
    alice, bob = keyed
    upstream.enqueue(Script(text="Alice's.", delay_after_headers=1.0))
    mine = alice.responses.create(model=MODEL, input="secret", background=True)
    conversation = alice.conversations.create(items=[{"role": "user", "content": "secret"}])
    for attempt in (lambda: bob.responses.input_items.list(mine.id), lambda: bob.responses.cancel(mine.id),
                    lambda: bob.responses.retrieve(mine.id), lambda: bob.conversations.retrieve(conversation.id),
                    lambda: bob.conversations.items.list(conversation.id),
                    lambda: bob.conversations.items.create(conversation.id, items=[{"role": "user", "content": "x"}]),
                    lambda: bob.conversations.delete(conversation.id),
                    lambda: bob.responses.create(model=MODEL, input="x", conversation=conversation.id)):
        with pytest.raises(openai.NotFoundError):
            attempt()
    assert until(lambda: alice.responses.retrieve(mine.id).status == "completed")
    assert len(list(alice.conversations.items.list(conversation.id))) == 1


# -- the Agents SDK ---------------------------------------------------------------------------------------------

def test_the_agents_sdk_conversations_session_example_runs(upstream: ScriptedUpstream,
                                                           toolwire_server: ToolwireServer) -> None:
    upstream.enqueue(Script(text="San Francisco."), Script(text="California."))
    env = {**os.environ, "OPENAI_BASE_URL": toolwire_server.v1_url, "OPENAI_API_KEY": "test",
           "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    done = subprocess.run([sys.executable, str(DATA / "agents_conversations_session.py")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "San Francisco." in done.stdout and "California." in done.stdout
    # the second turn was answered with the first one in its transcript, read back from the conversation
    assert "What city is the Golden Gate Bridge in?" in upstream_text(upstream)
    assert "San Francisco." in upstream_text(upstream)


# -- on Redis, across hosts -------------------------------------------------------------------------------------

def test_on_redis_another_host_continues_a_conversation_and_cancels_a_background_response(
        upstream: ScriptedUpstream, toolwire_factory: Callable[..., ToolwireServer], redis_server,
        make_openai_client) -> None:
    settings = {"TOOLWIRE_RESPONSE_STORE_URL": redis_server.url, "TOOLWIRE_API_KEYS": ALICE}
    host_a, host_b = (make_openai_client(toolwire_factory(**settings, TOOLWIRE_TEST_HOST=name)).with_options(
        api_key=ALICE) for name in ("rest-a", "rest-b"))
    upstream.enqueue(Script(text="Noted: blue."), Script(text="Blue.", chunks=2),
                     Script(text="Never.", hang_after_chunks=0))
    conversation = host_a.conversations.create(items=[{"role": "user", "content": "My colour is blue."}])
    host_a.responses.create(model=MODEL, conversation=conversation.id, input="Remember it.")
    assert host_b.responses.create(model=MODEL, conversation=conversation.id, input="Which?").output_text == "Blue."
    assert "My colour is blue." in upstream_text(upstream) and "Noted: blue." in upstream_text(upstream)
    assert len(list(host_a.conversations.items.list(conversation.id))) == 5

    queued = host_a.responses.create(model=MODEL, input="Run long.", background=True)
    until(lambda: host_b.responses.retrieve(queued.id).status == "in_progress")
    assert host_b.responses.cancel(queued.id).status == "cancelled"
    time.sleep(6.0)  # past host A's next heartbeat, which stops the generation and leaves the cancel as it is
    assert host_a.responses.retrieve(queued.id).status == "cancelled"
