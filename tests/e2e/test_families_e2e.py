"""Model-family formats end to end: openai SDK → gunicorn/gevent toolwire → scripted upstream.

One server with ``TOOLWIRE_TOOL_FORMAT=auto``: each client model maps to a
back-end model of one family, whose own format the prompt teaches, the
output is parsed in and the transcript renders earlier calls in; the
family's end-of-turn tokens and reasoning never reach the answer's content.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from support.scripted_upstream import Script, ScriptedUpstream
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
USER = [{"role": "user", "content": "What's the weather in SF?"}]
FAMILIES = {  # client model: (back-end model, model text, the family's opener)
    "ds": ("deepseek-ai/DeepSeek-V3.1", "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
           '{"city": "SF"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>', "<｜tool▁calls▁begin｜>"),
    "ds-v3.2": ("deepseek-ai/DeepSeek-V3.2", 'Checking.<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
                '<｜DSML｜parameter name="city" string="true">SF</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
                "</｜DSML｜function_calls>", '<｜DSML｜invoke name="get_weather">'),
    "gemma-4": ("google/gemma-4-31B-it", '<|channel>thought\nThe weather tool.<channel|>Checking.<|tool_call>'
                'call:get_weather{city:<|"|>SF<|"|>}<tool_call|>', "<|tool_call>call:get_weather{"),
    "kimi": ("moonshotai/Kimi-K2-Instruct", "Checking.<|tool_calls_section_begin|><|tool_call_begin|>"
             'functions.get_weather:0<|tool_call_argument_begin|>{"city": "SF"}<|tool_call_end|>'
             "<|tool_calls_section_end|>", "<|tool_calls_section_begin|>"),
    "mistral": ("mistralai/Mistral-Small-3.2-24B", 'Checking.[TOOL_CALLS]get_weather[ARGS]{"city": "SF"}',
                "[TOOL_CALLS]"),
    "glm": ("zai-org/GLM-4.5", "Checking.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>SF</arg_value>\n"
            "</tool_call>", "<arg_key>"),
    "llama": ("meta-llama/Llama-3.3-70B-Instruct",
              'Checking.<|python_tag|>{"name": "get_weather", "parameters": {"city": "SF"}}<|eom_id|>',
              "<|python_tag|>"),
    "gpt-oss": ("openai/gpt-oss-20b", "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
                "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary "
                'to=functions.get_weather <|constrain|>json<|message|>{"city": "SF"}<|call|>', "to=functions."),
    "llama4": ("meta-llama/Llama-4-Maverick-17B-128E-Instruct",
               "Checking.<|python_start|>[get_weather(city='SF')]<|python_end|>", "[get_weather("),
    "olmo": ("allenai/Olmo-3-32B-Think", "Checking.<function_calls>get_weather(city=\"SF\")</function_calls>",
             "<function_calls>"),
    "gemma3": ("google/gemma-3-27b-it", 'Checking.```tool_code\nget_weather(city="SF")\n```', "```tool_code"),
    "fgemma": ("google/functiongemma-270m-it",
               "Checking.<start_function_call>call:get_weather{city:<escape>SF<escape>}<end_function_call>",
               "<start_function_call>"),
    "functionary": ("meetkai/functionary-small-v3.2", 'all\nChecking.>>>get_weather\n{"city": "SF"}', ">>>get_weather"),
}

#: A family's answer after the tool result, with its end-of-turn token or reasoning as text: only "Sunny." shows
#: (the families without either answer "Sunny.").
ANSWERS = {"ds": "Sunny.<｜end▁of▁sentence｜>", "kimi": "Sunny.<|im_end|>", "glm": "Sunny.<|user|>",
           "mistral": "[THINK]The tool said so.[/THINK]Sunny.", "llama": "Sunny.<|eot_id|>",
           "gpt-oss": "<|channel|>analysis<|message|>The tool said so.<|end|><|start|>assistant<|channel|>final"
                      "<|message|>Sunny.<|return|>"}


#: What the prompt shows of a family whose format teaches its calls by an abstract list (issue 38), not its opener.
TAUGHT = {"llama4": "[tool_name1(param1=value1"}


@pytest.fixture(scope="module")
def families_server(toolwire_factory: Callable[..., ToolwireServer]) -> ToolwireServer:
    model_map = {client: upstream_model for client, (upstream_model, _, _) in FAMILIES.items()}
    return toolwire_factory(TOOLWIRE_TOOL_FORMAT="auto", TOOLWIRE_MODEL_MAP=json.dumps(model_map))


def _system_text(body: dict[str, Any]) -> str:
    """The text that teaches the format: the system message's, or the first user turn's for a family without a
    system role (Gemma 3, ``system_in: auto``)."""
    system = [m["content"] for m in body["messages"] if m["role"] in ("system", "developer")]
    return "\n".join(system) or body["messages"][0]["content"]


@pytest.mark.parametrize("model", sorted(FAMILIES))
def test_family_call_streams_and_renders_back(model: str, families_server: ToolwireServer,
                                              upstream: ScriptedUpstream, make_openai_client) -> None:
    _, text, opener = FAMILIES[model]
    client = make_openai_client(families_server)
    upstream.enqueue(Script(text=text, chunks=7), Script(text=ANSWERS.get(model, "Sunny."), chunks=3))
    with client.chat.completions.stream(model=model, messages=USER, tools=[WEATHER]) as stream:
        list(stream)
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls] == [
        ("get_weather", {"city": "SF"})]
    assert (choice.message.content, choice.finish_reason) == ("Checking.", "tool_calls")
    assert TAUGHT.get(model, opener) in _system_text(upstream.chat_requests[0].body)

    (call,) = choice.message.tool_calls
    history = [*USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": "get_weather", "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    follow_up = client.chat.completions.create(model=model, messages=history, tools=[WEATHER])
    assert follow_up.choices[0].message.content == "Sunny."
    assistant_text = "\n".join(m["content"] or "" for m in upstream.chat_requests[1].body["messages"]
                               if m["role"] == "assistant")
    assert opener in assistant_text and ('{"name"' not in assistant_text or model == "llama")
    if model == "gpt-oss":  # the result comes back as the family's template writes it
        assert "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>sunny<|end|>" in "\n".join(
            m["content"] or "" for m in upstream.chat_requests[1].body["messages"] if m["role"] == "user")


def test_by_default_an_untaught_family_is_read_and_prose_keeps_its_chunks(
        toolwire_server: ToolwireServer, upstream: ScriptedUpstream, make_openai_client) -> None:
    """Default settings teach a bare JSON list of calls and read every family (``accept_formats=all``): a Mistral call is
    a call; the prose before it, whose ``<`` and ``[`` start no sentinel, arrives in the upstream's pieces (sent
    apart: pieces that arrive together go on as one)."""
    pieces = ["See <b>this</b> and ", "[the docs](x) | a < b | ", '[TOOL_CALLS]get_weather[ARGS]{"city": "SF"}']
    upstream.enqueue(Script(text="".join(pieces), chunks=pieces, delay_between_chunks=0.01))
    client = make_openai_client(toolwire_server)
    with client.chat.completions.stream(model="m", messages=USER, tools=[WEATHER]) as stream:
        deltas = [e.delta for e in stream if e.type == "content.delta"]
        final = stream.get_final_completion()
    assert deltas == pieces[:2]
    choice = final.choices[0]
    assert [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls] == [
        ("get_weather", {"city": "SF"})]
    assert choice.finish_reason == "tool_calls"
    assert '[\n{"name": "get_weather", "arguments": {' in _system_text(upstream.chat_requests[0].body)
