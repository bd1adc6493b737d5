"""The package namespace: every public name resolves, lazily."""

import object_input


def test_every_public_name_resolves_and_all_is_complete():
    exported = set(object_input._EXPORTS) | set(object_input._SUBMODULES)
    assert set(object_input.__all__) == exported
    for name in object_input.__all__:
        assert getattr(object_input, name) is not None
    assert object_input.make_dataset.__module__ == "object_input.pipeline"
