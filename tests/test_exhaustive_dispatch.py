"""Every full dispatch over the core's ``Event`` union is exhaustive: it names what it ignores and ends in
``typing.assert_never``, so a new kind of event fails mypy at each of them (not a silent default).

Proved on a copy of the project whose ``Event`` union has one member more: mypy reports an error at every
``assert_never`` in ``app/``, and nowhere else, and those are the five full dispatches.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The full dispatches over ``Event``, by module and function.
FULL_DISPATCHES = {
    ("app/chat/encoder.py", "_event_chunks"),  # Chat's stream chunks
    ("app/chat/encoder.py", "add"),  # Chat's answer, not streamed
    ("app/responses/encoder.py", "feed"),
    ("app/messages/encoder.py", "feed"),
    ("app/gemini/encoder.py", "feed"),
    ("app/pipeline/driver.py", "_account"),  # what the usage estimate and the outcomes count
}

NEW_KIND = '''

@dataclass(frozen=True, slots=True)
class SomethingNew:
    """A kind of event no dispatch knows yet."""

    text: str


Event = Union[
    SomethingNew,'''


def assert_never_sites(root: Path) -> dict[tuple[str, int], str]:
    """Each ``assert_never(event)`` call in ``app/`` (a dispatch over the core's events; other unions, such as a
    surface's route kinds, have theirs): its module and line, and the function it is in."""
    sites = {}
    for path in sorted((root / "app").rglob("*.py")):
        module = str(path.relative_to(root))
        for function in ast.walk(ast.parse(path.read_text())):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(function):
                    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "assert_never" \
                            and getattr(node.args[0], "id", None) == "event":
                        sites[module, node.lineno] = function.name
    return sites


def test_a_new_event_kind_fails_mypy_at_every_full_dispatch(tmp_path: Path) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for package in ("app", "statemachine"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    events = tmp_path / "statemachine" / "_events.py"
    source = events.read_text()
    assert source.count("\n\nEvent = Union[") == 1
    events.write_text(source.replace("\n\nEvent = Union[", NEW_KIND))

    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "-p", "app"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    errors = {(module, int(line)) for module, line in re.findall(r"^(app/\S+\.py):(\d+): error:", done.stdout, re.M)}
    sites = assert_never_sites(tmp_path)
    assert errors == set(sites), done.stdout[-4000:]
    assert set((module, function) for (module, _), function in sites.items()) == FULL_DISPATCHES
    assert "SomethingNew" in done.stdout
