"""Real coding agents for end-to-end tests: pinned npm packages installed once into a cache outside the repo.

``npm_tool(package, version, binary)`` returns the path of the package's
executable, installing ``package@version`` with ``npm install`` into
``~/.cache/toolwire/npm/<package>-<version>`` (``TOOLWIRE_NPM_CACHE``
overrides the root) the first time; ``codex_cli()`` is the pinned Codex CLI,
the same install the Codex back-end tests use (``support.codex_binary``). A
missing ``npm`` is a loud skip; any other install failure is an error, so CI
(which has npm) must install.

The configuration writers give each agent exactly one custom model provider
pointing at toolwire's ``/v1`` and the switches that keep it offline (no
update check, no analytics, no plugin or model-list fetches): nothing that
changes which tools it offers.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support.codex_binary import CACHE_ROOT, INSTALL_TIMEOUT, ensure_codex
from support.server import run_to_end

#: Longest one agent run may take (its whole process group is killed after it).
AGENT_TIMEOUT = 120.0
#: The ``time_limit`` mark of an agent test (tests/e2e/conftest.py): two agent runs and their installs.
AGENT_TIME_LIMIT = 2 * AGENT_TIMEOUT + 60
OPENCODE = ("opencode-ai", "1.18.33", "opencode")
#: The Vercel AI SDK and its OpenAI-compatible provider (what OpenCode builds on), for scripts run with node.
AI_SDK = (("ai", "7.0.173"), ("@ai-sdk/openai-compatible", "3.0.92"))
#: Ollama's own JavaScript library (``ollama`` on npm), for scripts run with node against the Ollama surface.
OLLAMA_JS = (("ollama", "0.6.4"),)
#: Claude Code at the version whose requests were measured (README, Claude Code); its native binary comes with it.
CLAUDE_CODE = ("@anthropic-ai/claude-code", "2.1.332", "claude")
#: Gemini CLI, and Google's GenAI SDK for scripts run with node.
GEMINI_CLI = ("@google/gemini-cli", "0.61.0", "gemini")
GENAI_SDK = (("@google/genai", "3.1.0"),)


def codex_cli() -> Path:
    """The pinned Codex CLI's launcher."""
    launcher, why = ensure_codex()
    if launcher is None:
        pytest.skip(f"SKIPPED LOUDLY: {why} for the real-agent test (CI has npm and runs it)")
    return launcher


def npm_tool(package: str, version: str, binary: str) -> Path:
    """The executable ``binary`` of ``package@version``, installed into the cache on first use."""
    prefix = CACHE_ROOT / f"{package.replace('/', '+')}-{version}"
    executable = prefix / "node_modules" / ".bin" / binary
    _npm_install(prefix, [f"{package}@{version}"], executable)
    return executable


def npm_library(*packages: tuple[str, str]) -> Path:
    """A cache directory whose ``node_modules`` holds each ``(package, version)``, installed on first use.

    A script written into it imports them as a program of that directory would (ES modules resolve there).
    """
    prefix = CACHE_ROOT / "+".join(f"{name.replace('/', '+')}-{version}" for name, version in packages)
    last = packages[-1][0]
    _npm_install(prefix, [f"{name}@{version}" for name, version in packages],
                 prefix / "node_modules" / last / "package.json")
    return prefix


def _npm_install(prefix: Path, specs: list[str], marker: Path) -> None:
    """``npm install specs`` into ``prefix`` unless ``marker`` exists (once across parallel test processes)."""
    if marker.exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"SKIPPED LOUDLY: npm is not installed, so {' '.join(specs)} cannot be installed "
                    "for the real-client test (CI has npm and runs it)")
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            result = subprocess.run(
                [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error", *specs],
                capture_output=True, text=True, timeout=INSTALL_TIMEOUT, stdin=subprocess.DEVNULL)
            if result.returncode != 0 or not marker.exists():
                raise RuntimeError(f"npm install {' '.join(specs)} failed ({result.returncode}):\n"
                                   f"{result.stderr[-4000:]}")


def run_agent(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run an agent in its own process group; past ``AGENT_TIMEOUT`` kill the whole group and fail with its output."""
    return run_to_end(command, cwd=cwd, env=env, timeout=AGENT_TIMEOUT)


def claude_code_env(home: Path, base_url: str, api_key: str) -> dict[str, str]:
    """Claude Code's environment against toolwire, offline and quiet (the README's, and the measured doc's):
    toolwire's root as ``ANTHROPIC_BASE_URL``, a client key sent as ``x-api-key``, no non-essential traffic
    (telemetry, error reports, update checks), and ``IS_SANDBOX=1`` so that a test running as root may skip
    permission prompts. ``home`` holds its configuration; nothing of the runner's environment leaks in."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TERM")}
    env.update(HOME=str(home), CLAUDE_CONFIG_DIR=str(home / ".claude"), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_CACHE_HOME=str(home / ".cache"), XDG_DATA_HOME=str(home / ".local/share"),
               XDG_STATE_HOME=str(home / ".local/state"), ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY=api_key,
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1", DISABLE_ERROR_REPORTING="1",
               DISABLE_TELEMETRY="1", CLAUDE_CODE_MAX_RETRIES="0", IS_SANDBOX="1",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    return env


#: The end of a Codex ``config.toml``: no update checks, analytics, feedback or plugins.
CODEX_OFFLINE = """\
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
"""


def codex_config(base_url: str) -> str:
    """A ``config.toml``: toolwire as the model provider over the Responses API, and the offline switches."""
    return f"""\
model_provider = "toolwire"
{CODEX_OFFLINE}
[model_providers.toolwire]
name = "toolwire"
base_url = "{base_url}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
"""


def opencode_config(base_url: str, model: str, *more: str) -> str:
    """An ``opencode.json``: toolwire as an ``@ai-sdk/openai-compatible`` provider (Chat Completions) offering
    ``model`` (the default) and the ``more`` models (``-m toolwire/NAME`` picks one)."""
    return json.dumps({
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"toolwire/{model}",
        "small_model": f"toolwire/{model}",
        "provider": {
            "toolwire": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "toolwire",
                "options": {"baseURL": base_url},
                "models": {name: {"name": name, "tool_call": True} for name in (model, *more)},
            },
        },
    }, indent=2)


def agent_env(home: Path, **extra: str) -> dict[str, str]:
    """A clean environment: no provider keys or proxies of the test runner leak into the agent."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(HOME=str(home), **extra)
    return env


def gemini_cli_env(home: Path, base_url: str, api_key: str, model: str) -> dict[str, str]:
    """Gemini CLI's environment and ``~/.gemini/settings.json``: toolwire as its Gemini API
    (``GOOGLE_GEMINI_BASE_URL``, the key as ``GEMINI_API_KEY``), telemetry, usage statistics, update checks and
    folder trust off, ``model`` its model."""
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
                "telemetry": {"enabled": False}, "privacy": {"usageStatisticsEnabled": False},
                "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
                "model": {"name": model}}
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    return agent_env(home, GEMINI_API_KEY=api_key, GOOGLE_GEMINI_BASE_URL=base_url, GEMINI_CLI_TRUST_WORKSPACE="true",
                     NO_COLOR="1", CI="1")


def codex_home(workdir: Path, base_url: str) -> tuple[Path, Path]:
    """``home`` (with ``.codex/config.toml``) and an empty ``project`` directory to run Codex in."""
    home, project = workdir / "home", workdir / "project"
    (home / ".codex").mkdir(parents=True)
    project.mkdir()
    (home / ".codex" / "config.toml").write_text(codex_config(base_url))
    return home, project


def opencode_run(workdir: Path, base_url: str, prompt: str, *options: str,
                 models: tuple[str, ...] = ("scripted-model",)) -> subprocess.CompletedProcess[str]:
    """``opencode run --format json`` in ``workdir/project`` (made here, with a home beside it), offline, with
    toolwire at ``base_url`` as its one provider, offering ``models`` (the first the default)."""
    home, project = workdir / "home", workdir / "project"
    home.mkdir(exist_ok=True)
    project.mkdir(exist_ok=True)
    config = workdir / "opencode.json"
    config.write_text(opencode_config(base_url, *models))
    command = [str(npm_tool(*OPENCODE)), "run", "--format", "json", *options, "--title", "e2e", prompt]
    return run_agent(command, project, agent_env(
        home, OPENCODE_CONFIG=str(config), OPENCODE_DISABLE_AUTOUPDATE="1", OPENCODE_DISABLE_MODELS_FETCH="1",
        OPENCODE_DISABLE_LSP_DOWNLOAD="1", OPENCODE_DISABLE_DEFAULT_PLUGINS="1"))
