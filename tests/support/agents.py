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
import signal
import subprocess
from pathlib import Path

import pytest

from support.codex_binary import CACHE_ROOT, INSTALL_TIMEOUT, ensure_codex

#: Longest one agent run may take (its whole process group is killed after it).
AGENT_TIMEOUT = 120.0
OPENCODE = ("opencode-ai", "1.18.33", "opencode")
#: Claude Code at the version whose requests were measured (README, Claude Code); its native binary comes with it.
CLAUDE_CODE = ("@anthropic-ai/claude-code", "2.1.332", "claude")


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
    if executable.exists():
        return executable
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"SKIPPED LOUDLY: npm is not installed, so {package}@{version} cannot be installed "
                    "for the real-agent test (CI has npm and runs it)")
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test processes install once
        if not executable.exists():
            result = subprocess.run(
                [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error",
                 f"{package}@{version}"],
                capture_output=True, text=True, timeout=INSTALL_TIMEOUT, stdin=subprocess.DEVNULL)
            if result.returncode != 0 or not executable.exists():
                raise RuntimeError(f"npm install {package}@{version} failed ({result.returncode}):\n"
                                   f"{result.stderr[-4000:]}")
    return executable


def run_agent(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run an agent in its own process group; on a timeout kill the whole group and fail with its output."""
    process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=AGENT_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"{command[0]} did not finish in {AGENT_TIMEOUT:.0f} s\n{stdout[-3000:]}\n{stderr[-3000:]}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


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


def codex_config(base_url: str) -> str:
    """A ``config.toml``: toolwire as the model provider over the Responses API, and the offline switches."""
    return f"""\
model_provider = "toolwire"
check_for_update_on_startup = false

[model_providers.toolwire]
name = "toolwire"
base_url = "{base_url}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
"""


def opencode_config(base_url: str, model: str) -> str:
    """An ``opencode.json``: toolwire as an ``@ai-sdk/openai-compatible`` provider (Chat Completions)."""
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
                "models": {model: {"name": model, "tool_call": True}},
            },
        },
    }, indent=2)
