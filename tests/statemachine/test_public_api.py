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
