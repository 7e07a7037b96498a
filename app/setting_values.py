"""What a setting's value may be: the tool modes, reasoning outputs, manifests… a model's settings choose from,
and the checks of the call-format names they give (against :mod:`statemachine`'s registry of formats)."""

from __future__ import annotations

from typing import Literal

from statemachine import get_format

#: How a model is given tools: ``prompt`` (a manifest in the prompt, calls parsed from the text), ``native``
#: (the back end gets ``tools`` and answers with ``tool_calls``), ``auto`` (native, prompt once it refuses tools).
ToolMode = Literal["prompt", "native", "auto"]
#: What becomes of the model's reasoning: ``show`` (Chat ``reasoning_content``, Responses ``reasoning`` items),
#: ``hide`` (dropped), ``inline`` (in the content, between ``<think>`` and ``</think>``).
ReasoningOutput = Literal["show", "hide", "inline"]
#: How the tool block lists the tools: ``json`` (each tool's JSON Schema, then a guide per tool) or ``compact``
#: (a signature line per tool: ``get_weather(city: string, unit?: "c"|"f")``).
ToolManifest = Literal["json", "compact"]
#: Where a model's system text goes in prompt mode (``auto``: by its family, :attr:`~app.profile.ModelProfile.system_in`).
SystemIn = Literal["auto", "system", "first_user"]
#: How calls are constrained by the back end's decoding (:mod:`app.pipeline.constrain`).
ConstrainCalls = Literal["auto", "on", "off", "llama.cpp", "vllm", "sglang", "response_format"]
#: When a call that fails its check is asked for again (:mod:`app.pipeline.reask`).
ReaskCalls = Literal["off", "unstreamed", "on"]
#: What becomes of a call equal to an earlier one of the same answer (:mod:`app.pipeline.repeats`).
RepeatedCalls = Literal["drop", "keep"]
#: What a model serves through toolwire, as ``GET /models`` lists it (``capabilities``).
Capability = Literal["chat", "tools", "completions", "embeddings", "rerank", "audio"]



def check_format(value: str) -> str:
    """``value`` if it names a registered call format.

    Raises:
        ValueError: it names none (the registry's message, which lists them).
    """
    try:
        get_format(value)
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from None
    return value


def check_tool_format(value: str) -> str:
    """``value`` if it is ``auto`` or names a registered call format (:func:`check_format`)."""
    return value if value == "auto" else check_format(value)


def check_accept(value: str) -> str:
    """``default``, ``all`` or a comma list of registered format names, normalised.

    Raises:
        ValueError: it is none of these.
    """
    if value.strip() in ("default", "all"):
        return value.strip()
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise ValueError("accept_formats is 'default', 'all' or a comma list of format names")
    for name in names:
        check_format(name)
    return ",".join(names)
