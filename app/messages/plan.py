"""A Messages request → its :class:`~app.pipeline.generate.Generation`: tools, ``tool_choice``, parameters.

Custom tools (``input_schema``) are offered as functions. Anthropic's own tools (``web_search_…``,
``code_execution_…``, ``bash_…``, ``text_editor_…``…) are tools Anthropic's runtime defines: like the
Responses endpoint's hosted tools they are not offered (counted in ``toolwire_dropped_tools_total``), or
with ``TOOLWIRE_UNSUPPORTED_TOOLS=fail`` a 400 naming the tool. ``tool_choice`` maps to the Chat choice
(``any`` → ``required``, ``tool`` → that tool, ``disable_parallel_tool_use`` → one call at most).

The back end gets ``max_tokens`` (clamped to the model's ``max_output_tokens`` by the pipeline), the
``stop_sequences`` as ``stop``, ``temperature``, ``top_p`` and ``top_k``; ``metadata``, ``thinking``,
``output_config``, ``context_management`` and the other Anthropic-only keys are not sent.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from statemachine import ParserConfig, ToolChoice, ToolSpec

from ..errors import InputError
from ..observability import metrics
from ..pipeline.generate import Generation
from ..pipeline.plan import ChoiceRequest, build_parser_config
from .schemas import CountTokensRequest, CustomTool, MessagesRequest, ServerTool, ToolChoice as MessagesChoice
from .transcript import to_chat_messages

if TYPE_CHECKING:
    from ..settings import Settings

log = logging.getLogger("toolwire.messages.plan")

#: Families of Anthropic's own tools, for the dropped-tools metric's label (anything else is ``other``).
_SERVER_FAMILIES = frozenset({"web_search", "web_fetch", "code_execution", "bash", "text_editor", "computer",
                              "memory", "tool_search_tool_regex", "tool_search_tool_bm25", "mcp_toolset"})
_DATED = re.compile(r"_\d{8}$")


def messages_generation(req: MessagesRequest, settings: "Settings") -> Generation:
    """The generation a validated Messages request asks for."""
    return Generation(model=req.model, messages=to_chat_messages(req), config=parser_config(req, settings),
                      fields=_chat_fields(req), stream=req.stream)


def parser_config(req: CountTokensRequest, settings: "Settings") -> ParserConfig:
    """The parser configuration: the custom tools as functions, and the request's ``tool_choice``.

    Raises:
        InputError: an Anthropic tool with ``TOOLWIRE_UNSUPPORTED_TOOLS=fail`` (``tools[i].type``); a
            ``tool_choice`` naming a tool not offered (``tool_choice.name``) or demanding a call with none.
    """
    specs = []
    for i, tool in enumerate(req.tools or ()):
        if isinstance(tool, CustomTool):
            specs.append(ToolSpec(name=tool.name, description=tool.description or "", parameters=tool.input_schema))
        else:
            _drop(tool, i, settings)
    choice = req.tool_choice or MessagesChoice(type="auto")
    return build_parser_config(specs, _choice_request(choice), parallel_tool_calls=not choice.disable_parallel_tool_use,
                               legacy_functions=False, settings=settings)


def _drop(tool: ServerTool, index: int, settings: "Settings") -> None:
    if settings.unsupported_tools == "fail":
        raise InputError(f"Tool type {tool.type!r} is not supported: the model behind this server can only call "
                         "custom tools (name, description, input_schema) that the client runs.",
                         f"tools[{index}].type", "unsupported_tool_type")
    family = _DATED.sub("", tool.type)
    metrics.child(metrics.DROPPED_TOOLS, family if family in _SERVER_FAMILIES else "other").inc()
    log.debug("tool not offered to the model (Anthropic-defined, not runnable here): %s", tool.type)


def _choice_request(choice: MessagesChoice) -> ChoiceRequest:
    if choice.type == "tool":
        if not choice.name:
            raise InputError("Missing required parameter: 'tool_choice.name'.", "tool_choice.name",
                             "missing_required_parameter")
        return ChoiceRequest(ToolChoice("required", frozenset({choice.name})),
                             name_params={choice.name: "tool_choice.name"})
    mode = {"auto": "auto", "any": "required", "none": "none"}[choice.type]
    return ChoiceRequest(ToolChoice(mode))  # type: ignore[arg-type]


def _chat_fields(req: MessagesRequest) -> dict[str, Any]:
    """The sampling parameters and limits as the back end's Chat request takes them."""
    fields: dict[str, Any] = {"max_tokens": req.max_tokens}
    if req.stop_sequences:
        fields["stop"] = req.stop_sequences
    for key in ("temperature", "top_p", "top_k"):
        value = getattr(req, key)
        if value is not None:
            fields[key] = value
    return fields
