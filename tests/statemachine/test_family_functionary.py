"""Functionary v3.1 (``<function=NAME>{…}</function>``, ``<|python_tag|>`` code) and v3.2 (``>>>NAME`` recipients)
through the core, under every chunking.

Cases marked LLAMA_CPP are mined from llama.cpp's tests (repository, file,
commit): texts theirs, structure ours. vLLM, SGLang and Ollama have no
Functionary parser; the other cases are ours.
"""

from __future__ import annotations

from dataclasses import replace

from harness import Call, Open, tr
from statemachine import ParserConfig, ToolSpec, get_format

LLAMA_CPP = "ggml-org/llama.cpp tests/test-chat.cpp @ e7e21164bdf5434e3453777fd27e68cdc0ebfe94"
OBJ = {"type": "object"}
TOOLS = [ToolSpec(n, "", OBJ) for n in ("special_function", "python", "get_weather", "get_time")]
V31 = replace(ParserConfig.for_tools(TOOLS), formats=("functionary", "tool_call"))
V32 = replace(ParserConfig.for_tools(TOOLS), formats=("functionary_v3_2", "tool_call"))
DEFAULT = ParserConfig.for_tools(TOOLS)
CALL = Call("special_function", '{"arg1": 1}')


def test_v31_json_body():  # LLAMA_CPP
    for config in (V31, DEFAULT):  # format C reads the JSON body too: no collision
        tr(config, '<function=special_function>{"arg1": 1}</function>', [CALL], finish="tool_calls")
        tr(config, "Hello, world!\nWhat's up?", ["Hello, world!\nWhat's up?"])


def test_v31_calls_inside_text():
    tr(V31, 'Hell<function=get_weather>{"city": "SF"}</function>o, world<function=get_time>{}</function>!',
       ["Hell", Call("get_weather", {"city": "SF"}), "o, world", Call("get_time", {}), "!"], finish="tool_calls")


def test_v31_python_tag_code():
    tr(V31, "<|python_tag|>print('hey')\nprint(\"x\")<|eom_id|>",
       [Call("python", {"code": "print('hey')\nprint(\"x\")"})], finish="tool_calls")
    tr(V31, "<|python_tag|>print('hey')", [Call("python", {"code": "print('hey')"})], finish="tool_calls",
       notes=["recovered_unclosed"])
    tr(V31, "<|python_tag|>print('hey", [Open("python", '{"code": "print(\'hey')], upstream="length",
       finish="length", notes=["incomplete"])


def test_v32_text_then_call():  # LLAMA_CPP
    tr(V32, "all\nHello, world!\nnono\nWhat's up?>>>special_function\n{\"arg1\": 1}\n",
       ["Hello, world!\nnono\nWhat's up?", CALL], finish="tool_calls")


def test_v32_python_lines():  # LLAMA_CPP
    tr(V32, "python\n# This is a program:\nprint('hey')",
       [Call("python", {"code": "# This is a program:\nprint('hey')"})], finish="tool_calls",
       notes=["recovered_unclosed"])


def test_v32_first_call_without_recipient_marker():  # LLAMA_CPP
    tr(V32, 'special_function\n{"arg1": 1} \n                    ', [CALL], finish="tool_calls")


def test_v32_text_only():  # LLAMA_CPP
    tr(V32, "all\nHello, world!\nWhat's up?", ["Hello, world!\nWhat's up?"])


def test_v32_with_markers_everywhere():
    tr(V32, '>>>all\nLet me check.\n>>>get_weather\n{"city": "SF"}\n>>>get_time\n{}',
       ["Let me check.\n", Call("get_weather", {"city": "SF"}), Call("get_time", {})], finish="tool_calls")


def test_v32_an_all_part_after_text_starts_on_a_new_line():
    """The ``>>>all`` line is a message header: dropped (``drop_block``), the next part on a line of its own."""
    tr(V32, "Let me check.>>>all\nDone.", ["Let me check.\nDone."])
    tr(V32, '>>>get_time\n{}>>>all\nDone.', [Call("get_time", {}), "Done."], finish="tool_calls")


def test_v32_prose_is_not_a_recipient():
    for text in ("all good here", "allow me\nto explain", "get_weather is a tool", "special"):
        tr(V32, text, [text])


def test_v32_unknown_recipient_is_text():
    tr(V32, ">>>weather\nsunny", [">>>weather\nsunny"])


def test_rendered_calls_round_trip():
    for config, name in ((V31, "functionary"), (V32, "functionary_v3_2")):
        tr(config, get_format(name).render_call("get_weather", '{"city": "SF"}'), [Call("get_weather", {"city": "SF"})],
           finish="tool_calls")
