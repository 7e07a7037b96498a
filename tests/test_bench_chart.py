"""``bench/chart.py``: ``make bench``'s chart writer, given a small results dict (not the benchmark itself)."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from chart import write_chart  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _size(png: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert png[:8] == PNG_SIGNATURE and png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def test_writes_a_png_of_every_scenario(tmp_path: Path) -> None:
    results = {
        "tool-call": {"toolwire": {"rps": 120.0, "cpu_us_per_request": 2100.0},
                      "relay-geventhttpclient": {"rps": 110.0, "cpu_us_per_request": 2300.0}},
        "text": {"toolwire": {"rps": 130.0, "cpu_us_per_request": 1900.0},
                 "relay-geventhttpclient": {"rps": 115.0, "cpu_us_per_request": 2200.0},
                 "litellm": {"rps": 4.0, "cpu_us_per_request": 70000.0}},
    }
    path = write_chart(results, tmp_path / "out" / "bench.png", "same run")
    assert path == tmp_path / "out" / "bench.png"
    png = path.read_bytes()
    width, height = _size(png)
    assert width > 400 and height > 200
    assert png.endswith(b"IEND\xaeB`\x82")  # the file is complete


def test_refuses_empty_results(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_chart({"tool-call": {}}, tmp_path / "bench.png", "nothing")
    assert not (tmp_path / "bench.png").exists()
