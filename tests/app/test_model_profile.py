"""A model's settings, resolved once into its :class:`~app.profile.ModelProfile` and read alike by every API.

Issue 43, item 3: ``/v1/messages`` built its parser without the model's name or the marker header, so
``model_map``'s ``tool_format``, ``accept_formats``, ``opens_reasoning``, ``stop_after_tools`` and
``X-Toolwire-Marker`` did nothing there. The parity test sends one request to the three APIs under each
per-model setting: the back end gets the same prompt, and the answers mean the same.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Callable

import pytest

from app.pipeline.encoder import CHARS_PER_TOKEN
from app.profile import model_profile
from app.settings import Settings
from statemachine import get_format
from support.fakes import FakeUpstream, text_chunks

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "Weather in Paris?"
WEATHER = {"name": "get_weather", "description": "Current weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
PARIS = '{"city": "Paris"}'
ROME = '{"city": "Rome"}'
#: An answer's meaning, whichever API carried it: its visible text and its calls (name, arguments).
Meaning = tuple[str, list[tuple[str, Any]]]


def chat(headers: dict[str, str]) -> tuple[str, dict[str, Any]]:
    return "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": QUESTION}],
                                    "tools": [{"type": "function", "function": WEATHER}]}


def responses(headers: dict[str, str]) -> tuple[str, dict[str, Any]]:
    return "/v1/responses", {"model": "m", "input": QUESTION, "tools": [{"type": "function", **WEATHER}],
                             "store": False}


def messages(headers: dict[str, str]) -> tuple[str, dict[str, Any]]:
    return "/v1/messages", {"model": "m", "max_tokens": 256, "messages": [{"role": "user", "content": QUESTION}],
                            "tools": [{"name": WEATHER["name"], "description": WEATHER["description"],
                                       "input_schema": WEATHER["parameters"]}]}


def meaning(path: str, answer: dict[str, Any]) -> Meaning:
    """The visible text and the calls of a non-streamed answer of any of the three APIs."""
    if path.endswith("/chat/completions"):
        message = answer["choices"][0]["message"]
        return message["content"] or "", [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                                          for c in message.get("tool_calls") or ()]
    if path.endswith("/responses"):
        items = answer["output"]
        text = "".join(part["text"] for item in items if item["type"] == "message" for part in item["content"])
        return text, [(i["name"], json.loads(i["arguments"])) for i in items if i["type"] == "function_call"]
    blocks = answer["content"]
    return ("".join(b["text"] for b in blocks if b["type"] == "text"),
            [(b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"])


def call_in(fmt: str, arguments: str = PARIS) -> str:
    return get_format(fmt).render_call("get_weather", arguments)


#: (model_map entry of "m", request headers, the model's answer, what the answer means).
CASES = {
    "tool_format": ({"tool_format": "use_tool"}, {}, f"Checking. {call_in('use_tool')}",
                    ("Checking. ", [("get_weather", {"city": "Paris"})])),
    "tool_format auto (Harmony for gpt-oss)": ({"model": "gpt-oss-20b", "tool_format": "auto"}, {},
                                               call_in("harmony"), ("", [("get_weather", {"city": "Paris"})])),
    "accept_formats": ({"accept_formats": "tool_call"}, {}, f"Like this: {call_in('use_tool')}",
                       (f"Like this: {call_in('use_tool')}", [])),
    "opens_reasoning": ({"opens_reasoning": True}, {}, "The user wants Paris.</think>It is sunny in Paris.",
                        ("It is sunny in Paris.", [])),
    "stop_after_tools": ({"stop_after_tools": "first"}, {}, call_in("tool_call") + call_in("tool_call", ROME),
                         ("", [("get_weather", {"city": "Paris"})])),
    "X-Toolwire-Marker": ({}, {"X-Toolwire-Marker": "1"}, f"Unmarked: {call_in('tool_call')}",
                          (f"Unmarked: {call_in('tool_call')}", [])),
}


def unmarked(text: str) -> str:
    """A prompt with its per-request marker replaced: the rest must be equal."""
    return re.sub(r'marker="[A-Za-z0-9_-]+"', 'marker="…"', text)


@pytest.mark.parametrize("case", list(CASES))
def test_the_same_request_means_the_same_on_every_api(make_app: Callable[..., Any], case: str) -> None:
    route, headers, answer, expected = CASES[case]
    prompts, meanings = [], []
    for api in (chat, responses, messages):
        upstream = FakeUpstream(text_chunks(answer, size=7))
        app = make_app(upstream, model_map={"m": {"model": "small", **route}})
        path, body = api(headers)
        reply = app.test_client().post(path, json=body, headers=headers)
        assert reply.status_code == 200, reply.data
        sent = upstream.bodies[-1]
        prompts.append((sent["model"], [(m["role"], unmarked(m["content"])) for m in sent["messages"]]))
        meanings.append(meaning(path, reply.get_json()))
    assert prompts[2] == prompts[1] == prompts[0], "the back end is taught the same way"
    assert meanings == [expected] * 3


@pytest.mark.parametrize("padding", range(4))
def test_count_tokens_counts_the_prompt_the_generation_sends(make_app: Callable[..., Any], padding: int) -> None:
    """``count_tokens`` built its prompt without the model's ``system_in`` (issue 37): a model whose system
    text opens the first user turn was counted as if it had a system message."""
    upstream = FakeUpstream(text_chunks("It is sunny."))
    app = make_app(upstream, model_map={"m": {"system_in": "first_user", "tool_manifest": "compact"}})
    path, body = messages({})
    body = {**body, "system": "Answer briefly." + " " * padding}
    assert app.test_client().post(path, json=body).status_code == 200
    sent = upstream.bodies[-1]["messages"]
    assert [m["role"] for m in sent] == ["user"]
    counted = app.test_client().post("/v1/messages/count_tokens", json={
        key: value for key, value in body.items() if key != "max_tokens"}).get_json()
    assert counted == {"input_tokens": math.ceil(sum(len(m["content"]) for m in sent) / CHARS_PER_TOKEN)}


def test_a_profile_is_built_once_per_settings_and_model() -> None:
    settings = Settings(tool_mode="auto", model_map={"m": {"model": "gemma3:270m", "tool_format": "auto",
                                                           "stop_after_tools": "first", "max_output_tokens": 64}})
    profile = model_profile(settings, "m")
    assert profile is model_profile(settings, "m") and profile is not model_profile(Settings(), "m")
    assert (profile.upstream_model, profile.tool_format, profile.system_in, profile.tool_mode) == \
        ("gemma3:270m", "gemma", "first_user", "auto")
    assert profile.policy.stop_after_first_call and profile.max_output_tokens == 64
    with pytest.raises(AttributeError):
        profile.tool_mode = "prompt"  # type: ignore[misc]


def test_a_request_resolves_its_model_once(make_app: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from app import profile as profiles

    built: list[str] = []
    original = profiles._build
    monkeypatch.setattr(profiles, "_build", lambda settings, model: built.append(model) or original(settings, model))
    app = make_app(FakeUpstream(text_chunks("Hello.")), model_map={"m": "small"})
    for api in (chat, responses, messages):
        path, body = api({})
        assert app.test_client().post(path, json=body).status_code == 200
    assert built == ["m"]  # once for the three requests: the later ones found it


#: The per-model lookups the settings had; the profile's builder is the one place reading ``model_map`` now.
OLD_LOOKUPS = re.compile(r"\b(?:tool_mode|reasoning|tool_format|stop_after_tools|system_in|constrain_calls|"
                         r"tool_manifest|example_exchanges|accept_formats|max_output_tokens)_for\(|"
                         r"\.opens_reasoning\(|\.upstream_model\(|\._per_model\(")


def test_no_per_model_lookup_outside_the_profile_s_builder() -> None:
    offenders = [f"{path.relative_to(ROOT)}:{number}" for path in sorted((ROOT / "app").rglob("*.py"))
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if OLD_LOOKUPS.search(line)]
    assert offenders == []
    readers = [path.relative_to(ROOT).as_posix() for path in sorted((ROOT / "app").rglob("*.py"))
               if re.search(r"model_map\.get\(", path.read_text(encoding="utf-8"))]
    assert readers == ["app/profile.py", "app/routing.py"]  # a model's settings, and its back end
