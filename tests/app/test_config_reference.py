"""The settings in sections, every one described, and the configuration reference generated from them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from app.settings import SECTIONS, ModelRoute, Settings

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_every_setting_is_in_exactly_one_section():
    names = [name for section in SECTIONS for name in section.model_fields]
    assert sorted(names) == sorted(Settings.model_fields)
    assert len(names) == len(set(names))


def test_every_setting_is_described():
    fields = [*Settings.model_fields.items(), *ModelRoute.model_fields.items()]
    assert [name for name, field in fields if not (field.description or "").strip()] == []
    assert all(section.__doc__ and ": " in section.__doc__ for section in SECTIONS)  # "Title: what it covers."


def test_the_committed_reference_is_what_the_settings_generate():
    """Regenerated in a fresh process (the formats tests register stay out); after a settings change:
    ``toolwire config --describe > docs/configuration.md``."""
    generated = subprocess.run([sys.executable, "-m", "app.cli", "config", "--describe"], capture_output=True,
                               text=True, check=True, cwd=REFERENCE.parents[1]).stdout
    assert generated == REFERENCE.read_text(encoding="utf-8")


def test_the_reference_names_every_environment_variable_and_section():
    text = REFERENCE.read_text(encoding="utf-8")
    assert all(f"`TOOLWIRE_{name.upper()}`" in text for name in Settings.model_fields)
    assert all(f"\n## {section.__doc__.partition(':')[0]}\n" in text for section in SECTIONS)
    assert "| `gemma` | `gemma-3` |" in text  # the formats' model names, from the registry
