"""DeepSeek V3.2 / V4 DSML calls through the core, under every chunking: the peers' cases (``dsml_cases``) and ours."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dsml_cases import CASES, INV, INV_END, NAMES, PAR, PAR_END, TC, TE, invoke, param, strict_block
from harness import Call, Open, run_chunks, tr, visible
from statemachine import ParserConfig, ToolCallArgumentsDelta, ToolSpec, get_format

FORMATS = ("deepseek_v32", "deepseek_v4")
OPEN = {n: {"type": "object"} for n in NAMES}


def config(fmt: str, tools: dict | None = None) -> ParserConfig:
    specs = [ToolSpec(name, "", schema) for name, schema in (tools or OPEN).items()]
    return replace(ParserConfig.for_tools(specs), formats=(fmt, "tool_call"))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("source", "label", "text", "expected", "options"), CASES,
                         ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_peer_case(fmt, source, label, text, expected, options):
    options = dict(options)
    options.pop("differs", None)
    tr(config(fmt, options.pop("tools", None)), text, expected, **options)


def test_no_dsml_token_reaches_the_content():
    for _, _, text, expected, options in CASES:
        if not any(isinstance(item, str) and "DSML" in item for item in expected):
            for fmt in FORMATS:
                events = run_chunks(config(fmt, options.get("tools")), list(text))
                assert "DSML" not in visible(events), text


# ours -------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_rendered_call_round_trips(fmt):
    rendered = get_format(fmt).render_call("get_weather", '{"city": "Paris", "days": 2, "tags": ["a"]}')
    tools = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                                             "tags": {"type": "array"}}}}
    tr(config(fmt, tools), rendered, [Call("get_weather", '{"city": "Paris", "days": 2, "tags": ["a"]}')],
       finish="tool_calls", notes=[])
    assert rendered.startswith(TC if fmt == "deepseek_v4" else "<｜DSML｜function_calls>")
    assert 'string="false">2<' in rendered and 'string="true">Paris<' in rendered


def test_a_string_value_streams_before_its_closing_tag():
    body = "A" * 4096
    text = strict_block(invoke("emit", param("text", body)))
    chunks = [text[i:i + 32] for i in range(0, len(text), 32)]
    events = run_chunks(config("deepseek_v4", {"emit": {"type": "object", "properties": {"text": {"type": "string"}}}}),
                        chunks)
    fragments = [e.fragment for e in events if isinstance(e, ToolCallArgumentsDelta)]
    assert len(fragments) > 100 and "".join(fragments) == '{"text": "' + body + '"}'


def test_a_value_with_json_escapes_streams_as_a_json_string():
    text = strict_block(invoke("fn", param("code", 'print("a\\tb")\n\tx = 1')))
    tr(config("deepseek_v32"), text, [Call("fn", {"code": 'print("a\\tb")\n\tx = 1'})], finish="tool_calls")


def test_a_malformed_second_invoke_keeps_the_first_call():
    text = strict_block(invoke("fn", param("k", "v")), f'{INV}bad name">{INV_END}')
    tr(config("deepseek_v4"), text, [Call("fn", {"k": "v"})], finish="tool_calls")


def test_an_unclosed_section_after_complete_invokes():
    tr(config("deepseek_v4"), TC + invoke("fn", param("k", "v")), [Call("fn", {"k": "v"})], finish="tool_calls",
       notes=["recovered_unclosed"])


def test_cut_inside_a_streamed_value_is_incomplete():
    text = TC + f'{INV}fn">{PAR}k" string="true">partial'
    tr(config("deepseek_v4"), text, [Open("fn", '{"k": "partial')], notes=["incomplete"])


def test_the_wrapper_is_kept_when_other_parameters_follow():
    tools = {"get_weather": {"type": "object", "properties": {"location": {"type": "string"}}}}
    text = strict_block(invoke("get_weather", param("input", '{"location": "x"}', "false") + param("location", "y")))
    tr(config("deepseek_v4", tools), text, [Call("get_weather", {"input": {"location": "x"}, "location": "y"})],
       finish="tool_calls")


def test_marker_mode_reads_only_marked_sections():
    marked = replace(config("deepseek_v32"), marker="k3J9")
    fmt = get_format("deepseek_v32").with_marker("k3J9")
    assert fmt.openers == ('<｜DSML｜function_calls marker="k3J9">', '<｜DSML｜tool_calls marker="k3J9">')
    rendered = fmt.render_call("fn", '{"k": "v"}')
    tr(marked, rendered, [Call("fn", {"k": "v"})], finish="tool_calls")
    quoted = invoke("fn", f'{PAR}k" string="true">v{PAR_END}')
    tr(marked, quoted, [quoted], leak_ok=True)
    assert TE not in rendered


def test_prose_after_an_unclosed_section_is_text():
    tr(config("deepseek_v4"), TC + invoke("fn", param("k", "v")) + "\nDone.", [Call("fn", {"k": "v"}), "Done."],
       finish="tool_calls")


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_end_of_sentence_token_is_dropped(fmt):
    tr(config(fmt), "Hi.<｜end▁of▁sentence｜>", ["Hi."], notes=[])
