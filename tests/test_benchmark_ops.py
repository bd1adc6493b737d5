"""benchmarks/ops.py keeps up with the registry: each step it times runs with its parameters."""

import importlib.util
import pathlib

import pytest

from object_input import recipes
from object_input.ops import get_step, registered_steps

# Loaded under a name of its own: a top-level "ops" would shadow or be shadowed by tests/ops.
_PATH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "ops.py"
_SPEC = importlib.util.spec_from_file_location("benchmark_ops", _PATH)
ops = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ops)


def test_every_step_timed_alone_resolves_with_probability_one_where_it_has_one():
    for name in registered_steps():
        if name in ops.NOT_ALONE:
            continue
        resolved = get_step(name).resolve(ops.step_params(name))
        assert resolved.get("probability", 1.0) == 1.0, name


def test_the_peers_stand_for_registered_steps():
    assert set(ops.ALBUMENTATIONS) | set(ops.KERAS) <= set(registered_steps())


def test_rows_are_each_step_alone_and_the_pipelines_of_the_combining_steps_asked_for():
    flip = ops.augments(["random_horizontal_flip"], None)
    assert flip == {"random_horizontal_flip": [("random_horizontal_flip", {"probability": 1.0})]}
    assert list(ops.augments(["mosaic"], None)) == ["mosaic", *ops.COMBINED]


def test_a_recipe_is_a_row_and_an_unknown_one_names_the_known_ones():
    assert ops.augments([], "cifar10") == {"recipe cifar10": recipes.cifar10()}
    with pytest.raises(SystemExit, match="cifar10"):
        ops.augments([], "no_such_recipe")


def test_every_peer_builds():
    import keras

    albumentations = pytest.importorskip("albumentations")
    for build in ops.ALBUMENTATIONS.values():
        assert isinstance(build(albumentations), albumentations.BasicTransform)
    for build in ops.KERAS.values():
        assert isinstance(build(keras.layers, ops.KERAS_BOX_FORMAT), keras.layers.Layer)
