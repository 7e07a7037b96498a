"""What a choice stream needs to know about the request: tools, choice, policy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

UnknownToolPolicy = Literal["text", "emit", "fail"]
InvalidPolicy = Literal["text", "fail"]
SchemaPolicy = Literal["emit", "text", "fail"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool offered by the request: a function tool, or a custom (freeform) one.

    Fields:
        name: the tool name.
        description: the tool's description ("" when absent).
        parameters: a function tool's JSON Schema (``None`` when absent).
        strict: ``True`` when the arguments must match the schema exactly.
        kind: ``"function"`` (JSON arguments) or ``"custom"`` (raw text
            input, written in the ``custom_tool_call`` format).
        input_format: a custom tool's OpenAI ``format`` object
            (``{"type": "text"}`` or ``{"type": "grammar", "syntax": "lark" |
            "regex", "definition": …}``); ``None`` means free text. A
            ``regex`` grammar is checked against the whole input when the call
            ends (a mismatch follows the schema policies).
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] | None = None
    strict: bool = False
    kind: Literal["function", "custom"] = "function"
    input_format: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """The request's ``tool_choice``, normalised.

    Fields:
        mode: ``auto``, ``none`` or ``required``.
        allowed: the names the model may call (``None`` = every offered tool).
            A forced function is ``ToolChoice("required", frozenset({name}))``.
    """

    mode: Literal["auto", "none", "required"] = "auto"
    allowed: frozenset[str] | None = None

    @property
    def forced_name(self) -> str | None:
        """The single function the model must call, if the choice names one."""
        if self.mode == "required" and self.allowed is not None and len(self.allowed) == 1:
            return next(iter(self.allowed))
        return None


@dataclass(frozen=True, slots=True)
class Policy:
    """How model mistakes and extra output are handled. Defaults are safe for agents.

    Fields:
        unknown_tool: a call to a name that is not offered (or not allowed):
            ``text`` releases the block as visible text, ``emit`` sends the
            call anyway, ``fail`` raises ``ModelOutputError``.
        invalid_json: arguments that stay unparseable after the repair pass:
            ``text`` releases the block as text (or, once the header was sent,
            ends the call as invalid), ``fail`` raises.
        schema_mismatch: arguments that parse but do not match the schema of a
            non-strict tool: ``emit`` (with a note), ``text`` or ``fail``.
            Strict tools (``strict: true``) always use ``strict_mismatch``.
        strict_mismatch: the same for strict tools; ``fail`` by default. When
            every offered tool is strict, a call to an unknown name breaks the
            strict contract too and follows this policy instead of
            ``unknown_tool`` (``emit`` sends it, ``text`` releases it).
        text_after_calls: ``keep`` visible text after the last call, or
            ``suppress`` it (Obsidian Copilot hangs on narrative after a call).
        stop_after_first_call: stop reading after the first completed call
            (``ChoiceStream.wants_more`` turns ``False``).
        max_tool_calls: calls allowed per choice, 0 for no limit; the call
            that would exceed it is never emitted, and the stream stops.
        hold_limit: the size valve: a held sentinel prefix or a pre-name
            buffer larger than this is released as text.
        hold_calls: each call is held until it ends and goes out whole only if
            it is acceptable: arguments that are not a JSON object, or miss the
            schema under a ``text`` schema policy, make its block a rejected one
            (text, or ``invalid_json: fail``'s error), and a call the stream
            ended inside is never sent (after ``length`` / ``content_filter``
            its block is dropped). Nothing of a call goes out before it is
            known to be good: what a non-streamed answer, or a caller that may
            re-ask the model, needs. The size valve does not apply to it.
    """

    unknown_tool: UnknownToolPolicy = "text"
    invalid_json: InvalidPolicy = "text"
    schema_mismatch: SchemaPolicy = "emit"
    strict_mismatch: SchemaPolicy = "fail"
    text_after_calls: Literal["keep", "suppress"] = "keep"
    stop_after_first_call: bool = False
    max_tool_calls: int = 0
    hold_limit: int = 4096
    hold_calls: bool = False


@dataclass(frozen=True, slots=True)
class ParserConfig:
    """Everything a :class:`~statemachine.ChoiceStream` needs, fixed per request.

    Fields:
        tools: offered tools by name.
        tool_choice: the normalised ``tool_choice``.
        parallel_tool_calls: ``False`` keeps only the first call per choice.
        legacy_functions: the request used ``functions``; the finish reason of
            a choice with a call is then ``function_call`` (one call at most).
        formats: names of the registered text formats to recognise, in order.
            When a custom tool is offered, ``custom_tool_call`` is recognised
            too even if it is not listed (custom tools have no other format).
        reasoning: recognise ``<think>…</think>`` blocks (a format's own
            reasoning delimiters, ``TextFormat.reasoning_delimiters``, are
            part of its syntax and read either way).
        starts_in_reasoning: the template pre-opened ``<think>``.
        policy: how mistakes are handled.
        marker: when set, only call blocks whose opener repeats this marker
            are calls (``TextFormat.with_marker``); unmarked openers, bare
            JSON and fenced JSON stay text. ``None`` (default) = off.
        bare_json: recognise a bare JSON call at the start of the message;
            off when the client asked for JSON output (``response_format``),
            where a JSON answer is content (case 31).
        example_arguments: the arguments the prompt's worked example shows, by
            tool name. A held call (``Policy.hold_calls``) whose arguments are
            these, those at their schema default aside, copied the example
            instead of taking its values from the request: it is not sent (note
            ``example_copy``). Empty (default): not checked.
    """

    tools: Mapping[str, ToolSpec] = field(default_factory=dict)
    tool_choice: ToolChoice = ToolChoice()
    parallel_tool_calls: bool = True
    legacy_functions: bool = False
    formats: tuple[str, ...] = ("tool_call", "use_tool", "function", "tag_aliases")
    reasoning: bool = True
    starts_in_reasoning: bool = False
    policy: Policy = Policy()
    marker: str | None = None
    bare_json: bool = True
    example_arguments: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def parsing_enabled(self) -> bool:
        """Whether call blocks are parsed at all (off without tools or with ``none``)."""
        return bool(self.tools) and self.tool_choice.mode != "none"

    @classmethod
    def for_tools(cls, tools: list[ToolSpec] | tuple[ToolSpec, ...], **kwargs: Any) -> "ParserConfig":
        """Build a config from a list of tools (convenience for callers and tests)."""
        return cls(tools={t.name: t for t in tools}, **kwargs)
