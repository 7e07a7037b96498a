"""Shown examples are no calls; meant calls are (issue 38 "Reading what models write", issue 43 items 5 and 6).

Every answer of ``shown_examples.SHOWN`` (API docs with a request body, configuration examples, refusals that
show a body, function definitions, list comprehensions, tutorials, JSON data, BFCL irrelevance-style prose)
stays text, whole, under ``auto``, with its own tools alone and with every tool offered; every answer of
``shown_examples.MEANT`` (the real small model's call forms on BFCL's cases) becomes exactly its calls. Both
under every chunking (``harness.tr``: whole, one character at a time, every two-chunk split, fixed sizes,
random splits), with every registered format read, as the service reads them by default.
"""

from __future__ import annotations

import pytest

from harness import Call, tr
from shown_examples import MEANT, SHOWN, TOOLS, Meant, Shown
from statemachine import ParserConfig, ToolChoice, ToolSpec, registered_formats

#: What the service reads by default: the taught format first, then every registered one (accept_formats=all).
FORMATS = ("tool_call", *(name for name in registered_formats() if name not in ("tool_call", "custom_tool_call")))
#: Every answer is also split at every position (the longest is 494 characters).
EVERY_SPLIT = 500
SPECS = {name: ToolSpec(name, f"The {name} tool.", schema) for name, schema in TOOLS.items()}


def config(names: tuple[str, ...], **kwargs: object) -> ParserConfig:
    return ParserConfig.for_tools([SPECS[name] for name in names], formats=FORMATS, **kwargs)  # type: ignore[arg-type]


def _id(item: Shown | Meant) -> str:
    return item.kind


@pytest.mark.parametrize("offered", ["its_tools", "every_tool"])
@pytest.mark.parametrize("shown", SHOWN, ids=_id)
def test_an_answer_that_shows_json_makes_no_call_under_auto(shown: Shown, offered: str) -> None:
    names = shown.tools if offered == "its_tools" else tuple(TOOLS)
    tr(config(names), shown.text, [shown.text], finish="stop", two_split_limit=EVERY_SPLIT)


@pytest.mark.parametrize("meant", MEANT, ids=_id)
def test_an_answer_that_means_calls_makes_them_under_auto(meant: Meant) -> None:
    expected: list[object] = [meant.text] if meant.text else []
    expected += [Call(name, args) for name, args in meant.calls]
    tr(config(meant.tools), meant.answer, expected, finish="tool_calls", two_split_limit=EVERY_SPLIT)


#: Under a forced choice the answer must be a call, so a call written after text counts (issue 31); but an
#: example shown inside prose that says so (a refusal, documentation, a tutorial) is still no call (issue 43
#: item 5): a forced choice the model did not meet is better failed than met with an example.
_EXAMPLES_IN_PROSE = [shown for shown in SHOWN if shown.kind in ("api_doc", "api_doc_named", "refusal", "tutorial")
                      and not shown.text.startswith(("{", "```"))]


@pytest.mark.parametrize("shown", _EXAMPLES_IN_PROSE, ids=_id)
def test_an_example_in_prose_is_no_call_under_a_forced_choice(shown: Shown) -> None:
    tr(config(shown.tools, tool_choice=ToolChoice("required")), shown.text, [shown.text], finish="stop",
       two_split_limit=EVERY_SPLIT)


def test_the_issue_43_refusal_is_no_send_email_call_under_any_choice() -> None:
    text = ('I will not send anything without your confirmation. For reference, the API takes a body like:\n'
            '{"to": "boss@example.com", "subject": "Resignation", "body": "I quit."}')
    for choice in (ToolChoice(), ToolChoice("required"), ToolChoice("required", frozenset({"send_email"}))):
        tr(config(("send_email",), tool_choice=choice), text, [text], finish="stop")
