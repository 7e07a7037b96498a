"""Debian packages the tests need (redis-server, golang-go, nginx-light, nodejs): found on PATH, or installed
with ``apt-get`` when missing and this machine can (root), never with a service started by the install."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

APT_TIMEOUT = 600
POLICY_RC = Path("/usr/sbin/policy-rc.d")
#: Where Debian puts binaries a non-root PATH may lack (nginx).
_SBIN = ("/usr/sbin", "/sbin")


def debian_binary(binary: str, package: str) -> tuple[str | None, str]:
    """``(path, "")`` of ``binary``, installed first from Debian's ``package`` when missing;
    ``(None, why)`` where it cannot be had."""
    found = _which(binary)
    if found:
        return found, ""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None, (f"{binary} is not installed and cannot be installed here (needs root and apt-get: "
                      f"run `apt-get install {package}` or `make test` as root)")
    error = apt_install(package)
    found = _which(binary)
    return (found, "") if found else (None, f"installing {package} with apt-get failed: {error or 'no ' + binary}")


def _which(binary: str) -> str | None:
    return shutil.which(binary) or shutil.which(binary, path=os.pathsep.join(_SBIN))


def apt_install(package: str) -> str:
    """``apt-get update`` then ``apt-get install -y package``, with no service started by the install
    (a ``policy-rc.d`` that refuses is put in place for the install when there is none). The error, or ``""``."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    placed_policy = not POLICY_RC.exists()
    if placed_policy:
        POLICY_RC.write_text("#!/bin/sh\n# toolwire tests: no service starts during this install\nexit 101\n")
        POLICY_RC.chmod(0o755)
    try:
        for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", package]):
            result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=APT_TIMEOUT)
            if result.returncode != 0:
                return f"{' '.join(command)} exited {result.returncode}: {result.stderr.strip()[-500:]}"
        return ""
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    finally:
        if placed_policy:
            POLICY_RC.unlink(missing_ok=True)
