"""docs/architecture.md shows the machine as the code builds it: its diagram is `toolwire diagram`'s output."""

from __future__ import annotations

import pathlib
import re

from statemachine import diagram

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def test_the_docs_diagram_is_toolwire_diagram_output(tmp_path):
    from app.cli import main

    out = tmp_path / "diagram.mmd"
    assert main(["diagram", "-o", str(out)]) == 0
    blocks = re.findall(r"```mermaid\n(.*?)```", DOC.read_text(), flags=re.S)
    assert blocks == [out.read_text()]


def test_the_docs_callback_table_is_the_table():
    assert diagram.callback_table() in DOC.read_text()
