"""A client model as one back end serves it: every per-model setting, resolved once.

A ``model_map`` object may set a model's own tool mode, formats, reasoning, prompt shape and limits; unset
keys take the back end's setting (a back end of ``upstreams`` may set its own), then the top-level one.
:func:`model_profile` reads them all once per (settings, model) into a frozen :class:`ModelProfile`, which
the plan carries on the generation: the parser, the prompt, the back end's request and ``count_tokens``
read the model's settings from it and nowhere else.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from statemachine import ParserConfig, Policy, get_format, registered_formats
from statemachine.formats import format_for_model

from .setting_values import ConstrainCalls, ReaskCalls, ReasoningOutput, RepeatedCalls, ToolManifest, ToolMode
from .settings import ExampleExchange, ModelRoute, Settings

T = TypeVar("T")

#: The formats ``accept_formats = "default"`` reads.
_DEFAULT_FORMATS = ParserConfig().formats
#: One object per distinct policy: an open stream holds its config (and its policy) to its end.
_shared: dict[Any, Any] = {}


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """One client model as the back end serving it is set up for it (:func:`model_profile`).

    Fields:
        model: the client's model name.
        upstream_model: the back end's model name (``model_map``, else ``default_upstream_model``, else
            ``model``).
        tool_mode: ``prompt``, ``native`` or ``auto``.
        formats: the call formats read in its output, the taught one first (``tool_format`` with ``auto``
            resolved, then ``accept_formats``).
        reasoning: how its reasoning reaches clients (``show``, ``hide``, ``inline``).
        opens_reasoning: its chat template opens ``<think>`` itself: its output starts inside reasoning.
        system_in: where its system text goes in prompt mode (``system`` or ``first_user``; ``auto`` resolved).
        manifest: how the tool block lists the tools (``json`` or ``compact``).
        examples: the example exchanges put before its conversation in prompt mode.
        constrain_calls: how its calls are constrained by the back end's decoding (``auto``, ``on``, ``off`` or a
            way's name: :mod:`app.pipeline.constrain`; a ``model_map`` ``true`` / ``false`` is ``on`` / ``off``).
        reask_calls: when a call failing its check is asked for again (``off``, ``unstreamed``, ``on``).
        repeated_calls: what becomes of a call equal to an earlier one of its answer (``drop``, ``keep``).
        max_output_tokens: its output limit (0 = none): larger output limits sent to the back end are clamped.
        policy: the parser policy for its calls, with its stop rule (``stop_after_tools``:
            ``policy.stop_after_first_call``).
        capabilities: what it serves, as its ``model_map`` object declares (``None``: not declared).
    """

    model: str
    upstream_model: str
    tool_mode: ToolMode
    formats: tuple[str, ...]
    reasoning: ReasoningOutput
    opens_reasoning: bool
    system_in: Literal["system", "first_user"]
    manifest: ToolManifest
    examples: tuple[ExampleExchange, ...]
    constrain_calls: ConstrainCalls
    reask_calls: ReaskCalls
    repeated_calls: RepeatedCalls
    max_output_tokens: int
    policy: Policy
    capabilities: tuple[str, ...] | None = None

    @property
    def tool_format(self) -> str:
        """The format the model is taught (``formats[0]``)."""
        return self.formats[0]


def model_profile(settings: Settings, model: str) -> ModelProfile:
    """The profile of the client's ``model`` under ``settings`` (the settings as its back end sees them):
    built once per settings object and model name, then the same object."""
    # The registry is part of the key: a format registered later can change what "all" or "auto" mean.
    return settings.derived(("profile", model, registered_formats()), lambda: _build(settings, model))


def upstream_models(settings: Settings) -> set[str]:
    """The back-end model name of every model ``model_map`` names."""
    return {model_profile(settings, model).upstream_model for model in settings.model_map} - {""}


def _build(settings: Settings, model: str) -> ModelProfile:
    route = settings.model_map.get(model)
    own = route if isinstance(route, ModelRoute) else None

    def setting(key: str) -> Any:
        """The model's own value of ``key`` (its ``model_map`` object's), else the setting's."""
        value = None if own is None else getattr(own, key)
        return getattr(settings, key) if value is None else value

    mapped = route.model if isinstance(route, ModelRoute) else route
    upstream_model = mapped or settings.default_upstream_model or model
    taught = setting("tool_format")
    if taught == "auto":
        taught = format_for_model(upstream_model) or "tool_call"
    system_in = setting("system_in")
    if system_in == "auto":
        system_in = "system" if get_format(taught).system_role else "first_user"
    opens = own.opens_reasoning if own and own.opens_reasoning is not None else settings.upstream_opens_reasoning
    examples = own.example_exchange if own else None
    return ModelProfile(
        model=model, upstream_model=upstream_model, tool_mode=setting("tool_mode"),
        formats=_formats(taught, setting("accept_formats"), registered_formats()), reasoning=setting("reasoning"),
        opens_reasoning=opens, system_in=system_in, manifest=setting("tool_manifest"),
        examples=(examples,) if isinstance(examples, ExampleExchange) else tuple(examples or ()),
        constrain_calls=_constrain(setting("constrain_calls")), reask_calls=setting("reask_calls"),
        repeated_calls=setting("repeated_calls"),
        max_output_tokens=setting("max_output_tokens"),
        policy=_one_copy(_policy(settings, stop_after_first_call=setting("stop_after_tools") == "first")),
        capabilities=tuple(own.capabilities) if own and own.capabilities is not None else None)


def _constrain(value: bool | ConstrainCalls) -> ConstrainCalls:
    """``constrain_calls`` as a way: a ``model_map`` object's ``true`` is ``on``, ``false`` is ``off``."""
    return ("on" if value else "off") if isinstance(value, bool) else value


def _policy(settings: Settings, *, stop_after_first_call: bool) -> Policy:
    """The operator's call policy, with the model's stop rule."""
    return Policy(unknown_tool=settings.unknown_tool, invalid_json=settings.invalid_json,
                  schema_mismatch=settings.schema_mismatch, strict_mismatch=settings.strict_mismatch,
                  text_after_calls="suppress" if settings.suppress_tail_after_tools else "keep",
                  stop_after_first_call=stop_after_first_call, max_tool_calls=settings.max_tool_calls)


@functools.lru_cache(maxsize=64)
def _formats(taught: str, accept: str, registry: tuple[str, ...]) -> tuple[str, ...]:
    """The formats read: the ``taught`` one first, then ``accept``: the defaults, every format of the
    ``registry`` (but ``custom_tool_call``, offered with custom tools only), or a comma list. One tuple per
    distinct value: an open stream holds its config (and these) to its end."""
    if accept == "default":
        others: tuple[str, ...] = _DEFAULT_FORMATS
    elif accept == "all":
        others = tuple(f for f in registry if f != "custom_tool_call")
    else:
        others = tuple(accept.split(","))
    return (taught, *(f for f in others if f != taught))


def _one_copy(value: T) -> T:
    """``value``, or the equal one an earlier profile got."""
    return _shared.setdefault(value, value)
