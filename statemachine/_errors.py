"""Exceptions raised by the core.

::

    ToolwireError
    └── ProtocolError (abstract)
        ├── UsageError        the caller misused the core (a bug in the caller)
        └── ModelOutputError  the model's output forces a failure under the policy

Recoverable model mistakes are :class:`~statemachine.ToolCallNote` events, not
exceptions. An exception from ``feed()`` other than ``ModelOutputError`` is a
bug.
"""

from __future__ import annotations

from typing import Any


class ToolwireError(Exception):
    """Base class of every exception the core raises."""


class ProtocolError(ToolwireError):
    """Abstract: something broke the rules of the choice stream.

    Attributes:
        code: a stable machine-readable code (``unknown_tool``, ``invalid_json``…).
        status_hint: the HTTP status to answer with when nothing was sent yet.
        event_hint: the OpenAI error object to stream when headers are out.
    """

    status_hint = 500

    def __new__(cls, *args: Any, **kwargs: Any) -> ProtocolError:
        if cls is ProtocolError:
            raise TypeError("ProtocolError is abstract; raise UsageError or ModelOutputError")
        return super().__new__(cls)

    def __init__(self, message: str, *, code: str = "server_error", status_hint: int | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        if status_hint is not None:
            self.status_hint = status_hint

    @property
    def event_hint(self) -> dict[str, Any]:
        """The OpenAI error object (``{"message","type","param","code"}``) for this failure."""
        return {"message": self.message, "type": "server_error", "param": None, "code": self.code}


class UsageError(ProtocolError):
    """The caller used the core wrongly (e.g. fed input after ``finish``)."""


class ModelOutputError(ProtocolError):
    """The model wrote something the configured policy treats as fatal.

    Raised only under ``fail`` policies (for example a strict tool whose
    arguments do not match its schema). ``status_hint`` is 502: the upstream
    model, not the client, produced the bad output.
    """

    status_hint = 502
