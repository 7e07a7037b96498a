"""The picture of ``make bench``'s results: requests/s and worker CPU per request, side by side.

:func:`write_chart` takes what ``bench/run.py`` measured, scenario by scenario
(short tool-call streams, short text streams, 500-chunk streams, two workers,
...), each with a figure per server (toolwire, the relays, LiteLLM when it was
measured), and draws one grouped bar per server and scenario in two panels.
matplotlib (the ``bench`` extra) is imported only here, and only when a chart
is written.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

#: scenario -> server -> {"rps": requests/s, "cpu_us_per_request": worker CPU µs a request}
Results = dict[str, dict[str, dict[str, float]]]

PANELS = (("rps", "requests / s (higher is better)"),
          ("cpu_us_per_request", "worker CPU µs per request (lower is better)"))


def write_chart(results: Results, path: Path, title: str) -> Path:
    """Draw ``results`` as a PNG at ``path`` (its folder is made if missing) and return the path.

    Servers appear in the order they are first met; a server missing from a
    scenario leaves a gap. Raises ``ValueError`` if there is nothing to draw.
    """
    scenarios = [name for name, servers in results.items() if servers]
    if not scenarios:
        raise ValueError("no results to draw")
    servers = list(dict.fromkeys(server for name in scenarios for server in results[name]))
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(PANELS), figsize=(6 * len(PANELS), 4.8), squeeze=False)
    width = 0.8 / len(servers)
    for axis, (key, label) in zip(axes[0], PANELS):
        for i, server in enumerate(servers):
            offset = (i - (len(servers) - 1) / 2) * width
            values = [results[name].get(server, {}).get(key, math.nan) for name in scenarios]
            axis.bar([k + offset for k in range(len(scenarios))], values, width, label=server)
        axis.set_xticks(range(len(scenarios)), [textwrap.fill(name, 12) for name in scenarios], fontsize=8)
        axis.set_title(label, fontsize=10)
        axis.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
