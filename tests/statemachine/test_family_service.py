"""Each model family's format through the service (the Flask app, a played upstream) under many chunkings.

``TOOLWIRE_TOOL_FORMAT`` names the family: the prompt teaches its format and
the family's special tokens never reach the message content.
"""

from __future__ import annotations

import json

import pytest

from harness import chunkings
from support.fakes import PlayingUpstream

SF = {"city": "SF"}
CASES = {
    "deepseek": ("Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
                 '{"city": "SF"}\n```<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}'
                 "<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "<｜tool▁calls▁begin｜>"),
    "deepseek_v32": ('Checking.<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter '
                     'name="city" string="true">SF</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name="get_time">'
                     "\n</｜DSML｜invoke>\n</｜DSML｜function_calls>", "<｜DSML｜function_calls>"),
    "deepseek_v4": ('Checking.<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter '
                    'name="city" string="true">SF</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name="get_time"/>'
                    "\n</｜DSML｜tool_calls>", "<｜DSML｜tool_calls>"),
    "gemma4": ('Checking.<|tool_call>call:get_weather{city:<|"|>SF<|"|>}<tool_call|><|tool_call>call:get_time{}'
               "<tool_call|><|tool_response>", "<|tool_call>call:"),
    "kimi_k2": ("Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                '<|tool_call_argument_begin|>{"city": "SF"}<|tool_call_end|><|tool_call_begin|>functions.get_time:1'
                "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
                "<|tool_calls_section_begin|>"),
    "glm": ("Checking.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>SF</arg_value>\n</tool_call>"
            "<tool_call>get_time</tool_call>", "<arg_key>"),
    "llama3": ('Checking.<|python_tag|>{"name": "get_weather", "parameters": {"city": "SF"}}; '
               '{"name": "get_time", "parameters": {}}<|eom_id|>', "<|python_tag|>"),
    "minimax": ('Checking.<minimax:tool_call><invoke name="get_weather"><parameter name="city">SF</parameter>'
                '</invoke><invoke name="get_time"></invoke></minimax:tool_call>', "<minimax:tool_call>"),
    "seed_oss": ("Checking.<seed:tool_call><function=get_weather><parameter=city>SF</parameter></function>"
                 "</seed:tool_call><seed:tool_call><function=get_time>{}</function></seed:tool_call>",
                 "<seed:tool_call>"),
    "mistral": ('Checking.[TOOL_CALLS]get_weather[ARGS]{"city": "SF"}[TOOL_CALLS]get_time[ARGS]{}', "[TOOL_CALLS]"),
    "harmony": ("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary"
                "<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
                '<|constrain|>json<|message|>{"city": "SF"}<|call|><|start|>assistant to=functions.get_time'
                "<|channel|>commentary json<|message|>{}<|call|>", "to=functions."),
    "pythonic": ("Checking.<|python_start|>[get_weather(city='SF'), get_time()]<|python_end|>", "[get_weather("),
    "gemma": ("Checking.```tool_code\n[get_weather(city='SF'), get_time()]\n```", "```tool_code"),
    "functiongemma": ("Checking.<start_function_call>call:get_weather{city:<escape>SF<escape>}<end_function_call>"
                      "<start_function_call>call:get_time{}<end_function_call>", "<start_function_call>"),
    "functionary": ('Checking.<function=get_weather>{"city": "SF"}</function><function=get_time>{}</function>',
                    "<function=get_weather>"),
    "functionary_v3_2": ('all\nChecking.>>>get_weather\n{"city": "SF"}\n>>>get_time\n{}', ">>>get_weather"),
    "olmo3": ("Checking.<function_calls>get_weather(city=\"SF\")\nget_time()</function_calls>", "<function_calls>"),
}


def _serve(monkeypatch, tmp_path, text, *, random_splits=6, **settings):
    """A test client on an upstream that plays ``text`` in one chunking per request, and the chunkings."""
    from app import create_app
    from app.http import extension
    from app.settings import Settings

    runs = chunkings(text, random_splits=random_splits, two_split_limit=0)
    upstream = PlayingUpstream([chunks for _, chunks in runs])
    monkeypatch.setattr(extension, "make_upstream", lambda _settings, _name: upstream)
    app = create_app(Settings(response_store_path=str(tmp_path / "r.sqlite3"), **settings))
    return app.test_client(), upstream, runs


def _answer(client, model="m"):
    """The one choice's (content, calls, finish_reason) for a request offering get_weather and get_time."""
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
             for n in ("get_weather", "get_time")]
    response = client.post("/v1/chat/completions", json={
        "model": model, "messages": [{"role": "user", "content": "hi"}], "tools": tools})
    assert response.status_code == 200, response.get_json()
    choice = response.get_json()["choices"][0]
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
             for c in choice["message"].get("tool_calls") or []]
    return choice["message"]["content"], calls, choice["finish_reason"]


TWO_CALLS = ("Checking.", [("get_weather", SF), ("get_time", {})], "tool_calls")
#: What the prompt of a format taught as a bare list at the reply's start holds instead of the format's opener.
TAUGHT_LIST = '[\n{"name": "get_weather", "arguments": {}},\n{"name": "get_time", "arguments": {}}\n]'
TAUGHT = {"pythonic": "[tool_name1(", "tool_call": TAUGHT_LIST}


def taught(family: str) -> str:
    return TAUGHT.get(family, CASES[family][1] if family in CASES else "")


@pytest.mark.parametrize("family", sorted(CASES))
def test_family_through_the_service(family, monkeypatch, tmp_path):
    text, opener = CASES[family]
    client, upstream, runs = _serve(monkeypatch, tmp_path, text, tool_format=family)
    for label, _ in runs:
        assert _answer(client) == TWO_CALLS, label
    assert taught(family) in upstream.prompts[0]  # the prompt taught the family's format


@pytest.mark.parametrize(("upstream_model", "family"), [
    ("deepseek-ai/DeepSeek-V3.1", "deepseek"), ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek_v32"),
    ("deepseek-ai/DeepSeek-V4-Flash", "deepseek_v4"), ("google/gemma-4-31B-it", "gemma4"), ("moonshotai/Kimi-K2-Instruct", "kimi_k2"),
    ("mistralai/Magistral-Small-2509", "mistral"), ("meta-llama/Llama-3.3-70B-Instruct", "llama3"),
    ("zai-org/GLM-4.6", "glm"), ("openai/gpt-oss-20b", "harmony"), ("gpt-oss:120b", "harmony"),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "pythonic"),
    ("allenai/Olmo-3-7B-Instruct", "olmo3"), ("google/gemma-3-27b-it", "gemma"),
    ("google/functiongemma-270m-it", "functiongemma"), ("meetkai/functionary-medium-v3.1", "functionary"),
    ("meetkai/functionary-small-v3.2", "functionary_v3_2")])
def test_auto_teaches_the_family_format_of_the_upstream_model(upstream_model, family, monkeypatch, tmp_path):
    text, opener = CASES[family]
    client, upstream, _ = _serve(monkeypatch, tmp_path, text, random_splits=0, tool_format="auto",
                                 model_map={"m": upstream_model})
    assert _answer(client) == TWO_CALLS
    assert taught(family) in upstream.prompts[0]


def test_a_bare_pythonic_list_at_the_start_is_read(monkeypatch, tmp_path):
    client, _, runs = _serve(monkeypatch, tmp_path, "[get_weather(city='SF'), get_time()]", tool_format="pythonic")
    for label, _ in runs:
        assert _answer(client) == (None, TWO_CALLS[1], "tool_calls"), label


def test_auto_falls_back_to_tool_call(monkeypatch, tmp_path):
    client, upstream, _ = _serve(monkeypatch, tmp_path, "hello", random_splits=0, tool_format="auto")
    assert _answer(client, "phi-4") == ("hello", [], "stop")
    assert TAUGHT_LIST in upstream.prompts[0]


def test_accept_all_reads_a_format_the_prompt_did_not_teach(monkeypatch, tmp_path):
    client, upstream, runs = _serve(monkeypatch, tmp_path, CASES["kimi_k2"][0], random_splits=2, accept_formats="all")
    for label, _ in runs:
        assert _answer(client) == TWO_CALLS, label
    assert TAUGHT_LIST in upstream.prompts[0] and "<|tool_call_begin|>" not in upstream.prompts[0]


def test_by_default_every_family_is_read(monkeypatch, tmp_path):
    client, upstream, runs = _serve(monkeypatch, tmp_path, CASES["mistral"][0], random_splits=2)
    for label, _ in runs:
        assert _answer(client) == TWO_CALLS, label
    assert TAUGHT_LIST in upstream.prompts[0] and "[TOOL_CALLS]" not in upstream.prompts[0]


def test_accept_default_leaves_an_untaught_family_as_text(monkeypatch, tmp_path):
    client, _, _ = _serve(monkeypatch, tmp_path, CASES["mistral"][0], random_splits=0, accept_formats="default")
    content, calls, finish = _answer(client)
    assert (content, calls, finish) == (CASES["mistral"][0], [], "stop")


def test_a_model_map_object_sets_format_and_accepted_formats(monkeypatch, tmp_path):
    route = {"model": "x", "tool_format": "deepseek", "accept_formats": "mistral"}
    client, upstream, _ = _serve(monkeypatch, tmp_path, CASES["mistral"][0], random_splits=0, model_map={"m": route})
    assert _answer(client) == TWO_CALLS
    assert "<｜tool▁calls▁begin｜>" in upstream.prompts[0]


def test_settings_refuse_unknown_formats():
    from pydantic import ValidationError

    from app.settings import Settings

    for bad in ({"tool_format": "nope"}, {"accept_formats": "tool_call,nope"}, {"accept_formats": " , "},
                {"model_map": {"m": {"accept_formats": "nope"}}}):
        with pytest.raises(ValidationError):
            Settings(**bad)
    assert Settings(accept_formats=" mistral , kimi_k2").accept_formats == "mistral,kimi_k2"


def test_harmony_without_tools_shows_only_the_final_channel(monkeypatch, tmp_path):
    text = ("<|channel|>analysis<|message|>The user greets.<|end|><|start|>assistant<|channel|>final<|message|>"
            "Hello!<|return|>")
    client, _, runs = _serve(monkeypatch, tmp_path, text, random_splits=3, tool_format="harmony")
    for label, _ in runs:
        response = client.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert response.get_json()["choices"][0]["message"]["content"] == "Hello!", label


@pytest.mark.parametrize(("family", "text"), [
    ("llama3", "Sunny.<|eot_id|>"), ("deepseek", "Sunny.<｜end▁of▁sentence｜>"), ("kimi_k2", "Sunny.<|im_end|>"),
    ("glm", "Sunny.<|user|>"), ("seed_oss", "<seed:think>The tool said so.</seed:think>Sunny.<seed:eos>"),
    ("mistral", "[THINK]The tool said so.[/THINK]Sunny.")])
def test_end_of_turn_tokens_and_reasoning_stay_out_of_the_content(family, text, monkeypatch, tmp_path):
    client, _, runs = _serve(monkeypatch, tmp_path, text, random_splits=2, tool_format=family)
    for label, _ in runs:
        assert _answer(client) == ("Sunny.", [], "stop"), label
