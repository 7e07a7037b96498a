"""The one ``transitions`` machine every choice runs on, built from the table (:mod:`._table`).

A plain ``transitions.Machine`` does about a hundred Python calls a trigger, most of them for
what this table never uses: a partial and the queue check, the prepare, condition and before lists, the
machine-wide callback lists, exit callbacks, the state's name read through an enum check six times, and a
debug log line at each step. A tool call takes four triggers. So the machine is built by ``transitions``
from the table as before, with its state, transition and event classes narrowed to what the table uses
(``transitions``' own extension points, ``state_cls``, ``transition_cls``, ``event_cls``): a trigger finds
the edge from the model's state, sets the state, and runs the dest's enter callbacks and the edge's
``after`` callbacks, resolved by name on the model as ``Machine.callback`` resolves them (a fifth of the plain
trigger's time, measured 2026-11).
:func:`unused_features` names anything the narrowed classes would skip; the table's tests keep it empty.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from transitions import Event, Machine, MachineError, State, Transition
from transitions.core import EventData

from ._table import INITIAL, ON_ENTER, TRANSITIONS, ChoiceState


class ChoiceMachineState(State):
    """A state whose name is read once (``State.name`` checks for an enum on every read)."""

    name = ""  # an attribute, not ``State``'s property

    def __init__(self, name: str | Enum, **kwargs: Any):
        super().__init__(name, **kwargs)
        self.name = name.name if isinstance(name, Enum) else name


class ChoiceTransition(Transition):
    """An edge that exits its source, sets the model's state, enters its dest and runs its ``after`` callbacks."""

    def execute(self, event_data: EventData) -> bool:
        machine = event_data.machine
        # Each callback is resolved by name as Machine.callback does, and called from here: the callbacks run
        # at the bottom of the parser's deepest stacks, and a frame less there is less stack every stream keeps.
        resolve, args, kwargs = machine.resolve_callable, event_data.args, event_data.kwargs
        for func in machine.states[self.source].on_exit:
            resolve(func, event_data)(*args, **kwargs)
        assert self.dest is not None  # no internal edges in the table (see unused_features)
        dest = machine.states[self.dest]
        setattr(event_data.model, machine.model_attribute, dest.value)
        event_data.state = dest
        for func in dest.on_enter:
            resolve(func, event_data)(*args, **kwargs)
        for func in self.after:
            resolve(func, event_data)(*args, **kwargs)
        return True


class ChoiceEvent(Event):
    """A trigger that takes its one edge from the model's state at once (the machine is not queued)."""

    def trigger(self, model: Any, *args: Any, **kwargs: Any) -> bool:
        machine = self.machine
        state = machine.state_of[getattr(model, machine.model_attribute)]
        edges = self.transitions.get(state.name)
        if not edges:
            raise MachineError(f"Can't trigger event {self.name} from state {state.name}!")
        event_data = EventData(state, self, machine, model, args=args, kwargs=kwargs)
        event_data.transition = edges[0]
        event_data.result = edges[0].execute(event_data)
        return bool(event_data.result)


class ChoiceMachine(Machine):
    """A model-less ``transitions.Machine`` with the narrowed classes."""

    state_cls = ChoiceMachineState
    transition_cls = ChoiceTransition
    event_cls = ChoiceEvent

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        #: each state by its value, as models hold it
        self.state_of: dict[Any, State] = {state.value: state for state in self.states.values()}


def build_machine() -> Machine:
    """The machine of :data:`~._table.TRANSITIONS`, with the :data:`~._table.ON_ENTER` callbacks."""
    machine = ChoiceMachine(
        model=None,
        states=list(ChoiceState),
        transitions=[{"trigger": t.trigger, "source": t.source, "dest": t.dest, "after": t.after or None}
                     for t in TRANSITIONS],
        initial=INITIAL,
        auto_transitions=False,
    )
    for state, callback in ON_ENTER.items():
        machine.get_state(state).add_callback("enter", callback)
    return machine


def unused_features(machine: Machine) -> list[str]:
    """What ``machine`` is configured with that the narrowed classes would leave out (none, for the table's)."""
    found = [name for name in ("prepare_event", "finalize_event", "before_state_change", "after_state_change",
                               "on_exception", "on_final") if getattr(machine, name)]
    found += ["queued"] * machine.has_queue + ["send_event"] * machine.send_event
    found += ["ignore_invalid_triggers"] * bool(machine.ignore_invalid_triggers)
    for event in machine.events.values():
        for source, edges in event.transitions.items():
            found += [f"{event.name} from {source}: several edges"] * (len(edges) > 1)
            found += [f"{event.name} from {source}: {kind}" for edge in edges
                      for kind in ("prepare", "conditions", "before") if getattr(edge, kind)]
            found += [f"{event.name} from {source}: internal"] * any(edge.dest is None for edge in edges)
    found += [f"{name}: final" for name, state in machine.states.items() if state.final]
    return found
