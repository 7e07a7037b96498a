"""The Gemini API's routes on the shared pipeline: ``models/{model}:generateContent`` and
``:streamGenerateContent`` (``?alt=sse`` for SSE, else one JSON array), ``:countTokens``, and the model list
and one model (``GET models``, ``GET models/{model}``), in the Gemini API's shapes.

A request becomes the same :class:`~app.pipeline.generate.Generation` the other APIs' do (its transcript as
Chat messages, its functions and ``toolConfig`` as the parser configuration), and
:class:`~app.gemini.encoder.GeminiEncoder` puts the core events on Gemini's wire. The model is the URL's
(``models/`` prefix and all, as the SDKs send it: ``models/gemini-2.5-flash`` names ``gemini-2.5-flash``).
"""

from __future__ import annotations

from typing import Any

from flask import Response, request

from ..errors import ApiError, InputError
from ..ids import uuid4_hex
from ..pipeline.context import RequestContext
from ..pipeline.generate import Generation
from ..pipeline.tokens import prompt_tokens
from ..validation import check_gemini_limits
from .encoder import CandidateBuilder, GeminiEncoder
from .plan import gemini_generation
from .schemas import parse_count_tokens_request, parse_generate_request

#: ``GET models``' page size unless ``pageSize`` says, and the most it may say.
PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000


def model_name(model: str) -> str:
    """The URL's model as toolwire names it: without the ``models/`` its resource name starts with."""
    return model.removeprefix("models/")


def wants_sse() -> bool:
    """Whether the current request asks for SSE (``?alt=sse``) rather than one JSON array."""
    return request.args.get("alt") == "sse"


def plan_generate_content(body: dict[str, Any], context: RequestContext, *, model: str,
                          stream: bool) -> tuple[Generation, GeminiEncoder]:
    """``generateContent`` (``stream=False``) or ``streamGenerateContent`` on the request's JSON ``body``: the
    generation and the encoder to run it with (:func:`~app.pipeline.generate.generate`)."""
    check_gemini_limits(body, context.settings)
    req = parse_generate_request(body)
    name = model_name(model)
    generation = gemini_generation(req, context.settings, model=name, stream=stream,
                                   marker_requested=context.marker_requested)
    thinking = req.generation_config.thinking_config if req.generation_config else None
    builder = CandidateBuilder(uuid4_hex(), name, show_thoughts=bool(thinking and thinking.include_thoughts))
    return generation, GeminiEncoder(builder, sse=wants_sse())


def count_tokens(body: dict[str, Any], context: RequestContext, *, model: str) -> dict[str, Any]:
    """``countTokens``: the tokens of the prompt the back end would get, built as the generation builds it,
    counted by the back end's own tokenizer where it offers one, else estimated as usage is
    (:func:`~app.pipeline.tokens.prompt_tokens`)."""
    inner = body.get("generateContentRequest")
    check_gemini_limits(inner if isinstance(inner, dict) else body, context.settings)
    req = parse_count_tokens_request(body)
    generation = gemini_generation(req, context.settings, model=model_name(model),
                                   marker_requested=context.marker_requested)
    return {"totalTokens": prompt_tokens(generation, context)}


def gemini_model(entry: dict[str, Any]) -> dict[str, Any]:
    """One model list entry (OpenAI's ``id``…) as Gemini's ``Model``."""
    name = str(entry["id"])
    return {"name": f"models/{name}", "baseModelId": name, "version": "toolwire", "displayName": name,
            "description": f"{name}, served by toolwire with tool calling.",
            "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"]}


def list_models(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """``GET models``: a page of ``pageSize`` models from ``pageToken`` (the token ``nextPageToken`` gave).

    Raises:
        InputError: a ``pageSize`` or ``pageToken`` that is not one.
    """
    size = min(_page_number("pageSize", PAGE_SIZE) or PAGE_SIZE, MAX_PAGE_SIZE)
    start = _page_number("pageToken", 0)
    models = [gemini_model(entry) for entry in entries]
    page: dict[str, Any] = {"models": models[start:start + size]}
    if start + size < len(models):
        page["nextPageToken"] = str(start + size)
    return page


def _page_number(param: str, default: int) -> int:
    value = request.args.get(param, "")
    if not value:
        return default
    if not value.isdigit():
        raise InputError(f"Invalid value for '{param}': {value!r} is not a {param} this server gave.", param)
    return int(value)


def get_model(entries: list[dict[str, Any]], *, model: str) -> dict[str, Any]:
    """``GET models/{model}``: that model, if the model list has it.

    Raises:
        ApiError: 404 for a model not in the list.
    """
    name = model_name(model)
    for entry in entries:
        if entry["id"] == name:
            return gemini_model(entry)
    raise ApiError(404, f"models/{name} is not found: GET /v1beta/models lists the models this server serves.",
                   code="not_found")


def unsupported_path(subpath: str) -> Response:
    """Any other path under the Gemini API's prefix (``:embedContent``, ``files``, ``cachedContents``…): 404."""
    raise ApiError(404, f"{request.method} {request.path} is not supported by this server: it serves "
                   "models/{model}:generateContent, :streamGenerateContent and :countTokens, and GET models.",
                   code="not_found")
