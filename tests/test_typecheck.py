"""The type checker runs with the tests: the core's protocols (CallSink, BodyReader) are checked, not prose.

Each entry of ``CHECKS`` is one package and the mypy flags it must pass with no error.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: package -> mypy arguments.
CHECKS = {
    "statemachine": ["--strict"],
}


@pytest.mark.parametrize("package", sorted(CHECKS))
def test_the_package_type_checks_clean(package):
    done = subprocess.run([sys.executable, "-m", "mypy", *CHECKS[package], package], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


def test_the_core_ships_its_types():
    assert (ROOT / "statemachine" / "py.typed").is_file()
