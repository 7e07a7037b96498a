"""``toolwire serve`` from a non-editable install: no checkout, no gunicorn.conf.py in the working directory."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from support.server import PROJECT_ROOT, run_toolwire

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """toolwire installed as a user gets it (a built wheel, not editable) into a directory of its own.

    Built from a copy of the sources, so the build leaves nothing in the checkout.
    """
    source, target = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("site")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(PROJECT_ROOT / name, source)
    for package in ("app", "statemachine"):
        shutil.copytree(PROJECT_ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                           str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    yield target


def test_toolwire_serve_runs_from_an_installed_copy(installed: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(installed), "TOOLWIRE_RESPONSE_STORE_PATH": ""}
    where = subprocess.run([sys.executable, "-c", "import app; print(app.__file__)"], cwd=tmp_path,
                           env={**env, "PATH": ""}, capture_output=True, text=True, timeout=60)
    assert where.stdout.strip() == str(installed / "app" / "__init__.py"), where.stderr
    assert (installed / "app" / "gunicorn.conf.py").is_file()

    with run_toolwire(env, launcher=[sys.executable, "-m", "app.cli", "serve"], cwd=tmp_path) as server:
        response = httpx.post(server.v1_url + "/chat/completions", timeout=10, json={
            "model": "toolwire-demo", "messages": [{"role": "user", "content": "Hello there"}]})
        assert response.status_code == 200
        assert response.json()["choices"][0]["message"]["content"]
        assert "Using worker: ToolwireWorker" in server.log()
