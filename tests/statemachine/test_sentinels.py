"""The scanner's fast path (``statemachine/_sentinels.py``): where a sentinel may start, and what it skips.

The finder is checked against a brute-force reference on random sentinel sets (any start characters, shared
prefixes, sentinels of one to a few characters) and random text; the scanner built on it is checked to keep
prose whole: a piece of text whose ``<`` and ``[`` start no sentinel goes out as one delta, so as one
client chunk (it went out in pieces split at each such character before).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import CFG, Call, Reasoning, tr
from statemachine import ChoiceStream, ParserConfig, ReasoningDelta, TextDelta, ToolCallNote, ToolSpec, registered_formats
from statemachine._sentinels import SentinelFinder

ALL = tuple(f for f in registered_formats() if f != "custom_tool_call")
ALPHABET = "<[|`ab/T"


def is_candidate(buf: str, j: int, sentinels: tuple[str, ...]) -> bool:
    """A sentinel starts at ``j``, or ``buf[j:]`` is a proper prefix of one (cut by the end)."""
    tail = buf[j:]
    return any(buf.startswith(s, j) or (len(tail) < len(s) and s.startswith(tail)) for s in sentinels)


@settings(max_examples=400, deadline=None)
@given(sentinels=st.lists(st.text(ALPHABET, min_size=1, max_size=6), min_size=1, max_size=8, unique=True),
       buf=st.text(ALPHABET + "x ", max_size=30), pos=st.integers(0, 30))
def test_find_skips_only_positions_where_no_sentinel_starts(sentinels, buf, pos):
    finder = SentinelFinder(tuple(sentinels))
    pos = min(pos, len(buf))
    found = finder.find(buf, pos)
    first = next((j for j in range(pos, len(buf)) if is_candidate(buf, j, tuple(sentinels))), -1)
    if first == -1:
        assert found == -1 or buf[found:found + finder.keys[buf[found]]] in finder.index
    else:
        assert found == first or (pos <= found < first and buf[found:found + finder.keys[buf[found]]] in finder.index)


@settings(max_examples=200, deadline=None)
@given(sentinels=st.lists(st.text(ALPHABET, min_size=1, max_size=6), min_size=1, max_size=8, unique=True),
       buf=st.text(ALPHABET + "x ", max_size=30))
def test_clear_text_has_no_sentinel_start_but_the_held_tail(sentinels, buf):
    finder = SentinelFinder(tuple(sentinels))
    end = finder.clear(buf)
    first = next((j for j in range(len(buf)) if is_candidate(buf, j, tuple(sentinels))), len(buf))
    assert end == -1 or end == first and (end == len(buf) or finder.held(buf, end))


def test_held_tail_is_only_a_proper_prefix():
    finder = SentinelFinder(("<｜tool▁calls▁begin｜>", "[TOOL_CALLS]"))
    assert finder.held("a <｜tool", 2) and finder.held("[TOOL_", 0)
    assert not finder.held("<｜x", 0) and not finder.held("[TOOL_CALLS]", 0) and not finder.held("a [the", 2)


PROSE_CHUNKS = ("See [the guide](https://x.io/a) and <b>bold</b> or ", "a <i>table</i>: | `x[0]` | [1, 2] | ",
                "```python\nif a[i] < b[j]: print(f\"<{i}>\")\n``` ", "a < b [", "TOOL] <", "div> done")


def test_each_prose_chunk_is_one_text_delta():
    tools = [ToolSpec("get_weather")]
    for formats in (ParserConfig().formats, ALL):
        stream = ChoiceStream(ParserConfig.for_tools(tools, formats=formats))
        stream.feed("Hi. ")
        for chunk in PROSE_CHUNKS:
            events = stream.feed(chunk)
            assert all(isinstance(e, TextDelta) for e in events), (formats, chunk, events)
            assert len(events) <= 1, (formats, chunk, events)  # a chunk ending in '[' or '<' holds it
        assert "".join(e.text for e in stream.finish("stop") if isinstance(e, TextDelta)) == ""


def test_a_sentinel_after_skipped_starts_is_still_found():
    text = 'a <b>x</b> [y](z) [TOOL_CALLS]get_weather[ARGS]{"city": "SF"}'
    tr(ParserConfig.for_tools(list(CFG.tools.values()), formats=ALL), text,
       ["a <b>x</b> [y](z) ", Call("get_weather", '{"city": "SF"}')], finish="tool_calls")


def test_a_partial_sentinel_held_after_a_reasoning_draft_is_not_lost():
    """Unclosed reasoning with a call drafted in it is read again at the end; a partial sentinel held after
    the draft (``<tool_ca``, a lone ``<``) belongs to it (before, the re-reading dropped it)."""
    for tail in ("<tool_ca", "<"):
        text = "<think>x<tool_call>y" + tail
        tr(CFG, text, [Reasoning("x<tool_call>y" + tail)], notes=[])


class BruteFinder:
    """The reference the scanner's fast path must agree with: it stops at every position where a sentinel,
    or a sentinel's start cut by the text's end, stands, and calls no text clear."""

    def __init__(self, sentinels: tuple[str, ...]):
        self.sentinels = sentinels

    def find(self, buf: str, pos: int) -> int:
        return next((j for j in range(pos, len(buf)) if is_candidate(buf, j, self.sentinels)), -1)

    def held(self, buf: str, i: int) -> bool:
        return any(len(buf) - i < len(s) and s.startswith(buf[i:]) for s in self.sentinels)


def brute_stream(config: ParserConfig) -> ChoiceStream:
    """A stream whose scanner finds sentinels by brute force (every sentinel table stays the real one)."""
    stream = ChoiceStream(config, id_factory=lambda: "call_1")
    brute = BruteFinder(stream._sentinels)
    stream._find, stream._held, stream._clear = brute.find, brute.held, lambda text: -1
    think = (*stream._think_closes, *stream._think_opens, *stream._openers)
    stream._think_held_tail = BruteFinder(think).held
    return stream


def every_sentinel(config: ParserConfig) -> tuple[str, ...]:
    """Every sentinel of the request's formats: openers, closers, reasoning delimiters, end tokens."""
    return ChoiceStream(config)._sentinels


#: Everything every family writes around its sentinels (bare starts, headers, bodies), and prose.
FAMILY_TEXT = ("get_weather", '{"city": "SF"}', "[ARGS]", "to=functions.get_weather", "<|message|>",
               "<|constrain|>json", "analysis", "final", "commentary", "all\n", "[get_weather(city='SF')]",
               "get_weather(city='SF')", "tool_code\n", "\n", " ", "x", "<b>", "[y](z)", " a < b ", "```", "`",
               ">", "[", "<", "|", "｜", "</", "<|", "call:get_weather{city:<escape>SF<escape>}")
SENTINEL_CONFIGS = tuple(
    ParserConfig.for_tools([ToolSpec("get_weather")], formats=formats, reasoning=reasoning)
    for formats in (ALL, ("mistral", *ALL), ("harmony", *ALL), ("functionary_v3_2", *ALL))
    for reasoning in (True, False))


@settings(max_examples=600, deadline=None)
@given(data=st.data(), which=st.integers(0, len(SENTINEL_CONFIGS) - 1))
def test_every_sentinel_of_every_family_is_found_as_brute_force_finds_it(data, which):
    """Every kind of sentinel the formats have (openers of any start character, closers, ``[THINK]`` and the
    other families' reasoning delimiters, end-of-turn tokens, start-only openers like ``>>>``), whole or cut
    anywhere by a chunk's end, in text or in reasoning: the fast path reads it as a scanner that stops at
    every candidate position does, event for event."""
    config = SENTINEL_CONFIGS[which]
    sentinels = every_sentinel(config)
    pieces = st.sampled_from(sentinels) | st.sampled_from(FAMILY_TEXT) | st.sampled_from(sentinels).flatmap(
        lambda s: st.integers(1, len(s) - 1).map(lambda k: s[:k]))
    text = "".join(data.draw(st.lists(pieces, max_size=12)))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    fast, brute = ChoiceStream(config, id_factory=lambda: "call_1"), brute_stream(config)
    for chunk in chunks:
        assert fast.feed(chunk) == brute.feed(chunk), (text, chunks)
    assert fast.finish("stop") == brute.finish("stop"), (text, chunks)


def test_a_short_sentinel_keeps_the_other_start_characters_keys_long():
    """Functionary's ``>>>`` is three characters long; Gemma's ```` ```tool_code ```` stays keyed by four, so a
    markdown fence is no candidate (with one key length for all, every ```` ``` ```` was), and a chunk ending
    in a possible start (``>``, ``[``, ``<``) is clear up to it: the fast path holds that tail itself."""
    finder = SentinelFinder(every_sentinel(SENTINEL_CONFIGS[0]))
    assert (finder.keys[">"], finder.keys["`"], finder.keys["["], finder.keys["<"]) == (3, 4, 4, 4)
    fence = "```python\nif a[i] < b: x = '<i>'\n```\n"
    assert finder.find(fence, 0) == -1 and finder.clear(fence) == len(fence)
    texts = ("see <b>x</b>", "a [", "``", "<|", "a >>>", "```tool_code")
    assert [finder.clear(text) for text in texts] == [11, 2, 0, 0, -1, -1]
    assert finder.find("x ```tool_code\n", 0) == 2


REFUTED = (">>>>>>>>>> end of the quote\n>>> x = 1\n>>> print(x)\n>>>\n1\n",
           "<xml> <tool>a</tool> <json>x</json>? <response>\n  <b>ok</b></response><tools>!\n",
           ">>> " + "y" * 200)


def test_refuted_openers_open_no_block():
    """An opener whose next characters already show no call (a line of ``>``, a REPL prompt, tags in prose)
    stays text without opening a block: each block cost two transitions, 100x prose per character."""
    config = replace(CFG, formats=ALL)
    for text in REFUTED:
        tr(config, text, [text], notes=[])
        stream = ChoiceStream(config)
        stream.feed(text)
        assert stream.path == [], (text, stream.path)


def test_a_call_after_refuted_openers_is_read():
    config = replace(CFG, formats=ALL)
    tr(config, '>>>>\n>>> x = 1\n>>>get_weather\n{"city": "SF"}',
       [">>>>\n>>> x = 1\n", Call("get_weather", '{"city": "SF"}')], finish="tool_calls")
    tr(config, '<tool>x</tool> <tool>{"name": "get_weather", "arguments": {"city": "SF"}}</tool>',
       ["<tool>x</tool> ", Call("get_weather", '{"city": "SF"}')], finish="tool_calls")


def merged(events: list) -> list:
    """``events`` with each run of text (and of reasoning) as one delta: how a chunking splits text is free."""
    out: list = []
    for e in events:
        if out and type(e) is type(out[-1]) and isinstance(e, (TextDelta, ReasoningDelta)):
            out[-1] = type(e)(out[-1].text + e.text)
        else:
            out.append(e)
    return out


def unrefuted_stream(config: ParserConfig) -> ChoiceStream:
    """A stream whose scanner refutes no opener: every block opens and its reader decides. Functionary v3.2's
    ``>>>`` stays refuted in both: its refutation decides before its reader would at the end of the stream
    (``>>><use_tool `` is ``>>>`` then an opener, where its reader held the whole line as one block's text)."""
    stream = ChoiceStream(config, id_factory=lambda: "call_1")
    stream._refutable = frozenset({">>>"} & stream._refutable)
    return stream


#: Openers repeated or followed by what their readers reject (issue 30's costliest inputs), with and without
#: the text that makes them calls.
REJECTED_OPENERS = ("<tool_call>", "<use_tool ", "<use_tool>", "<function=", "<function name=", "<|tool_call>",
                    "<start_function_call>", "<tool>", "<xml>", ">>>", "x", "call:", "get_weather", "{", "}",
                    "[", "<", ">", "\n", " ", "<function=get_weather>", '{"name": "get_weather", "arguments": {}}',
                    "```\n", "<b>", "<think>", "</think>")


@settings(max_examples=500, deadline=None)
@given(data=st.data(), which=st.integers(0, len(SENTINEL_CONFIGS) - 1))
def test_a_refuted_opener_is_what_its_block_would_have_been(data, which):
    """An opener its format refutes from the next characters (``TextFormat.refutes``) opens no block, yet the
    stream says what opening the block and having its reader disprove it said: the same text byte for byte,
    the same rejection notes in the same places, the same calls, whatever the chunking and the finish."""
    config = SENTINEL_CONFIGS[which]
    pieces = st.sampled_from(REJECTED_OPENERS) | st.sampled_from(every_sentinel(config)) | st.sampled_from(
        FAMILY_TEXT)
    text = "".join(data.draw(st.lists(pieces, max_size=14)))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    finish = data.draw(st.sampled_from(("stop", "length")))
    refuting, reading = ChoiceStream(config, id_factory=lambda: "call_1"), unrefuted_stream(config)
    got = [e for chunk in chunks for e in refuting.feed(chunk)] + refuting.finish(finish)
    want = [e for chunk in chunks for e in reading.feed(chunk)] + reading.finish(finish)
    assert merged(got) == merged(want), (text, chunks, finish)


@pytest.mark.parametrize("which, text, finish, want", [
    (6, "\n```tool_code\n<tool_call>", "length", "\n```tool_code\n<tool_call>"),
    (6, "\n```tool_code\n<tool_call>", "stop", "\n```tool_code\n<tool_call>"),
    (0, "\n  ```tool_code\n<tool_call>", "length", "\n  ```tool_code\n<tool_call>"),
    (0, "x\n```tool_code\n<tool_call>", "length", None),  # the line break went out with the text: no fence
    (6, "<function=get_weather>```\n```tool_code", "length", None),
    (0, "```\nx<tool_call><tool_call>", "length", "```\nx<tool_call><tool_call>"),
])
def test_a_refuted_opener_leaves_the_fences_as_its_release(which, text, finish, want):
    """A refuted ```tool_code after a line break is a fence line, as the text its released block feeds to the
    fence tracker again (the whitespace it took in, then the opener) makes it: what follows is a fenced example,
    so a ``<tool_call>`` cut by the finish stays text. An opener after text that follows a held message-start
    fence is in that fence's example, as it is once that text has gone out before a block (the fuzz test above
    found these cases, the last at 5000 examples)."""
    config = SENTINEL_CONFIGS[which]
    refuting, reading = ChoiceStream(config, id_factory=lambda: "call_1"), unrefuted_stream(config)
    got = merged(refuting.feed(text) + refuting.finish(finish))
    assert got == merged(reading.feed(text) + reading.finish(finish))
    if want is not None:
        assert got[:-1] == [TextDelta(want)]
        assert [edge for edge in refuting.path if edge[1] != "upstream_finished"] == []  # no block opened


def test_repeated_rejected_openers_keep_their_text_and_notes():
    """The costliest inputs of issue 30: each opener is text again and keeps its rejection note, without a
    block (a ``transitions`` trigger pair each) for every one."""
    config = replace(CFG, formats=ALL)
    for opener, note in (("<use_tool ", "a new call began before this one was complete"),
                         ("<function=", "no '>' after the name"), ("<tool_call>", None), ("<|tool_call>", None)):
        text = opener * 40
        stream = ChoiceStream(config)
        events = [e for chunk in (text[i:i + 16] for i in range(0, len(text), 16)) for e in stream.feed(chunk)]
        events += stream.finish()
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == text
        notes = [e.message for e in events if isinstance(e, ToolCallNote)]
        # the openers the stream ends before their reader could tell (nothing after the last one, no '>' within
        # 128 characters after a '<function=') open one block at the finish: its reader has the last word
        assert notes[:-1] == ([] if note is None else [note] * (len(notes) - 1)), opener
        assert note is None or len(notes) > 20, opener
        assert len([edge for edge in stream.path if edge[1] != "tool_open_refuted"]) <= 3, opener
