"""The format plug-in protocol: what a text format gives the core, and what its reader may call."""

from __future__ import annotations

import abc
import json
import re
from typing import Any, Protocol, Sequence

from .._reader import BodyReader, CallSink, Pending


#: What :meth:`TextFormat.refutes` answers: ``True``, ``(note kind, message)``, ``None`` or ``False``.
Refutation = bool | tuple[str, str] | None


class TextFormat(abc.ABC):
    """A tool-call text format: the plug-in a host registers with :func:`~statemachine.register_format`.

    A format gives the core four things:

    * its literal ``openers`` (each starts a block; the scanner matches them
      exactly, split anywhere across chunks) and its ``closer`` (``""`` when
      its blocks end by syntax alone; a closer found in prose right after a
      call is dropped as an orphan); optionally its reasoning delimiters
      (:attr:`reasoning_delimiters`), the tokens that end its messages or
      turns (:attr:`end_tokens`) and those its calls are written in
      (:attr:`call_tokens`);
    * its body reader, :meth:`new_body`: a :class:`BodyReader` reporting to a
      :class:`CallSink`;
    * its prompt text, :meth:`instructions`: rules and a worked example;
    * its transcript rendering, :meth:`render_call`: an earlier call written
      back as the model would write it, so that imitation yields parseable calls.

    A family may also read calls written without an opener at a message's
    start (:attr:`reads_bare`, :meth:`bare_start`: pythonic lists, a first
    Functionary recipient, Harmony's first recipient) and write tool results
    its own way (:meth:`render_result`). One whose output has a structure of
    its own (Harmony's channels, Functionary's recipients) drops headers that
    open no call (:meth:`CallSink.drop_block`), and may open reasoning there
    (a :attr:`reasoning_delimiters` pair without an opener).

    Subclasses set ``name``, ``openers`` and ``closer``, and implement
    :meth:`render_call` and :meth:`new_body`.
    """

    #: The registry key, e.g. ``"tool_call"``.
    name: str = ""
    #: Whether :meth:`bare_instructions` shows the worked calls it is given (a copy of them is then no call).
    bare_shows_calls: bool = True
    #: Literal openers that start a call (the scanner matches them exactly).
    openers: tuple[str, ...] = ()
    #: The literal that closes a call of this format (``""``: none).
    closer: str = ""
    #: Fragments of the model names this format is the family's own for (``"gemma-3"``): ``tool_format = auto``
    #: picks the format whose fragment a model's name holds, compared in lower case on letters and digits only
    #: (``gemma-3`` is found in ``gemma3:270m``); the longest fragment found wins (see :func:`format_for_model`).
    model_names: tuple[str, ...] = ()
    #: Formats whose bodies this format's reader reads too: an opener it shares with one of them is read by
    #: this format's reader whichever is listed first (GLM's reader takes ``<tool_call>`` from format A).
    reads_also: frozenset[str] = frozenset()
    #: The family's own reasoning delimiters ``(opener, closer)``, read as ``<think>`` … ``</think>`` are, with
    #: or without ``ParserConfig.reasoning`` (Seed-OSS's ``<seed:think>``, Magistral's ``[THINK]``). An empty
    #: opener: the format's reader opens reasoning (:meth:`CallSink.drop_block`, Harmony's analysis header),
    #: and does so even without tools.
    reasoning_delimiters: tuple[str, str] | None = None
    #: Special tokens that end a message or a turn and carry no text (``<|eot_id|>``, Harmony's ``<|return|>``):
    #: wherever one stands in visible text it is dropped.
    end_tokens: tuple[str, ...] = ()
    #: The special tokens a call of the format is written in: a block that goes back to text goes without them.
    call_tokens: tuple[str, ...] = ()
    #: Whether the family's chat template has a system role; without one (Gemma 3's writes the system text into
    #: the first user turn) toolwire's ``system_in: auto`` puts the tool block there too.
    system_role: bool = True
    #: Whether :meth:`bare_start` may find calls written without an opener at a message's start (after
    #: whitespace, reasoning or dropped headers, before anything visible; never in marker mode).
    reads_bare: bool = False

    @abc.abstractmethod
    def render_call(self, name: str, arguments: str) -> str:
        """The canonical text of one call, as the model is asked to write it.

        Args:
            name: the function name.
            arguments: the arguments as a JSON object text.
        Returns:
            The call block, e.g. ``<tool_call>{"name": …}</tool_call>``.
        """

    def render_reasoning(self, text: str) -> str:
        """Reasoning as the family's model writes it (a transcript gives a turn's reasoning back this way).

        Between the family's :attr:`reasoning_delimiters`, else ``<think>`` and ``</think>``.
        """
        opener, closer = self.reasoning_delimiters or ("<think>", "</think>")
        return f"{opener}{text}{closer}"

    @abc.abstractmethod
    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        """A reader for the body after ``opener`` (one of :attr:`openers`), reporting to ``sink``."""

    def refutes(self, opener: str, buf: str, pos: int) -> Refutation:
        """Whether the text right after ``opener`` (``buf[pos:]``, what of it has arrived) already shows its
        block would be disproved: the scanner then leaves the opener in the text without opening a block. An
        opener that opened and closed a block every few characters (a line of ``>``, a page of ``<tool>``
        tags, a repeated broken opener) cost two ``transitions`` triggers each, 25-100x prose.

        It must say exactly what the format's reader would decide from the same characters (a test reads
        every sentinel fuzzed both ways), so a format answers only where it can tell as cheaply.

        Returns:
            ``True``: text, with no note (the block would be released as ``not_a_call``); ``(kind,
            message)``: text, and the note the reader would have made (``tool_open_refuted`` makes it);
            ``None``: the text so far cannot tell (the scanner holds it for more, within a bound);
            ``False``: the block opens and its reader decides (the default).
        """
        return False

    def bare_start(self, buf: str, pos: int, sink: CallSink) -> BodyReader | Pending | None:
        """A call written without an opener at the message's start (``reads_bare`` formats only).

        Args:
            buf: the text; ``buf[pos]`` is the message's first significant character.
            pos: where to look.
            sink: the call book (its ``config`` names the offered tools).
        Returns:
            The reader for the block starting at ``pos`` (it reads ``buf[pos:]``,
            no opener before it); :attr:`Pending.PARTIAL` while ``buf[pos:]`` may
            still become one (the chunk ended too soon: the core asks again with
            more text); ``None`` when it is none.
        """
        return None

    def render_result(self, name: str | None, result: str) -> str | None:
        """A tool result as the family's template writes it, or ``None`` for toolwire's labelled result.

        Args:
            name: the tool's name, when known.
            result: the result's text.
        """
        return None

    def instructions(self, example_name: str, example_arguments: str) -> str:
        """Prompt text telling the model how to write calls in this format.

        Args:
            example_name: a tool name for the worked example.
            example_arguments: example arguments (a JSON object text).
        Returns:
            Rules plus one worked example, ready to put in a system message.
        """
        example = self.render_call(example_name, example_arguments)
        return (
            f"To call tools, reply with only the calls, each written like this:\n{example}\n"
            "- One block per call, each on its own line; write every call the request needs.\n"
            "- Arguments are one JSON object with the tool's parameter names and the request's values "
            "({} for a tool without parameters).\n"
            "- Nothing else: no code fence, no comment, no text around the calls.\n"
            "- If no tool fits the request, answer in plain text without any call."
        )

    def bare_instructions(self, calls: Sequence[tuple[str, str]]) -> str | None:
        """Prompt text teaching calls written without an opener (read by the core's bare-JSON rule at a message's
        start), for a format whose models write them so; ``None`` (the default): :meth:`instructions` is taught.
        Never taught in marker mode or when the client asked for a JSON answer: bare calls are text there.

        Args:
            calls: a worked example of two or three calls of the offered tools, ``(name, arguments JSON)`` each.
        """
        return None

    def marked_openers(self, marker: str) -> dict[str, str]:
        """Each marked opener with the plain opener it stands for (see :meth:`with_marker`).

        The marked opener inserts `` marker="…"`` before the opener's last
        character. An opener ending in a space takes free attributes
        (``<use_tool ``); its format has a tag form too, so it has no marked form.
        """
        return {f'{op[:-1]} marker="{marker}"{op[-1]}': op for op in self.openers if op[-1] != " "}

    def with_marker(self, marker: str | None) -> TextFormat:
        """This format with every opener carrying ``marker`` (``self`` when ``marker`` is ``None``).

        The marked opener inserts `` marker="…"`` before the opener's last
        character: ``<tool_call marker="k3J9">``, ``<use_tool marker="k3J9">``,
        ``<function marker="k3J9"=``. Only marked openers start a call, so
        sentinel text quoted from a tool result or a user message stays text.

        Args:
            marker: the per-request marker (letters, digits, ``-``, ``_``), or ``None``.
        Raises:
            ValueError: the marker is empty or has other characters.
        """
        if marker is None:
            return self
        if not _MARKER.fullmatch(marker):
            raise ValueError("a marker is 1-64 letters, digits, '-' or '_'")
        return _MarkedFormat(self, marker)


_MARKER = re.compile(r"[A-Za-z0-9_-]{1,64}")


class _MarkedFormat(TextFormat):
    """A registered format whose calls must repeat a per-request marker in the opener."""

    def __init__(self, base: TextFormat, marker: str):
        self.base = base
        self.marker = marker
        self.name = base.name
        self.closer = base.closer
        self.reads_also, self.reasoning_delimiters = base.reads_also, base.reasoning_delimiters
        self.end_tokens, self.call_tokens = base.end_tokens, base.call_tokens
        self._unmarked = base.marked_openers(marker)
        self.openers = tuple(self._unmarked)

    def __getattr__(self, name: str) -> Any:
        # What the base format's own methods read (a delimiter, its rules, its section tag) when they run on
        # this format (:meth:`instructions`); only attributes this class does not have come here.
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def render_call(self, name: str, arguments: str) -> str:
        text = self.base.render_call(name, arguments)
        plain = self.base.openers[0]
        if text.startswith(plain):
            return self.openers[0] + text[len(plain):]
        # A call the base format writes bare (a pythonic list) is read in marker mode only inside the opener.
        return f"{self.openers[0]}{text}{self.closer}"

    def render_reasoning(self, text: str) -> str:
        return self.base.render_reasoning(text)

    def instructions(self, example_name: str, example_arguments: str) -> str:
        # The base format's rules, run on this format so that the worked example carries the marker.
        return (type(self.base).instructions(self, example_name, example_arguments)
                + f'\n- Every call must start with the opener exactly as shown, including marker="{self.marker}"; '
                "a block without it is treated as plain text.")

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return self.base.new_body(self._unmarked[opener], sink)

    def render_result(self, name: str | None, result: str) -> str | None:
        return self.base.render_result(name, result)

    def with_marker(self, marker: str | None) -> TextFormat:
        return self.base.with_marker(marker)


def call_instructions(example: str, rules: tuple[str, ...]) -> str:
    """Prompt text for a model family's format: the worked ``example``, its ``rules``, then the shared ones."""
    return "\n".join((
        f"To call a tool, write exactly this for each call:\n{example}", "Rules:",
        *(f"- {rule}" for rule in rules),
        "- The client runs the tools and sends the results back in a later message.",
        "- If no tool is needed, answer in plain text without any tool call."))


def compact_object(arguments: str) -> str:
    """Arguments as given when they are JSON, else ``{}``."""
    try:
        json.loads(arguments)
    except (TypeError, ValueError):
        return "{}"
    return arguments


class CallsBlockReader(Protocol):
    """A reader of a block that holds several calls, as :func:`end_calls_at_eof` ends it."""

    #: Whom the reader reports to.
    sink: CallSink
    #: How many calls the block began.
    calls: int
    #: A call's arguments are complete but its end is not: what follows them would show it.
    pending: bool

    @property
    def in_arguments(self) -> bool:
        """The reader is inside a call's arguments."""


def end_calls_at_eof(body: CallsBlockReader, *, repaired: bool = False, invalid: bool = False) -> None:
    """The stream ended inside a block of calls: a call cut in its arguments is incomplete, one whose end was
    still pending is unclosed (``repaired`` / ``invalid`` as its reader found it), and a block that never
    started a call goes back to text."""
    if body.in_arguments:
        body.sink.call_incomplete()
    elif body.pending:
        body.pending = False
        body.sink.call_unclosed(repaired=repaired, invalid=invalid)
    elif not body.calls:
        body.sink.call_abort("not_a_call", "the block ended before a call started")
