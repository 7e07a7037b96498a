"""One surface per client API family (issue 37): the HTTP layer names none, and a fourth one mounts through the
public API alone, with its own route, envelope, key header, model in the URL, stream verb and framing."""

from __future__ import annotations

import ast
import dataclasses
import functools
from pathlib import Path
from typing import Any, Iterable

import orjson
import pytest
from flask import Flask, request

from app import Toolwire
from app.errors import ApiError
from app.http.errors import envelope_for, register_error_handlers
from app.messages.errors import error_body as anthropic_envelope
from app.pipeline.encoder import Usage
from app.pipeline.generate import Generation
from app.profile import model_profile
from app.settings import Settings
from app.surface import SSE, Generate, ListModels, Surface, View, fixed, header_key, in_url, openai_envelope
from app.surfaces import DEFAULT_SURFACES
from statemachine import Event, ParserConfig, TextDelta
from support.fakes import FakeUpstream, text_chunks

HTTP = Path(__file__).resolve().parents[2] / "app" / "http"
#: What would name a client API family: its package, its paths and endpoints, its vendor and key header.
FAMILY_PACKAGES = ("app.chat", "app.responses", "app.messages", "app.ollama")
FAMILY_WORDS = ("anthropic", "ollama", "/api/", "x-api-key", "/chat", "/responses", "/messages", "chat_completion", "create_message",
                "create_response")


def http_modules() -> list[tuple[str, ast.Module]]:
    return [(path.name, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(HTTP.glob("*.py"))]


def imported_modules(name: str, tree: ast.Module) -> Iterable[str]:
    """Every module ``app/http/<name>`` imports, absolute (imports made only for type checking included)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "app.http" if node.level == 1 else "app" if node.level == 2 else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def code_text(tree: ast.Module) -> Iterable[str]:
    """The identifiers, attribute names and string constants of a module (its docstrings left out)."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.value
        elif isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            yield node.name


def path_checks(tree: ast.Module) -> list[ast.AST]:
    """Where the request's path is compared or tested (``request.path.endswith(...)``, ``req.path == ...``)."""
    def is_path(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr in ("path", "full_path") \
            and isinstance(node.value, ast.Name) and node.value.id in ("request", "req")

    return [node for node in ast.walk(tree)
            if isinstance(node, ast.Compare) and any(map(is_path, (node.left, *node.comparators)))
            or isinstance(node, ast.Attribute) and is_path(node.value)]


@pytest.mark.parametrize("name, tree", http_modules(), ids=lambda value: value if isinstance(value, str) else "")
def test_the_http_layer_names_no_api_family(name: str, tree: ast.Module) -> None:
    families = [module for module in imported_modules(name, tree)
                if module == "app.surfaces" and name != "extension.py"
                or any(module == family or module.startswith(family + ".") for family in FAMILY_PACKAGES)]
    assert not families, f"app/http/{name} imports {families}"
    named = {word for text in code_text(tree) for word in FAMILY_WORDS if word in text.lower()}
    assert not named, f"app/http/{name} names {named}"
    assert not path_checks(tree), f"app/http/{name} checks the request's path: a surface's Blueprint says whose it is"


def test_the_checks_above_see_a_family_named() -> None:
    tree = ast.parse('from ..messages.errors import error_body\nif request.path.endswith("/messages"): '
                     'key = request.headers.get("x-api-key")\n')
    assert "app.messages.errors" in set(imported_modules("x.py", tree))
    assert {"/messages", "x-api-key"} <= {word for text in code_text(tree) for word in FAMILY_WORDS if word in text}
    assert path_checks(tree) and path_checks(ast.parse('ours = req.path == "/v1/messages"'))


# -- a fourth surface ----------------------------------------------------------------------------------------


class LinesEncoder:
    """A toy wire: NDJSON lines of text while streaming, one JSON object otherwise."""

    keepalive = b"\n"

    def __init__(self) -> None:
        self.text: list[str] = []

    def opening(self, usage: Usage) -> Iterable[bytes]:
        return ()

    def frames(self, index: int, event: Event) -> Iterable[bytes]:
        return (orjson.dumps({"text": event.text}) + b"\n",) if isinstance(event, TextDelta) else ()

    def closing(self, usage: Usage) -> Iterable[bytes]:
        return (orjson.dumps({"done": True}) + b"\n",)

    def error_frames(self, error: ApiError, usage: Usage) -> bytes:
        return orjson.dumps({"error": error.message}) + b"\n"

    def add(self, index: int, event: Event) -> None:
        if isinstance(event, TextDelta):
            self.text.append(event.text)

    def body(self, usage: Usage) -> dict[str, Any]:
        return {"text": "".join(self.text)}


def plan_toy(body: dict[str, Any], context: Any, *, model: str, stream: bool) -> tuple[Generation, LinesEncoder]:
    """The toy's planning: the model comes from the URL and the stream from the verb, the prompt from the body."""
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise ApiError(400, "'prompt' must be a string.", param="prompt", code="invalid_prompt")
    generation = Generation(profile=model_profile(context.settings, model),
                            messages=[{"role": "user", "content": prompt}], config=ParserConfig(), fields={},
                            stream=stream)
    return generation, LinesEncoder()


def unknown_toy_path(subpath: str) -> Any:
    raise ApiError(404, f"/toy/{subpath} is not a toy route.", code="not_found")


def toy_envelope(error: ApiError) -> dict[str, Any]:
    return {"toy_error": {"status": error.status, "message": error.message}}


def toy_models(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"toys": [entry["id"] for entry in entries]}


TOY = Surface(
    "toy",
    routes=(Generate("/toy/models/<path:model>:generate", "generate", functools.partial(plan_toy, stream=False),
                     model=in_url("model"), stream=fixed(False)),
            Generate("/toy/models/<path:model>:stream", "stream", functools.partial(plan_toy, stream=True),
                     model=in_url("model"), stream=fixed(True),
                     media_type=lambda: SSE if request.args.get("alt") == "sse" else "application/x-ndjson"),
            ListModels("/toy/tags", "tags", toy_models),
            View("/toy/<path:subpath>", "unknown", unknown_toy_path, ("GET", "POST", "DELETE"))),
    error_envelope=toy_envelope,
    keys=(header_key("x-toy-key"),),
    model_list=lambda entries: toy_models(entries) if "x-toy-version" in request.headers else None)


@pytest.fixture
def upstream() -> FakeUpstream:
    return FakeUpstream(text_chunks("Hello from the toy."))


@pytest.fixture
def toy(upstream: FakeUpstream) -> Any:
    """A host app serving the three default surfaces and the toy, as ``create_app`` sets one up."""
    host = Flask(__name__)
    register_error_handlers(host)
    Toolwire(host, settings=Settings(api_keys="sk-toy", model_map={"small": "fake-small"}), upstream=upstream,
             surfaces=(*DEFAULT_SURFACES, TOY))
    return host.test_client()


TOY_KEY = {"x-toy-key": "sk-toy"}


def test_a_toy_surface_generates_with_the_model_from_its_url_and_the_stream_from_its_verb(toy, upstream) -> None:
    whole = toy.post("/v1/toy/models/small:generate", json={"prompt": "hi"}, headers=TOY_KEY)
    assert whole.status_code == 200 and whole.get_json() == {"text": "Hello from the toy."}
    assert upstream.bodies[0]["model"] == "fake-small"  # the URL's model, mapped by the settings
    assert upstream.bodies[0]["messages"][-1] == {"role": "user", "content": "hi"}

    upstream.script = text_chunks("Streamed.")
    streamed = toy.post("/v1/toy/models/small:stream", json={"prompt": "hi"}, headers=TOY_KEY)
    assert streamed.status_code == 200 and streamed.mimetype == "application/x-ndjson"
    lines = [orjson.loads(line) for line in streamed.data.splitlines()]
    assert "".join(line.get("text", "") for line in lines) == "Streamed." and lines[-1] == {"done": True}
    upstream.script = text_chunks("Streamed.")
    asked = toy.post("/v1/toy/models/small:stream?alt=sse", json={"prompt": "hi"}, headers=TOY_KEY)
    assert asked.status_code == 200 and asked.mimetype == "text/event-stream"  # the media type the request asks


def test_a_toy_surface_refuses_in_its_own_envelope(toy) -> None:
    refused = toy.post("/v1/toy/models/small:generate", json={"prompt": 1}, headers=TOY_KEY)
    assert (refused.status_code, refused.get_json()) == \
        (400, {"toy_error": {"status": 400, "message": "'prompt' must be a string."}})
    unknown = toy.get("/v1/toy/nothing/here", headers=TOY_KEY)
    assert unknown.get_json() == {"toy_error": {"status": 404, "message": "/toy/nothing/here is not a toy route."}}
    wrong_method = toy.put("/v1/toy/models/small:stream", headers=TOY_KEY)  # refused by routing, before any view
    assert wrong_method.status_code == 405 and wrong_method.get_json()["toy_error"]["status"] == 405
    assert "POST" in wrong_method.headers["Allow"]


def test_a_surface_claims_the_paths_under_its_routes_that_none_of_them_takes(upstream) -> None:
    """Without a catch-all of its own, the toy's unrouted paths answer 404 in its envelope naming what it serves
    (they were Werkzeug's 404 in OpenAI's), and an answer made outside the app (gunicorn's) finds its envelope."""
    host = Flask(__name__)
    register_error_handlers(host)
    bare = dataclasses.replace(TOY, routes=TOY.routes[:3])
    Toolwire(host, settings=Settings(api_keys="sk-toy"), upstream=upstream, surfaces=(*DEFAULT_SURFACES, bare))
    client = host.test_client()
    for method, path in (("GET", "/v1/toy/nothing"), ("POST", "/v1/toy/tags/"), ("DELETE", "/v1/toy/models/")):
        answer = client.open(path, method=method, headers=TOY_KEY)
        assert (answer.status_code, answer.get_json()) == (404, {"toy_error": {"status": 404, "message": (
            f"{method} {path} is not supported by this server: it serves POST /v1/toy/models/{{model}}:generate, "
            "POST /v1/toy/models/{model}:stream, GET /v1/toy/tags.")}})
    assert envelope_for(host, "/v1/toy/nothing") is toy_envelope
    assert envelope_for(host, "/v1/toy/models/small:stream") is toy_envelope  # (a route taking POST only)
    assert envelope_for(host, "/v1/messages/") is anthropic_envelope
    assert envelope_for(host, "/v1/chat/completions") is envelope_for(host, "/elsewhere") is openai_envelope


def test_a_toy_surface_takes_its_key_from_its_own_header(toy) -> None:
    missing = toy.post("/v1/toy/models/small:generate", json={"prompt": "hi"}, headers={"Authorization": "Bearer sk-toy"})
    assert missing.status_code == 401
    assert missing.get_json() == {"toy_error": {"status": 401, "message": "You didn't provide an API key. Send it "
                                                "as 'x-toy-key: YOUR_KEY'."}}
    wrong = toy.post("/v1/toy/models/small:generate", json={"prompt": "hi"}, headers={"x-toy-key": "sk-other"})
    assert wrong.status_code == 401 and wrong.get_json()["toy_error"]["message"] == "Incorrect API key provided."
    # The other surfaces keep their own: Chat takes a Bearer token, not the toy's header.
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert toy.post("/v1/chat/completions", json=chat, headers=TOY_KEY).status_code == 401
    assert toy.post("/v1/chat/completions", json=chat, headers={"Authorization": "Bearer sk-toy"}).status_code == 200


def test_a_toy_surface_lists_models_in_its_shape(toy) -> None:
    assert toy.get("/v1/toy/tags", headers=TOY_KEY).get_json() == {"toys": ["fake-model", "small"]}
    # the shared list: any surface's key; the toy's shape for its clients, OpenAI's for the others
    assert toy.get("/v1/models", headers={**TOY_KEY, "x-toy-version": "1"}).get_json() == \
        {"toys": ["fake-model", "small"]}
    assert toy.get("/v1/models", headers=TOY_KEY).get_json()["object"] == "list"
    assert toy.get("/v1/models", headers={"x-api-key": "sk-toy"}).status_code == 200


def test_each_surface_is_a_child_blueprint_of_the_mount(toy) -> None:
    endpoints = {rule.endpoint for rule in toy.application.url_map.iter_rules() if rule.rule.startswith("/v1/")}
    assert {endpoint.split(".")[1] for endpoint in endpoints if endpoint.count(".") == 2} == \
        {"chat", "responses", "messages", "gemini_v1", "toy"}
    assert [surface.name for surface in DEFAULT_SURFACES] == ["chat", "responses", "messages", "ollama", "gemini",
                                                             "gemini_v1"]
    assert any(rule.endpoint == "toolwire.ollama.chat" and rule.rule == "/api/chat"
               for rule in toy.application.url_map.iter_rules())  # Ollama's at the root, where its clients look


def test_a_surface_may_live_at_the_root_beside_a_prefixed_mount(upstream) -> None:
    host = Flask(__name__)
    Toolwire(host, settings=Settings(), upstream=upstream,
             surfaces=(*DEFAULT_SURFACES, dataclasses.replace(TOY, url_prefix="")))
    client = host.test_client()
    assert client.get("/toy/tags").get_json() == {"toys": ["fake-model"]}
    assert client.post("/toy/models/m:generate", json={"prompt": "hi"}).get_json() == {"text": "Hello from the toy."}
    assert client.get("/v1/toy/tags").status_code == 404
    assert client.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}) \
        .status_code == 200


@pytest.mark.parametrize("path, body, takes_api_key_header", [
    ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, True),
    ("/v1/responses", {"model": "m", "input": "hi", "store": False}, True),
    ("/v1/messages", {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}, True),
])
def test_each_default_surface_takes_the_key_where_its_clients_send_it(upstream, path, body,
                                                                      takes_api_key_header) -> None:
    host = Flask(__name__)
    Toolwire(host, settings=Settings(api_keys="sk-one"), upstream=upstream)
    client = host.test_client()
    assert client.post(path, json=body, headers={"Authorization": "Bearer sk-one"}).status_code == 200
    upstream.script = text_chunks("Again.")
    assert client.post(path, json=body, headers={"x-api-key": "sk-one"}).status_code == \
        (200 if takes_api_key_header else 401)
    hint = "'Authorization: Bearer YOUR_KEY'" + (" (or 'x-api-key: YOUR_KEY')" if takes_api_key_header else "")
    assert f"Send it as {hint}." in client.post(path, json=body).get_data(as_text=True)
    assert client.get("/v1/models", headers={"x-api-key": "sk-one"}).status_code == 200  # shared: any surface's
