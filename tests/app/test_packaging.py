"""Packaging hygiene: the ``statemachine`` name clash is refused at import; the CLI stops quietly on a closed pipe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def python(code: str, *, first_on_path: Path | None = None, stdout: int | None = subprocess.PIPE,
           cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter on the checkout (``first_on_path`` ahead of it)."""
    path = [str(first_on_path)] if first_on_path else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, str(ROOT)])}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=60)


def test_the_core_is_toolwires():
    done = python("import app, statemachine; print(statemachine.__file__)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(ROOT / "statemachine" / "__init__.py")


def test_python_statemachine_installed_beside_the_core_is_refused_naming_it_and_the_fix(tmp_path):
    """A site directory holding toolwire's core and python-statemachine's metadata, as pip leaves it."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "statemachine").symlink_to(ROOT / "statemachine")
    dist = site / "python_statemachine-2.5.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: python-statemachine\nVersion: 2.5.0\n")
    done = python("import app", first_on_path=site, cwd=tmp_path)
    assert done.returncode == 1
    assert ("ImportError: toolwire cannot start: the PyPI package 'python-statemachine' (2.5.0) is installed in "
            f"{site}") in done.stderr
    assert "'pip uninstall python-statemachine'" in done.stderr


def test_another_statemachine_package_first_on_the_path_is_refused(tmp_path):
    (tmp_path / "statemachine").mkdir()
    (tmp_path / "statemachine" / "__init__.py").write_text("class StateMachine:\n    pass\n")
    done = python("import app", first_on_path=tmp_path, cwd=tmp_path)
    assert done.returncode == 1
    assert f"imported from {tmp_path / 'statemachine' / '__init__.py'} is not toolwire's parsing core" in done.stderr


def test_cli_output_into_a_closed_pipe_ends_quietly():
    """``toolwire config | head -1``: the reader is gone before the first write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = python("import sys; from app.cli import main; sys.exit(main(['config']))", stdout=write_end)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, "")
