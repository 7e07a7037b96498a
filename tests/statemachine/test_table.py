"""The transition table drives the machine and the diagrams: every (state, trigger) pair, every edge."""

from __future__ import annotations

import ast
import inspect
import itertools
import re

import pytest
from transitions import MachineError

from harness import CFG
from statemachine import INITIAL, TRANSITIONS, ChoiceState, ChoiceStream
from statemachine import _choice, _text, diagram
from statemachine._machine import build_machine
from statemachine._table import ON_ENTER, TRIGGERS, Verdict

TABLE = {(t.source, t.trigger): t.dest for t in TRANSITIONS}
ALL_TRIGGERS = sorted({t.trigger for t in TRANSITIONS})
EDGES = {(t.source.value, t.trigger, t.dest.value) for t in TRANSITIONS}


def test_table_shape():
    assert INITIAL is ChoiceState.TEXT
    assert len(TABLE) == len(TRANSITIONS), "a (source, trigger) pair appears twice"
    assert TRIGGERS == tuple(dict.fromkeys(t.trigger for t in TRANSITIONS))
    assert all(t.source is not ChoiceState.DONE for t in TRANSITIONS), "DONE is terminal"
    assert {t.source for t in TRANSITIONS if t.trigger == "upstream_finished"} == set(ChoiceState) - {ChoiceState.DONE}
    assert all(t.observed for t in TRANSITIONS)


class Model:
    """A model of the table's machine whose callbacks only record their names: the edges alone."""

    def __init__(self, state: ChoiceState):
        self.state = state
        self.ran: list[str] = []


for _callback in {t.after for t in TRANSITIONS if t.after} | set(ON_ENTER.values()):
    setattr(Model, _callback, lambda self, *args, _name=_callback, **kwargs: self.ran.append(_name))


@pytest.mark.parametrize("state,trigger", list(itertools.product(list(ChoiceState), ALL_TRIGGERS)),
                         ids=lambda v: getattr(v, "value", v))
def test_every_state_trigger_pair(state, trigger):
    machine, model = build_machine(), Model(state)
    if (state, trigger) in TABLE:
        assert machine.events[trigger].trigger(model) is True
        edge = next(t for t in TRANSITIONS if (t.source, t.trigger) == (state, trigger))
        assert model.state is edge.dest
        assert model.ran == [name for name in (ON_ENTER.get(edge.dest), edge.after) if name]  # enter, then after
    else:
        with pytest.raises(MachineError):
            machine.events[trigger].trigger(model)
        assert model.state is state and model.ran == []


def _fired_names(module) -> set[str]:
    """The trigger names ``module`` fires by literal (``_trigger("…")``, ``_take_direct("…")``, ``events["…"]``)."""
    named = []
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("_trigger", "_take_direct"):
            named.append(node.args[0])
        elif isinstance(node, ast.Subscript) and getattr(node.value, "attr", None) == "events":
            named.append(node.slice)
    return {node.value for node in named if isinstance(node, ast.Constant)}


def test_the_stream_fires_the_table_s_triggers_only_and_all():
    """Only the scanner fires edges, by the table's names: the ones it names and the verdicts it acts on."""
    fired = _fired_names(_choice) | _fired_names(_text) | {verdict.value for verdict in Verdict}
    assert fired == set(TRIGGERS)


def test_path_records_taken_edges():
    s = ChoiceStream(CFG)
    s.feed('x<tool_call>{"name": "get_time", "arguments": {}}</tool_call>')
    s.finish()
    assert s.path == [("text", "tool_open_seen", "in_tool_call"), ("in_tool_call", "name_completed", "args_streaming"),
                      ("args_streaming", "tool_close_seen", "text"), ("text", "upstream_finished", "done")]
    assert set(s.path) <= EDGES


def test_spans_locate_the_text_that_fired_each_transition():
    text = 'ok <tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
    pieces = ["ok <to", "ol_call>", '{"name": "get_time", ', '"arguments": {}}', "</tool_call>"]
    s = ChoiceStream(CFG)
    for piece in pieces:
        s.feed(piece)
    s.finish()
    assert len(s.spans) == len(s.path)
    assert [text[a:b] for a, b in s.spans] == [
        # the held "<to", the piece that completed the opener (held too: its next character tells whether it
        # opens a call) and the piece with that character
        '<tool_call>{"name": "get_time", ',
        '"arguments": {}}',  # the header goes out once the arguments begin
        "</tool_call>",  # ... and the call ends at its closer
        "",  # finish: no text
    ]


def test_edges_are_the_table():
    edges = diagram.edges()
    assert edges == [(t.source.value, t.trigger, t.dest.value) for t in TRANSITIONS]
    assert set(edges) == EDGES


def _mermaid_edges(text: str) -> set[tuple[str, str, str]]:
    found = set()
    for line in text.splitlines():
        m = re.fullmatch(r"\s*(\S+)\s*-->\s*(\S+)\s*(?::\s*(\S+))?\s*", line)
        if m and "[*]" not in (m.group(1), m.group(2)):
            found.add((m.group(1), m.group(3), m.group(2)))
    return found


def _dot_edges(text: str) -> set[tuple[str, str, str]]:
    found = set()
    for line in text.splitlines():
        m = re.fullmatch(r'\s*(\w+)\s*->\s*(\w+)\s*\[label="([^"]*)".*\];\s*', line)
        if m:
            found.add((m.group(1), m.group(3), m.group(2)))
    return found


def test_mermaid_contains_exactly_the_table():
    text = diagram.render_choice_fsm("mermaid")
    assert text.startswith("stateDiagram-v2")
    assert _mermaid_edges(text) == EDGES
    assert f"[*] --> {INITIAL.value}" in text


def test_dot_contains_exactly_the_table():
    text = diagram.render_choice_fsm("dot")
    assert text.lstrip().startswith("digraph")
    assert _dot_edges(text) == EDGES
    nodes = set(re.findall(r"^\s*(\w+) \[label=", text, flags=re.M))
    assert nodes == {s.value for s in ChoiceState}


@pytest.mark.parametrize("current", list(ChoiceState))
def test_current_state_highlighted_in_both_formats(current):
    mermaid = diagram.render_choice_fsm("mermaid", current=current)
    assert re.search(rf"^\s*class {current.value} s_active\s*$", mermaid, flags=re.M)
    assert len(re.findall(r"s_active\s*$", mermaid, flags=re.M)) == 1
    dot = diagram.render_choice_fsm("dot", current=current.value)
    highlighted = [line for line in dot.splitlines() if "peripheries=2" in line]
    assert len(highlighted) == 1 and re.match(rf"\s*{current.value} \[", highlighted[0])
    # highlighting never changes the edges
    assert _mermaid_edges(mermaid) == EDGES and _dot_edges(dot) == EDGES


def test_no_highlight_without_current():
    assert "s_active" not in diagram.render_choice_fsm("mermaid")
    assert "peripheries=2" not in diagram.render_choice_fsm("dot")


def test_path_drawn_bold_in_dot():
    s = ChoiceStream(CFG)
    s.feed('<tool_call>{"name": "get_time", "arguments": {}}</tool_call>')
    dot = diagram.render_choice_fsm("dot", current=s.state, path=s.path)
    bold = {e for e in _dot_edges(dot)
            if re.search(rf'{e[0]} -> {e[2]} \[label="{e[1]}", color=blue', dot)}
    assert bold == set(s.path)


def test_bad_format_and_state():
    with pytest.raises(ValueError):
        diagram.render_choice_fsm("png")
    with pytest.raises(ValueError):
        diagram.render_choice_fsm("mermaid", current="nowhere")


def test_svg_is_rendered_in_process_with_the_current_state():
    # pygraphviz is part of the dev extras, so this runs wherever the tests run.
    svg = diagram.render_choice_fsm("svg", "args_streaming")
    assert isinstance(svg, bytes) and svg.lstrip().startswith(b"<?xml") and b"<svg" in svg
    for t in TRANSITIONS:
        assert t.trigger.encode() in svg
    assert b"darksalmon" in svg


def test_every_callback_and_reader_the_table_names_exists():
    from statemachine._table import READERS

    named = [t.after for t in TRANSITIONS if t.after] + list(ON_ENTER.values()) + list(READERS.values())
    for name in named:
        assert callable(getattr(ChoiceStream, name, None)), name
    assert set(READERS) == set(ChoiceState) - {ChoiceState.DONE}, "every live state has a reader"


def test_entering_done_selects_the_finish_reason():
    s = ChoiceStream(CFG)
    assert [e.finish_reason for e in s.finish("length")] == ["length"]
    assert s.state is ChoiceState.DONE and s.path == [("text", "upstream_finished", "done")]


def test_the_state_picks_the_reader():
    s = ChoiceStream(CFG)
    s.feed('<tool_call>{"name": "get_time", "arguments": {"a": "x')
    assert s.state is ChoiceState.ARGS_STREAMING
    s.feed('"}}')  # the call object closed; the block's reader reads on until it shows the call is over
    assert s.state is ChoiceState.ARGS_STREAMING
    s.feed("</tool_call> then text")
    assert s.state is ChoiceState.TEXT


def test_a_direct_edge_is_a_self_loop_whose_callback_is_all_the_machine_does():
    """The scanner takes a ``direct`` edge by calling its callback: sound only for a self-loop of a state with
    no enter callback (``transitions`` would run nothing else)."""
    direct = [t for t in TRANSITIONS if t.direct]
    assert direct and all(t.source is t.dest and t.source not in ON_ENTER and t.after for t in direct)


def test_the_machine_uses_only_what_its_narrowed_classes_run():
    """The machine is ``transitions``' with its state, transition and event classes narrowed to what the table
    uses (``_machine.py``): nothing it is configured with is left out by them."""
    from statemachine._choice import _MACHINE
    from statemachine._machine import ChoiceMachine, build_machine, unused_features

    assert isinstance(_MACHINE, ChoiceMachine) and unused_features(_MACHINE) == []
    machine = build_machine()
    machine.add_transition("tool_close_seen", ChoiceState.TEXT, ChoiceState.DONE, conditions="_hold_call")
    machine.before_state_change = ["_hold_call"]
    assert unused_features(machine) == ["before_state_change", "tool_close_seen from TEXT: conditions"]
