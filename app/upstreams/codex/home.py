"""toolwire's private Codex home: the config that turns ``codex app-server`` into a plain text model.

Codex's defaults suit an interactive coding agent, not a proxy: stream retries replay text, refused
connections are retried forever, history is compacted behind our back, every thread runs a login
shell, threads stay loaded for 30 minutes, and a TRACE log grows without bound. :func:`write_home`
writes a ``config.toml`` that overrides each of them (every key passes ``--strict-config`` on the
pinned Codex version), a model catalog with a context window so large that Codex never compacts or
truncates history, and links the user's ``auth.json`` in when there is one. The user's own Codex home is
only read. :func:`preflight` has the binary validate the result before any request is served.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: The Codex version toolwire's config and protocol use is verified against.
CODEX_VERSION = "0.169.0"
#: The provider id toolwire's own provider gets in the generated config.
PROVIDER_ID = "toolwire"
#: The environment variable Codex reads the provider key from (set only in the app-server's environment).
PROVIDER_KEY_ENV = "TOOLWIRE_CODEX_PROVIDER_KEY"
#: Large enough that Codex never believes a history does not fit: it must not compact or truncate it.
CONTEXT_WINDOW = 1_000_000_000
PREFLIGHT_TIMEOUT = 30.0

#: ``platform.machine()`` → (npm's platform package suffix, the vendored binary's target triple).
_NPM_PLATFORMS = {"x86_64": ("x64", "x86_64-unknown-linux-musl"), "aarch64": ("arm64", "aarch64-unknown-linux-musl"),
                  "arm64": ("arm64", "aarch64-unknown-linux-musl")}


class CodexSetupError(RuntimeError):
    """The Codex binary is missing, or it refused toolwire's generated config."""


@dataclass(frozen=True, slots=True)
class CodexHome:
    """A generated private Codex home.

    Fields:
        path: the directory (``CODEX_HOME`` of the app-servers).
        models: the catalog's model slugs, in order.
    """

    path: Path
    models: tuple[str, ...]

    def state_dir(self, tag: str) -> Path:
        """The disposable state and TRACE-log directory (``sqlite_home``) of the app-server ``tag``."""
        return self.path / f"sqlite-{tag}"


def resolve_command(command: str) -> str:
    """The executable to run for ``command``: the native binary when ``command`` is npm's node launcher.

    The launcher (``node_modules/.bin/codex`` → ``@openai/codex/bin/codex.js``) only execs the native binary
    that npm installed beside it; spawning that directly saves a node process per app-server.

    Raises:
        CodexSetupError: ``command`` is neither a path nor on ``PATH``.
    """
    found = shutil.which(command)
    if found is None:
        raise CodexSetupError(
            f"The Codex binary {command!r} was not found. Install it (npm install -g @openai/codex@{CODEX_VERSION}) "
            "or point TOOLWIRE_CODEX_COMMAND at it.")
    real = Path(found).resolve()
    npm_platform = _NPM_PLATFORMS.get(platform.machine())
    if real.suffix == ".js" and npm_platform is not None:
        arch, triple = npm_platform
        native = real.parent.parent.parent / f"codex-linux-{arch}" / "vendor" / triple / "bin" / "codex"
        if native.is_file() and os.access(native, os.X_OK):
            return str(native)
    return found


def write_home(path: Path, *, models: list[str], provider_url: str | None, provider_key: bool,
               user_home: Path) -> CodexHome:
    """Write the private Codex home at ``path`` (created or overwritten) and return it.

    Args:
        path: the private home directory.
        models: model slugs for the catalog (the first is the default model); at least one.
        provider_url: a Responses-API base URL (``…/v1``) for Codex to use instead of the user's login.
        provider_key: whether the provider gets a key (from :data:`PROVIDER_KEY_ENV`).
        user_home: the user's Codex home; its ``auth.json`` is linked in (never written) when present.
    """
    path.mkdir(parents=True, exist_ok=True)
    catalog = path / "models.json"
    catalog.write_text(json.dumps({"models": [_catalog_entry(slug, i) for i, slug in enumerate(models)]}))
    (path / "config.toml").write_text(_config_toml(models[0], catalog, path / "sqlite", provider_url,
                                                         provider_key))
    auth, link = user_home / "auth.json", path / "auth.json"
    if link.is_symlink() or link.exists():
        link.unlink()
    if provider_url is None and auth.is_file():
        link.symlink_to(auth)
    return CodexHome(path, tuple(models))


def preflight(executable: str, home: CodexHome) -> str:
    """Have the binary validate the generated config (``--strict-config --print-startup-config``).

    Returns:
        The binary's version line (``codex-cli 0.169.0``), for the caller to compare with :data:`CODEX_VERSION`.
    Raises:
        CodexSetupError: the binary does not run, or refuses the config (its message is quoted).
    """
    version = _run(executable, ["--version"], home).stdout.strip()
    done = _run(executable, ["app-server", "--strict-config", "--print-startup-config"], home)
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip()[-2000:]
        raise CodexSetupError(f"Codex refused toolwire's generated config in {home.path} "
                              f"(exit {done.returncode}): {detail}")
    return version


def _run(executable: str, args: list[str], home: CodexHome) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([executable, *args], env=app_server_env(home.path, None), capture_output=True,
                              text=True, timeout=PREFLIGHT_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CodexSetupError(f"Could not run the Codex binary {executable!r}: {exc}") from None


def app_server_env(home: Path, provider_key: str | None) -> dict[str, str]:
    """The environment of an app-server: toolwire's variables left out, ``CODEX_HOME`` set, the key if any."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWIRE_")}
    env["CODEX_HOME"] = str(home)
    env.pop("RUST_LOG", None)
    if provider_key:
        env[PROVIDER_KEY_ENV] = provider_key
    return env


def _catalog_entry(slug: str, priority: int) -> dict[str, object]:
    """The smallest model entry Codex accepts, with a window it can never fill."""
    return {"slug": slug, "display_name": slug, "description": "served through toolwire",
            "context_window": CONTEXT_WINDOW, "max_context_window": CONTEXT_WINDOW,
            "base_instructions": "", "supported_reasoning_levels": [], "default_reasoning_summary": "none",
            "shell_type": "disabled", "visibility": "list", "supported_in_api": True, "priority": priority + 1,
            "support_verbosity": False, "supports_parallel_tool_calls": False, "input_modalities": ["text"],
            "truncation_policy": {"mode": "tokens", "limit": CONTEXT_WINDOW},
            "experimental_supported_tools": []}


def toml_string(value: str) -> str:
    """``value`` as a TOML basic string (a JSON string is one), for config files and ``-c key=value``."""
    return json.dumps(value)


def _config_toml(model: str, catalog: Path, sqlite_home: Path, provider_url: str | None,
                 provider_key: bool) -> str:
    lines = [
        "# Generated by toolwire for its own app-servers; rewritten at every start. Do not edit.",
        f"model = {toml_string(model)}",
        f"model_catalog_json = {toml_string(str(catalog))}",
        'approval_policy = "never"',
        'sandbox_mode = "read-only"',
        "check_for_update_on_startup = false",
        'web_search = "disabled"',
        # No text of Codex's own in the prompt: toolwire's system prompt is the whole of it.
        "include_environment_context = false",
        "include_permissions_instructions = false",
        "include_apps_instructions = false",
        "include_collaboration_mode_instructions = false",
        "project_doc_max_bytes = 0",
        "allow_login_shell = false",
        "thread_unload_delay_secs = 0",  # an unsubscribed thread is freed at once (default: 30 min)
        f"sqlite_home = {toml_string(str(sqlite_home))}",  # the TRACE log: disposable, replaced on recycle
        "",
        "[analytics]", "enabled = false",
        "[history]", 'persistence = "none"',
        "[feedback]", "enabled = false",
        "[skills]", "include_instructions = false",
        "[agents]", "enabled = false",
        "[features]",
        "shell_tool = false", "unified_exec = false", "goals = false", "view_image = false",
        "plugins = false",  # also stops network lookups at startup
        "apps = false", "memories = false", "image_generation = false", "hooks = false", "tool_suggest = false",
        "shell_snapshot = false",  # else every thread/start runs a login shell
        "unbounded_connection_retries = false",  # else a refused connection is retried forever
        "[tools.experimental_request_user_input]", "enabled = false",
    ]
    if provider_url is not None:
        lines[1:1] = [f'model_provider = "{PROVIDER_ID}"']
        lines += [
            f"[model_providers.{PROVIDER_ID}]",
            'name = "toolwire provider"',
            f"base_url = {toml_string(provider_url.rstrip('/'))}",
            'wire_api = "responses"',
            "request_max_retries = 0",
            "stream_max_retries = 0",  # a retried stream replays the text already forwarded
            "stream_idle_timeout_ms = 300000",
        ]
        if provider_key:  # Codex then sends "Authorization: Bearer <key>"; without one, no header
            lines.append(f'env_key = "{PROVIDER_KEY_ENV}"')
    return "\n".join(lines) + "\n"
