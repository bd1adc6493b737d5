"""Tests for random_jitter_boxes, scale_boxes_to_pixel_coordinates and random_self_concat_image."""

import numpy as np
import pytest
import tensorflow as tf
from helpers import as_numpy, assert_masks_match_boxes, over_seeds, pixel_examples, run_in_graph
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from object_input import fields
from object_input.ops import (
    ConfigError,
    get_step,
    random_jitter_boxes,
    random_self_concat_image,
    scale_boxes_to_pixel_coordinates,
)
from object_input.ops.geometry import JITTER_MODES

# --- random_jitter_boxes ---------------------------------------------------------------------

# Boxes inside [0.25, 0.75]: with ratio <= 0.5 no edge can leave [0, 1], so nothing is clipped.
_central_boxes = hnp.arrays(
    np.float32, st.tuples(st.integers(1, 20), st.just(4)), elements=st.floats(0.25, 0.75, width=32)
).map(
    lambda a: np.concatenate(
        [np.minimum(a[:, :2], a[:, 2:]), np.maximum(a[:, :2], a[:, 2:]) + 0.01], 1
    )
)


def _distortion(before, after):
    """Per-edge d such that each edge moved outward by d × the box size along its axis."""
    height = before[:, 2] - before[:, 0]
    width = before[:, 3] - before[:, 1]
    sizes = np.stack([height, width, height, width], 1)
    return (after - before) * [-1, -1, 1, 1] / sizes


@given(_central_boxes, st.sampled_from(JITTER_MODES), st.floats(0.0, 0.5), st.integers(0, 2**31))
def test_jitter_modes(boxes, mode, ratio, seed):
    features = {fields.BOXES: tf.constant(boxes), fields.CLASSES: tf.ones([len(boxes)], tf.int32)}
    out = random_jitter_boxes(features, seed=seed, ratio=ratio, jitter_mode=mode)
    new = out[fields.BOXES].numpy()
    np.testing.assert_array_equal(out[fields.CLASSES], features[fields.CLASSES])
    d = _distortion(boxes, new)
    tolerance = 1e-3
    low, high = {"expand": (0, ratio), "shrink": (-ratio, 0)}.get(
        mode.split("_")[0], (-ratio, ratio)
    )
    assert (d >= low - tolerance).all() and (d <= high + tolerance).all()
    assert (new[:, 2] >= new[:, 0]).all() and (new[:, 3] >= new[:, 1]).all()
    if "symmetric" in mode:
        np.testing.assert_allclose(d[:, 0], d[:, 2], atol=tolerance)
        np.testing.assert_allclose(d[:, 1], d[:, 3], atol=tolerance)
        np.testing.assert_allclose(new[:, :2] + new[:, 2:], boxes[:, :2] + boxes[:, 2:], atol=1e-5)
    if mode.endswith("_xy"):
        np.testing.assert_allclose(d[:, 0], d[:, 1], atol=tolerance)
    same = random_jitter_boxes(features, seed=seed, ratio=ratio, jitter_mode=mode)
    np.testing.assert_array_equal(same[fields.BOXES], new)


@pytest.mark.parametrize("mode", JITTER_MODES)
def test_jitter_draws_cover_the_range(mode):
    boxes = np.tile([[0.3, 0.3, 0.6, 0.7]], [300, 1]).astype(np.float32)
    out = random_jitter_boxes(
        {fields.BOXES: tf.constant(boxes)}, seed=5, ratio=0.2, jitter_mode=mode
    )
    d = _distortion(boxes, out[fields.BOXES].numpy())
    low, high = {"expand": (0, 0.2), "shrink": (-0.2, 0)}.get(mode.split("_")[0], (-0.2, 0.2))
    # 300 boxes: the draws come close to both ends of the range and differ box to box.
    assert d.min() < low + 0.02 and d.max() > high - 0.02
    if mode == "default":
        # Four independent edges.
        assert not np.allclose(d[:, 0], d[:, 2], atol=1e-3)
        assert not np.allclose(d[:, 0], d[:, 1], atol=1e-3)
    elif mode.endswith("symmetric"):
        # y and x draw independently.
        assert not np.allclose(d[:, 0], d[:, 1], atol=1e-3)


@given(
    hnp.arrays(
        np.float32, st.tuples(st.integers(0, 8), st.just(4)), elements=st.floats(0, 1, width=32)
    ),
    st.sampled_from(JITTER_MODES),
    st.integers(0, 2**31),
)
def test_jitter_output_valid_and_clipped(raw, mode, seed):
    boxes = np.concatenate(
        [np.minimum(raw[:, :2], raw[:, 2:]), np.maximum(raw[:, :2], raw[:, 2:])], 1
    )
    out = random_jitter_boxes(
        {fields.BOXES: tf.constant(boxes)}, seed=seed, ratio=0.5, jitter_mode=mode
    )
    new = out[fields.BOXES].numpy()
    assert new.shape == boxes.shape
    assert ((new >= 0) & (new <= 1)).all()
    assert (new[:, 2] >= new[:, 0] - 1e-6).all() and (new[:, 3] >= new[:, 1] - 1e-6).all()


def test_jitter_exact_and_edge_cases():
    boxes = tf.constant([[0.0, 0.2, 1.0, 0.4]])
    out = random_jitter_boxes({fields.BOXES: boxes}, seed=1, ratio=0.0)
    np.testing.assert_array_equal(out[fields.BOXES], boxes)
    # Expanding a full-height box: y stays clipped at [0, 1].
    out = random_jitter_boxes({fields.BOXES: boxes}, seed=1, ratio=0.5, jitter_mode="EXPAND")
    np.testing.assert_array_equal(out[fields.BOXES].numpy()[0, [0, 2]], [0.0, 1.0])
    assert random_jitter_boxes({fields.IMAGE: tf.zeros([2, 2, 3])}, seed=1).keys() == {fields.IMAGE}
    empty = random_jitter_boxes({fields.BOXES: tf.zeros([0, 4])}, seed=1)
    assert empty[fields.BOXES].shape == (0, 4)
    graph = run_in_graph(
        random_jitter_boxes, {fields.BOXES: boxes}, seed=[1, 2], jitter_mode="shrink"
    )
    eager = random_jitter_boxes({fields.BOXES: boxes}, seed=[1, 2], jitter_mode="shrink")
    np.testing.assert_array_equal(graph[fields.BOXES], eager[fields.BOXES])


# --- scale_boxes_to_pixel_coordinates ---------------------------------------------------------


def test_scale_boxes_to_pixel_coordinates_exact():
    features = {
        fields.IMAGE: tf.zeros([4, 6, 3], tf.uint8),
        fields.BOXES: tf.constant([[0.25, 0.5, 0.75, 1.0]]),
        fields.KEYPOINTS: tf.constant([[[0.5, 0.5], [np.nan, np.nan]]]),
    }
    for out in (
        scale_boxes_to_pixel_coordinates(features),
        run_in_graph(scale_boxes_to_pixel_coordinates, features, seed=None),
    ):
        np.testing.assert_allclose(out[fields.BOXES], [[1.0, 3.0, 3.0, 6.0]])
        np.testing.assert_allclose(out[fields.KEYPOINTS], [[[2.0, 3.0], [np.nan, np.nan]]])
    image_only = scale_boxes_to_pixel_coordinates({fields.IMAGE: tf.zeros([4, 6, 3])})
    assert image_only.keys() == {fields.IMAGE}


# --- random_self_concat_image -----------------------------------------------------------------


def _assert_consistent(out):
    """Masks match boxes; keypoint 0 is the box's top-left corner, keypoint 1 unlabeled."""
    assert_masks_match_boxes(out)
    np.testing.assert_allclose(out[fields.KEYPOINTS][:, 0], out[fields.BOXES][:, :2], atol=1e-6)
    assert np.isnan(out[fields.KEYPOINTS][:, 1]).all()


@given(pixel_examples(), st.booleans(), st.booleans())
def test_self_concat_properties(box_id, features, vertical, horizontal):
    out = as_numpy(
        random_self_concat_image(
            features,
            seed=3,
            concat_vertical_probability=float(vertical),
            concat_horizontal_probability=float(horizontal),
        )
    )
    image = features[fields.IMAGE].numpy()
    if vertical:
        image = np.concatenate([image, image], 0)
    if horizontal:
        image = np.concatenate([image, image], 1)
    np.testing.assert_array_equal(out[fields.IMAGE], image)
    copies = 2 ** (vertical + horizontal)
    ids = features["box_id"].numpy()
    np.testing.assert_array_equal(out["box_id"], np.tile(ids, copies))
    np.testing.assert_array_equal(out[fields.CLASSES], np.tile(ids + 1, copies))
    np.testing.assert_array_equal(out[fields.KEYPOINT_VISIBILITIES][:, 0], True)
    _assert_consistent(out)
    # Copies are distinct boxes: together they tile every original box `copies` times.
    assert len({tuple(b) for b in out[fields.BOXES].round(5)}) == copies * len(
        {tuple(b) for b in features[fields.BOXES].numpy().round(5)}
    )


def test_self_concat_exact():
    features = {
        fields.IMAGE: tf.constant([[[1], [2]]], tf.uint8),
        fields.BOXES: tf.constant([[0.0, 0.0, 1.0, 0.5]]),
        fields.WEIGHTS: tf.constant([0.5]),
    }
    out = as_numpy(
        random_self_concat_image(
            features, seed=0, concat_vertical_probability=1.0, concat_horizontal_probability=0.0
        )
    )
    np.testing.assert_array_equal(out[fields.IMAGE][..., 0], [[1, 2], [1, 2]])
    np.testing.assert_allclose(out[fields.BOXES], [[0.0, 0.0, 0.5, 0.5], [0.5, 0.0, 1.0, 0.5]])
    np.testing.assert_array_equal(out[fields.WEIGHTS], [0.5, 0.5])
    out = as_numpy(
        random_self_concat_image(
            features, seed=0, concat_vertical_probability=0.0, concat_horizontal_probability=1.0
        )
    )
    np.testing.assert_array_equal(out[fields.IMAGE][..., 0], [[1, 2, 1, 2]])
    np.testing.assert_allclose(out[fields.BOXES], [[0.0, 0.0, 1.0, 0.25], [0.0, 0.5, 1.0, 0.75]])
    np.testing.assert_array_equal(out[fields.IMAGE_SHAPE], [1, 4])


def test_self_concat_rates_and_graph_mode():
    features = {
        fields.IMAGE: tf.zeros([2, 3, 1], tf.uint8),
        fields.BOXES: tf.constant([[0.0, 0.0, 1.0, 1.0]]),
    }

    def sizes(seed):
        out = random_self_concat_image(
            features,
            seed=seed,
            concat_vertical_probability=0.3,
            concat_horizontal_probability=0.6,
        )
        return out[fields.IMAGE_SHAPE], tf.shape(out[fields.BOXES])[0]

    shapes, counts = over_seeds(sizes, salt=1)
    shapes, counts = shapes.numpy(), counts.numpy()
    vertical, horizontal = shapes[:, 0] == 4, shapes[:, 1] == 6
    # Binomial(400, 0.3): mean 120, sd 9.2; Binomial(400, 0.6): mean 240, sd 9.8.
    assert 79 <= vertical.sum() <= 161
    assert 196 <= horizontal.sum() <= 284
    np.testing.assert_array_equal(counts, 2 ** (vertical.astype(int) + horizontal))
    graph = run_in_graph(
        random_self_concat_image, features, seed=[1, 1], concat_vertical_probability=0.5
    )
    eager = random_self_concat_image(features, seed=[1, 1], concat_vertical_probability=0.5)
    for key in eager:
        np.testing.assert_array_equal(graph[key], eager[key])


@pytest.mark.parametrize(
    ("step", "params", "parameter"),
    [
        ("random_jitter_boxes", {"ratio": -0.1}, "ratio"),
        ("random_jitter_boxes", {"ratio": 0.6}, "ratio"),
        ("random_jitter_boxes", {"jitter_mode": "wobble"}, "jitter_mode"),
        (
            "random_self_concat_image",
            {"concat_vertical_probability": 1.1},
            "concat_vertical_probability",
        ),
        (
            "random_self_concat_image",
            {"concat_horizontal_probability": -1},
            "concat_horizontal_probability",
        ),
        ("scale_boxes_to_pixel_coordinates", {"scale": 2}, "scale"),
    ],
)
def test_parameter_validation(step, params, parameter):
    with pytest.raises(ConfigError, match=rf"{step}.*{parameter}"):
        get_step(step).resolve(params)


def test_defaults():
    assert get_step("random_jitter_boxes").resolve({}) == {"ratio": 0.05, "jitter_mode": "default"}
    assert get_step("random_self_concat_image").resolve({}) == {
        "concat_vertical_probability": 0.1,
        "concat_horizontal_probability": 0.1,
    }
