"""A format registered from outside the package: Mistral's ``[TOOL_CALLS][{…}, …]``, through the public API only."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from harness import CFG, Call, Reasoning, tr
from statemachine import TextFormat, get_format, register_format, registered_formats
from statemachine.formats import BodyReader, CallSink, JsonCallsReader


class MistralFormat(TextFormat):
    """Mistral v0.3 / Nemo: ``[TOOL_CALLS] [{"name": …, "arguments": {…}}, …]`` (no closer)."""

    name = "test_mistral"
    openers = ("[TOOL_CALLS]",)
    closer = ""

    def render_call(self, name: str, arguments: str) -> str:
        return f'[TOOL_CALLS][{{"name": {json.dumps(name)}, "arguments": {arguments}}}]'

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return JsonCallsReader(sink, None)


if MistralFormat.name not in registered_formats():
    register_format(MistralFormat())
MCFG = replace(CFG, formats=("test_mistral", "tool_call"))
SF = {"city": "SF"}


def test_the_registered_format_is_found_by_name():
    assert isinstance(get_format("test_mistral"), MistralFormat)
    with pytest.raises(ValueError):
        register_format(MistralFormat())  # the name is taken
    register_format(MistralFormat(), replace=True)


def test_a_format_needs_an_opener():
    class NoOpener(MistralFormat):
        name = "test_no_opener"
        openers = ("",)

    with pytest.raises(ValueError):
        register_format(NoOpener())


def test_one_call():
    text = 'Sure.[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "SF"}}]'
    tr(MCFG, text, ["Sure.", Call("get_weather", SF)], finish="tool_calls", notes=[])


def test_parallel_calls_then_text():
    text = ('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "SF"}}, '
            '{"name": "get_time", "arguments": {}}]\nDone.')
    # like bare JSON, the whitespace between the block and the text is the block's
    tr(MCFG, text, [Call("get_weather", SF), Call("get_time", {}), "Done."], finish="tool_calls", notes=[])


def test_rendered_call_round_trips():
    rendered = get_format("test_mistral").render_call("get_weather", '{"city": "SF"}')
    tr(MCFG, rendered, [Call("get_weather", SF)], finish="tool_calls")


def test_mixed_with_a_built_in_format():
    text = ('[TOOL_CALLS][{"name": "get_time", "arguments": {}}] and '
            '<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call>')
    tr(MCFG, text, [Call("get_time", {}), "and ", Call("get_weather", SF)], finish="tool_calls")


def test_brackets_and_unknown_tools_stay_text():
    text = "a [TOOL] list [x] and [TOOL_CALLS] for nothing"
    tr(MCFG, text, [text], notes=[])
    unknown = '[TOOL_CALLS][{"name": "rm", "arguments": {}}]'
    tr(MCFG, unknown, [unknown], notes=["unknown_tool"])


def test_inside_reasoning_it_is_reasoning():
    text = '<think>[TOOL_CALLS][{"name": "get_time", "arguments": {}}]</think>ok'
    tr(MCFG, text, [Reasoning('[TOOL_CALLS][{"name": "get_time", "arguments": {}}]'), "ok"])


def test_not_listed_it_is_text():
    text = '[TOOL_CALLS][{"name": "get_time", "arguments": {}}]'
    tr(CFG, text, [text])


# through the service: the Flask app on an upstream that plays the model text in the given chunks ---------------

def test_through_the_service_under_every_chunking(monkeypatch, tmp_path):
    from harness import chunkings
    from support.fakes import PlayingUpstream

    from app import create_app
    from app.http import extension
    from app.settings import Settings

    text = ('Checking.[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "SF"}}, '
            '{"name": "get_time", "arguments": {}}]')
    runs = chunkings(text, random_splits=8)
    upstream = PlayingUpstream([chunks for _, chunks in runs])
    monkeypatch.setattr(extension, "make_upstream", lambda _settings, _name: upstream)
    app = create_app(Settings(tool_format="test_mistral", response_store_path=str(tmp_path / "r.sqlite3")))
    client = app.test_client()
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
             for n in ("get_weather", "get_time")]
    for label, _ in runs:
        response = client.post("/v1/chat/completions", json={
            "model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools})
        assert response.status_code == 200, (label, response.get_json())
        choice = response.get_json()["choices"][0]
        calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                 for c in choice["message"]["tool_calls"]]
        assert (choice["message"]["content"], calls, choice["finish_reason"]) == (
            "Checking.", [("get_weather", SF), ("get_time", {})], "tool_calls"), label
    assert "[TOOL_CALLS][" in upstream.prompts[0]  # the prompt taught the registered format
