"""Every registered format taught with and without a marker, on all three APIs (issue 43, item 2).

The back end answers with a call written in the taught format, repeating the prompt's marker when it has one;
the answer must be that one call whatever the format, the API or the way marker mode came on (a quoted opener
in the user's message turns it on by itself; ``X-Toolwire-Marker: 1`` asks for it). Before, 7 of 22 formats
answered 500 as soon as a marker was drawn (``'_MarkedFormat' object has no attribute 'delim'``)."""

from __future__ import annotations

import json
import re

import pytest

from statemachine import get_format, registered_formats
from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks

MARKER = re.compile(r' marker="([A-Za-z0-9_-]+)"')
ARGUMENTS = {"city": "Rome"}


class TaughtCallUpstream(FakeUpstream):
    """Answers with one ``get_weather`` call in ``format_name``, marked as the prompt teaches (if it does)."""

    def __init__(self, format_name: str):
        super().__init__()
        self.format_name = format_name

    def open(self, body: dict, *, request_id: str | None = None):
        prompt = "\n".join(str(m.get("content")) for m in body["messages"])
        found = MARKER.search(prompt)
        taught = get_format(self.format_name).with_marker(found.group(1) if found else None)
        self.script = text_chunks(taught.render_call("get_weather", json.dumps(ARGUMENTS)), size=7)
        return super().open(body, request_id=request_id)


def user_text(format_name: str, quoted: bool) -> str:
    opener = get_format(format_name).openers[0]
    return f"Weather in Rome? My notes say: {opener} import json" if quoted else "Weather in Rome?"


def chat_calls(client, text: str, headers: dict) -> list:
    response = client.post("/v1/chat/completions", headers=headers, json={
        "model": "m", "messages": [{"role": "user", "content": text}], "tools": [WEATHER_TOOL]})
    assert response.status_code == 200, response.data
    return [(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in response.get_json()["choices"][0]["message"].get("tool_calls") or []]


def responses_calls(client, text: str, headers: dict) -> list:
    response = client.post("/v1/responses", headers=headers, json={
        "model": "m", "input": text, "tools": [{"type": "function", **WEATHER_TOOL["function"]}]})
    assert response.status_code == 200, response.data
    return [(item["name"], json.loads(item["arguments"]))
            for item in response.get_json()["output"] if item["type"] == "function_call"]


def messages_calls(client, text: str, headers: dict) -> list:
    tool = WEATHER_TOOL["function"]
    response = client.post("/v1/messages", headers=headers, json={
        "model": "m", "max_tokens": 256, "messages": [{"role": "user", "content": text}],
        "tools": [{"name": tool["name"], "description": tool["description"], "input_schema": tool["parameters"]}]})
    assert response.status_code == 200, response.data
    return [(block["name"], block["input"]) for block in response.get_json()["content"] if block["type"] == "tool_use"]


#: Every format toolwire ships that a function call can be taught in (``custom_tool_call`` is offered with custom
#: tools only; a test's plug-in format, registered when its module is collected, is not one of them).
FUNCTION_FORMATS = [name for name in registered_formats() if name != "custom_tool_call"
                    and type(get_format(name)).__module__.startswith("statemachine.formats.")]


@pytest.mark.parametrize("api", [chat_calls, responses_calls, messages_calls], ids=["chat", "responses", "messages"])
@pytest.mark.parametrize("quoted, headers, marked", [
    (False, {}, False), (True, {}, True), (False, {"X-Toolwire-Marker": "1"}, True)],
    ids=["unmarked", "auto-marker", "marker-header"])
@pytest.mark.parametrize("format_name", FUNCTION_FORMATS)
def test_every_format_makes_its_call_with_and_without_a_marker(make_app, format_name, api, quoted, headers, marked):
    upstream = TaughtCallUpstream(format_name)
    client = make_app(upstream, tool_format=format_name).test_client()
    assert api(client, user_text(format_name, quoted), headers) == [("get_weather", ARGUMENTS)]
    prompt = str(upstream.bodies[0]["messages"])
    assert bool(MARKER.search(prompt)) == marked
