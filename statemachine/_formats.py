"""Text formats a model can write calls in, and the registry a host can extend.

A format knows its openers, how to ask a model to write a call (prompt
instructions), how to render a call back into text (for transcripts), and how
to parse a call body (a ``CallBody`` the scanner drives).
"""

from __future__ import annotations

import json
import re
from typing import Any


class TextFormat:
    """Base class of a tool-call text format.

    Subclasses set ``name``, ``openers`` and ``closer``, and implement
    :meth:`render_call` and :meth:`new_body`.
    """

    #: The registry key, e.g. ``"tool_call"``.
    name: str = ""
    #: Literal openers that start a call (the scanner matches them exactly).
    openers: tuple[str, ...] = ()
    #: The literal that closes a call of this format.
    closer: str = ""

    def render_call(self, name: str, arguments: str) -> str:
        """The canonical text of one call, as the model is asked to write it.

        Args:
            name: the function name.
            arguments: the arguments as a JSON object text.
        Returns:
            The call block, e.g. ``<tool_call>{"name": …}</tool_call>``.
        """
        raise NotImplementedError

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
            f"To call a tool, write exactly one block like this for each call:\n{example}\n"
            "Rules:\n"
            f"- Use exactly one opener and one closer ({self.closer}) per call; never repeat the closer.\n"
            "- Put nothing else inside the block: no code fences, no comments, no extra braces.\n"
            "- Arguments are one JSON object using the tool's exact parameter names; "
            "a tool without parameters gets {}.\n"
            "- Write each call as its own block; never wrap several calls in a JSON array.\n"
            "- The client runs the tools and sends the results back in a later message.\n"
            "- If no tool is needed, answer in plain text without any block."
        )

    def new_body(self, opener: str, ctx: Any) -> Any:  # pragma: no cover - replaced by subclasses
        """Start parsing the body after ``opener`` (internal scanner protocol)."""
        raise NotImplementedError

    def marked_openers(self, marker: str) -> dict[str, str]:
        """Each marked opener with the plain opener it stands for (see :meth:`with_marker`).

        The marked opener inserts `` marker="…"`` before the opener's last
        character. An opener ending in a space takes free attributes
        (``<use_tool ``); its format has a tag form too, so it has no marked form.
        """
        return {f'{op[:-1]} marker="{marker}"{op[-1]}': op for op in self.openers if op[-1] != " "}

    def with_marker(self, marker: str | None) -> "TextFormat":
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
        self._unmarked = base.marked_openers(marker)
        self.openers = tuple(self._unmarked)

    def render_call(self, name: str, arguments: str) -> str:
        text = self.base.render_call(name, arguments)
        plain = self.base.openers[0]
        return self.openers[0] + text[len(plain):] if text.startswith(plain) else text

    def instructions(self, example_name: str, example_arguments: str) -> str:
        return (super().instructions(example_name, example_arguments)
                + f'\n- Every call must start with the opener exactly as shown, including marker="{self.marker}"; '
                "a block without it is treated as plain text.")

    def new_body(self, opener: str, ctx: Any) -> Any:
        return self.base.new_body(self._unmarked[opener], ctx)

    def with_marker(self, marker: str | None) -> TextFormat:
        return self.base.with_marker(marker)


def _compact_object(arguments: str) -> str:
    """Arguments as given when they are JSON, else ``{}``."""
    try:
        json.loads(arguments)
    except (TypeError, ValueError):
        return "{}"
    return arguments


class ToolCallFormat(TextFormat):
    """``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` (Hermes, Qwen; the default)."""

    name = "tool_call"
    openers = ("<tool_call>",)
    closer = "</tool_call>"

    def render_call(self, name: str, arguments: str) -> str:
        return f'<tool_call>{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {_compact_object(arguments)}}}</tool_call>'

    def new_body(self, opener: str, ctx: Any) -> Any:
        from ._bodies import JsonCallsBody

        return JsonCallsBody(ctx, self.closer)


class UseToolFormat(TextFormat):
    """``<use_tool><name>NAME</name><args>{…}</args></use_tool>`` (Obsidian Copilot)."""

    name = "use_tool"
    openers = ("<use_tool>", "<use_tool ")
    closer = "</use_tool>"

    def render_call(self, name: str, arguments: str) -> str:
        return f"<use_tool><name>{name}</name><args>{_compact_object(arguments)}</args></use_tool>"

    def new_body(self, opener: str, ctx: Any) -> Any:
        from ._bodies import UseToolBody

        return UseToolBody(ctx, has_attributes=opener.endswith(" "))


class FunctionFormat(TextFormat):
    """``<function=NAME>{…}</function>`` or with ``<parameter=K>V</parameter>`` children."""

    name = "function"
    openers = ("<function=",)
    closer = "</function>"

    def render_call(self, name: str, arguments: str) -> str:
        return f"<function={name}>{_compact_object(arguments)}</function>"

    def new_body(self, opener: str, ctx: Any) -> Any:
        from ._bodies import FunctionBody

        return FunctionBody(ctx)


_REGISTRY: dict[str, TextFormat] = {}


def register_format(fmt: TextFormat, *, replace: bool = False) -> None:
    """Add a text format to the registry so a ``ParserConfig`` can name it.

    Args:
        fmt: the format object; ``fmt.name`` is its key.
        replace: allow replacing a format of the same name.
    Raises:
        ValueError: the name is empty, or taken and ``replace`` is false.
    """
    if not fmt.name:
        raise ValueError("a text format needs a non-empty name")
    if fmt.name in _REGISTRY and not replace:
        raise ValueError(f"text format {fmt.name!r} is already registered")
    _REGISTRY[fmt.name] = fmt


def get_format(name: str) -> TextFormat:
    """The registered format called ``name``.

    Raises:
        KeyError: no format has that name.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no text format named {name!r}; registered: {sorted(_REGISTRY)}") from None


def registered_formats() -> tuple[str, ...]:
    """Names of every registered format, in registration order."""
    return tuple(_REGISTRY)


for _fmt in (ToolCallFormat(), UseToolFormat(), FunctionFormat()):
    register_format(_fmt)
