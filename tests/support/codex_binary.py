"""The real Codex CLI for e2e tests, installed from npm at the pinned version into a cache directory.

``ensure_codex()`` returns the npm launcher (``node_modules/.bin/codex``), installing
``@openai/codex@<CODEX_VERSION>`` into ``~/.cache/toolwire/npm/@openai+codex-<version>`` first if needed
(about 400 MB, ~30 s once; the same layout and ``TOOLWIRE_NPM_CACHE`` override as the real-agent tests, so
both share one install). It returns ``None`` with the reason only when ``npm`` itself is missing; an install
that fails is an error, so CI cannot pass without the binary.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

from app.upstreams.codex.home import CODEX_VERSION

CACHE_ROOT = Path(os.environ.get("TOOLWIRE_NPM_CACHE") or Path.home() / ".cache" / "toolwire" / "npm")
INSTALL_TIMEOUT = 600


def ensure_codex() -> tuple[Path | None, str]:
    """``(launcher path, "")``, or ``(None, why)`` when npm is not installed."""
    npm = shutil.which("npm")
    if npm is None:
        return None, "npm is not installed, so the pinned Codex CLI cannot be installed"
    prefix = CACHE_ROOT / f"@openai+codex-{CODEX_VERSION}"
    launcher = prefix / "node_modules" / ".bin" / "codex"
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test processes install once
        if not _works(launcher):
            subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix),
                            f"@openai/codex@{CODEX_VERSION}"], check=True, timeout=INSTALL_TIMEOUT,
                           stdout=subprocess.DEVNULL)
            if not _works(launcher):
                raise RuntimeError(f"npm installed @openai/codex@{CODEX_VERSION} but {launcher} does not run")
    return launcher, ""


def _works(launcher: Path) -> bool:
    if not launcher.exists():
        return False
    try:
        done = subprocess.run([str(launcher), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and CODEX_VERSION in done.stdout
