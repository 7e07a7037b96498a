"""The architecture of ``app/`` and the core: import-linter's contracts in ``pyproject.toml`` hold.

No import circle anywhere inside ``app/`` or ``statemachine/`` (``acyclic_siblings``), each
layer of ``app/`` imports only the ones below it (``layers``: HTTP, the endpoints, the
pipeline, back ends, observability, the leaves), the generation path imports no Flask
(``forbidden``), and only the extension imports the Blueprint. Imports made for type
checking count.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the project at ``root`` (its pyproject.toml), without a cache."""
    return subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                           "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True))"],
                          cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True,
                          timeout=120)


def test_the_contracts_are_kept():
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Contracts: 5 kept, 0 broken." in done.stdout


@pytest.mark.parametrize(("module", "line", "broken"), [
    # a circle: the leaf settings module importing the extension, which imports it (for type checking only)
    ("app/settings.py", "if TYPE_CHECKING:\n    from .http import extension", "No import circle inside app/"),
    # the core's old circle: the call book naming the stream that owns it (for type checking only)
    ("statemachine/_calls.py", "if TYPE_CHECKING:\n    from ._choice import ChoiceStream",
     "No import circle inside statemachine/"),
    # against the layering: a back end reaching up into an endpoint package
    ("app/upstreams/base.py", "from ..chat import encoder", "app/ is layered"),
    # the pipeline reading a Flask global, even indirectly (through observability)
    ("app/observability/metrics.py", "from flask import g", "import no web"),
    # the Blueprint imported by anything but the extension
    ("app/http/ops.py", "from . import blueprint", "Only the extension mounts the Blueprint"),
])
def test_a_violating_import_breaks_its_contract(tmp_path, module, line, broken):
    """The same contracts on a copy of the project with one bad import added: the check can fail."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for package in ("app", "statemachine"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    done = lint(tmp_path)
    assert done.returncode == 1, done.stdout[-2000:]
    assert broken in done.stdout.split("Broken contracts", 1)[1]
