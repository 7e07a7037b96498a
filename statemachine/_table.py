"""The choice state machine: its transition table, the callbacks it names, and each state's reader.

Theory of operation
-------------------
Every response choice gets its own :class:`~statemachine.ChoiceStream`, whose
``state`` moves on one shared, model-less ``transitions.Machine`` built from
this module. This file tells the whole story: which edges exist
(:data:`TRANSITIONS`), what work each edge does (its ``after`` callback, and
the :data:`ON_ENTER` callbacks of the state it enters), and which reader reads
the model's text in each state (:data:`READERS`). The stream's scanner asks the
state for its reader before every piece of input; no other field says where
the stream is.

* ``TEXT``: ordinary visible text, read by ``_read_text``. It holds back only
  the longest suffix that could still become a sentinel and emits everything
  else; inside ``<think>`` (or a format's reasoning channel, Harmony's
  analysis) the same reader emits reasoning (a sub-state of the reader, not of
  the machine: reasoning never changes what a call is).
* ``IN_TOOL_CALL``: an opener (``<tool_call>``, ``<use_tool``, ``<function=``,
  a registered format's, or a native delta without a name) was seen, but no
  accepted name yet. Entering it (``_hold_call``) starts holding the call:
  argument text that arrives before the name is buffered and the block's text
  is kept, so that the call can still be disproved and released as text. The
  block's own reader (its format's body reader) reads the input.
* ``ARGS_STREAMING``: the complete, accepted name is known. The edge into it
  (``name_completed`` → ``_send_header``) sends the header and releases the
  buffered arguments; fragments then stream verbatim. The block's reader reads
  on until the block ends, so a block's closer (or the separator before its
  next call) is read in the state of the call it closes.
* ``DONE``: the upstream finished; terminal. Entering it
  (``_select_finish_reason``) emits the one ``ChoiceFinished``.

A call's block ends (its reader says so, the next call in the block begins, a
policy stops reading, or the stream ends) and the machine leaves the call
states by ``tool_close_seen`` (the call went out; ``_call_closed`` lets an
orphan closer right after it be dropped) or ``tool_open_disproved`` (it is
not a call; ``_release_block`` sends the held block out as text, unless it was
suppressed or was structure, a Harmony message header, which is dropped).

An opener whose format can tell from the next few characters that its block
would be disproved (``TextFormat.refutes``) opens no block at all: it stays in
the text, and when its reader would have noted the rejection the scanner takes
``tool_open_refuted``, a ``TEXT`` self-loop whose callback (``_note_refuted``)
makes that note. The scanner calls that callback itself (``direct``): a model
repeating a broken opener would otherwise fire two triggers every few
characters, 25-40x the cost of prose.

Triggers are named for what the scanner observed, and fire only at those
boundaries: a handful per tool call, never per character. Per-character work
(prefix matching, JSON lexing, a parameter value) happens in plain Python in
the readers, which read ``state`` but never query ``may_*``. The diagram
renderer (:mod:`statemachine.diagram`) and the table tests read this same
table.
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


class Verdict(enum.Enum):
    """How a call ended, naming the edge the machine leaves the call states by once the call's block ends
    (or the block's next call begins)."""

    #: The call went out (valid or not): its end is sent and counted.
    CLOSED = "tool_close_seen"
    #: It was no call: its block goes back to text, or is dropped.
    DISPROVED = "tool_open_disproved"


class Transition(NamedTuple):
    """One edge of the machine.

    Fields:
        trigger: the observation's name, a past participle.
        source: the state the edge leaves.
        dest: the state the edge enters.
        observed: what the scanner saw, in words (used by the diagram).
        after: the ``ChoiceStream`` method that does the edge's work, run
            once the state changed (``""``: none).
        direct: the scanner takes the edge by calling ``after`` itself, not
            through ``transitions``: a self-loop of a state with no enter
            callback, so that call is all the machine would do. For boundaries
            that may come thousands of times a response, where a ``transitions`` trigger
            would cost more than the text around it.
    """

    trigger: str
    source: ChoiceState
    dest: ChoiceState
    observed: str
    after: str = ""
    direct: bool = False


TEXT = ChoiceState.TEXT
IN_TOOL_CALL = ChoiceState.IN_TOOL_CALL
ARGS_STREAMING = ChoiceState.ARGS_STREAMING
DONE = ChoiceState.DONE

#: The state every choice starts in.
INITIAL = TEXT

#: Every legal transition. Anything not listed raises and leaves the state as it was.
TRANSITIONS: tuple[Transition, ...] = (
    Transition("tool_open_seen", TEXT, IN_TOOL_CALL, "a complete opener"),
    Transition("name_completed", IN_TOOL_CALL, ARGS_STREAMING, "the complete, accepted function name",
               "_send_header"),
    Transition("tool_open_disproved", IN_TOOL_CALL, TEXT, "the block is not an accepted call", "_release_block"),
    Transition("tool_close_seen", ARGS_STREAMING, TEXT, "the call ended", "_call_closed"),
    Transition("tool_open_refuted", TEXT, TEXT, "an opener its next characters show opens no call, with a note",
               "_note_refuted", direct=True),
    Transition("upstream_finished", TEXT, DONE, "upstream finish or end of stream"),
    Transition("upstream_finished", IN_TOOL_CALL, DONE, "upstream finish or end of stream"),
    Transition("upstream_finished", ARGS_STREAMING, DONE, "upstream finish or end of stream"),
)

#: The ``ChoiceStream`` method run on entering a state (before the edge's own ``after`` callback).
ON_ENTER: dict[ChoiceState, str] = {
    IN_TOOL_CALL: "_hold_call",
    DONE: "_select_finish_reason",
}

#: The ``ChoiceStream`` method that reads model text in each state (none in ``DONE``: input is refused).
READERS: dict[ChoiceState, str] = {
    TEXT: "_read_text",
    IN_TOOL_CALL: "_read_block",
    ARGS_STREAMING: "_read_block",
}

#: Trigger names in table order, without repeats.
TRIGGERS: tuple[str, ...] = tuple(dict.fromkeys(t.trigger for t in TRANSITIONS))
