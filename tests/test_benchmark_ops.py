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
    crop = ops.augments(["random_crop_to_aspect_ratio"], None)
    assert crop == {"random_crop_to_aspect_ratio": [("random_crop_to_aspect_ratio", {})]}
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


def test_a_step_runs_with_its_demo_params_and_photo_sizes_replace_only_demo_sizes():
    assert ops.step_params("normalize_image") == get_step("normalize_image").demo_params
    assert ops.step_params("random_crop_to_size") == {"height": 384, "width": 384}
    assert ops.step_params("random_gaussian_blur") == {"probability": 1.0}
    for name, sizes in ops.PHOTO_SIZES.items():
        assert set(sizes) <= set(get_step(name).demo_params), name
