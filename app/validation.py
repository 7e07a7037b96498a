"""The one validation layer of both endpoints: the pydantic base class, pydantic errors → ``param``, count limits.

Request models subclass :class:`RequestModel` (unknown keys are kept: newer API
fields pass through). :func:`validate` runs a model and turns the first problem
into an :class:`~app.errors.InputError` whose ``param`` is the OpenAI-style path
of the offending value (``messages[0].content``, ``input[2].call_id``). The count
limits (``max_messages``, ``max_tools``, ``max_tool_schema_bytes``) run on the
raw body before it is validated, so an oversized body costs no model work.
"""

from __future__ import annotations

from typing import Annotated, Any, Mapping, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .errors import InputError
from .settings import Settings

Model = TypeVar("Model")


#: A tool's (or namespace's) name as OpenAI takes one: 1 to 64 letters, digits, ``_`` and ``-`` (a name is
#: written into the prompt and back ends' templates: no markup, no newlines).
ToolName = Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
#: Request ``metadata`` as OpenAI takes it: at most 16 pairs, keys up to 64 and values up to 512 characters.
Metadata = Annotated[dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]],
                     Field(max_length=16)]

#: OpenAI takes at most 4 stop sequences (Chat's ``stop``), and Messages' ``stop_sequences`` is held to the
#: same. Their length is bounded too: a back end without ``stop`` has them matched in toolwire, against every
#: delta (:mod:`app.upstreams.codex.emulation`).
MAX_STOP_SEQUENCES = 4
MAX_STOP_CHARS = 256
StopSequence = Annotated[str, Field(max_length=MAX_STOP_CHARS)]


def stop_count(value: Any) -> Any:
    """A ``BeforeValidator`` refusing a list of more than :data:`MAX_STOP_SEQUENCES` stop sequences (before
    pydantic validates each of them)."""
    if isinstance(value, list) and len(value) > MAX_STOP_SEQUENCES:
        raise ValueError(f"at most {MAX_STOP_SEQUENCES} stop sequences are allowed, not {len(value)}")
    return value



class RequestModel(BaseModel):
    """A request object that accepts keys it does not know (kept in ``model_extra``)."""

    model_config = ConfigDict(extra="allow")


def validate(schema: type[Model] | TypeAdapter[Model], data: Any, base: str | None = None) -> Model:
    """``data`` validated as ``schema`` (a model class or a ``TypeAdapter``).

    Args:
        base: the path of ``data`` inside the request (``input[3]``), prefixed to the reported ``param``.
    Raises:
        InputError: 400 naming the first offending parameter.
    """
    try:
        if isinstance(schema, TypeAdapter):
            return schema.validate_python(data)
        return schema.model_validate(data)  # type: ignore[attr-defined]
    except ValidationError as exc:
        raise input_error(exc, data, base) from None


def input_error(exc: ValidationError, data: Any, base: str | None = None) -> InputError:
    """The 400 for the first problem in ``exc`` (``data`` is what was validated).

    pydantic reports one error per failed union branch; of those about the
    first parameter in error, the most specific (longest path) is used.
    """
    errors = [(_param(err, data, base), err) for err in exc.errors(include_url=False)]
    first = errors[0][0] or ""
    param, err = max((e for e in errors if (e[0] or "").startswith(first)), key=lambda e: len(e[0] or ""))
    if err["type"] in ("missing", "union_tag_not_found"):
        return InputError(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")
    where = f" for '{param}'" if param else ""
    return InputError(f"Invalid value{where}: {err['msg']}.", param, "invalid_value")


def _param(err: Any, data: Any, base: str | None) -> str | None:
    """The error's location as ``a.b[1].c``, walking ``data`` to drop the labels pydantic adds for union
    branches (tags, class names, ``str``); a missing key is kept when it is the last step. A tagged union
    whose tag is missing or unknown names the tag (``messages[0].role``)."""
    loc = err["loc"]
    path = base or ""
    last = len(loc) - 1
    for n, segment in enumerate(loc):
        if isinstance(segment, int) and isinstance(data, list) and 0 <= segment < len(data):
            path += f"[{segment}]"
            data = data[segment]
        elif isinstance(segment, str) and isinstance(data, Mapping) and (
                segment in data or (err["type"] == "missing" and n == last)):
            path += f".{segment}" if path else segment
            data = data.get(segment)
    if err["type"] in ("union_tag_not_found", "union_tag_invalid"):
        tag = str(err["ctx"]["discriminator"]).strip("'\"")
        path += f".{tag}" if path else tag
    return path or None


# count limits on the raw body ------------------------------------------------------------------

def check_chat_limits(body: dict[str, Any], settings: Settings) -> None:
    """Enforce ``max_messages``, ``max_tools`` and ``max_tool_schema_bytes`` on a Chat body.

    Raises:
        InputError: 400 naming the offending ``param`` (``messages``, ``tools``,
            ``tools[3].function.parameters``, ``functions[0].parameters``).
    """
    _check_length(body.get("messages"), "messages", settings.max_messages)
    for key, path in (("tools", "function.parameters"), ("functions", "parameters")):
        _check_tools(body.get(key), key, path, settings.max_tools, settings.max_tool_schema_bytes)


def check_responses_limits(body: dict[str, Any], settings: Settings) -> None:
    """The same limits on a Responses body: ``input`` items, ``tools``, ``tools[i].parameters``, a custom
    tool's ``tools[i].format`` (its grammar), and the same inside a namespace (``tools[i].tools[j]…``).

    Raises:
        InputError: 400 naming the offending ``param``.
    """
    _check_length(body.get("input"), "input", settings.max_messages)
    tools = body.get("tools")
    groups = [("tools", tools)]
    if isinstance(tools, list):
        groups += [(f"tools[{i}].tools", t.get("tools")) for i, t in enumerate(tools)
                   if isinstance(t, dict) and t.get("type") == "namespace"]
    for param, group in groups:
        _check_tools(group, param, "parameters", settings.max_tools, settings.max_tool_schema_bytes)
        _check_tools(group, param, "format", 0, settings.max_tool_schema_bytes)


def check_messages_limits(body: dict[str, Any], settings: Settings) -> None:
    """The same limits on an Anthropic Messages body: ``messages``, ``tools``, ``tools[i].input_schema``.

    Raises:
        InputError: 400 naming the offending ``param``.
    """
    _check_length(body.get("messages"), "messages", settings.max_messages)
    _check_tools(body.get("tools"), "tools", "input_schema", settings.max_tools, settings.max_tool_schema_bytes)


def check_gemini_limits(body: dict[str, Any], settings: Settings) -> None:
    """The same limits on a Gemini ``generateContent`` body: ``contents``, the function declarations of all
    ``tools`` together, ``tools[i].functionDeclarations[j].parameters`` (and ``parametersJsonSchema``).

    Raises:
        InputError: 400 naming the offending ``param``.
    """
    _check_length(body.get("contents"), "contents", settings.max_messages)
    tools = body.get("tools")
    groups = [(f"tools[{i}].functionDeclarations", tool.get("functionDeclarations"))
              for i, tool in enumerate(tools if isinstance(tools, list) else ()) if isinstance(tool, dict)]
    declared = [d for _, group in groups if isinstance(group, list) for d in group]
    _check_length(declared, "tools", settings.max_tools)
    for param, group in groups:
        for schema_path in ("parameters", "parametersJsonSchema"):
            _check_tools(group, param, schema_path, 0, settings.max_tool_schema_bytes)


def _check_length(items: Any, param: str, limit: int) -> None:
    if limit and isinstance(items, list) and len(items) > limit:
        raise InputError(f"Invalid '{param}': array too long. Expected an array with maximum length {limit}, "
                         f"but got an array with length {len(items)} instead.", param, "array_above_max_length")


def _check_tools(tools: Any, param: str, schema_path: str, max_tools: int, max_schema: int) -> None:
    _check_length(tools, param, max_tools)
    if not max_schema or not isinstance(tools, list):
        return
    for i, tool in enumerate(tools):
        schema = _dig(tool, schema_path)
        if schema is None:
            continue
        size = len(orjson.dumps(schema))
        if size > max_schema:
            raise InputError(f"Invalid '{param}[{i}].{schema_path}': the schema is {size} bytes of JSON; "
                             f"the limit is {max_schema}.", f"{param}[{i}].{schema_path}", "tool_schema_too_large")


def _dig(value: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value
