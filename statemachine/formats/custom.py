"""The freeform custom-tool format: ``<custom_tool_call name="NAME">`` + raw input text.

OpenAI ``custom`` tools (Codex's ``apply_patch``) take free text, not JSON. A
model writes such a call as::

    <custom_tool_call name="apply_patch">
    *** Begin Patch
    …
    *** End Patch
    </custom_tool_call>

The input is everything between the opening tag's ``>`` and the closer, taken
verbatim (never JSON-parsed, never unescaped), minus exactly one leading and
one trailing newline, so that the tags can stand on lines of their own. Nothing
inside the input is a sentinel: ``<``, ``{``, quotes, backticks, fences, other
call openers and ``<think>`` are all input text; only the literal closer ends
it, wherever it stands (like a heredoc terminator). An input that itself holds
``</custom_tool_call>`` therefore cannot be written; the prompt says so. A
patch is safe: its content lines start with ``+``, ``-`` or a space.
"""

from __future__ import annotations

import re
from .._events import CUSTOM
from .._scanning import NewlineTrim, partial_at_end
from .._reader import BodyReader, CallSink, COMPLETE, MORE, Outcome
from ._base import TextFormat

CLOSER = "</custom_tool_call>"
_TAG_END = re.compile(r"[<>]")
_NAME_ATTRIBUTE = re.compile(r"""name\s*=\s*(?:"([^"]*)"|'([^']*)')""")


class CustomToolBody:
    """Reads one custom tool call after its opener ``<custom_tool_call ``: attributes, then raw input.

    The header goes out as soon as the opening tag's ``>`` shows an accepted
    name; the input then streams as it arrives, holding back only a possible
    partial closer at the chunk's end and one trailing newline (it may be the
    last, which is trimmed).
    """

    _TAG_LIMIT = 256  # an opening tag with no '>' after this many characters is not a call

    def __init__(self, ctx: CallSink):
        self.ctx = ctx
        self.named = False
        self.trim = NewlineTrim()

    def feed(self, buf: str, pos: int) -> tuple[Outcome, int]:
        if not self.named:
            m = _TAG_END.search(buf, pos, pos + self._TAG_LIMIT)
            if m is None:
                if len(buf) - pos >= self._TAG_LIMIT:
                    return self._not_a_call(pos)
                return MORE, pos
            if buf[m.start()] == "<":
                return self._not_a_call(pos)
            name = _NAME_ATTRIBUTE.search(buf, pos, m.start())
            if name is None:
                return self._not_a_call(pos)
            self.named = True
            self.ctx.call_name((name.group(1) if name.group(1) is not None else name.group(2)).strip(), kind=CUSTOM)
            pos = m.end()
        end = buf.find(CLOSER, pos)
        if end == -1:
            # every closer starts with '<': without one the whole rest is input
            keep = len(buf) if buf.find("<", pos) == -1 else partial_at_end(buf, pos, (CLOSER,))
            self._input(buf[pos:keep])
            return MORE, keep
        self._input(buf[pos:end])
        self.ctx.call_end()  # a held trailing newline was the input's last: trimmed
        return COMPLETE, end + len(CLOSER)

    def _not_a_call(self, pos: int) -> tuple[Outcome, int]:
        self.ctx.call_abort("not_a_call", "the custom_tool_call tag has no name")
        return COMPLETE, pos

    def _input(self, text: str) -> None:
        text = self.trim.stream(self.trim.leading(text))
        if text:
            self.ctx.call_args(text)

    def at_eof(self) -> None:
        if self.named:
            self.ctx.call_unclosed()  # accepted after a normal stop; a cut-short output makes it incomplete
        else:
            self.ctx.call_incomplete()


class CustomToolFormat(TextFormat):
    """``<custom_tool_call name="NAME">`` raw input ``</custom_tool_call>``: calls to custom (freeform) tools.

    ``render_call`` and ``instructions`` take the raw input text where the
    JSON formats take arguments. A :class:`~statemachine.ChoiceStream`
    recognises this format whenever the request offers a custom tool.
    """

    name = "custom_tool_call"
    openers = ("<custom_tool_call ",)
    closer = CLOSER

    def render_call(self, name: str, arguments: str) -> str:
        """The block for a call of custom tool ``name`` with raw input ``arguments``."""
        return f'<custom_tool_call name="{name}">\n{arguments}\n{CLOSER}'

    def instructions(self, example_name: str, example_arguments: str) -> str:
        """Prompt rules for custom tools, with a worked example whose input is ``example_arguments``."""
        example = self.render_call(example_name, example_arguments)
        return (
            "A custom tool takes free text as its input, not JSON. To call one, write a block like this:\n"
            f"{example}\n"
            "Rules:\n"
            '- Put the tool\'s exact name in name="…" and start the input on the next line.\n'
            "- Write the input exactly as the tool expects it: no JSON, no quotes around it, no escaping, "
            "no code fence around it.\n"
            f"- End the input with {CLOSER} on a line of its own; the input itself must never contain "
            f"{CLOSER}.\n"
            "- Write one block per call; the client runs the tool and sends the result back in a later message."
        )

    def marked_openers(self, marker: str) -> dict[str, str]:
        """The marked opener keeps its trailing space: the ``name`` attribute follows the marker."""
        return {f'<custom_tool_call marker="{marker}" ': self.openers[0]}

    def new_body(self, opener: str, sink: CallSink) -> BodyReader:
        return CustomToolBody(sink)

