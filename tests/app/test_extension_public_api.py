"""The ``app`` package's public API: what ``__all__`` names, and README examples that need nothing deeper."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import app

README = Path(__file__).resolve().parents[2] / "README.md"
PUBLIC = {"Settings", "SettingsError", "Toolwire", "create_app", "create_debug_blueprint", "create_ops_blueprint"}


def test_all_names_the_public_api_and_nothing_else():
    assert set(app.__all__) == PUBLIC
    assert all(getattr(app, name).__module__.startswith("app") for name in app.__all__)
    assert all(getattr(app, name).__doc__ for name in app.__all__)


def _python_examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_examples_import_only_the_public_api():
    examples = _python_examples()
    assert examples  # the mounting example at least
    for example in examples:
        for node in ast.walk(ast.parse(example)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "app":
                assert node.module == "app", f"deep import in the README: from {node.module} import …"
                assert {alias.name for alias in node.names} <= PUBLIC
            if isinstance(node, ast.Import):
                assert not any(alias.name.startswith("app.") for alias in node.names)


def test_the_readme_mounting_example_runs():
    """Two mounts and the ops routes, as the README writes them (no request reaches a back end)."""
    for example in _python_examples():
        if "Toolwire(" in example:
            scope: dict = {"__name__": "readme_example"}
            exec(compile(example, "README.md", "exec"), scope)  # noqa: S102 - our own README
            host = scope["host"]
            client = host.test_client()
            assert client.get("/healthz").status_code == 200
            assert set(host.extensions["toolwire"]) == {"llm", "cloud"}
            assert client.post("/cloud/v1/chat/completions", json={"model": "m"}).get_json()["error"]["param"] \
                == "messages"
            return
    raise AssertionError("no mounting example in the README")
