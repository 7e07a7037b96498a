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
