"""The back ends' settings: the default back end's section (:class:`UpstreamSettings`), the named ones of
``upstreams`` (:class:`NamedUpstream`) and each built-in kind's own section (:class:`CodexSettings`,
:class:`DemoSettings`).

:class:`~app.settings.Settings` is made of these sections and the others; a kind's section here gives it
settings of its own (``TOOLWIRE_<KIND>_*``): add it to :class:`KindSettings` and :data:`KIND_SECTIONS`, and its
kind in :mod:`app.upstreams.kinds` reads it. A kind registered from outside needs none (its keys are
``upstream_options``). A leaf, as the settings are: it never imports the registry of kinds.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from .setting_values import ConstrainCalls, ReasoningOutput, ToolMode

#: The name of the back end ``upstream_url`` & co. describe, which serves every model not routed elsewhere.
DEFAULT_UPSTREAM = "default"
#: What a back end's name in ``upstreams`` may hold (it labels metrics and log lines).
UPSTREAM_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")


class NamedUpstream(BaseModel):
    """One back end of ``upstreams``: its kind, address and the settings that differ from the top-level ones.

    Unset keys take the top-level setting they stand for (:data:`UPSTREAM_KEYS`); values are checked as that
    setting is.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = Field(
        description="Its kind, a registered one's name: openai (an OpenAI-compatible HTTP API at url), codex (a Codex "
                    "app-server) or demo (checked when the back ends are made)")
    url: str | None = Field(None, description="Base URL of its Chat Completions API, up to and including /v1")
    api_key: SecretStr | None = Field(None, description="Bearer key sent to it (masked like upstream_api_key)")
    models: list[str] = Field(
        default_factory=list, description="Back-end model names routed to it as they are, without a model_map "
                                          "entry (a name two back ends list is refused at start)")
    connect_timeout: float | None = Field(None, description="upstream_connect_timeout for it")
    read_timeout: float | None = Field(None, description="upstream_read_timeout for it")
    write_timeout: float | None = Field(None, description="upstream_write_timeout for it")
    idle_content_seconds: float | None = Field(None, description="upstream_idle_content_seconds for it")
    max_event_bytes: int | None = Field(None, description="upstream_max_event_bytes for it")
    max_body_bytes: int | None = Field(None, description="upstream_max_body_bytes for it")
    max_concurrent: int | None = Field(None, description="upstream_max_concurrent for it")
    opens_reasoning: bool | None = Field(None, description="upstream_opens_reasoning for it")
    tool_mode: ToolMode | None = Field(None, description="tool_mode for its models")
    tool_format: str | None = Field(None, description="tool_format for its models")
    accept_formats: str | None = Field(None, description="accept_formats for its models")
    reasoning: ReasoningOutput | None = Field(None, description="reasoning for its models")
    max_output_tokens: int | None = Field(None, description="max_output_tokens for its models")
    constrain_calls: ConstrainCalls | None = Field(None, description="constrain_calls for its models")
    demo_model: str | None = Field(None, description="demo_model, for a demo back end")
    codex_command: str | None = Field(None, description="codex_command, for a Codex back end")
    codex_home: str | None = Field(None, description="codex_home, for a Codex back end")
    codex_provider_url: str | None = Field(None, description="codex_provider_url, for a Codex back end")
    codex_provider_api_key: SecretStr | None = Field(None, description="codex_provider_api_key, for a Codex "
                                                                       "back end")
    codex_recycle_requests: int | None = Field(None, description="codex_recycle_requests, for a Codex back end")
    codex_max_turns: int | None = Field(None, description="codex_max_turns, for a Codex back end")
    options: dict[str, Any] | None = Field(None, description="upstream_options for it")
    weight: float = Field(1.0, gt=0, description="Its share of a pool's conversations (a model_map entry whose "
                                                 "upstream lists several back ends) against the other members'")

    def overrides(self) -> dict[str, Any]:
        """The top-level settings this back end sets, by their names (:data:`UPSTREAM_KEYS`)."""
        return {UPSTREAM_KEYS.get(key, key): value for key, value in self
                if key not in OWN_KEYS and value is not None}


#: The keys of a :class:`NamedUpstream` that are its own, standing for no top-level setting.
OWN_KEYS = frozenset({"models", "weight"})


#: The keys of a :class:`NamedUpstream` that stand for a top-level setting of another name.
UPSTREAM_KEYS = {
    "kind": "upstream_kind", "url": "upstream_url", "api_key": "upstream_api_key",
    "connect_timeout": "upstream_connect_timeout", "read_timeout": "upstream_read_timeout",
    "write_timeout": "upstream_write_timeout", "idle_content_seconds": "upstream_idle_content_seconds",
    "max_event_bytes": "upstream_max_event_bytes", "max_body_bytes": "upstream_max_body_bytes",
    "max_concurrent": "upstream_max_concurrent", "opens_reasoning": "upstream_opens_reasoning",
    "options": "upstream_options",
}


def served_models(named: NamedUpstream, demo_model: str) -> list[str]:
    """The model names a back end of ``upstreams`` serves without a ``model_map`` entry: its ``models``, and a
    demo's own model (its ``demo_model``, else the top-level ``demo_model``)."""
    return [*named.models, named.demo_model or demo_model] if named.kind == "demo" else named.models




class UpstreamSettings(BaseModel):
    """Back end: which one toolwire calls, and how long and how much it waits for it."""

    upstream_kind: str | None = Field(
        None, description="The back end's kind, a registered one's name (checked when the back ends are made): "
                          "openai (an OpenAI-compatible HTTP API at upstream_url), codex (a Codex app-server, see "
                          "the Codex section) or demo (the embedded demo, see the Demo section); unset = openai "
                          "when upstream_url is set, else demo")
    upstream_url: str | None = Field(
        None, description="Base URL of the back end's Chat Completions API, up to and including /v1; "
                          "unset = the embedded demo")
    upstream_api_key: SecretStr | None = Field(
        None, description="Bearer key sent to the back end (never logged, shown or quoted in an error)")
    upstream_connect_timeout: float = Field(
        10.0, gt=0, description="Connect timeout (TCP and TLS, per connection; for Codex, the longest wait for a "
                                "control request), seconds")
    upstream_read_timeout: float = Field(300.0, gt=0, description="Longest silence between bytes, seconds")
    upstream_write_timeout: float = Field(30.0, gt=0, description="Longest the sending of one request may take, "
                                                                  "seconds")
    upstream_idle_content_seconds: float = Field(
        300.0, ge=0, description="Longest a back-end stream may send no data event (only keep-alive comments, or "
                                 "nothing), seconds; then it is closed and the client gets an upstream timeout; "
                                 "0 = no limit")
    upstream_max_event_bytes: int = Field(
        8 * 1024 * 1024, gt=0, description="Largest back-end SSE event or line (or Codex app-server line) held "
                                           "while it arrives (502 upstream_too_large past it)")
    upstream_max_body_bytes: int = Field(
        64 * 1024 * 1024, gt=0, description="Largest non-streamed back-end JSON answer "
                                             "(502 upstream_too_large past it)")
    upstream_max_concurrent: int = Field(
        0, ge=0, description="Generations in flight per worker to this back end (above it 429 with "
                             "Retry-After: 1, the other back ends unaffected); 0 = only max_concurrent_streams")
    upstream_opens_reasoning: bool = Field(
        False, description="Every model of the back end has a chat template that opens <think> itself "
                           "(a model_map object's opens_reasoning wins)")
    upstream_options: dict[str, Any] = Field(
        default_factory=dict, description="The keys of a back-end kind whose section is not among these settings "
                                          "(one an app registers), checked by that section when the back ends are "
                                          "made; JSON in the environment")
    upstreams: dict[str, NamedUpstream] = Field(
        default_factory=dict, description="More back ends by name, each serving the models routed to it (see "
                                          "Named back ends below); JSON in the environment, [upstreams.NAME] "
                                          "tables in the file; the one above is named default")


    @property
    def backend(self) -> str:
        """The back end in use: ``upstream_kind``, else ``openai`` with an ``upstream_url``, else ``demo``."""
        return self.upstream_kind or ("openai" if self.upstream_url else "demo")



class CodexSettings(BaseModel):
    """Codex back end (upstream_kind = codex): the app-servers toolwire runs."""

    codex_command: str = Field(
        "codex", description="The Codex binary, or its npm launcher (the native binary beside it is run)")
    codex_home: str = Field(
        "~/.codex", description="The user's Codex home: its auth.json (the codex login) is used, never written "
                                "by toolwire")
    codex_provider_url: str | None = Field(
        None, description="A Responses-API base URL (up to /v1) for Codex to use instead of the login")
    codex_provider_api_key: SecretStr | None = Field(None, description="Bearer key Codex sends to that provider")
    codex_work_dir: str = Field(
        "var/codex", description="Where toolwire writes its private Codex homes (one per worker, removed at exit)")
    codex_recycle_requests: int = Field(
        1000, ge=0, description="Requests per Codex app-server before a fresh one takes over (the old one "
                                "finishes its requests first); 0 = never")
    codex_max_turns: int = Field(
        64, ge=0, description="Codex turns in flight per worker (above it 429 with Retry-After: 1); 0 = no limit")


class DemoSettings(BaseModel):
    """Demo back end (upstream_kind = demo): the embedded model."""

    demo_model: str = Field("toolwire-demo", description="Model id served by the embedded demo back end")



class PoolSettings(BaseModel):
    """Pools: a model served by several back ends (a model_map entry whose upstream is a list of names), each
    conversation kept on the member that holds its cache (docs/deploying.md)."""

    pool_load_factor: float = Field(
        2.0, ge=1.0, description="A member takes a conversation while its generations in flight (in this worker), "
                                 "this one included, stay within this factor times its weighted share of the "
                                 "pool's; past it the conversation goes elsewhere (pool_tie_breaker)")
    pool_tie_breaker: Literal["next", "least_busy"] = Field(
        "next", description="Where a conversation goes when its member is past its bound: next (its next member "
                            "by hash under its own bound: its overflow stays together) or least_busy (the "
                            "member with the fewest in flight for its weight)")
    pool_session_header: str = Field(
        "X-Session-Id", description="A request header naming the client's session: its conversations stay on "
                                    "one member (a body's prompt_cache_key, conversation or metadata.user_id "
                                    "are read too; else the prompt's stable prefix is the key)")
    pool_cooldown_seconds: float = Field(
        5.0, ge=0, description="How long a member that refused, timed out or answered 5xx/429 is passed over "
                               "(a 429's Retry-After when longer), seconds")
    pool_health_seconds: float = Field(
        5.0, ge=0, description="How often each worker checks each member's health endpoint (jittered by a "
                               "fifth), seconds; a member failing it is passed over until it answers 200; "
                               "0 = no checks (a failing member waits out its cooldown)")
    pool_health_path: str = Field(
        "/health", description="The members' health endpoint, under the server's root (llama.cpp, vLLM and "
                               "SGLang serve /health)")


class KindSettings(CodexSettings, DemoSettings, PoolSettings):
    """The built-in kinds' own sections and the pools', as one mixin of :class:`~app.settings.Settings`."""


#: The kinds' own sections and the pools', in the order the configuration reference lists them.
KIND_SECTIONS: tuple[type[BaseModel], ...] = (CodexSettings, DemoSettings, PoolSettings)


def check_upstreams(upstreams: dict[str, NamedUpstream], demo_model: str) -> None:
    """The rules the back ends of ``upstreams`` keep together: each name usable, no model served by two.

    Raises:
        ValueError: one is broken (one line naming the back end).
    """
    for name in upstreams:
        if name == DEFAULT_UPSTREAM or not UPSTREAM_NAME.fullmatch(name):
            raise ValueError(f"upstreams: {name!r} cannot name a back end ('{DEFAULT_UPSTREAM}' is the one "
                             "upstream_url describes; a name is a letter, then letters, digits, '_', '.', '-')")
    listed: dict[str, str] = {}
    for name, named in upstreams.items():
        for model in served_models(named, demo_model):
            if listed.setdefault(model, name) != name:
                raise ValueError(f"upstreams: {model!r} is in the models of both {listed[model]} and {name}")


def check_route(client: str, upstream: str | list[str] | None, fallback: list[str], upstreams: dict[str, Any]) -> None:
    """The rules a ``model_map`` entry's back ends keep: each one known, none repeated (a pool's members and its
    fallbacks included).

    Raises:
        ValueError: one is broken (one line naming the entry).
    """
    members = upstream if isinstance(upstream, list) else [upstream or DEFAULT_UPSTREAM]
    if not members:
        raise ValueError(f"model_map.{client}: upstream lists no back end")
    for target in (*members, *fallback):
        if target not in (DEFAULT_UPSTREAM, *upstreams):
            raise ValueError(f"model_map.{client}: upstream {target!r} is not in upstreams")
    named = [*members, *fallback]
    if len(set(named)) < len(named):
        raise ValueError(f"model_map.{client}: a back end repeats (in upstream and fallback)")
