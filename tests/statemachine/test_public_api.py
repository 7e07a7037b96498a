"""The public surface: an explicit, sorted __all__, documented, and nothing else public."""

import inspect

import statemachine


def test_all_is_sorted_and_complete():
    public = {name for name in dir(statemachine) if not name.startswith("_")}
    modules = {name for name in public if inspect.ismodule(getattr(statemachine, name))}
    assert statemachine.__all__ == sorted(statemachine.__all__)
    assert set(statemachine.__all__) == public - modules


def test_every_public_class_and_function_is_documented():
    for name in statemachine.__all__:
        obj = getattr(statemachine, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), name


def test_the_format_plug_in_api_is_documented():
    from statemachine import formats

    assert formats.__all__ == sorted(formats.__all__)
    for name in formats.__all__:
        assert inspect.getdoc(getattr(formats, name)), name
    for method in ("render_call", "new_body", "instructions", "marked_openers", "with_marker"):
        assert inspect.getdoc(getattr(formats.TextFormat, method)), method


def test_every_event_is_a_frozen_value_however_it_is_made():
    # The deltas set their fields through their slots (a chunk's event, made once a chunk): they stay frozen
    # dataclasses, equal and hashed by value, made by position or keyword, copied by dataclasses.replace.
    import dataclasses

    from statemachine import ReasoningDelta, TextDelta, ToolCallArgumentsDelta, ToolCallInputDelta

    for event, fields in [(TextDelta("Hi"), {"text": "Hi"}), (ReasoningDelta("hm"), {"text": "hm"}),
                          (ToolCallArgumentsDelta(1, '{"a"'), {"index": 1, "fragment": '{"a"'}),
                          (ToolCallInputDelta(0, "x"), {"index": 0, "fragment": "x"})]:
        cls = type(event)
        assert dataclasses.asdict(event) == fields
        assert event == cls(**fields) and hash(event) == hash(cls(**fields)) and event != cls(*("z" for _ in fields))
        assert repr(event) == f"{cls.__name__}({', '.join(f'{k}={v!r}' for k, v in fields.items())})"
        assert dataclasses.replace(event) == event and not hasattr(event, "__dict__")
        for name in fields:
            try:
                setattr(event, name, "other")
            except dataclasses.FrozenInstanceError:
                continue
            raise AssertionError(f"{cls.__name__}.{name} was set")
