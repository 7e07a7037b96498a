"""Request tools / tool_choice / legacy functions → ParserConfig."""

from __future__ import annotations

import pytest

from app.errors import ApiError
from app.chat.schemas import parse_chat_request
from app.settings import Settings
from app.chat.plan import chat_parser_config
from app.pipeline.plan import build_parser_config
from app.profile import model_profile
from statemachine import ToolChoice, ToolSpec
from support.fakes import WEATHER_TOOL

USER = [{"role": "user", "content": "hi"}]
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "strict": True,
                                              "parameters": {"type": "object", "properties": {}}}}


def config_for(**body):
    settings = Settings()
    return chat_parser_config(parse_chat_request({"model": "m", "messages": USER, **body}), settings,
                              model_profile(settings, "m"))


def test_tools_become_specs():
    config = config_for(tools=[WEATHER_TOOL, TIME_TOOL])
    assert set(config.tools) == {"get_weather", "get_time"}
    assert config.tools["get_weather"].description == "Current weather for a city"
    assert config.tools["get_time"].strict is True and config.tools["get_weather"].strict is False
    assert config.tool_choice == ToolChoice("auto") and config.parallel_tool_calls is True
    assert not config.legacy_functions and config.formats[0] == "tool_call"


@pytest.mark.parametrize("choice, expected", [
    ("none", ToolChoice("none")),
    ("required", ToolChoice("required")),
    ({"type": "function", "function": {"name": "get_time"}}, ToolChoice("required", frozenset({"get_time"}))),
    ({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [
        {"type": "function", "function": {"name": "get_weather"}}]}}, ToolChoice("auto", frozenset({"get_weather"}))),
])
def test_tool_choice_forms(choice, expected):
    assert config_for(tools=[WEATHER_TOOL, TIME_TOOL], tool_choice=choice).tool_choice == expected


def test_parallel_tool_calls_false():
    assert config_for(tools=[WEATHER_TOOL], parallel_tool_calls=False).parallel_tool_calls is False


def test_legacy_functions():
    config = config_for(functions=[WEATHER_TOOL["function"]], function_call={"name": "get_weather"})
    assert config.legacy_functions and not config.parallel_tool_calls
    assert config.tool_choice == ToolChoice("required", frozenset({"get_weather"}))


def test_no_tools_disables_parsing():
    assert not config_for().parsing_enabled


def test_preferred_format_goes_first():
    config = build_parser_config([ToolSpec("f")], ToolChoice(), parallel_tool_calls=True, legacy_functions=False,
                                 settings=Settings(), profile=model_profile(Settings(tool_format="use_tool"), "m"))
    assert config.formats[0] == "use_tool" and len(config.formats) == len(set(config.formats))


def test_named_choice_must_be_offered():
    with pytest.raises(ApiError) as info:
        build_parser_config([ToolSpec("f")], ToolChoice("required", frozenset({"g"})), parallel_tool_calls=True,
                            legacy_functions=False, settings=Settings(), profile=model_profile(Settings(), "m"))
    assert info.value.param == "tool_choice" and info.value.status == 400


def test_requests_offering_the_same_tools_share_one_tool_set():
    """An open stream holds its config to its end: equal tools (schemas included) are one copy, not one a stream."""
    first, second = config_for(tools=[WEATHER_TOOL]), config_for(tools=[WEATHER_TOOL])
    assert first.tools is second.tools
    assert first.policy is second.policy and first.formats is second.formats
    renamed = {"type": "function", "function": {**WEATHER_TOOL["function"], "description": "Another."}}
    other = config_for(tools=[renamed])
    assert other.tools is not first.tools
    assert other.tools["get_weather"].description == "Another."


def test_the_shared_tool_sets_are_bounded(monkeypatch):
    from app.pipeline import plan

    monkeypatch.setattr(plan._tool_sets, "max_entries", 2)
    plan._tool_sets.clear()
    tools = [[ToolSpec(f"tool_{i}")] for i in range(3)]
    sets = [plan.shared_tool_set(t) for t in tools]
    assert plan.shared_tool_set(tools[2]) is sets[2]
    assert plan.shared_tool_set(tools[0]) is not sets[0]  # evicted: a fresh mapping, equal to it
    assert plan.shared_tool_set(tools[0]) == sets[0] and len(plan._tool_sets.entries) == 2
    monkeypatch.setattr(plan._tool_sets, "max_size", 10)  # a set larger than the whole budget is not kept
    assert plan.shared_tool_set(tools[1]) is not plan.shared_tool_set(tools[1])


def test_a_tool_set_key_holds_no_more_memory_than_its_length():
    """The caches count their keys by length: a key must not keep orjson's growth buffer (30x for this one)."""
    import tracemalloc

    from app.pipeline import plan

    tools = [ToolSpec("get_weather", "Wetter für eine Stadt — aktuell", {"type": "object"})]
    tracemalloc.start()
    try:
        key = plan.tools_key(tools)
        held = sum(t.size for t in tracemalloc.take_snapshot().traces)
    finally:
        tracemalloc.stop()
    assert key is not None and held < 2 * len(key) + 1024


def test_a_tools_list_is_validated_once_and_errors_still_name_their_parameter():
    """The validated ``tools`` are kept by their JSON: a request resending them gets the same objects (not
    validated again); what else it gets wrong is still named, and a bad list is never kept."""
    tools = [{"type": "function", "function": {"name": "cached_tool", "parameters": {"type": "object"}}}]
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools}
    first = parse_chat_request(dict(body))
    second = parse_chat_request(dict(body, tools=[dict(t) for t in tools]))
    assert second.tools is first.tools and second.tools[0].function.name == "cached_tool"
    with pytest.raises(ApiError) as bad_choice:
        parse_chat_request(dict(body, temperature=5))
    assert bad_choice.value.param == "temperature"
    broken = [{"type": "function", "function": {"name": 3}}]
    for _ in range(2):
        with pytest.raises(ApiError) as bad_tool:
            parse_chat_request(dict(body, tools=broken))
        assert bad_tool.value.param == "tools[0].function.name"


def test_the_same_tools_json_is_checked_and_shared_once(monkeypatch):
    """Issue 30: a validated tools list (one per distinct JSON) is turned into its checked, shared tool set
    once; a list that fails its check is refused every time."""
    from app.chat import plan as chat_plan
    from app.errors import InputError

    tool = {"type": "function", "function": {"name": "once_only_tool", "parameters": {"type": "object"}}}
    settings = Settings(response_store_path="")
    checked = []
    original = chat_plan._offered_tools
    monkeypatch.setattr(chat_plan, "_offered_tools", lambda tools: checked.append(tools) or original(tools))
    first, second = (chat_parser_config(parse_chat_request(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [tool]}), settings,
        model_profile(settings, "m"))
        for _ in range(2))
    assert first.tools is second.tools and list(first.tools) == ["once_only_tool"] and len(checked) == 1
    twice = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [tool, tool]}
    for _ in range(2):
        with pytest.raises(InputError) as refused:
            chat_parser_config(parse_chat_request(twice), settings, model_profile(settings, "m"))
        assert refused.value.param == "tools[1].function.name"
    assert len(checked) == 3
