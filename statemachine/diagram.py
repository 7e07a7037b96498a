"""Render the choice state machine from its transition table.

Mermaid and Graphviz DOT text need nothing beyond the standard library; SVG
needs the optional ``pygraphviz`` wheel (``pip install 'toolwire[diagrams]'``).
Every renderer reads :data:`statemachine.TRANSITIONS` (and the callbacks and
readers ``_table.py`` names), so the picture is always the table.
"""

from __future__ import annotations

from ._table import INITIAL, ON_ENTER, READERS, TRANSITIONS, ChoiceState

FORMATS = ("mermaid", "dot", "svg")


def edges() -> list[tuple[str, str, str]]:
    """Every edge as ``(source, trigger, dest)`` state values, in table order."""
    return [(t.source.value, t.trigger, t.dest.value) for t in TRANSITIONS]


def render_choice_fsm(fmt: str = "mermaid", current: str | ChoiceState | None = None,
                      path: list[tuple[str, str, str]] | None = None) -> str | bytes:
    """Draw the choice state machine.

    Args:
        fmt: ``mermaid`` (text), ``dot`` (Graphviz text) or ``svg`` (bytes).
        current: a state to highlight (a ``ChoiceState`` or its value).
        path: ``(source, trigger, dest)`` edges a choice took, drawn in bold
            (see ``ChoiceStream.path``).
    Returns:
        The diagram: ``str`` for mermaid and dot, ``bytes`` for svg.
    Raises:
        ValueError: an unknown format or state.
        RuntimeError: svg asked for without pygraphviz installed.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown diagram format {fmt!r}; choose one of {', '.join(FORMATS)}")
    state = ChoiceState(current).value if current is not None else None
    taken = set(path or ())
    if fmt == "mermaid":
        return _mermaid(state, taken)
    dot = _dot(state, taken)
    if fmt == "dot":
        return dot
    try:
        import pygraphviz
    except ImportError:
        raise RuntimeError("SVG needs pygraphviz: pip install 'toolwire[diagrams]'") from None
    graph = pygraphviz.AGraph(string=dot)
    svg = graph.draw(format="svg", prog="dot")
    if not isinstance(svg, bytes):  # pragma: no cover - pygraphviz contract
        raise RuntimeError("pygraphviz did not return SVG bytes")
    return svg


def state_notes() -> list[tuple[str, str]]:
    """Per state, in words: the reader that reads its input, the callback run on entering it and the
    callback each edge out of it runs."""
    notes = []
    for state in ChoiceState:
        parts = [f"read by {READERS[state]}" if state in READERS else "reads nothing"]
        if state in ON_ENTER:
            parts.append(f"on enter {ON_ENTER[state]}")
        parts.extend(f"{t.trigger} runs {t.after}" for t in TRANSITIONS if t.source is state and t.after)
        notes.append((state.value, ", ".join(parts)))
    return notes


def callback_table() -> str:
    """The table as Markdown: every edge with what was observed and the callback that does its work."""
    lines = ["| source | trigger | dest | observed | callback |", "|---|---|---|---|---|"]
    for t in TRANSITIONS:
        callback = f"`{t.after}`" if t.after else ""
        lines.append(f"| `{t.source.value}` | `{t.trigger}` | `{t.dest.value}` | {t.observed} | {callback} |")
    return "\n".join(lines) + "\n"


def _mermaid(current: str | None, taken: set[tuple[str, str, str]]) -> str:
    lines = ["stateDiagram-v2", f"    [*] --> {INITIAL.value}"]
    for source, trigger, dest in edges():
        lines.append(f"    {source} --> {dest} : {trigger}")
    lines.append(f"    {ChoiceState.DONE.value} --> [*]")
    lines.extend(f"    note right of {state} : {note}" for state, note in state_notes())
    if current:
        lines.append("    classDef s_active color:red,fill:darksalmon")
        lines.append(f"    class {current} s_active")
    if taken:
        visited = sorted({s for edge in taken for s in (edge[0], edge[2])} - {current})
        if visited:
            lines.append("    classDef s_visited fill:azure")
            lines.append(f"    class {','.join(visited)} s_visited")
    return "\n".join(lines) + "\n"


def _dot(current: str | None, taken: set[tuple[str, str, str]]) -> str:
    lines = ["digraph choice {", "    rankdir=LR;", '    node [shape=box, style="rounded,filled", fillcolor=white];',
             '    start [shape=point];', f"    start -> {INITIAL.value};"]
    for state in ChoiceState:
        attrs = ' fillcolor=darksalmon, color=red, peripheries=2' if state.value == current else ""
        lines.append(f'    {state.value} [label="{state.value}"{"," + attrs if attrs else ""}];')
    for source, trigger, dest in edges():
        style = ', color=blue, penwidth=2' if (source, trigger, dest) in taken else ""
        lines.append(f'    {source} -> {dest} [label="{trigger}"{style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"
