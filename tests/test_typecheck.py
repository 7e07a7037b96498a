"""The types are checked: mypy finds nothing in the core (``--strict``) or in app/ (with pydantic's plugin,
``[tool.mypy]`` in pyproject.toml), and both packages ship their types (PEP 561 ``py.typed``)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Each package and the mypy flags it must pass with no error.
CHECKS = {
    "app": [],
    "statemachine": ["--strict"],
}


@pytest.mark.parametrize("package", sorted(CHECKS))
def test_mypy_finds_no_error(package):
    # --no-incremental: a cache left by an earlier run of another checkout state reported errors the code has not
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", *CHECKS[package], package], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert done.stdout.startswith("Success: no issues found")


@pytest.mark.parametrize("package", sorted(CHECKS))
def test_the_package_ships_its_types(package):
    """``py.typed`` is in the package and in its package data, so a host type-checks against toolwire's types."""
    assert (ROOT / package / "py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data[package]
