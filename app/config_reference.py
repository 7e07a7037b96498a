"""The configuration reference, ``docs/configuration.md``, written from the settings model.

``toolwire config --describe`` prints it; a test regenerates it and compares it with the committed file, so
the reference cannot drift from :mod:`app.settings`.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from statemachine import get_format, registered_formats

from .settings import CONFIG_FILE_ENV, ENV_PREFIX, SECTIONS, ExampleExchange, ModelRoute
from .upstream_settings import DEFAULT_UPSTREAM, NamedUpstream

#: The environment variables gunicorn's settings (``app/gunicorn.conf.py``) read: ``(name, default, meaning)``.
GUNICORN_ENV = (
    ("TOOLWIRE_BIND", "127.0.0.1:8000", "gunicorn's listen address"),
    ("WEB_CONCURRENCY", "2", "gunicorn worker processes (at least 1)"),
    ("TOOLWIRE_GRACEFUL_TIMEOUT", "300", "seconds running streams get to finish on shutdown (or reload); those "
                                         "still open 2 s before it end with their error frame"),
    ("TOOLWIRE_WORKER_CONNECTIONS", "10000", "open connections per worker (idle and slow ones included, at least "
                                             "1); the open-files limit is raised to match"),
    ("TOOLWIRE_CONTROL_SOCKET", "unset = off", "a path of this instance's own for gunicorn's control socket "
                                               "(gunicorn's default, one path per user, would be shared by every "
                                               "instance)"),
    ("PROMETHEUS_MULTIPROC_DIR", "a fresh temporary directory", "where the workers keep their metrics "
                                                                "(made if missing, emptied at start)"),
)

_INTRO = f"""\
# Configuration reference

<!-- Generated from app/settings.py and app/upstream_settings.py by `toolwire config --describe`; edit the settings, not this file. -->

Every setting is an environment variable, `{ENV_PREFIX}` + its name in upper case, or the same name in lower
case in a TOML file named by `{CONFIG_FILE_ENV}` (the environment wins); an app that mounts toolwire may
also set them as `{ENV_PREFIX}…` keys of its Flask `app.config`. `toolwire config` prints the effective
values, secrets masked, and where each came from.

```toml
upstream_url = "http://127.0.0.1:11434/v1"
heartbeat_seconds = 5

[model_map]
"gpt-4o" = "qwen2.5:7b"
"qwen3" = {{ model = "qwen3:32b", tool_mode = "native" }}
"coder" = {{ model = "qwen3-coder", upstream = "vllm" }}

[upstreams.vllm]
kind = "openai"
url = "http://10.0.0.5:8000/v1"
```
"""


def render_reference() -> str:
    """The Markdown text of ``docs/configuration.md``."""
    parts = [_INTRO]
    for section in SECTIONS:
        parts.append(_section(section))
    parts.append(_model_routes())
    parts.append(_keys("Example exchange", "A `model_map` object's `example_exchange` (prompt mode; see "
                       "[backends.md](backends.md#teaching-small-models)) has these keys:", ExampleExchange))
    parts.append(_named_upstreams())
    parts.append(_formats_by_model_name())
    parts.append(_gunicorn())
    return "\n".join(parts)


def write_reference(path: Path) -> None:
    """Write :func:`render_reference` to ``path``."""
    path.write_text(render_reference(), encoding="utf-8")


def _section(section: type[BaseModel]) -> str:
    title, _, rest = (section.__doc__ or "").partition(": ")
    lines = [f"## {title}", "", rest.strip()[:1].upper() + rest.strip()[1:], ""]
    lines += [_setting(name, field, f"{ENV_PREFIX}{name.upper()}") for name, field in section.model_fields.items()]
    return "\n".join(lines) + "\n"


def _model_routes() -> str:
    return _keys("Per-model settings", "A `model_map` value is the back-end model's name, or an object with any of "
                 "these keys (unset keys take the setting of the same name):", ModelRoute)


def _keys(title: str, intro: str, model: type[BaseModel]) -> str:
    """A section listing an object's keys (no environment variables of their own)."""
    lines = [f"## {title}", "", intro, ""]
    lines += [_setting(name, field) for name, field in model.model_fields.items()]
    return "\n".join(lines) + "\n"


def _named_upstreams() -> str:
    return _keys("Named back ends", f"The back end the Back end section describes is named `{DEFAULT_UPSTREAM}` "
                 "and serves every model not routed elsewhere. Each entry of `upstreams` (`[upstreams.NAME]` in the file) is one more, "
                 "serving the `model_map` entries whose `upstream` names it (or lists it: a pool, see "
                 "[deploying.md](deploying.md#several-toolwire-hosts-in-front-of-several-model-servers)) and the names in its `models` (see "
                 "[backends.md](backends.md#several-back-ends)). Its keys (unset keys take the top-level setting "
                 "named, checked as that setting is):",
                 NamedUpstream)


def _formats_by_model_name() -> str:
    lines = ["## Formats by model name", "",
             "`tool_format = auto` teaches the format that claims the back-end model's name: the name, in lower "
             "case and with letters and digits only, holds one of the format's fragments (`gemma-3` is found in "
             "`gemma3:270m`); the longest fragment found wins; none found: `tool_call`. A registered format "
             "claims names through its `model_names`.", "",
             "| format | model names |", "|---|---|"]
    for name in registered_formats():
        fragments = get_format(name).model_names
        if fragments:
            lines.append(f"| `{name}` | {', '.join(f'`{fragment}`' for fragment in fragments)} |")
    return "\n".join(lines) + "\n"


def _gunicorn() -> str:
    lines = ["## Read by gunicorn's settings", "",
             "`toolwire serve` (and the checkout's `gunicorn.conf.py`) read these from the environment only:", ""]
    lines += [f"- **`{name}`** (default {default}): {meaning}." for name, default, meaning in GUNICORN_ENV]
    return "\n".join(lines) + "\n"


def _setting(name: str, field: FieldInfo, env: str | None = None) -> str:
    where = f"`{env}`, " if env else ""
    return (f"- **`{name}`** ({where}{_type_name(field.annotation)}, default {_default(field)}): "
            f"{field.description}.")


def _type_name(annotation: Any) -> str:
    """A reader's name for a field's type: ``one of a, b``, ``number``, ``secret``…"""
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{arg}`" for arg in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(arg) for arg in args)
    if origin is dict:
        return "object"
    if origin is list:
        return "list of " + _type_name(args[0])
    names = {bool: "true/false", int: "integer", float: "number", str: "text", SecretStr: "secret", Path: "path",
             ModelRoute: "object", NamedUpstream: "object", ExampleExchange: "object"}
    return names[annotation]


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "none (required)"
    if field.default_factory is not None:
        return f"`{field.default_factory()}`"  # type: ignore[call-arg]  # factories here take no arguments
    value = field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1024 ** 2 and value % 1024 ** 2 == 0:
        return f"{value // 1024 ** 2} MiB" if value < 1024 ** 3 else f"{value // 1024 ** 3} GiB"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    days = f" ({value // _DAY} days)" if isinstance(value, int) and value > _DAY and value % _DAY == 0 else ""
    return f"`{value}`{days}"


_DAY = 24 * 3600
