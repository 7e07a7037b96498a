"""The core's measures, read from its source with ``ast`` (issue 26): small functions, states that are enums,
and readers that report a :class:`~statemachine._scanning.Stop`, never a status string."""

from __future__ import annotations

import ast
import pathlib
from typing import Iterator

import pytest

CORE = pathlib.Path(__file__).resolve().parents[2] / "statemachine"
LONGEST_FUNCTION = 40  # lines, its decorators and docstring included
STATE_NAMES = frozenset({"state", "mode", "phase"})  # also with leading underscores: ``_mode``, ``_phase``

#: Settings compared with their wire values, not states a reader moves between: the request's ``tool_choice``
#: mode (``….tool_choice.mode`` anywhere) and the policy's action for a schema mismatch are strings by the public
#: API's contract (``Literal``).
SETTINGS = {
    ("_config.py", "mode"), ("_config.py", "self.mode"),  # ToolChoice's own field
    ("_calls.py", "mode"),  # policy.strict_mismatch or policy.schema_mismatch
}


def _sources() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(CORE.rglob("*.py")):
        name = path.relative_to(CORE).as_posix()
        yield name, ast.parse(path.read_text(), filename=name)


def long_functions(tree: ast.Module) -> dict[str, int]:
    """Every function or method over ``LONGEST_FUNCTION`` lines, with its length."""
    return {node.name: node.end_lineno - node.lineno + 1 for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > LONGEST_FUNCTION}


def _is_state(node: ast.expr, module: str) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    if name.lstrip("_") not in STATE_NAMES:
        return False
    text = ast.unparse(node)
    return not text.endswith("tool_choice.mode") and (module, text) not in SETTINGS


def _is_text(node: ast.expr | None) -> bool:
    """A string, or a tuple, list or set of strings."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(map(_is_text, node.elts))
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def string_states(tree: ast.Module, module: str = "") -> list[int]:
    """The lines that compare a state, mode or phase with a string, or set one to a string (``module``'s
    ``SETTINGS`` aside)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_state(side, module) for side in sides) and any(map(_is_text, sides)):
                lines.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if _is_text(node.value) and any(_is_state(target, module) for target in targets):
                lines.append(node.lineno)
    return lines


def partial_strings(tree: ast.Module) -> list[int]:
    """The lines that return or compare the string ``"partial"`` (a status string; ``Stop.PARTIAL`` says it, and
    ``Pending.PARTIAL`` a bare start's)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Return, ast.Compare)):
            if any(isinstance(n, ast.Constant) and n.value == "partial" for n in ast.walk(node)):
                lines.append(node.lineno)
    return lines


def test_no_function_of_the_core_is_over_40_lines():
    assert {name: found for name, tree in _sources() if (found := long_functions(tree))} == {}


def test_no_state_of_the_core_is_a_string():
    assert {name: found for name, tree in _sources() if (found := string_states(tree, name))} == {}


def test_no_reader_of_the_core_returns_a_status_string():
    assert {name: found for name, tree in _sources() if (found := partial_strings(tree))} == {}


# The measures themselves: each finds what it is about.

LONG = "def long():\n" + "    x = 1\n" * 40
SHORT = "def short():\n" + "    x = 1\n" * 39


@pytest.mark.parametrize("source,found", [
    (LONG, {"long": 41}),
    (SHORT, {}),
    ("class Body:\n    def feed(self):\n" + "        pass\n" * 40, {"feed": 41}),
])
def test_a_function_over_40_lines_is_found(source, found):
    assert long_functions(ast.parse(source)) == found


@pytest.mark.parametrize("source,found", [
    ('if self.state == "body":\n    pass', [1]),
    ('if "args" != self._mode:\n    pass', [1]),
    ('while phase in ("a", "b") or x:\n    pass', [1]),
    ('self._phase = "rest"', [1]),
    ('state: str = "key"', [1]),
    ("if self.state is READING:\n    pass", []),
    ('self.kind = "custom"', []),
    ('if self.state == State.BODY and name == "x":\n    pass', []),
    ('if config.tool_choice.mode == "none":\n    pass', []),  # a setting
    ('if mode == "emit":\n    pass', [1]),  # a setting only in the module SETTINGS names
])
def test_a_string_state_is_found(source, found):
    assert string_states(ast.parse(source)) == found


@pytest.mark.parametrize("source,found", [
    ('def start():\n    return "partial"', [2]),
    ('def start():\n    return None if x else "partial"', [2]),
    ('if body == "partial":\n    pass', [1]),
    ("def start():\n    return Stop.PARTIAL", []),
    ("def bare_start():\n    return Pending.PARTIAL", []),
    ('class Stop(enum.Enum):\n    PARTIAL = "partial"', []),
])
def test_a_status_string_is_found(source, found):
    assert partial_strings(ast.parse(source)) == found
