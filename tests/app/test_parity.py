"""Parity: the decisions both endpoints share, one table of cases run against Chat and Responses.

Each case is written once in endpoint-neutral terms; :class:`Chat` and :class:`Responses` put it in
their request shape and read their answer back. The decisions (docs/api.md, "Chat and Responses agree"):
media parts become placeholders, a missing upstream ``usage`` is estimated, ``tool_choice`` is checked
once with the same message and a ``param`` naming the offending value, and validation errors name
their ``param`` the same way. :class:`Messages` (Anthropic's API) runs the cases it shares with them:
placeholders, usage, the named-tool check and the mid-stream error; :class:`Gemini` (Google's API, its model in
the URL and its stream a verb) the same ones. :class:`Ollama` (Ollama's API) runs the
usage cases and the mid-stream error; it has no ``tool_choice``, and refuses images for a text back end rather
than hiding them. On every API one model text gives the same text and calls, at every chunking.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from app.upstreams.base import UpstreamError
from support.fakes import WEATHER_TOOL, FakeUpstream, text_chunks
from support.scripted_upstream import tool_call_text

WEATHER = WEATHER_TOOL["function"]
USAGE = {"prompt_tokens": 31, "completion_tokens": 7, "total_tokens": 38}


class Chat:
    path = "/v1/chat/completions"

    def body(self, text: str = "hi", *, tools: list[dict] | None = None, tool_choice: Any = None,
             image: bool = False, **extra: Any) -> dict[str, Any]:
        content: Any = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": "data:x"}}] \
            if image else text
        body = {"model": "m", "messages": [{"role": "user", "content": content}], **extra}
        if tools is not None:
            body["tools"] = [{"type": "function", "function": t} for t in tools]
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
        return body

    def named(self, name: str) -> tuple[dict, str]:
        return {"type": "function", "function": {"name": name}}, "tool_choice.function.name"

    def allowed(self, names: list[str]) -> tuple[dict, str]:
        return ({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [
            {"type": "function", "function": {"name": n}} for n in names]}},
                f"tool_choice.allowed_tools.tools[{len(names) - 1}].function.name")

    def usage(self, body: dict) -> tuple[int, int, int]:
        u = body["usage"]
        return u["prompt_tokens"], u["completion_tokens"], u["total_tokens"]

    def stream_error(self, raw: bytes) -> dict:
        frames = [b[len("data: "):] for b in raw.decode().split("\n\n") if b.startswith("data: ")]
        assert frames[-1] == "[DONE]"
        return json.loads(frames[-2])["error"]


class Responses:
    path = "/v1/responses"

    def body(self, text: str = "hi", *, tools: list[dict] | None = None, tool_choice: Any = None,
             image: bool = False, **extra: Any) -> dict[str, Any]:
        content: Any = [{"type": "input_text", "text": text}, {"type": "input_image", "image_url": "data:x"}] \
            if image else text
        body = {"model": "m", "input": [{"role": "user", "content": content}], **extra}
        if tools is not None:
            body["tools"] = [{"type": "function", **t} for t in tools]
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
        return body

    def named(self, name: str) -> tuple[dict, str]:
        return {"type": "function", "name": name}, "tool_choice.name"

    def allowed(self, names: list[str]) -> tuple[dict, str]:
        return ({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": n} for n in names]},
                f"tool_choice.tools[{len(names) - 1}].name")

    def usage(self, body: dict) -> tuple[int, int, int]:
        u = body["usage"]
        return u["input_tokens"], u["output_tokens"], u["total_tokens"]

    def stream_error(self, raw: bytes) -> dict:
        events = [json.loads(b.split("\ndata: ", 1)[1]) for b in raw.decode().split("\n\n") if "\ndata: " in b]
        assert events[-1]["type"] == "response.failed"
        return events[-1]["response"]["error"]


class Messages:
    """Anthropic's Messages API: no ``allowed_tools``, ``required`` is ``any``, errors in its own envelope."""

    path = "/v1/messages"

    def body(self, text: str = "hi", *, tools: list[dict] | None = None, tool_choice: Any = None,
             image: bool = False, **extra: Any) -> dict[str, Any]:
        content: Any = [{"type": "text", "text": text},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}] \
            if image else text
        body = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": content}], **extra}
        if tools is not None:
            body["tools"] = [{"name": t["name"], "description": t.get("description"), "input_schema": t["parameters"]}
                             for t in tools]
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
        return body

    def named(self, name: str) -> tuple[dict, str]:
        return {"type": "tool", "name": name}, "tool_choice.name"

    def usage(self, body: dict) -> tuple[int, int, int]:
        u = body["usage"]
        return u["input_tokens"], u["output_tokens"], u["input_tokens"] + u["output_tokens"]

    def stream_error(self, raw: bytes) -> dict:
        events = [json.loads(b.split("\ndata: ", 1)[1]) for b in raw.decode().split("\n\n") if "\ndata: " in b]
        assert events[-1]["type"] == "error"
        return events[-1]["error"]


class Gemini:
    """Google's Gemini API: the model in the URL, a stream by its verb (``alt=sse``), ``ANY`` with
    ``allowedFunctionNames`` for a named tool, errors in Google's envelope (the field in ``details``)."""

    path = "/v1beta/models/m:generateContent"

    def body(self, text: str = "hi", *, tools: list[dict] | None = None, tool_choice: Any = None,
             image: bool = False, stream: bool = False) -> dict[str, Any]:
        parts: list[dict] = [{"text": text}]
        if image:
            parts.append({"inlineData": {"mimeType": "image/png", "data": "x"}})
        body: dict[str, Any] = {"contents": [{"role": "user", "parts": parts}]}
        if stream:
            body["_path"] = "/v1beta/models/m:streamGenerateContent?alt=sse"
        if tools is not None:
            body["tools"] = [{"functionDeclarations": tools}]
        if tool_choice is not None:
            body["toolConfig"] = tool_choice
        return body

    def named(self, name: str) -> tuple[dict, str]:
        return ({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}},
                "toolConfig.functionCallingConfig.allowedFunctionNames[0]")

    def usage(self, body: dict) -> tuple[int, int, int]:
        u = body["usageMetadata"]
        return u["promptTokenCount"], u["candidatesTokenCount"], u["totalTokenCount"]

    def stream_error(self, raw: bytes) -> dict:
        chunks = [json.loads(e.strip()[len("data: "):]) for e in raw.decode().split("\r\n\r\n") if e.strip()]
        return chunks[-1]["error"]

    def error(self, body: dict) -> tuple[str, str | None]:
        """(the kind, the field) of a refusal: Google's status, and the field of its ``fieldViolations``."""
        error = body["error"]
        return error["status"], error["details"][0]["fieldViolations"][0]["field"]



class Ollama:
    """Ollama's API: streams unless told not to (so a body here says ``stream: false`` unless given), NDJSON
    lines, errors as ``{"error": "..."}``."""

    path = "/api/chat"

    def body(self, text: str = "hi", *, tools: list[dict] | None = None, **extra: Any) -> dict[str, Any]:
        body = {"model": "m", "messages": [{"role": "user", "content": text}], "stream": False, **extra}
        if tools is not None:
            body["tools"] = [{"type": "function", "function": t} for t in tools]
        return body

    def usage(self, body: dict) -> tuple[int, int, int]:
        return body["prompt_eval_count"], body["eval_count"], body["prompt_eval_count"] + body["eval_count"]

    def stream_error(self, raw: bytes) -> dict:
        last = json.loads(raw.decode().strip().split("\n")[-1])
        assert list(last) == ["error"]
        return {"message": last["error"]}


ENDPOINTS = [pytest.param(Chat(), id="chat"), pytest.param(Responses(), id="responses")]
#: The cases Anthropic's Messages API and Google's Gemini API share with the two OpenAI APIs.
ALL_APIS = [*ENDPOINTS, pytest.param(Messages(), id="messages"), pytest.param(Gemini(), id="gemini")]
#: The cases every surface shares (Ollama's API too).
SURFACES = [*ALL_APIS, pytest.param(Ollama(), id="ollama")]


def post(make_app, endpoint, upstream: FakeUpstream, body: dict, **settings: Any):
    path = body.pop("_path", endpoint.path)  # Gemini streams by its URL, the others by the body's flag
    return make_app(upstream, **settings).test_client().post(path, json=body)


def prompt_text(upstream: FakeUpstream) -> str:
    [sent] = upstream.bodies
    return "\n".join(m["content"] for m in sent["messages"])


# -- decided divergences ----------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ALL_APIS)
def test_an_image_becomes_a_placeholder_the_model_reads(make_app, endpoint):
    upstream = FakeUpstream(text_chunks("I cannot see images."))
    response = post(make_app, endpoint, upstream, endpoint.body("What is this?", image=True))
    assert response.status_code == 200
    assert "What is this?\n[image]" in prompt_text(upstream)
    assert "data:" not in prompt_text(upstream)


@pytest.mark.parametrize("endpoint", SURFACES)
@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_usage_is_the_upstreams_when_sent(make_app, endpoint, stream):
    upstream = FakeUpstream(text_chunks("Sunny.", usage=USAGE))
    extra = {"stream": True, "stream_options": {"include_usage": True}} if stream and isinstance(endpoint, Chat) \
        else {"stream": True} if stream else {}
    response = post(make_app, endpoint, upstream, endpoint.body(**extra))
    body = _final_body(endpoint, response.get_data()) if stream else response.get_json()
    assert endpoint.usage(body) == (31, 7, 38)


@pytest.mark.parametrize("endpoint", SURFACES)
def test_missing_usage_is_estimated_at_four_characters_a_token(make_app, endpoint):
    upstream = FakeUpstream(text_chunks("x" * 41))  # no usage chunk
    body = post(make_app, endpoint, upstream, endpoint.body("Say x.")).get_json()
    prompt, completion, total = endpoint.usage(body)
    assert completion == math.ceil(41 / 4)
    assert prompt == math.ceil(sum(len(m["content"]) for m in upstream.bodies[0]["messages"]) / 4)
    assert total == prompt + completion


def _final_body(endpoint, raw: bytes) -> dict:
    """The streamed answer's usage carrier: Chat's usage chunk, Responses' terminal Response, Messages'
    ``message_delta``, Gemini's last chunk."""
    if isinstance(endpoint, Chat):
        frames = [b[len("data: "):] for b in raw.decode().split("\n\n") if b.startswith("data: ")]
        return json.loads(frames[-2])
    if isinstance(endpoint, Gemini):
        return json.loads(raw.decode().split("\r\n\r\n")[-2].strip()[len("data: "):])
    if isinstance(endpoint, Ollama):
        return json.loads(raw.decode().strip().split("\n")[-1])
    events = [json.loads(b.split("\ndata: ", 1)[1]) for b in raw.decode().split("\n\n") if "\ndata: " in b]
    return events[-2] if isinstance(endpoint, Messages) else events[-1]["response"]


# -- the same answer -----------------------------------------------------------------------------------


#: One model answer: text, a call, text between, a second call.
ANSWER = ("Let me look both up.\n" + tool_call_text("get_weather", {"city": "Paris"}) + "\nand\n"
          + tool_call_text("get_time", {"tz": "Europe/Paris"}))
TIME = {"name": "get_time", "description": "Time in a zone",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}


def text_and_calls(endpoint, body: dict) -> tuple[str, list[tuple[str, dict]]]:
    """An answer's visible text and its calls (name, arguments), read as each API's clients read them."""
    if isinstance(endpoint, Chat):
        message = body["choices"][0]["message"]
        return message["content"] or "", [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                                          for c in message["tool_calls"]]
    if isinstance(endpoint, Responses):
        items = body["output"]
        text = "".join(part["text"] for item in items if item["type"] == "message" for part in item["content"])
        return text, [(i["name"], json.loads(i["arguments"])) for i in items if i["type"] == "function_call"]
    if isinstance(endpoint, Messages):
        blocks = body["content"]
        return ("".join(b["text"] for b in blocks if b["type"] == "text"),
                [(b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"])
    if isinstance(endpoint, Gemini):
        parts = body["candidates"][0]["content"]["parts"]
        return ("".join(p["text"] for p in parts if "text" in p),
                [(p["functionCall"]["name"], p["functionCall"]["args"]) for p in parts if "functionCall" in p])
    message = body["message"]
    return message["content"], [(c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]]


@pytest.mark.parametrize("endpoint", SURFACES)
@pytest.mark.parametrize("size", [1, 4, 9, len(ANSWER)])
def test_one_model_text_gives_the_same_text_and_calls_on_every_api(make_app, endpoint, size):
    upstream = FakeUpstream(text_chunks(ANSWER, size=size))
    response = post(make_app, endpoint, upstream, endpoint.body("Weather and time in Paris?", tools=[WEATHER, TIME]))
    assert response.status_code == 200, response.get_data()
    text, calls = text_and_calls(endpoint, response.get_json())
    assert text == "Let me look both up.\n\nand\n"  # the text around the calls, as the parser leaves it
    assert calls == [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "Europe/Paris"})]


# -- one tool_choice check ------------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ALL_APIS)
def test_tool_choice_naming_a_tool_not_offered(make_app, endpoint):
    choice, param = endpoint.named("nope")
    _assert_400(make_app, endpoint, endpoint.body(tools=[WEATHER], tool_choice=choice), param,
                f"Invalid value for '{param}': 'nope' is not in 'tools'.")


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_allowed_tools_naming_a_tool_not_offered(make_app, endpoint):
    choice, param = endpoint.allowed(["get_weather", "nope"])
    _assert_400(make_app, endpoint, endpoint.body(tools=[WEATHER], tool_choice=choice), param,
                f"Invalid value for '{param}': 'nope' is not in 'tools'.")


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_required_without_tools(make_app, endpoint):
    _assert_400(make_app, endpoint, endpoint.body(tool_choice="required"), "tool_choice",
                "Invalid value for 'tool_choice': 'required' needs at least one tool in 'tools'.")


# -- one validation layer ------------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize(("change", "param", "code"), [
    ({"model": None}, "model", "missing_required_parameter"),
    ({"temperature": 7}, "temperature", "invalid_value"),
    ({"top_p": -1}, "top_p", "invalid_value"),
    ({"stream": "yes please"}, "stream", "invalid_value"),
    ({"parallel_tool_calls": "maybe"}, "parallel_tool_calls", "invalid_value"),
    ({"tool_choice": "sometimes"}, "tool_choice", "invalid_value"),
], ids=["missing-model", "temperature", "top_p", "stream", "parallel", "tool_choice-word"])
def test_field_errors_name_the_same_param(make_app, endpoint, change, param, code):
    body = endpoint.body()
    body.update(change)
    body = {k: v for k, v in body.items() if v is not None}
    error = _assert_400(make_app, endpoint, body, param)
    assert error["code"] == code


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_too_many_tools_is_the_same_limit(make_app, endpoint):
    tools = [{**WEATHER, "name": f"tool_{i}"} for i in range(3)]
    error = _assert_400(make_app, endpoint, endpoint.body(tools=tools), "tools", max_tools=2)
    assert error["code"] == "array_above_max_length"


def _assert_400(make_app, endpoint, body: dict, param: str, message: str | None = None, **settings: Any) -> dict:
    upstream = FakeUpstream(text_chunks("never"))
    response = post(make_app, endpoint, upstream, body, **settings)
    assert response.status_code == 400, response.get_data()
    error = response.get_json()["error"]  # every envelope keeps it under "error"
    kind, field = endpoint.error(response.get_json()) if isinstance(endpoint, Gemini) else (error["type"], error["param"])
    assert (kind, field) == ("INVALID_ARGUMENT" if isinstance(endpoint, Gemini) else "invalid_request_error", param)
    assert param in error["message"]
    if message is not None:
        assert error["message"] == message
    assert upstream.bodies == []
    return error


# -- failures ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", SURFACES)
def test_a_mid_stream_upstream_failure_ends_the_stream_with_the_same_error(make_app, endpoint):
    failure = UpstreamError("server_error", "the back end fell over", status=502)
    upstream = FakeUpstream([*text_chunks("Partial", finish=None), failure])
    response = post(make_app, endpoint, upstream, endpoint.body(stream=True))
    assert response.status_code == 200
    error = endpoint.stream_error(response.get_data())
    assert "the back end fell over" in error["message"]


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_an_upstream_refusal_is_the_same_http_error(make_app, endpoint):
    upstream = FakeUpstream(open_error=UpstreamError("client_error", "context too long", status=400,
                                                     code="context_length_exceeded", param="messages"))
    response = post(make_app, endpoint, upstream, endpoint.body(stream=True))
    assert response.status_code == 400
    assert response.get_json()["error"] == {"message": "context too long", "type": "invalid_request_error",
                                            "param": "messages", "code": "context_length_exceeded"}
