"""An Ollama request → its :class:`~app.pipeline.generate.Generation`: the transcript as Chat messages, the tools,
``format``, ``think`` and ``options`` as the back end's Chat fields.

Ollama's calls carry no id its clients must echo: a ``role: "tool"`` result names its call by ``tool_call_id``
when the client kept the id toolwire gave, else by ``tool_name``, else it answers the earliest call still
unanswered (Home Assistant sends neither). ``images`` reach only a back end in native tool mode, the one kind
whose model toolwire knows to take Chat content parts; anywhere else they are refused, naming the message.

``options``: ``temperature``, ``top_p``, ``top_k``, ``min_p``, ``seed``, ``stop``, ``presence_penalty`` and
``frequency_penalty`` go as the Chat fields of those names, ``num_predict`` as ``max_tokens`` (not when
negative: Ollama's "no limit"); ``num_ctx`` is the loaded context's size, which an OpenAI-compatible back end
fixes when it starts, so it is not sent. ``format: "json"`` is ``response_format`` ``json_object``, a schema
``json_schema``; ``think`` a level is ``reasoning_effort``, and ``think: false`` hides the reasoning.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from statemachine import ParserConfig, ToolSpec

from ..errors import InputError
from ..pipeline.generate import Generation
from ..pipeline.plan import ChoiceRequest, build_parser_config, check_tool
from ..profile import ModelProfile, model_profile
from .schemas import ChatRequest, Generating, GenerateRequest, Message, Options

if TYPE_CHECKING:
    from ..settings import Settings

#: ``options`` sent to the back end under the same name.
_SAME_NAME = ("temperature", "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty", "frequency_penalty")


def chat_generation(req: ChatRequest, settings: "Settings", *, marker_requested: bool = False) -> Generation:
    """The generation a validated ``/api/chat`` request asks for (``marker_requested``: the client asked for
    marker mode)."""
    profile = model_profile(settings, req.model)
    messages = to_chat_messages(req.messages, takes_images=_takes_images(profile))
    return Generation(profile=profile, messages=messages,
                      config=parser_config(req, settings, profile, marker_requested=marker_requested),
                      fields=chat_fields(req), stream=req.streams)


def generate_generation(req: GenerateRequest, settings: "Settings") -> Generation:
    """The generation a validated ``/api/generate`` request asks for: ``system`` then ``prompt`` (``raw``: the
    prompt alone, as Ollama applies no template to it)."""
    if req.suffix:
        raise InputError("'suffix' is not supported: the back end completes a conversation, not a gap between "
                         "two texts.", "suffix", "unsupported_parameter")
    profile = model_profile(settings, req.model)
    user = _user_message(req.prompt, req.images, "images", takes_images=_takes_images(profile))
    messages = [user] if req.raw or not req.system else [{"role": "system", "content": req.system}, user]
    config = build_parser_config([], ChoiceRequest(), parallel_tool_calls=False, legacy_functions=False,
                                 settings=settings, profile=profile, json_output=bool(req.format))
    return Generation(profile=profile, messages=messages, config=config, fields=chat_fields(req),
                      stream=req.streams)


def parser_config(req: ChatRequest, settings: "Settings", profile: ModelProfile, *,
                  marker_requested: bool = False) -> ParserConfig:
    """The offered tools (each checked as the other APIs check theirs) with Ollama's only choice: ``auto``."""
    specs: list[ToolSpec] = []
    for i, tool in enumerate(req.tools or ()):
        spec = ToolSpec(name=tool.function.name, description=tool.function.description or "",
                        parameters=tool.function.parameters)
        check_tool(spec, [s.name for s in specs], name=f"tools[{i}].function.name",
                   definition=f"tools[{i}].function.parameters")
        specs.append(spec)
    return build_parser_config(specs, ChoiceRequest(), parallel_tool_calls=True, legacy_functions=False,
                               settings=settings, profile=profile, marker_requested=marker_requested,
                               json_output=bool(req.format))


def chat_fields(req: Generating) -> dict[str, Any]:
    """``options``, ``format`` and ``think`` as the back end's Chat request fields."""
    fields = _option_fields(req.options) if req.options else {}
    if req.format == "json":
        fields["response_format"] = {"type": "json_object"}
    elif isinstance(req.format, dict):
        fields["response_format"] = {"type": "json_schema",
                                     "json_schema": {"name": "format", "schema": req.format}}
    if isinstance(req.think, str):
        fields["reasoning_effort"] = "high" if req.think == "max" else req.think
    return fields


def _option_fields(options: Options) -> dict[str, Any]:
    fields = {key: getattr(options, key) for key in _SAME_NAME if getattr(options, key) is not None}
    if options.num_predict is not None and options.num_predict > 0:
        fields["max_tokens"] = options.num_predict
    return fields


def to_chat_messages(messages: list[Message], *, takes_images: bool) -> list[dict[str, Any]]:
    """Ollama's messages as Chat messages: calls with ids and JSON arguments, results paired to their calls."""
    out: list[dict[str, Any]] = []
    unanswered: list[tuple[str, str]] = []  # (call id, name) of calls with no result yet, in order
    for i, message in enumerate(messages):
        if message.role == "assistant":
            out.append(_assistant(message, i, unanswered))
        elif message.role == "tool":
            out.append(_tool_result(message, unanswered))
        elif message.role == "user":
            out.append(_user_message(message.content, message.images, f"messages[{i}].images",
                                     takes_images=takes_images))
        else:
            out.append({"role": "system", "content": message.content})
    return out


def _assistant(message: Message, position: int, unanswered: list[tuple[str, str]]) -> dict[str, Any]:
    chat: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.thinking:
        chat["reasoning_content"] = message.thinking
    if message.tool_calls:
        calls = []
        for j, call in enumerate(message.tool_calls):
            call_id = call.id or f"call_{position}_{j}"
            unanswered.append((call_id, call.function.name))
            calls.append({"id": call_id, "type": "function",
                          "function": {"name": call.function.name, "arguments": _json(call.function.arguments)}})
        chat["tool_calls"] = calls
    return chat


def _tool_result(message: Message, unanswered: list[tuple[str, str]]) -> dict[str, Any]:
    """A tool result paired to its call: by id, else by name, else the earliest unanswered call."""
    match = next((c for c in unanswered if c[0] == message.tool_call_id), None) \
        or next((c for c in unanswered if c[1] == message.tool_name), None) \
        or (unanswered[0] if unanswered and not message.tool_call_id and not message.tool_name else None)
    if match is None:
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "name": message.tool_name,
                "content": message.content}
    unanswered.remove(match)
    return {"role": "tool", "tool_call_id": match[0], "name": match[1], "content": message.content}


def _user_message(text: str, images: list[str] | None, param: str, *, takes_images: bool) -> dict[str, Any]:
    if not images:
        return {"role": "user", "content": text}
    if not takes_images:
        raise InputError(f"'{param}': this model's back end reads text only (it is served in prompt tool mode), "
                         "so it cannot see images; send the message without them.", param, "unsupported_images")
    return {"role": "user", "content": [{"type": "text", "text": text}, *(
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}} for image in images)]}


def _takes_images(profile: ModelProfile) -> bool:
    return profile.tool_mode == "native"


def _json(value: Any) -> str:
    """Arguments as the Messages API writes them back too (``json.dumps``' spacing, the one models write), so the
    same calls reach the model as the same transcript whichever API the client speaks."""
    return json.dumps(value, ensure_ascii=False)
