"""``constrain_calls``: what each back end with constrained decoding gets in prompt mode (issue 38), by the way it
names itself (``owned_by``), per back end and per model."""

from __future__ import annotations

import json
import time

import gevent
import pytest

from app.pipeline import constrain
from app.profile import model_profile
from app.settings import Settings
from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks

CALL = '[{"name": "get_weather", "arguments": {"city": "Oslo"}}]'
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER_TOOL, TIME_TOOL]}
KEYS = {"grammar", "structured_outputs", "ebnf", "response_format"}
FORCED = {**BODY, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}


class EngineUpstream(FakeUpstream):
    """A scripted back end whose model list names its engine (as llama-server, vLLM and SGLang do)."""

    def __init__(self, owner: str, script=None):
        super().__init__(script or text_chunks(CALL))
        self.owner = owner
        self.base_url = f"http://{owner}.invalid/v1"  # the engine is remembered per back end
        self.asked = 0

    def models(self) -> list[dict]:
        self.asked += 1
        return [{"id": "m", "object": "model", "created": 1, "owned_by": self.owner}]


@pytest.fixture(autouse=True)
def _forget_engines(monkeypatch):
    monkeypatch.setattr(constrain, "_KNOWN", {})


def sent(make_app, owner: str, body: dict, **settings) -> dict:
    upstream = EngineUpstream(owner)
    response = make_app(upstream, **settings).test_client().post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.get_data(as_text=True)
    return upstream.bodies[-1]


def test_llama_server_gets_a_lazy_grammar_on_the_opener(make_app) -> None:
    body = sent(make_app, "llamacpp", BODY)
    assert body["grammar_lazy"] is True
    assert body["grammar_triggers"] == [{"type": 1, "value": "<tool_call>"}]
    assert body["preserved_tokens"] == ["<tool_call>", "</tool_call>"]
    grammar = body["grammar"]
    assert grammar.startswith('root ::= ws ( ( "[" ws call ( ws "," ws call )* ws "]" | call ) prose-0 | prose-start ) '
                              '( block prose-0 )*')
    assert '"\\"get_weather\\""' in grammar and '"\\"get_time\\""' in grammar and '"\\"city\\""' in grammar


def test_llama_server_under_a_forced_choice_gets_a_grammar_of_calls_only(make_app) -> None:
    body = sent(make_app, "llamacpp", FORCED)
    assert "grammar_lazy" not in body and "grammar_triggers" not in body
    assert body["grammar"].startswith('root ::= ws "[" ws call ( ws "," ws call )* ws "]"')
    assert '"\\"get_weather\\""' in body["grammar"] and "get_time" not in body["grammar"], "only the forced tool"
    no_parallel = sent(make_app, "llamacpp", {**FORCED, "parallel_tool_calls": False})
    assert no_parallel["grammar"].startswith("root ::= ws call\n")


def test_vllm_gets_structured_outputs(make_app) -> None:
    tag = json.loads(sent(make_app, "vllm", BODY)["structured_outputs"]["structural_tag"])
    assert tag["type"] == "structural_tag" and tag["triggers"] == ["<tool_call>"]
    weather = next(s for s in tag["structures"] if "get_weather" in s["begin"])
    assert weather == {"begin": '<tool_call>{"name": "get_weather", "arguments": ',
                       "schema": WEATHER_TOOL["function"]["parameters"], "end": "}</tool_call>"}
    assert sent(make_app, "vllm", FORCED)["structured_outputs"]["grammar"].startswith('root ::= ws "["')


def test_sglang_gets_a_structural_tag_and_ebnf(make_app) -> None:
    fmt = sent(make_app, "sglang", BODY)["response_format"]
    assert fmt["type"] == "structural_tag" and len(fmt["structures"]) == 2 and fmt["triggers"] == ["<tool_call>"]
    assert sent(make_app, "sglang", FORCED)["ebnf"].startswith('root ::= ws "["')


def test_a_back_end_that_names_itself_otherwise_gets_no_constraint(make_app) -> None:
    assert not KEYS & set(sent(make_app, "me", BODY)), "llama-cpp-python names itself 'me': auto is off there"


@pytest.mark.parametrize("body", [{**BODY, "tool_choice": "none"}, {k: v for k, v in BODY.items() if k != "tools"}])
def test_no_constraint_where_no_call_may_come(make_app, body: dict) -> None:
    assert not KEYS & set(sent(make_app, "llamacpp", body))


@pytest.mark.parametrize("body", [{**BODY, "tool_choice": "none"}, {k: v for k, v in BODY.items() if k != "tools"}])
def test_the_engine_is_not_asked_where_no_call_may_come(make_app, body: dict) -> None:
    """A request without callable tools waits for nothing: a back end's model list may hang (the hostile suite's)."""
    upstream = EngineUpstream("llamacpp")
    make_app(upstream).test_client().post("/v1/chat/completions", json=body)
    assert upstream.asked == 0


def test_a_model_list_that_hangs_is_given_up_on(make_app, monkeypatch) -> None:
    class Hanging(EngineUpstream):
        def models(self) -> list[dict]:
            gevent.sleep(60)
            return super().models()

    monkeypatch.setattr(constrain, "PROBE_SECONDS", 0.05)
    upstream = Hanging("llamacpp")
    started = time.monotonic()
    response = make_app(upstream).test_client().post("/v1/chat/completions", json=BODY)
    assert response.status_code == 200 and time.monotonic() - started < 30, "the probe's bound, not the hang"
    assert not KEYS & set(upstream.bodies[-1]), "unconstrained until it answers"


def test_the_engine_is_asked_once_per_back_end(make_app) -> None:
    upstream = EngineUpstream("llamacpp")
    client = make_app(upstream).test_client()
    for _ in range(3):
        client.post("/v1/chat/completions", json=BODY)
    assert upstream.asked == 1 and all("grammar" in body for body in upstream.bodies)


def test_off_per_back_end_and_on_per_model(make_app) -> None:
    assert "grammar" not in sent(make_app, "llamacpp", BODY, constrain_calls="off")
    named = {"local": {"kind": "openai", "url": "http://local.invalid/v1", "models": ["m"], "constrain_calls": "off"}}
    assert "grammar" not in sent(make_app, "llamacpp", BODY, upstreams=named)
    assert "grammar" in sent(make_app, "llamacpp", BODY, constrain_calls="off", model_map={"m": {"constrain_calls": True}})
    assert "grammar" in sent(make_app, "me", BODY, constrain_calls="llama.cpp"), "named outright: not asked"


def test_the_setting_reads_per_model() -> None:
    settings = Settings(model_map={"a": {"constrain_calls": True}, "b": {"constrain_calls": False},
                                   "c": {"constrain_calls": "vllm"}, "d": "x"})
    assert [model_profile(settings, m).constrain_calls for m in "abcd"] == ["on", "off", "vllm", "auto"]


def test_a_constrained_answer_is_read_as_ever(make_app) -> None:
    upstream = EngineUpstream("llamacpp")
    message = make_app(upstream).test_client().post("/v1/chat/completions", json=FORCED).get_json()["choices"][0][
        "message"]
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [{"city": "Oslo"}]


def test_a_json_answer_asked_for_keeps_bare_json_free(make_app) -> None:
    body = sent(make_app, "llamacpp", {**BODY, "response_format": {"type": "json_object"}})
    assert body["grammar"].startswith("root ::= prose-0 ( block prose-0 )*"), "only tagged blocks are calls then"
    assert "grammar" not in sent(make_app, "llamacpp", {**FORCED, "response_format": {"type": "json_object"}})


def _other_name_end(grammar: str, name: str) -> str:
    """The body of the rule the ``other-name`` trie of ``grammar``'s call reaches after the characters of ``name``."""
    rules = dict(line.split(" ::= ", 1) for line in grammar.splitlines())
    rule = rules["call"].split('ws ( "\\"" ', 1)[1].split()[0]
    for char in name:
        step = dict(pair for alt in rules[rule].split(" | ") if len(pair := alt.split()) == 2 and pair[0][0] == '"')
        rule = step[json.dumps(char)]
    return rules[rule]


def test_a_call_may_name_a_tool_nobody_offered_under_auto(make_app) -> None:
    """Under ``auto`` the grammar lets a call name a tool nobody offered (its arguments any object, read as an unknown
    tool's call), so a model that means another tool is not forced into an offered one that does not fit: forcing
    offered names turned two of BFCL's irrelevance answers into such calls (docs/benchmarks.md). The name may end
    wherever no offered name does; a forced choice allows only its tools."""
    grammar = sent(make_app, "llamacpp", BODY)["grammar"]
    assert '"\\""' not in _other_name_end(grammar, "get_weather").split(" | ")  # that name is an offered one's
    assert '"\\""' in _other_name_end(grammar, "get_").split(" | ")  # get_ is no offered name
    assert '"\\""' in _other_name_end(grammar, "").split(" | ")
    assert "other-name" not in sent(make_app, "llamacpp", FORCED)["grammar"]
