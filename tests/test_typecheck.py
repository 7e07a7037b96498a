"""The types are checked: mypy, with pydantic's plugin (``[tool.mypy]`` in pyproject.toml), finds nothing in app/."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_error_in_app():
    done = subprocess.run([sys.executable, "-m", "mypy", "app"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert done.stdout.startswith("Success: no issues found")


def test_app_ships_its_types():
    """``py.typed`` is in the package and in its package data, so a host type-checks against toolwire's types."""
    assert (ROOT / "app" / "py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["app"]
