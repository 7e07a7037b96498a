"""The producing side of tool calling: the system tool block and history flattening.

A text-only upstream never sees ``tools``, ``tool_calls`` or ``role: "tool"``.
:func:`build_upstream_messages` turns a Chat Completions transcript (the
Responses endpoint converts its input items into the same shape first) into
plain ``system``/``user``/``assistant`` messages with string content:

- One leading system message: the tool block (when calls are parsed) or a
  "do not call tools" line (tools offered with ``tool_choice: "none"``),
  followed by the text of every client ``system``/``developer`` message, in
  order. System messages found mid-conversation move there too, because
  strict chat templates accept a system message only at the start. For a
  model whose template drops system messages (``system_in: first_user``) that
  text opens the first user turn instead.
- Assistant tool calls (and legacy ``function_call``) are written back after
  the message's text as the exact sentinel text the model is asked to
  produce (``fmt.render_call``), so imitation yields parseable calls; a
  ``custom`` (freeform) call is written in the ``custom_tool_call`` format
  with its raw input.
- Tool results (``role: "tool"`` and legacy ``role: "function"``) become
  **user** messages labelled with the tool name and call id and closed by
  :data:`TOOL_RESULT_END`; the wrapper uses no tags or brackets, so it cannot
  be mistaken for, or imitated as, a call. A format whose family's template
  writes results its own way (``TextFormat.render_result``: Harmony's
  ``<|start|>functions.NAME to=assistant…``) gets them in that form instead.
- A model's example exchanges (``model_map``'s ``example_exchange``) come first, written as a real
  exchange would be: the request, the call in the taught format, the result, the answer.
- Consecutive messages of the same role are merged (blank line between), so
  upstreams that require strict user/assistant alternation accept the result.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Mapping, Sequence

from statemachine import ParserConfig, TextFormat, ToolSpec, get_format

from ..prompt_protocol import (
    GUIDE_HEADING,
    HOW_TO_HEADING,
    MANIFEST_HEADING,
    TOOL_BLOCK_TITLE,
    TOOL_RESULT_END,
    TURN_HEADING,
    example_value,
    object_shape,
)
from ..setting_values import ToolManifest
from ..settings import ExampleExchange
from .lru import BoundedLRU
from .plan import shared_key
from .signatures import compact_example, signature_lines

__all__ = [
    "GUIDE_HEADING",
    "HOW_TO_HEADING",
    "MANIFEST_HEADING",
    "TOOL_BLOCK_TITLE",
    "TOOL_RESULT_END",
    "TURN_HEADING",
    "build_upstream_messages",
    "example_arguments",
    "example_value",
    "media_placeholder",
    "object_shape",
    "tool_result_label",
]

#: The heading of the section that teaches a JSON answer format (see :func:`answer_format_block`).
ANSWER_FORMAT_HEADING = "## Answer format"
#: The core's format of custom (freeform) tool calls.
CUSTOM_FORMAT = "custom_tool_call"
_NO_CALLS_LINE = (
    "Tools are disabled for this reply: do not call any tool and do not write any tool-call block; "
    "answer in plain text."
)
_EMPTY_PARAMETERS: Mapping[str, Any] = {"type": "object", "properties": {}}
_PART_PLACEHOLDERS = {
    "image_url": "[image]",
    "input_image": "[image]",
    "input_audio": "[audio]",
    "file": "[file]",
    "input_file": "[file]",
}


def build_upstream_messages(messages: list[dict], config: ParserConfig, fmt: TextFormat, *,
                            answer_format: Mapping[str, Any] | None = None, manifest: ToolManifest = "json",
                            examples: Sequence[ExampleExchange] = (), system_in: str = "system") -> list[dict]:
    """Flatten a Chat Completions transcript for a text-only upstream.

    Args:
        messages: the client's messages as plain dicts (roles ``system``,
            ``developer``, ``user``, ``assistant``, ``tool``, ``function``;
            content a string, ``None`` or a list of content parts).
        config: the request's parser config (offered tools, ``tool_choice``,
            ``parallel_tool_calls``, legacy functions mode).
        fmt: the text format the model is asked to write calls in; earlier
            calls are rendered in it too.
        answer_format: a JSON ``response_format`` (Chat shape) the prompt teaches for an answer
            without calls, because the back end is not asked to enforce it (see ``answer_format_block``).
        manifest: how the tool block lists the tools: ``json`` (each tool's JSON Schema) or ``compact``
            (signature lines, :mod:`.signatures`).
        examples: exchanges written before the conversation, in ``fmt``, when calls are parsed, each
            when its tool is offered (a small model imitates a call it sees far better than one it is told about).
        system_in: where the system text goes: ``system``, one leading system message; ``first_user``, the
            start of the first user turn (for chat templates that drop system messages or have no such role).
    Returns:
        New message dicts with roles ``system``/``user``/``assistant`` only and
        string content only; at most one system message, always first.
    """
    system_texts: list[str] = []
    if config.parsing_enabled:
        system_texts.append(_cached_tool_block(config, fmt, manifest))
    elif config.tools:
        system_texts.append(_NO_CALLS_LINE)
    if answer_format is not None:
        system_texts.append(answer_format_block(answer_format))

    call_names: dict[str, str] = {}  # call id -> function name, from earlier assistant calls
    turns = [turn for example in examples if config.parsing_enabled and example.tool in config.tools
             for turn in _example_turns(example, fmt)]
    formats = (fmt, custom_format(config))
    this_turn = max((i for i, message in enumerate(messages) if message.get("role") == "user"), default=-1)
    for position, message in enumerate(messages):
        role = message.get("role")
        if role in ("system", "developer"):
            text = _content_text(message.get("content"))
            if text:
                system_texts.append(text)
        elif role == "assistant":
            text = _assistant_text(message, formats, call_names, with_reasoning=position > this_turn)
            if text:
                turns.append(("assistant", text))
        elif role == "tool":
            call_id = message.get("tool_call_id")
            name = call_names.get(call_id) if call_id else None
            turns.append(("user", _tool_result_text(fmt, name or message.get("name"), call_id, message.get("content"))))
        elif role == "function":
            turns.append(("user", _tool_result_text(fmt, message.get("name"), None, message.get("content"))))
        else:  # "user", and any role a text-only upstream would not know
            turns.append(("user", _content_text(message.get("content"))))

    out: list[dict] = []
    if system_texts:
        system = "\n\n".join(system_texts)
        if system_in != "first_user":
            out.append({"role": "system", "content": system})
        else:  # it opens the first user turn, as the template of a family without a system role writes it
            first = next((i for i, (role, _) in enumerate(turns) if role == "user"), None)
            if first is None:
                turns.insert(0, ("user", system))
            else:
                turns[first] = ("user", f"{system}\n\n{turns[first][1]}" if turns[first][1] else system)
    for role, text in turns:
        if out and out[-1]["role"] == role:
            out[-1]["content"] += "\n\n" + text
        else:
            out.append({"role": role, "content": text})
    return out


def _example_turns(example: ExampleExchange, fmt: TextFormat) -> list[tuple[str, str]]:
    """The example exchange as the turns a real one becomes: request, call, result, answer."""
    call = fmt.render_call(example.tool, json.dumps(example.arguments, ensure_ascii=False))
    return [("user", example.user), ("assistant", call),
            ("user", _tool_result_text(fmt, example.tool, None, example.result)), ("assistant", example.answer)]


def answer_format_block(response_format: Mapping[str, Any]) -> str:
    """The system-prompt section asking for a JSON answer (``json_object``, or ``json_schema`` with its schema)
    whenever the reply makes no call."""
    lines = [f"{ANSWER_FORMAT_HEADING}\nWhen you reply without calling a tool, the reply must be one JSON "
             "object and nothing else: no prose and no code fence around it."]
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if isinstance(schema, dict):
        lines.append(f"It must conform to this JSON Schema: {_compact(schema)}")
    return "\n".join(lines)


def custom_format(config: ParserConfig) -> TextFormat:
    """The format custom (freeform) tool calls are written in, marked when ``config`` is."""
    return get_format(CUSTOM_FORMAT).with_marker(config.marker)


def tool_result_label(name: str | None, call_id: str | None) -> str:
    """The first line of a rendered tool result.

    Args:
        name: the tool's name, when known.
        call_id: the call id the result answers, when given.
    Returns:
        E.g. ``Tool result for get_weather (call_id call_abc):``.
    """
    label = "Tool result"
    if name:
        label += f" for {name}"
    if call_id:
        label += f" (call_id {call_id})"
    return label + ":"


# --- tool block ---------------------------------------------------------------

#: Rendered tool blocks kept: agents resend the same tools every turn, and rendering cost ~40 µs a tool (2026-11).
TOOL_BLOCK_CACHE_SIZE = 64
#: Characters of keys and blocks kept in all (a body may carry megabytes of tools); a larger pair is not kept.
TOOL_BLOCK_CACHE_CHARS = 2 * 1024 * 1024


def _entry_chars(key: tuple[Any, ...], block: str) -> int:
    return len(key[-1]) + len(block)  # the tools' JSON is the key's only sizeable part


_tool_blocks: BoundedLRU[tuple[Any, ...], str] = BoundedLRU(TOOL_BLOCK_CACHE_SIZE, TOOL_BLOCK_CACHE_CHARS, _entry_chars)


def _cached_tool_block(config: ParserConfig, fmt: TextFormat, manifest: ToolManifest) -> str:
    """:func:`_tool_block`, from a small LRU keyed by everything the block is rendered from.

    A marked request is never cached: its marker is fresh per request, and its text is its own.
    """
    if config.marker is not None:
        return _tool_block(config, fmt, manifest)
    tools = shared_key(config.tools)
    if tools is None:
        return _tool_block(config, fmt, manifest)
    key = (fmt, manifest, config.tool_choice, config.parallel_tool_calls, config.legacy_functions, config.bare_json,
           tools)
    block = _tool_blocks.get(key)
    if block is None:
        block = _tool_block(config, fmt, manifest)
        _tool_blocks.put(key, block)
    return block


def _tool_block(config: ParserConfig, fmt: TextFormat, manifest: ToolManifest = "json") -> str:
    """The whole tool block: intro, manifest, guide (``json`` manifest only), call formats, this turn's rules."""
    tools = list(config.tools.values())
    sections = [
        f"{TOOL_BLOCK_TITLE}\n"
        "You can call the tools below. The client that sent this conversation runs each call and sends its "
        "result back in a later message; your own runtime's tools and limits do not apply here.",
    ]
    if manifest == "compact":
        sections.append(f"{MANIFEST_HEADING}\nOne line per tool: its name(parameters) - what it does; `?` marks "
                        "an optional parameter.\n" + "\n".join(_compact_lines(t) for t in tools))
        custom = [t for t in tools if t.kind == "custom"]  # a grammar is the input's only description
        if custom:
            sections.append(f"{GUIDE_HEADING}\n" + "\n\n".join(_custom_guide(t) for t in custom))
    else:
        sections.append(f"{MANIFEST_HEADING}\n" + "\n\n".join(_tool_entry(t) for t in tools))
    sections.append(f"{HOW_TO_HEADING}\n" + "\n\n".join(_how_to(config, fmt)))
    rules = _turn_rules(config, tools)
    if rules:
        sections.append(f"{TURN_HEADING}\n" + "\n".join(f"- {line}" for line in rules))
    return "\n\n".join(sections)


def _tool_entry(tool: ToolSpec) -> str:
    """``### NAME``, what it does, and its parameters' JSON Schema on a line of their own.

    No line of the manifest is a call's shape: a ``NAME {schema}`` line was copied as ``NAME {arguments}``
    (text, not a call) by a small model (issue 38).
    """
    if tool.kind == "custom":
        return _custom_guide(tool)
    lines = [f"### {tool.name}"]
    if tool.description:
        lines.append(tool.description.strip())
    lines.append(f"Parameters: {_compact(tool.parameters or _EMPTY_PARAMETERS)}")
    return "\n".join(lines)


def _compact_lines(tool: ToolSpec) -> str:
    if tool.kind == "custom":
        return f"{tool.name} (custom tool: {_input_kind(tool.input_format)})"
    return "\n".join(signature_lines(tool))


def _how_to(config: ParserConfig, fmt: TextFormat) -> list[str]:
    """The call-format instructions: the JSON format's for function tools, the custom format's for custom tools."""
    parts = []
    example_tool = _example_tool(config, "function")
    if example_tool is not None:
        # a string's name in angle brackets where the schema gives no value: the JSON manifest's "example" was
        # copied into real calls (issue 31)
        bare = _bare_instructions(config, fmt, example_tool)
        parts.append(bare or fmt.instructions(example_tool.name, _example_arguments(example_tool)))
    custom_tool = _example_tool(config, "custom")
    if custom_tool is not None:
        parts.append(custom_format(config).instructions(custom_tool.name, "the raw input text"))
    return parts


def _bare_instructions(config: ParserConfig, fmt: TextFormat, example_tool: ToolSpec) -> str | None:
    """``fmt``'s teaching of bare JSON calls with :func:`_worked_calls`, where bare calls are read and it has one."""
    if not config.bare_json or config.marker is not None:
        return None
    return fmt.bare_instructions([(tool.name, _example_arguments(tool, another))
                                  for tool, another in _worked_calls(config, example_tool)])


def example_arguments(config: ParserConfig, fmt: TextFormat, messages: list[dict]) -> dict[str, tuple[Any, ...]]:
    """The worked example's arguments that a call cannot take from the conversation ``messages``, by tool name
    (``ParserConfig.example_arguments``): those with a made-up value (a ``"<name>"`` hint, a number's
    placeholder) that no message mentions.

    A small model copies them into calls of tools that do not fit the request (``calculate_tip(bill_total=1.5,
    tip_percentage=1.5)`` to find a restaurant, issue 38); a call of ``get_page(page=1)`` when the user asked for
    page 1 is the user's, so an example whose placeholder the conversation mentions is not listed.
    """
    tool = _example_tool(config, "function")
    if tool is None:
        return {}
    if _bare_instructions(config, fmt, tool) is None:
        calls = [(tool, False)]
    else:
        calls = _worked_calls(config, tool) if fmt.bare_shows_calls else []
    said = "\n".join(_said(message) for message in messages if isinstance(message, dict))
    examples: dict[str, tuple[Any, ...]] = {}
    for shown, another in calls:
        made_up: list[Any] = []
        arguments = compact_example(shown.parameters or _EMPTY_PARAMETERS, made_up=made_up, another=another)
        if made_up and not any(_mentions(said, value) for value in made_up):
            examples[shown.name] = (*examples.get(shown.name, ()), arguments)
    return examples


def _said(message: Mapping[str, Any]) -> str:
    """A transcript message's text and the arguments of its calls (an earlier call's values are the
    conversation's too)."""
    calls = message.get("tool_calls")
    arguments = [_arguments_text((call.get("function") or {}).get("arguments")) for call in calls
                 if isinstance(call, dict)] if isinstance(calls, list) else []
    return "\n".join([_content_text(message.get("content")), *arguments])


def _mentions(text: str, value: Any) -> bool:
    """Whether ``text`` holds the number ``value`` as a number of its own (a ``"<name>"`` hint never counts)."""
    if isinstance(value, str):
        return False
    return re.search(rf"(?<![\d.]){re.escape(json.dumps(value))}(?![\d]|\.\d)", text) is not None


def _example_arguments(tool: ToolSpec, another: bool = False) -> str:
    return json.dumps(compact_example(tool.parameters or _EMPTY_PARAMETERS, another=another, hints=True),
                      ensure_ascii=False)


def _worked_calls(config: ParserConfig, first: ToolSpec) -> list[tuple[ToolSpec, bool]]:
    """A worked example of parallel calls, as ``(tool, another)``: ``first``, then the next two callable function
    tools, or ``first`` again with other values (``another``: :func:`compact_example`) when it is the only one.

    The same call twice was copied as such: a small model answered a single ask with two identical calls
    (issue 38, simple_python_315). Shown two calls where four tools were offered, it wrote the calls of three of
    four tasks; a third call of a third tool, where there is one, won one such case on BFCL and lost none.
    """
    allowed = config.tool_choice.allowed
    others = [t for t in config.tools.values()
              if t.kind == "function" and t is not first and (allowed is None or t.name in allowed)]
    return [(first, False), *((tool, False) for tool in others[:2])] if others else [(first, False), (first, True)]


def _example_tool(config: ParserConfig, kind: str) -> ToolSpec | None:
    """The ``kind`` tool of a worked example: the forced one, else the first allowed one, else the first."""
    allowed = config.tool_choice.allowed
    of_kind = [t for t in config.tools.values() if t.kind == kind]
    return next((t for t in of_kind if allowed is None or t.name in allowed), of_kind[0] if of_kind else None)


def _input_kind(input_format: Mapping[str, Any] | None) -> str:
    """``free text``, or ``text in this lark grammar`` for a grammar-constrained custom tool."""
    if isinstance(input_format, Mapping) and input_format.get("type") == "grammar":
        return f"text in the {input_format.get('syntax') or 'given'} grammar below"
    return "free text"


def _custom_guide(tool: ToolSpec) -> str:
    """Name, description, and the input's grammar (shown verbatim) for a custom tool."""
    lines = [f"### {tool.name}"]
    if tool.description:
        lines.append(tool.description.strip())
    lines.append(f"Input: {_input_kind(tool.input_format)}, written raw (not JSON) in a custom tool call block.")
    fmt = tool.input_format
    if isinstance(fmt, Mapping) and fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str):
        lines.append(f"Grammar ({fmt.get('syntax') or 'unspecified'}):\n{fmt['definition'].strip()}")
    return "\n".join(lines)


def _turn_rules(config: ParserConfig, tools: list[ToolSpec]) -> list[str]:
    """The ``tool_choice``, strict and parallel lines (parsing.md 3 and 6.1)."""
    choice = config.tool_choice
    rules: list[str] = []
    forced = choice.forced_name
    if forced is not None:
        rules.append(f"You must call `{forced}` in this reply.")
    else:
        if choice.allowed is not None:
            allowed = [t.name for t in tools if t.name in choice.allowed]
            rules.append("Only these tools may be called in this reply: " + ", ".join(f"`{n}`" for n in allowed) + ".")
        if choice.mode == "required":
            rules.append("You must call at least one tool in this reply; a reply without a call is not allowed.")
    strict = [t.name for t in tools if t.strict]
    if strict:
        rules.append(f"Strict tools: {', '.join(strict)}. Arguments MUST conform exactly.")
    if config.legacy_functions:
        rules.append("Call at most one function in this reply.")
    elif not config.parallel_tool_calls:
        rules.append("Call at most one tool in this reply.")
    return rules


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- history -------------------------------------------------------------------


def _content_text(content: Any) -> str:
    """Message content as text: strings as-is, part lists joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_part_text(part) for part in content)
    return _compact(content)


def _part_text(part: Any) -> str:
    """One content part: its text, a refusal, or a short placeholder."""
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return "[content]"
    if isinstance(part.get("text"), str):  # text, input_text, output_text
        return part["text"]
    if isinstance(part.get("refusal"), str):
        return part["refusal"]
    return media_placeholder(str(part.get("type") or "content"))


def media_placeholder(kind: str) -> str:
    """What the text-only model reads in place of a content part of type ``kind`` (``[image]``, ``[file]``…)."""
    return _PART_PLACEHOLDERS.get(kind, f"[{kind}]")


def _arguments_text(arguments: Any) -> str:
    """Arguments as JSON text; some clients send an object instead of a string."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)


def _assistant_text(message: Mapping[str, Any], formats: tuple[TextFormat, TextFormat],
                    call_names: dict[str, str], *, with_reasoning: bool) -> str:
    """The assistant's reasoning (``with_reasoning``), text, then each of its calls as sentinel text; records
    call names.

    ``formats`` are the function-call format and the custom-call format. Reasoning is given back only within
    the current turn (after the last user message), where the model reads the results of the calls it
    reasoned its way to, in the family's own delimiters; earlier turns' reasoning is dropped, as every
    family's chat template drops it (docs/reasoning.md).
    """
    pieces = []
    reasoning = message.get("reasoning_content")
    if with_reasoning and isinstance(reasoning, str) and reasoning:
        pieces.append(formats[0].render_reasoning(quoted(formats[0], reasoning)))
    text = _content_text(message.get("content")) or str(message.get("refusal") or "")
    if text:
        pieces.append(text)
    for call in message.get("tool_calls") or ():
        if call.get("type") == "custom":
            custom = call.get("custom") or {}
            name = custom.get("name") or ""
            rendered = formats[1].render_call(name, str(custom.get("input") or ""))
        else:
            function = call.get("function") or {}
            name = function.get("name") or ""
            rendered = formats[0].render_call(name, _arguments_text(function.get("arguments")))
        if call.get("id"):
            call_names[call["id"]] = name
        pieces.append(rendered)
    legacy = message.get("function_call")
    if legacy:
        pieces.append(formats[0].render_call(legacy.get("name") or "", _arguments_text(legacy.get("arguments"))))
    return "\n".join(pieces)


def _tool_result_text(fmt: TextFormat, name: str | None, call_id: str | None, content: Any) -> str:
    """A tool result as the format's family writes it (Harmony), else labelled so that it is clearly not a call."""
    body = quoted(fmt, _content_text(content).strip()) or "(no output)"
    rendered = fmt.render_result(name, body)
    return rendered if rendered is not None else f"{tool_result_label(name, call_id)}\n{body}\n{TOOL_RESULT_END}"


#: What goes after the first character of a control sequence quoted in a tool result or replayed reasoning: the
#: model still reads the text, but no tokenizer reads a special token in it and no delimiter ends the quote.
QUOTE_BREAK = "\u200b"
#: Special tokens by their shape (``<|im_end|>``, ``<|channel>``, ``<turn|>``, ``<｜end▁of▁sentence｜>``), whichever
#: family's: a back end's tokenizer turns them into the tokens that end a turn or open a call.
_TOKEN_SHAPED = r"<[|｜][^<>\s]{1,48}>|<[^<>|｜\s]{1,48}[|｜]>"


def quoted(fmt: TextFormat, text: str) -> str:
    """``text`` (a tool result, reasoning given back) with every control sequence of ``fmt``'s family broken by
    :data:`QUOTE_BREAK`: special-token-shaped sequences, and the family's literal delimiters (its closer, end
    and call tokens, reasoning delimiters, ``<think>``). Without it a Harmony or Gemma 4 result could end its
    message and write an assistant call after it, and reasoning holding ``</think>`` could end itself early.
    A text holding none of them (the ``in`` checks run at memory speed) is not searched."""
    literals, pattern = _control_sequences(fmt.name)
    if any(edge in text for edge in _TOKEN_EDGES) or any(literal in text for literal in literals):
        return pattern.sub(lambda found: found[0][0] + QUOTE_BREAK + found[0][1:], text)
    return text


#: What a special-token-shaped sequence must hold.
_TOKEN_EDGES = ("<|", "|>", "<｜", "｜>")


@functools.lru_cache(maxsize=64)
def _control_sequences(name: str) -> tuple[tuple[str, ...], "re.Pattern[str]"]:
    """The literal delimiters of the registered format ``name`` (a marked one's are its base's), and one search
    for them and the special-token shapes."""
    fmt = get_format(name)
    literals = sorted({fmt.closer, *fmt.end_tokens, *fmt.call_tokens, *(fmt.reasoning_delimiters or ()), "<think>",
                       "</think>"} - {""}, key=len, reverse=True)
    return tuple(literals), re.compile("|".join([_TOKEN_SHAPED, *map(re.escape, literals)]))
