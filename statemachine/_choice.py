"""ChoiceStream: one choice's state machine (interface; the scanner is being written)."""

from __future__ import annotations

import secrets
from typing import Callable

from transitions import Machine

from ._config import ParserConfig
from ._events import ChoiceFinished, Event, TextDelta
from ._table import INITIAL, TRANSITIONS, ChoiceState


def new_call_id() -> str:
    """A fresh OpenAI-style call id: ``call_`` and 24 random characters."""
    return "call_" + secrets.token_urlsafe(18)


class ChoiceStream:
    """Turns one choice's model output into events.

    Args:
        config: the request's tools, tool_choice and policy.
        id_factory: makes call ids (default :func:`new_call_id`).
    """

    def __init__(self, config: ParserConfig, *, id_factory: Callable[[], str] = new_call_id):
        self.config = config
        self._new_id = id_factory
        self.state = INITIAL
        Machine(
            model=self,
            states=list(ChoiceState),
            transitions=[{"trigger": t.trigger, "source": t.source, "dest": t.dest} for t in TRANSITIONS],
            initial=INITIAL,
            auto_transitions=False,
        )

    def feed(self, text: str) -> list[Event]:
        """Feed a piece of model text; return the events it completes."""
        return [TextDelta(text)] if text else []

    def feed_tool_call(self, index: int, *, id: str | None = None, name: str | None = None,
                       arguments: str | None = None) -> list[Event]:
        """Feed one structured ``tool_calls`` fragment from the upstream."""
        return []

    def finish(self, reason: str | None = None) -> list[Event]:
        """The upstream finished (``reason`` may be ``None`` for a bare EOF)."""
        return [ChoiceFinished(reason or "stop")]

    @property
    def wants_more(self) -> bool:
        """``False`` once policy says to stop reading the upstream."""
        return True
