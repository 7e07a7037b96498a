"""The choice state machine's transition table: the single source of truth.

Theory of operation
-------------------
Every response choice gets its own :class:`~statemachine.ChoiceStream`, whose
``state`` moves on one shared, model-less ``transitions.Machine`` built from
:data:`TRANSITIONS`. The machine moves between four states:

* ``TEXT``: ordinary visible text. The scanner holds back only the longest
  suffix that could still become a sentinel and emits everything else.
* ``IN_TOOL_CALL``: an opener (``<tool_call>``, ``<use_tool``, ``<function=``,
  or a structured delta without a name) has been seen, but no function name
  yet. The opener and anything after it are held, and argument text that
  arrives before the name is buffered, so that the call can still be disproved
  and released as text.
* ``ARGS_STREAMING``: the complete, accepted name is known; the header event
  went out and argument fragments stream verbatim.
* ``DONE``: the upstream finished; terminal.

Triggers are named for what the scanner observed, and fire only at those
boundaries: a handful per tool call, never per character. Per-character work
(prefix matching, JSON lexing) happens in plain Python in the scanner, which
reads ``state`` but never queries ``may_*``. The diagram renderer
(:mod:`statemachine.diagram`) and the table tests read this same table.
"""

from __future__ import annotations

import enum
from typing import NamedTuple


class ChoiceState(str, enum.Enum):
    """The states of one choice's machine."""

    #: Visible text; no call is open.
    TEXT = "text"
    #: An opener was seen; the function name is not known yet.
    IN_TOOL_CALL = "in_tool_call"
    #: The call's header was emitted; arguments stream.
    ARGS_STREAMING = "args_streaming"
    #: The upstream finished; no further input is accepted.
    DONE = "done"


class Transition(NamedTuple):
    """One edge of the machine.

    Fields:
        trigger: the observation's name, a past participle.
        source: the state the edge leaves.
        dest: the state the edge enters.
        observed: what the scanner saw, in words (used by the diagram).
    """

    trigger: str
    source: ChoiceState
    dest: ChoiceState
    observed: str


TEXT = ChoiceState.TEXT
IN_TOOL_CALL = ChoiceState.IN_TOOL_CALL
ARGS_STREAMING = ChoiceState.ARGS_STREAMING
DONE = ChoiceState.DONE

#: The state every choice starts in.
INITIAL = TEXT

#: Every legal transition. Anything not listed raises and leaves the state as it was.
TRANSITIONS: tuple[Transition, ...] = (
    Transition("tool_open_seen", TEXT, IN_TOOL_CALL, "a complete opener"),
    Transition("name_completed", IN_TOOL_CALL, ARGS_STREAMING, "the complete, accepted function name"),
    Transition("tool_open_disproved", IN_TOOL_CALL, TEXT, "the block is not an accepted call"),
    Transition("tool_close_seen", ARGS_STREAMING, TEXT, "the call ended"),
    Transition("upstream_finished", TEXT, DONE, "upstream finish or end of stream"),
    Transition("upstream_finished", IN_TOOL_CALL, DONE, "upstream finish or end of stream"),
    Transition("upstream_finished", ARGS_STREAMING, DONE, "upstream finish or end of stream"),
)

#: Trigger names in table order, without repeats.
TRIGGERS: tuple[str, ...] = tuple(dict.fromkeys(t.trigger for t in TRANSITIONS))
