"""Every reference the code and tests make into docs/parsing.md and docs/wire-contract.md resolves.

Comments cite ``parsing.md 4.11``, ``case 14`` (section 7's numbered cases), ``wire-contract 3.9`` or
``wire-contract 9 items 21-32``; each such section, case and item must exist in the documents kept in
``docs/``, so a reader can follow every citation from a fresh clone.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("app", "statemachine", "tests", "bench")

PARSING_REF = re.compile(r"parsing\.md,? (?:section |case )?(\d+(?:\.\d+)?)")
WIRE_REF = re.compile(r"wire-contract,? (?:section )?(\d+(?:\.\d+)?)(?:-(\d+\.\d+))?(?:,? items? (\d+)(?:-(\d+))?)?")
CASE_REF = re.compile(r"(?<!seed )\b[Cc]ases? (\d+)\b")
HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", re.MULTILINE)
NUMBERED = re.compile(r"^(\d+)\. ", re.MULTILINE)


def _section_body(text: str, number: str) -> str:
    """The text of top-level section ``number`` (``## N.``) up to the next top-level section."""
    start = re.search(rf"^## {number}\. ", text, re.MULTILINE)
    assert start, f"section {number} is missing"
    end = re.search(r"^## \d+\. ", text[start.end():], re.MULTILINE)
    return text[start.end(): start.end() + end.start() if end else len(text)]


def _doc(name: str) -> tuple[set[str], str]:
    text = (ROOT / "docs" / name).read_text(encoding="utf-8")
    return set(HEADING.findall(text)), text


def _citations(pattern: re.Pattern[str]) -> list[tuple[str, re.Match[str]]]:
    found = []
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == Path(__file__).name:
                continue
            for match in pattern.finditer(path.read_text(encoding="utf-8")):
                found.append((str(path.relative_to(ROOT)), match))
    return found


def test_parsing_sections_cited_exist() -> None:
    sections, _ = _doc("parsing.md")
    cited = _citations(PARSING_REF)
    assert cited, "the pattern no longer finds any citation: the test would pass vacuously"
    missing = [f"{where}: {m.group(0)}" for where, m in cited
               if m.group(1) not in sections and "case" not in m.group(0)]
    assert not missing


def test_cases_cited_exist() -> None:
    _, text = _doc("parsing.md")
    cases = set(NUMBERED.findall(_section_body(text, "7")))
    cited = _citations(CASE_REF)
    assert len(cited) >= 10
    missing = [f"{where}: {m.group(0)}" for where, m in cited if m.group(1) not in cases]
    assert not missing


def test_wire_contract_sections_cited_exist() -> None:
    sections, text = _doc("wire-contract.md")
    items = set(NUMBERED.findall(_section_body(text, "9")))
    cited = _citations(WIRE_REF)
    assert len(cited) >= 5
    missing = []
    for where, m in cited:
        first_section, last_section, first_item, last_item = m.groups()
        wanted_sections = {first_section, last_section or first_section}
        wanted_items = {first_item, last_item} - {None}
        if not wanted_sections <= sections or not wanted_items <= items:
            missing.append(f"{where}: {m.group(0)}")
    assert not missing


@pytest.mark.parametrize("name", ["parsing.md", "wire-contract.md"])
def test_no_citation_points_outside_the_repository(name: str) -> None:
    """Citations name the copy in docs/, not a path on one developer's machine."""
    outside = [where for where, _ in _citations(re.compile(rf"/work/shared/docs/{re.escape(name)}"))]
    assert not outside


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_readme_is_a_newcomers_page() -> None:
    """The README is the path in (what, two commands, try it, back end, agents, Flask); the reference is in docs/."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250


@pytest.mark.parametrize("page", DOCS, ids=lambda path: path.name)
def test_relative_links_resolve(page: Path) -> None:
    targets = [target for target in LINK.findall(page.read_text(encoding="utf-8")) if "://" not in target]
    missing = [target for target in targets if not (page.parent / target).exists()]
    assert not missing
