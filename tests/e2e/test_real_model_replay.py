"""The real models' recorded answers (``data/real_model_answers.json``, made by ``test_real_model_e2e.py``
with ``TOOLWIRE_RECORD_MODEL_ANSWERS``) replayed through toolwire without the model: the scripted upstream
sends each answer's content deltas as the model server cut them, and the client gets the calls and text
the live run got, streamed or not, on Chat and Responses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from support.endpoints import CHAT, RESPONSES, send
from support.real_model import MODELS, PROMPTS, request
from support.scripted_upstream import Script, ScriptedUpstream
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

RECORDINGS = json.loads((Path(__file__).parent / "data" / "real_model_answers.json").read_text())


def script_of(recording: dict[str, Any]) -> Script:
    """The recorded SSE payloads as the scripted upstream's pieces and finish reason."""
    pieces, finish = [], None
    for payload in recording["payloads"]:
        if payload == "[DONE]":
            continue
        for choice in json.loads(payload).get("choices") or ():
            if (choice.get("delta") or {}).get("content"):
                pieces.append(choice["delta"]["content"])
            finish = choice.get("finish_reason") or finish
    return Script(text="".join(pieces), chunks=pieces or None, finish_reason=finish or "stop")


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda r: f"{r['model']}-{len(r['payloads'])}")
def test_a_recorded_answer_replays_the_same(recording: dict[str, Any], upstream: ScriptedUpstream,
                                            toolwire_factory: Callable[..., ToolwireServer]) -> None:
    routes = {name: {**route, "model": "scripted-model"} for name, route in MODELS.items()}
    server = toolwire_factory(TOOLWIRE_MODEL_MAP=json.dumps(routes))
    for endpoint in (CHAT, RESPONSES):
        for stream in (True, False):
            upstream.enqueue(script_of(recording))
            outcome = send(server.v1_url, endpoint, request(endpoint, recording["model"],
                                                            PROMPTS["followup_next_call"], stream=stream))
            assert outcome.kind == "completed", (outcome.error, outcome.body[-500:])
            # a non-streamed answer's repeated calls go once (repeated_calls: drop); a streamed call has gone out
            expected = recording["calls"] if stream else _once(recording["calls"])
            assert [list(call) for call in outcome.calls] == expected, (endpoint.name, stream)
            assert outcome.text.strip() == recording["text"].strip(), (endpoint.name, stream)


def _once(calls: list[list[Any]]) -> list[list[Any]]:
    """``calls`` without those equal to an earlier one."""
    return [call for i, call in enumerate(calls) if call not in calls[:i]]
