"""Build the Codex upstream from the settings: find the binary, write and check the private home."""

from __future__ import annotations

import atexit
import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ...profile import upstream_models
from .appserver import AppServer, AppServerError, AppServerGone
from .home import CODEX_VERSION, CodexSetupError, app_server_env, preflight, resolve_command, write_home
from .upstream import START_TIMEOUT, CodexUpstream

if TYPE_CHECKING:
    from ...settings import Settings

log = logging.getLogger("toolwire.upstreams.codex")

_BOOTSTRAP_CONFIG = "check_for_update_on_startup = false\n[features]\nplugins = false\n"


def make_codex_upstream(settings: "Settings") -> CodexUpstream:
    """The Codex upstream the settings describe, its private home written and validated by the binary.

    The home lives in ``codex_work_dir/<pid>`` (removed when the process exits; homes of processes that
    are gone are swept here). Its model catalog lists the configured models (``model_map`` targets and
    ``default_upstream_model``), or, when none is configured, the models the binary offers on its own.

    Raises:
        CodexSetupError: the binary is missing, or refused the generated config.
    """
    executable = resolve_command(settings.codex_command)
    work_dir = Path(settings.codex_work_dir).expanduser().resolve()
    _sweep(work_dir)
    path = work_dir / str(os.getpid())
    atexit.register(shutil.rmtree, path, True)  # registered first, so it runs after the app-server stops
    configured = [*filter(None, [settings.default_upstream_model]), *sorted(upstream_models(settings))]
    models = list(dict.fromkeys(configured))
    if not models:
        models = builtin_models(executable, path / "bootstrap")
    key = settings.codex_provider_api_key.get_secret_value() if settings.codex_provider_api_key else None
    home = write_home(path, models=models, provider_url=settings.codex_provider_url, provider_key=bool(key),
                      user_home=Path(settings.codex_home).expanduser())
    version = preflight(executable, home)
    if CODEX_VERSION not in version:
        log.warning("Codex %r is not the version toolwire is verified with (%s); its protocol or config keys may "
                    "differ.", version, CODEX_VERSION)
    upstream = CodexUpstream(executable, home, provider_key=key, read_timeout=settings.upstream_read_timeout,
                             rpc_timeout=settings.upstream_connect_timeout,
                             recycle_after=settings.codex_recycle_requests, max_turns=settings.codex_max_turns,
                             max_line_bytes=settings.upstream_max_event_bytes)
    atexit.register(upstream.close)
    return upstream


def builtin_models(executable: str, scratch: Path) -> list[str]:
    """The model slugs the binary offers with no catalog of toolwire's (its own list), default first.

    Raises:
        CodexSetupError: the binary did not start or answer.
    """
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "config.toml").write_text(_BOOTSTRAP_CONFIG)
    try:
        server = AppServer([executable, "app-server"], env=app_server_env(scratch, None), cwd=str(scratch),
                           name="bootstrap")
    except OSError as exc:
        raise CodexSetupError(f"Could not run the Codex binary {executable!r}: {exc}") from None
    try:
        server.initialize(timeout=START_TIMEOUT)
        listed = server.call("model/list", {}, timeout=START_TIMEOUT)
    except (AppServerGone, AppServerError) as exc:
        raise CodexSetupError(f"The Codex binary {executable!r} did not list its models: {exc}. "
                              f"{server.stderr_tail()[-500:]}") from None
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    data = sorted((m for m in (listed or {}).get("data") or () if isinstance(m, dict) and m.get("id")),
                  key=lambda m: not m.get("isDefault"))
    if not data:
        raise CodexSetupError("The Codex binary offers no models; set TOOLWIRE_DEFAULT_UPSTREAM_MODEL.")
    return [str(m["id"]) for m in data]


def _sweep(work_dir: Path) -> None:
    """Remove the homes of processes that no longer run (a worker killed before its exit handlers)."""
    if not work_dir.is_dir():
        return
    for entry in work_dir.iterdir():
        if entry.name.isdigit() and not Path(f"/proc/{entry.name}").exists():
            shutil.rmtree(entry, ignore_errors=True)

