"""NativeCalls: a back end's raw ``delta.tool_calls`` made into clean fragments for one choice.

Servers with tool support stream their calls in many dialects. Each quirk is
undone here before the fragments reach :meth:`ChoiceStream.feed_tool_call`, so
native calls meet the same state machine and policies as parsed ones:

- a missing ``index`` (or every call on index 0): once a call's name went out
  and its arguments followed, a fragment naming a different function starts the
  next call, and so does the same name after a complete JSON value, with
  arguments that do not extend it or as a header (``id`` or ``type``);
- ids missing or changing per fragment: ignored (the core makes one id per call); a fragment with the open
  call's own id, or on its index with its name, no id and no arguments, continues it (llama-cpp-python repeats
  the header in every fragment and ends with ``"arguments": ""``);
- a name split over fragments, or repeated in every fragment: joined, and handed
  to the core whole, once, when the arguments begin or the call ends (a name is
  never emitted partially);
- arguments before the name: passed on; the core holds them until the name;
- the whole argument string repeated in every fragment (cumulative): each repeat
  that extends the text so far contributes only its new suffix. Once a call is
  seen to be cumulative, a fragment that does not extend its text is a protocol
  error: the call ends as invalid (``invalid_json`` policy; ``fail`` raises),
  and nothing of it is merged;
- ``arguments`` sent as a JSON object instead of a string: serialised;
- several calls in one delta, a legacy ``function_call`` delta: in order;
- a call with a name and no arguments at all: ``{}``.

- calls interleaved by index (0, 1, 0, 1): a call's fragments are held until
  the open call has its name and arguments that form a complete JSON value, so
  calls still go out one after the other.

A fragment for a call that already ended is dropped with an ``invalid_json``
note rather than merged into another call.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from ._choice import ChoiceStream
from ._errors import ModelOutputError
from ._events import Event, ToolCallNote

_NO_EVENTS: tuple[Event, ...] = ()


class _Slot:
    """One upstream call as assembled so far."""

    __slots__ = ("number", "upstream_index", "upstream_id", "name", "name_sent", "_parts", "length", "cumulative",
                 "broken")

    def __init__(self, number: int, upstream_index: int | None):
        self.number = number  # the call's position in this choice: the index the core sees
        self.upstream_index = upstream_index
        self.upstream_id: object = None  # the first id the back end gave the call
        self.name = ""
        self.name_sent = False
        self._parts: list[str] = []  # the arguments so far, joined only when compared (no copy per fragment)
        self.length = 0
        self.cumulative = False
        self.broken = False

    @property
    def args(self) -> str:
        """The argument text so far."""
        parts = self._parts
        if len(parts) > 1:
            parts[:] = ["".join(parts)]
        return parts[0] if parts else ""

    def add(self, suffix: str, whole: str | None = None) -> None:
        """Append ``suffix``; ``whole`` is the new text entire, when the caller has it."""
        if whole is not None:
            self._parts[:] = [whole]
        else:
            self._parts.append(suffix)
        self.length += len(suffix)


class NativeCalls:
    """Feeds one choice's native tool-call fragments, quirks undone, to its :class:`ChoiceStream`.

    Call :meth:`feed` with each delta's ``tool_calls`` list (or a legacy
    ``function_call`` wrapped as one entry), and :meth:`close` before the choice
    gets text or its finish, so a held name reaches the core first.
    """

    __slots__ = ("_choice", "_slot", "_waiting", "_ended", "_count")

    def __init__(self, choice: ChoiceStream):
        self._choice = choice
        self._slot: _Slot | None = None  # the call the core is reading
        self._waiting: dict[int, _Slot] = {}  # interleaved calls held until the open one is complete
        self._ended: set[int] = set()  # upstream indexes of calls that ended
        self._count = 0

    def feed(self, fragments: Sequence[Any]) -> list[Event]:
        """One delta's ``tool_calls`` entries (dicts, as the back end sent them), in order.

        Raises:
            ModelOutputError: a ``fail`` policy rejected a call.
        """
        slot = self._slot
        if len(fragments) == 1 and slot is not None and slot.name_sent and not (slot.cumulative or slot.broken):
            # the usual delta: one piece of the open call's incremental arguments, read here (every fragment's path)
            fragment = fragments[0]
            function = fragment.get("function") if fragment.__class__ is dict else None
            if function.__class__ is dict and not function.get("name") \
                    and fragment.get("index", slot.upstream_index) == slot.upstream_index:
                text = function.get("arguments")
                # (a longer fragment may be a cumulative repeat: the full path checks)
                if text.__class__ is str and text and len(text) < slot.length:
                    slot.add(text)
                    return self._choice.feed_tool_call(slot.number, arguments=text)
        out: list[Event] = []
        for fragment in fragments:
            if isinstance(fragment, dict):
                self._fragment(fragment, out)
        return out

    def close(self) -> list[Event] | tuple[Event, ...]:
        """End the open call and any held ones (text or the finish follows); held names reach the core now."""
        if self._slot is None and not self._waiting:
            return _NO_EVENTS
        out = self._end_open()
        while self._waiting:
            self._activate(self._waiting.pop(next(iter(self._waiting))), out)
            out += self._end_open()
        return out

    def _end_open(self) -> list[Event]:
        slot = self._slot
        if slot is None:
            return []
        self._slot = None
        if slot.upstream_index is not None:
            self._ended.add(slot.upstream_index)
        out: list[Event] = []
        if not slot.broken:
            if slot.name and not slot.name_sent:
                out += self._choice.feed_tool_call(slot.number, name=slot.name)
                slot.name_sent = True
            if slot.name_sent and not slot.length:
                out += self._choice.feed_tool_call(slot.number, arguments="{}")  # a call without parameters
        return out

    def _activate(self, slot: _Slot, out: list[Event]) -> None:
        """Make ``slot`` the open call: it gets the next index, and what it held goes to the core."""
        slot.number = self._count
        self._count += 1
        self._slot = slot
        choice = self._choice
        if slot.broken:
            out += choice.feed_tool_call(slot.number, name=slot.name or None, invalid=True)
        elif slot.length and slot.name:
            slot.name_sent = True
            out += choice.feed_tool_call(slot.number, name=slot.name, arguments=slot.args)
        else:  # arguments before the name go to the core (it holds them); a name alone waits here
            out += choice.feed_tool_call(slot.number, arguments=slot.args or None)

    # ---------------------------------------------------------------------------------------------

    def _fragment(self, fragment: dict[str, Any], out: list[Event]) -> None:
        """One ``tool_calls`` entry: to the call it belongs to, which becomes the open one unless it waits."""
        name, arguments, index = _fields(fragment)
        slot = self._slot
        if index is not None and (slot is None or slot.upstream_index != index):
            slot = self._indexed(index, name, arguments, out)
            if slot is None:
                return
        elif slot is None or self._starts_next(slot, fragment, name, arguments, index is not None):
            out += self._end_open()
            slot = _Slot(-1, index)
            self._activate(slot, out)
        if slot.upstream_id is None:
            slot.upstream_id = fragment.get("id")
        if not slot.broken:
            self._merge(slot, name, arguments, out)

    def _indexed(self, index: int, name: str, arguments: str, out: list[Event]) -> _Slot | None:
        """A fragment on another index than the open call's: its call, made the open one; ``None`` when the
        fragment is dropped (its call ended) or held (the open call is not complete yet)."""
        if index in self._ended:
            if name or arguments:  # (an empty one carries nothing to lose)
                out.append(ToolCallNote("invalid_json", "a fragment arrived for a call that had already ended; "
                                                        "dropped"))
            return None
        slot = self._slot
        if slot is not None and slot.upstream_index is not None and not (slot.name and _complete_json(slot.args)):
            # Interleaved calls: the open one is not complete yet, so this one waits its turn.
            self._hold(self._waiting.setdefault(index, _Slot(-1, index)), name, arguments)
            return None
        out += self._end_open()
        slot = self._waiting.pop(index, None) or _Slot(-1, index)
        self._activate(slot, out)
        return slot

    def _merge(self, slot: _Slot, name: str, arguments: str, out: list[Event]) -> None:
        """A fragment's name and arguments join the open call; what the core may have goes to it."""
        if name:
            slot.name = _joined_name(slot.name, name, sent=slot.name_sent)
        if arguments:
            suffix = self._new_suffix(slot, arguments)
            if suffix is None:
                out += self._break(slot)
                return
            if suffix:
                if slot.name and not slot.name_sent:
                    slot.name_sent = True
                    out += self._choice.feed_tool_call(slot.number, name=slot.name, arguments=suffix)
                else:
                    out += self._choice.feed_tool_call(slot.number, arguments=suffix)
                return
        if not slot.name_sent and not slot.length:
            # Nothing for the core yet, but make it begin this call so the choice's order holds.
            out += self._choice.feed_tool_call(slot.number)

    @staticmethod
    def _starts_next(slot: _Slot, fragment: dict[str, Any], name: str, arguments: str, indexed: bool) -> bool:
        """Whether a fragment on the open call's index (or none) is really the next call.

        Only once the open call's name went out (its arguments followed it): a
        name arriving after its arguments may still be in pieces. Never when it
        carries the open call's own id.
        """
        if not name or not slot.name_sent or (slot.upstream_id is not None and fragment.get("id") == slot.upstream_id):
            return False
        if name != slot.name:
            return True
        if arguments:
            return not arguments.startswith(slot.args) and _complete_json(slot.args)
        # the same name's header again after a whole call: a new call if it has a new id; with no id, on the
        # same index, the call repeated
        if fragment.get("id") is not None:
            return _complete_json(slot.args)
        return not indexed and ("id" in fragment or "type" in fragment) and _complete_json(slot.args)

    @staticmethod
    def _new_suffix(slot: _Slot, text: str) -> str | None:
        """The new part of ``text``; ``None`` when it breaks a cumulative stream."""
        if slot.length and len(text) >= slot.length and text.startswith(slot.args):
            slot.cumulative = True
            suffix = text[slot.length:]
            slot.add(suffix, whole=text)
            return suffix
        if slot.cumulative:
            return None
        slot.add(text)
        return text

    def _hold(self, slot: _Slot, name: str, arguments: str) -> None:
        """Add a fragment to a waiting call (nothing reaches the core yet)."""
        if name:
            slot.name = _joined_name(slot.name, name, sent=False)
        if arguments and not slot.broken and self._new_suffix(slot, arguments) is None:
            slot.broken = True
            self._fail_if_strict()

    def _fail_if_strict(self) -> None:
        if self._choice.config.policy.invalid_json == "fail":
            raise ModelOutputError("the back end repeated a call's arguments with different text",
                                   code="invalid_json")

    def _break(self, slot: _Slot) -> list[Event]:
        """A cumulative call's fragment did not extend it: the call is invalid under the policy."""
        slot.broken = True
        self._fail_if_strict()
        return self._choice.feed_tool_call(slot.number, name=None if slot.name_sent else slot.name or None,
                                           invalid=True)


def _fields(fragment: dict[str, Any]) -> tuple[str, str, int | None]:
    """A fragment's name, arguments text and index (a legacy ``function_call`` or flattened entry has no
    ``function`` object; what has the wrong type counts as absent)."""
    function = fragment.get("function")
    if not isinstance(function, dict):
        function = fragment
    name = function.get("name")
    index = fragment.get("index")
    return (name if isinstance(name, str) else "", _arguments_text(function.get("arguments")),
            index if isinstance(index, int) and not isinstance(index, bool) else None)


def _arguments_text(value: Any) -> str:
    """A fragment's ``arguments`` as text (an object some servers send is serialised)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _joined_name(have: str, fragment: str, *, sent: bool) -> str:
    """The name so far and a name fragment: a repeat, a cumulative repeat, or the next piece."""
    if not have or fragment.startswith(have):
        return fragment
    if sent:
        return have  # a late piece once the name went out: the core keeps the first
    return have + fragment


def _complete_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
