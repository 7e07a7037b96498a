"""toolwire's settings: environment (``TOOLWIRE_*``), an optional TOML file, defaults.

Precedence, highest first: keyword arguments, environment variables, the TOML
file named by ``TOOLWIRE_CONFIG_FILE``, defaults. Nested values (``model_map``)
are JSON in the environment (``TOOLWIRE_MODEL_MAP='{"gpt-4o": "qwen2.5"}'``) or
a table in the file. A ``model_map`` value is the upstream model's name, or an
object that may also set the model's tool mode and say that its chat template
opens the reasoning block itself:
``{"gpt-4o": {"model": "qwen3", "tool_mode": "native", "opens_reasoning": true}}``;
it may also set the model's ``tool_format`` and ``accept_formats``, and name its back end (``"upstream": "ollama"``,
one of ``upstreams``; a list of them: a pool; unset = the default back end, ``upstream_url`` & co.).
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, ValidationError, field_validator,
                      model_validator)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from .setting_values import (Capability, ConstrainCalls, ReaskCalls, ReasoningOutput, RepeatedCalls, SystemIn,
                             ToolManifest, ToolMode, check_accept, check_tool_format)
from .gateway_settings import GatewaySettings
from .search_settings import SearchSettings
from .upstream_settings import KIND_SECTIONS, KindSettings, UpstreamSettings, check_route, check_upstreams

ENV_PREFIX = "TOOLWIRE_"
CONFIG_FILE_ENV = "TOOLWIRE_CONFIG_FILE"
#: How an environment variable names a key of a nested setting (``TOOLWIRE_MODEL_MAP__GPT_4O``).
NESTED = "__"
#: What a secret or a URL's password is shown as.
MASK = "**********"
#: The most values :meth:`Settings.derived` keeps per settings object (a key may hold a client's model name).
DERIVED_KEPT = 256

_T = TypeVar("_T")


class SettingsError(ValueError):
    """Settings toolwire cannot start with: one line naming the environment variable (or config file) to fix."""


#: Bounds of one model's example exchanges: every request carries them all in its prompt (400: 1.6 MB prompts).
MAX_EXAMPLE_EXCHANGES = 8
MAX_EXAMPLE_CHARS = 4096
ExampleText = Annotated[str, Field(max_length=MAX_EXAMPLE_CHARS)]


class ExampleExchange(BaseModel):
    """One worked exchange put before a model's conversation in prompt mode (never shown to clients, never
    stored): the user's request, the call the model answers it with, the tool's result, the final answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user: ExampleText = Field(description="The example request")
    tool: str = Field(max_length=64,
                      description="The tool called (the exchange is left out when the request does not offer it)")
    arguments: dict[str, Any] = Field(default_factory=dict, description="The call's arguments")
    result: ExampleText = Field(description="The tool's result")
    answer: ExampleText = Field(description="The model's answer after the result")

    @field_validator("arguments")
    @classmethod
    def _arguments_bounded(cls, value: dict[str, Any]) -> dict[str, Any]:
        if len(json.dumps(value)) > MAX_EXAMPLE_CHARS:
            raise ValueError(f"the arguments' JSON must have at most {MAX_EXAMPLE_CHARS} characters")
        return value


class ModelRoute(BaseModel):
    """A ``model_map`` value written as an object."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(None, description="The upstream model; unset = the client's model name")
    tool_mode: ToolMode | None = Field(None, description="This model's tool mode; unset = tool_mode")
    opens_reasoning: bool | None = Field(
        None, description="The model's chat template opens <think> itself: its output starts inside reasoning")
    tool_format: str | None = Field(None, description="This model's tool format (or auto); unset = tool_format")
    accept_formats: str | None = Field(None, description="This model's accepted formats; unset = accept_formats")
    reasoning: ReasoningOutput | None = Field(None, description="How this model's reasoning reaches clients; "
                                                                "unset = reasoning")
    max_output_tokens: int | None = Field(
        None, ge=0, description="This model's output limit (max_tokens clamped to it); unset = max_output_tokens")
    stop_after_tools: Literal["off", "first"] | None = Field(
        None, description="Stop reading this model's answer after its first call; unset = stop_after_tools")
    system_in: SystemIn | None = Field(None, description="Where this model's system text goes; unset = system_in")
    constrain_calls: bool | ConstrainCalls | None = Field(
        None, description="This model's constrain_calls (true = on, false = off); unset = constrain_calls")
    reask_calls: ReaskCalls | None = Field(None, description="This model's reask_calls; unset = reask_calls")
    repeated_calls: RepeatedCalls | None = Field(
        None, description="This model's repeated_calls; unset = repeated_calls")
    tool_manifest: ToolManifest | None = Field(
        None, description="How this model's tool block lists the tools; unset = tool_manifest")
    example_exchange: ExampleExchange | list[ExampleExchange] | None = Field(
        None, description="Prompt mode: an example exchange (or a list of up to 8) in the taught call format before "
                          "the conversation (user, tool, arguments, result, answer; texts up to 4096 characters)")
    upstream: str | list[str] | None = Field(None, description="The back end serving this model: a name in "
                                             "upstreams, or a list of them (a pool, see Pools); unset = default")
    fallback: list[str] = Field(
        default_factory=list, description="Back ends (names in upstreams, or default) tried in turn when the "
                                          "one before refuses the connection or answers 5xx before its first "
                                          "byte; each gets this entry's settings")
    capabilities: list[Capability] | None = Field(
        None, description="What this model serves, as GET /models lists it (an embedding model: [\"embeddings\"]); "
                          "unset = what its back end's kind and model list say")

    @field_validator("example_exchange")
    @classmethod
    def _few_examples(cls, value: Any) -> Any:
        if isinstance(value, list) and len(value) > MAX_EXAMPLE_EXCHANGES:
            raise ValueError(f"at most {MAX_EXAMPLE_EXCHANGES} example exchanges, not {len(value)}")
        return value

    @field_validator("tool_format")
    @classmethod
    def _known_format(cls, value: str | None) -> str | None:
        return None if value is None else check_tool_format(value)

    @field_validator("accept_formats")
    @classmethod
    def _known_accept(cls, value: str | None) -> str | None:
        return None if value is None else check_accept(value)


class ModelSettings(BaseModel):
    """Models: which back-end model serves a client's model name, and per-model tool settings."""

    model_map: dict[str, str | ModelRoute] = Field(
        default_factory=dict, description="Client model name -> back-end model name, or an object of the "
                                          "model's own settings (see Per-model settings below); JSON in the "
                                          "environment, a table in the file")
    default_upstream_model: str | None = Field(
        None, description="Back-end model for client model names not in model_map; unset = the client's name")
    max_output_tokens: int = Field(
        0, ge=0, description="Largest max_tokens / max_completion_tokens sent to the back end (a larger one is "
                             "clamped: Claude Code asks for 128000); 0 = sent as asked")
    reasoning: ReasoningOutput = Field(
        "show", description="The model's reasoning: show (Chat reasoning_content, Responses reasoning items, "
                            "Messages thinking blocks), hide (dropped), or inline (in the content, between <think> "
                            "and </think>)")


class ToolSettings(BaseModel):
    """Tool calling: how a model is given tools and which call formats are taught and read."""

    tool_mode: ToolMode = Field(
        "prompt", description="How models get tools: prompt (a manifest in the prompt, calls read from the "
                              "text), native (the back end gets tools and answers with tool_calls) or auto "
                              "(native, prompt once the back end refuses tools)")
    tool_mode_fallback_seconds: float = Field(
        600.0, ge=0, description="How long auto mode keeps a (back end, model) that refused tools (and then "
                                 "answered without them) in prompt mode, per worker, seconds")
    tool_format: str = Field(
        "tool_call", description="The format the model is asked to write calls in: a registered format's name, "
                                 "or auto (the format whose model names the back-end model's name holds, "
                                 "else tool_call; see Formats by model name below)")
    accept_formats: str = Field(
        "all", description="Formats read in the output besides tool_format: all (every registered format), "
                           "default (tool_call, use_tool, function, tag_aliases) or a comma list of names")
    marker_mode: bool = Field(
        False, description="Calls must repeat a fresh per-request marker in their opener "
                           "(X-Toolwire-Marker: 1 turns it on for one request)")
    auto_marker: bool = Field(
        True, description="Marker mode for a request whose user text or tool results already hold call syntax")
    max_tool_calls: int = Field(0, ge=0, description="Calls allowed per choice; 0 = unlimited")
    stop_after_tools: Literal["off", "first"] = Field(
        "off", description="first: stop the back end after the first complete call")
    tool_manifest: ToolManifest = Field(
        "json", description="How the tool block lists the tools: json (each tool's description and JSON Schema) or "
                            "compact (one signature line per tool, fewer prompt tokens)")
    system_in: SystemIn = Field(
        "auto", description="Prompt mode: where the system text (the tool block, the client's system and developer "
                            "messages) goes: system (one leading system message), first_user (the start of the "
                            "first user turn, for chat templates that drop system messages or have none) or auto "
                            "(first_user for the models taught the gemma format, whose family has no system role; "
                            "else system)")
    constrain_calls: ConstrainCalls = Field(
        "auto", description="Prompt mode: the back end's constrained decoding makes each call, once begun, "
                            "well-formed and of an offered tool, and a forced tool_choice's whole answer calls: "
                            "llama.cpp (llama-server's GBNF grammar), vllm (structured_outputs), sglang (ebnf, "
                            "structural tags), response_format (a forced choice only, as a JSON schema: "
                            "llama-cpp-python), off, on (the back end's own way, else response_format) or auto "
                            "(the back end's own way when its model list names llamacpp, vllm or sglang, else off)")
    suppress_tail_after_tools: bool = Field(False, description="Drop the visible text after the last call")
    unsupported_tools: Literal["drop", "fail"] = Field(
        "drop", description="Responses hosted tools (web_search, file_search…; mcp is the gateway's) and "
                            "Anthropic's own tools on Messages (web_search_*, code_execution_*…): drop (not offered, counted, logged at debug "
                            "level) or fail (400 naming tools[i].type)")

    @field_validator("tool_format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        return check_tool_format(value)

    @field_validator("accept_formats")
    @classmethod
    def _known_accept(cls, value: str) -> str:
        return check_accept(value)


class CallPolicySettings(BaseModel):
    """Call policy: what becomes of a call the model got wrong."""

    unknown_tool: Literal["text", "emit", "fail"] = Field(
        "text", description="A call to a tool not offered: text (left in the content), emit (sent as a call) "
                            "or fail (an error)")
    invalid_json: Literal["text", "fail"] = Field(
        "text", description="Arguments that do not parse as JSON: text (left in the content) or fail (an error)")
    schema_mismatch: Literal["emit", "text", "fail"] = Field(
        "emit", description="Arguments that do not match a non-strict tool's schema: emit, text or fail")
    strict_mismatch: Literal["emit", "text", "fail"] = Field(
        "fail", description="The same for strict tools; also a call to an unknown tool when every offered "
                            "tool is strict")
    reask_calls: ReaskCalls = Field(
        "unstreamed", description="Ask the model once more, telling it the error, when a call's arguments are not "
                                  "a JSON object or miss its tool's schema, or a forced tool_choice got no call: "
                                  "unstreamed (non-streamed answers, which hold every call anyway), on (streamed "
                                  "ones too: a call's arguments then go out only once it checks) or off")
    repeated_calls: RepeatedCalls = Field(
        "drop", description="A call with the same name and arguments as an earlier one of the same answer: drop "
                            "(sent once) or keep (all sent, but a loop of one call the token limit cut); calls are "
                            "known whole in non-streamed answers and streamed ones with reask_calls on or gateway tools")


class StreamingSettings(BaseModel):
    """Streaming: keep-alives and how long a generation may take."""

    heartbeat_seconds: float = Field(
        10.0, ge=0, description="Keep-alive comment interval while the back end is silent, seconds "
                                "(X-No-Keepalive: 1 turns them off for a request); 0 disables")
    stream_max_seconds: float = Field(
        3600.0, ge=0, description="Longest one generation may take, the wait for the back end's first output "
                                  "included, seconds (an upstream timeout after); 0 = no limit")
    stream_write_timeout_seconds: float = Field(
        60.0, ge=0, description="Longest one write to a streaming client may block (a client that stopped "
                                "reading), seconds; then the connection, the back-end request and the stream "
                                "slot are closed; 0 = no limit")


class LimitSettings(BaseModel):
    """Request limits: what one request may hold, and how many generations a worker runs at once."""

    max_body_bytes: int = Field(
        16 * 1024 * 1024, gt=0, description="Largest request body, with or without Content-Length (413 above)")
    body_timeout_seconds: float = Field(
        60, ge=0, description="Longest a request body may take to arrive, seconds (408 after, connection "
                              "closed); 0 = no limit")
    max_messages: int = Field(
        2048, ge=0, description="Messages (Responses: input items) per request; 0 = no limit (400, param: messages)")
    max_tools: int = Field(128, ge=0, description="Tools per request; 0 = no limit (400, param: tools)")
    max_tool_schema_bytes: int = Field(
        65536, ge=0, description="JSON size of one tool's parameters; 0 = no limit (400 naming the tool's "
                                 "parameters)")
    max_concurrent_streams: int = Field(
        512, ge=0, description="Generations in flight per worker, streaming or not (keep it below "
                               "TOOLWIRE_WORKER_CONNECTIONS); above it 429 with Retry-After: 1; 0 = no limit")


class AccessSettings(BaseModel):
    """Client keys: who may call the API."""

    api_keys: SecretStr | None = Field(
        None, description="Client keys accepted on /v1 where each API's clients send them: 'Authorization: "
                          "Bearer', or x-api-key on the Messages API, or x-goog-api-key or ?key= on the Gemini API (comma or "
                          "newline list); "
                          "unset with no key file = an open API (a warning is logged)")
    api_keys_file: Path | None = Field(
        None, description="File of client keys, one per line, '#' comments; added to api_keys; unreadable or "
                          "empty = refuse to start")
    metrics_require_key: bool = Field(False, description="Require a client key on the metrics endpoint too")
    cors_origins: str = Field(
        "", description="Origins whose web pages may call the API from a browser (comma list, such as "
                        "app://obsidian.md, or * for any): their preflights are answered and every answer carries "
                        "Access-Control-Allow-Origin; empty = no CORS headers")


class StoreSettings(BaseModel):
    """Stored responses: where the Responses API keeps responses, for how long, and how many bytes."""

    response_store_url: str | None = Field(
        None, description="Where stored responses live: sqlite:///relative/path, sqlite:////absolute/path, "
                          "redis://[:password@]host:port/db or rediss://… (TLS); empty = no store; "
                          "unset = the SQLite file response_store_path")
    response_store_path: str = Field(
        "var/responses.sqlite3", description="SQLite file keeping stored responses when response_store_url "
                                             "is unset (relative to the working directory); empty = no store")
    response_store_shared: bool = Field(
        False, description="Every client key may read, continue and delete every stored response (one tenant)")
    response_store_timeout: float = Field(
        2.0, gt=0, description="Longest wait for the response store per operation, seconds (Redis: connect and "
                               "reply; SQLite: another process's write lock)")
    response_store_max_bytes: int = Field(
        1024 ** 3, ge=0, description="Most bytes of JSON all stored responses and conversations may take (in Redis, "
                                     "with what it holds beside); the oldest responses are evicted to make room "
                                     "(a larger single response is not stored); 0 = no limit")
    response_store_max_bytes_per_key: int = Field(
        256 * 1024 ** 2, ge=0, description="Most bytes the stored responses and conversations of one client key "
                                           "may take (with keys); its oldest responses are evicted; 0 = no limit")
    response_retention_seconds: float = Field(
        30 * 24 * 3600, gt=0, description="How long a stored response stays resolvable, seconds "
                                          "(Redis: the keys' TTL)")
class ObservabilitySettings(BaseModel):
    """Observability: logs, readiness checks and the debug page."""

    log_level: str = Field(
        "INFO", description="Log level (DEBUG adds tool-call note messages, which may quote arguments)")
    log_format: Literal["json", "plain"] = Field("json", description="Log lines as JSON objects or plain text")
    ready_cache_seconds: float = Field(
        1.0, ge=0, description="How long each worker reuses its /readyz checks (back end, store), seconds; "
                               "0 = check on every hit")
    debug: bool = Field(
        False, description="Keep recent requests' state-machine paths, with the model text that moved them, for "
                           "the debug page /debug/; off in production")
    debug_dir: str | None = Field(
        None, description="Directory the workers share for the debug records; unset = <tmp>/toolwire-debug")
    debug_keep: int = Field(200, gt=0, description="How many recent requests of each client key the debug page "
                                                   "keeps")

    @field_validator("log_level")
    @classmethod
    def _upper(cls, value: str) -> str:
        return value.upper()


class _AllSettings(UpstreamSettings, ModelSettings, ToolSettings, CallPolicySettings, StreamingSettings,
                   LimitSettings, AccessSettings, StoreSettings, KindSettings, GatewaySettings, SearchSettings,
                   ObservabilitySettings):
    """Every setting, validated as values only (no environment, no file): how a back end's keys are checked."""


#: The sections of :class:`Settings`, in the order the configuration reference lists them.
SECTIONS: tuple[type[BaseModel], ...] = (
    UpstreamSettings, ModelSettings, ToolSettings, CallPolicySettings, StreamingSettings, LimitSettings,
    AccessSettings, StoreSettings, *KIND_SECTIONS, GatewaySettings, SearchSettings, ObservabilitySettings)


class Settings(UpstreamSettings, ModelSettings, ToolSettings, CallPolicySettings, StreamingSettings,
               LimitSettings, AccessSettings, StoreSettings, KindSettings, GatewaySettings, SearchSettings,
               ObservabilitySettings, BaseSettings):
    """Every knob toolwire reads, one section class per concern (:data:`SECTIONS`).

    The fields stay flat (``settings.upstream_url``): environment variable = ``TOOLWIRE_`` + field name, upper
    case; the TOML file and ``app.config`` use the same names. ``docs/configuration.md`` is generated from
    these classes (``toolwire config --describe``).
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter=NESTED, extra="ignore")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: tuple[PydanticBaseSettingsSource, ...] = (init_settings, env_settings)
        path = config_file_path()
        if path is not None:
            read_config_file(path)  # a file named but unreadable is an error, not an empty file
            sources += (TomlConfigSettingsSource(settings_cls, toml_file=path),)
        return sources

    _derived: dict[Any, Any] = PrivateAttr(default_factory=dict)

    def derived(self, key: Any, build: Callable[[], _T]) -> _T:
        """``build()``, computed once for these settings and ``key`` (settings are not changed once made), so a
        request does not rebuild what only the settings decide; past :data:`DERIVED_KEPT` keys, built each time."""
        # the private attribute read from pydantic's own dict: ``self._derived`` fails the ordinary lookup first
        # and costs ~5 µs a read (the whole per-model lookup costs less than that)
        derived = self.__pydantic_private__["_derived"]  # type: ignore[index]
        try:
            return derived[key]
        except KeyError:
            value = build()
            if len(derived) < DERIVED_KEPT:
                derived[key] = value
            return value

    @model_validator(mode="after")
    def _check_upstreams(self) -> Settings:
        check_upstreams(self.upstreams, self.demo_model)
        for name, named in self.upstreams.items():  # a back end's keys are checked as the settings they stand for
            try:
                _AllSettings.model_validate({**self._section_values(), **named.overrides()})
            except ValidationError as exc:
                error = exc.errors()[0]
                raise ValueError(f"upstreams.{name}: {'.'.join(map(str, error['loc']))}: {error['msg']}") from None
        for client, route in self.model_map.items():
            if isinstance(route, ModelRoute):
                check_route(client, route.upstream, route.fallback, self.upstreams)
        return self

    def _section_values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _AllSettings.model_fields}


def config_file_path() -> Path | None:
    """The TOML config file named by ``TOOLWIRE_CONFIG_FILE``, if any."""
    value = os.environ.get(CONFIG_FILE_ENV)
    return Path(value) if value else None


def read_config_file(path: Path) -> dict[str, Any]:
    """The TOML config file ``path`` as a mapping.

    Raises:
        SettingsError: the file cannot be read or is not TOML (named with ``TOOLWIRE_CONFIG_FILE``).
    """
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise SettingsError(f"{CONFIG_FILE_ENV} {str(path)!r}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{CONFIG_FILE_ENV} {str(path)!r} is not TOML: {exc}") from None


def mask_url(url: str) -> str:
    """``url`` with any password replaced by asterisks."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:{MASK}@{parts.hostname or ''}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))
