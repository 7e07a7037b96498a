"""Settings loaded for a start: from keyword arguments, the environment and the config file, or a Flask app's
config, with any invalid value named in one line (the variable to fix, or the key in the config file)."""

from __future__ import annotations

import os
from typing import Any, Mapping

from pydantic import ValidationError

from .settings import ENV_PREFIX, NESTED, Settings, SettingsError, config_file_path, read_config_file


def load_settings(**values: Any) -> Settings:
    """``Settings(**values)``, any invalid value raised as a :class:`SettingsError` naming its variable.

    Raises:
        SettingsError: a value does not validate, or ``TOOLWIRE_CONFIG_FILE`` names a file that cannot be read.
    """
    try:
        return Settings(**values)
    except ValidationError as exc:
        raise SettingsError(f"invalid settings: {'; '.join(_error_lines(exc))}") from None


def _error_lines(exc: ValidationError) -> list[str]:
    """One ``VARIABLE: message`` per error; a value read from the config file is named as its key there."""
    path = config_file_path()
    in_file = config_file_keys()
    lines = []
    for error in exc.errors():
        field, *inner = error["loc"] or ("?",)
        name = f"{ENV_PREFIX}{str(field).upper()}"
        if name not in {key.upper().split(NESTED, 1)[0] for key in os.environ} and field in in_file:
            name = f"{field} in {path}"
        where = ".".join(str(part) for part in inner)
        message = " ".join(error["msg"].split())  # one line, whatever a validator wrote
        lines.append(f"{name}{f' ({where})' if where else ''}: {message}")
    return lines


def settings_from_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``TOOLWIRE_*`` keys of a Flask ``app.config`` as :class:`Settings` keyword arguments.

    ``TOOLWIRE_UPSTREAM_URL`` → ``upstream_url``; keys that name no setting (``TOOLWIRE_CONFIG_FILE``…)
    are left out.
    """
    fields = Settings.model_fields
    names = ((key, key[len(ENV_PREFIX):].lower()) for key in config if key.startswith(ENV_PREFIX))
    return {name: config[key] for key, name in names if name in fields}


def config_file_keys() -> dict[str, Any]:
    """The values the config file sets, by their keys (none when no file is named or it cannot be read: the
    settings themselves say why)."""
    path = config_file_path()
    try:
        return {} if path is None else read_config_file(path)
    except SettingsError:
        return {}
