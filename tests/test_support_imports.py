"""Tests share code one way only: ``from support.<module> import …``; never from a conftest or another test."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_tests_import_shared_code_from_support_only():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        inside_support = path.parent.name == "support"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
                relative = node.level > 0
            elif isinstance(node, ast.Import):
                names, relative = [alias.name for alias in node.names], False
            else:
                continue
            for name in names:
                first = name.split(".")[0]
                tail = name.split(".")[-1]
                if first == "tests" or tail == "conftest" or tail.startswith("test_") or (relative and not inside_support):
                    offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}: {'.' * node.level}{name}")
    assert not offenders, "import shared test code from support.<module>:\n" + "\n".join(offenders)
