"""toolwire's sans-IO core: model text in, OpenAI tool-call events out.

There is no networking code here at all: no Flask, sockets, clocks, threads or
logging side effects. The only third-party import is ``transitions`` (and
``jsonschema`` and ``google-re2``, imported on first use to check a strict tool's arguments and a custom
tool's regex grammar).
"""

from ._choice import ChoiceStream, new_call_id
from ._config import ParserConfig, Policy, ToolChoice, ToolSpec
from ._errors import ModelOutputError, ProtocolError, ToolwireError, UsageError
from ._events import (
    NOTE_KINDS,
    ChoiceFinished,
    Event,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnded,
    ToolCallInputDelta,
    ToolCallNote,
    ToolCallStarted,
)
from ._native import NativeCalls
from ._regex import regex_problem
from ._schema import schema_problem
from .formats import TextFormat, get_format, register_format, registered_formats
from ._table import INITIAL, TRANSITIONS, ChoiceState, Transition

__all__ = [
    "ChoiceFinished",
    "ChoiceState",
    "ChoiceStream",
    "Event",
    "INITIAL",
    "ModelOutputError",
    "NOTE_KINDS",
    "NativeCalls",
    "ParserConfig",
    "Policy",
    "ProtocolError",
    "ReasoningDelta",
    "TRANSITIONS",
    "TextDelta",
    "TextFormat",
    "ToolCallArgumentsDelta",
    "ToolCallEnded",
    "ToolCallInputDelta",
    "ToolCallNote",
    "ToolCallStarted",
    "ToolChoice",
    "ToolSpec",
    "ToolwireError",
    "Transition",
    "UsageError",
    "get_format",
    "new_call_id",
    "regex_problem",
    "register_format",
    "registered_formats",
    "schema_problem",
]
