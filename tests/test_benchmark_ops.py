"""benchmarks/ops.py keeps up with the registry: each step it times runs with its parameters."""

import importlib.util
import json
import pathlib

import numpy as np
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


def test_the_peers_stand_for_registered_steps_and_recipes():
    assert set(ops.ALBUMENTATIONS) | set(ops.KERAS) <= set(registered_steps())
    for recipe in ops.ALBUMENTATIONS_RECIPES:
        assert ops.recipe_steps(recipe) == ops.augments([], recipe)[f"recipe {recipe}"]


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


def test_a_recipe_with_an_image_size_gets_the_pipeline_size():
    assert ops.augments([], "yolo") == {"recipe yolo": recipes.yolo(ops.SIZE[0])}


def test_the_yolo_peer_takes_the_recipe_parameters_and_mosaics_four_photographs():
    albumentations = pytest.importorskip("albumentations")
    mosaic, flip, affine, hsv = ops.albumentations_yolo(albumentations, recipes.yolo(64))
    assert (mosaic.target_size, mosaic.cell_shape, mosaic.fill) == ((64, 64), (64, 64), 114.0)
    assert mosaic.center_range == (0.0, 1.0)
    assert flip.p == 0.5
    assert affine.fill == 114.0
    assert hsv.hue_shift_limit == pytest.approx((-2.7, 2.7))
    assert hsv.sat_shift_limit == pytest.approx((-89.25, 89.25))
    assert hsv.val_shift_limit == pytest.approx((-51.0, 51.0))
    transform = albumentations.Compose(
        [mosaic],
        bbox_params=albumentations.BboxParams(format="albumentations", label_fields=["labels"]),
        seed=3,
    )

    def photo(label: int) -> dict:
        # A whole-image box in a 32 x 48 photograph: each partner's box reaches the canvas.
        image = np.full((32, 48, 3), label * 50, np.uint8)
        return {"image": image, "bboxes": np.array([[0.0, 0.0, 1.0, 1.0]]), "labels": [label]}

    out = transform(**photo(1), mosaic_metadata=[photo(2), photo(3), photo(4)])
    # Seed 3 puts the centre where all four cells show; each photograph is letterboxed in grey.
    assert out["image"].shape == (64, 64, 3)
    assert set(np.unique(out["image"])) == {50, 100, 150, 200, 114}
    assert sorted(out["labels"]) == [1, 2, 3, 4]


def test_the_albumentations_worker_times_noop_steps_and_the_recipe(tmp_path, capsys):
    pytest.importorskip("albumentations")
    rng = np.random.default_rng(0)
    data = tmp_path / "photos.npz"
    boxes = np.array([[0.1, 0.2, 0.5, 0.6], [0.0, 0.0, 1.0, 1.0], [0.3, 0.3, 0.4, 0.9]])
    images = rng.integers(0, 256, (2, 48, 64, 3), dtype=np.uint8)
    np.savez(data, images=images, boxes=boxes, counts=np.array([1, 2]))
    ops.albumentations_worker(str(data), ["random_horizontal_flip"], "yolo", 3, 1)
    timings = json.loads(capsys.readouterr().out)
    assert set(timings) == {ops.BASELINE, "random_horizontal_flip", "recipe yolo"}
    assert all(ms > 0 for ms in timings.values())
