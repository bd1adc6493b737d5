"""Tests for random_horizontal_flip, random_vertical_flip and random_rotation90."""

import numpy as np
import pytest
import tensorflow as tf
from helpers import as_numpy, assert_masks_match_boxes, over_seeds, pixel_examples, run_in_graph
from hypothesis import given
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import (
    ConfigError,
    flip_left_right,
    flip_up_down,
    get_step,
    random_horizontal_flip,
    random_rotation90,
    random_vertical_flip,
    rotate90,
)
from object_input.ops._core import mirror


def _example():
    """A 2×3 image, one box with a matching mask, two keypoints (left, right)."""
    image = np.arange(2 * 3 * 2, dtype=np.uint8).reshape(2, 3, 2)
    mask = np.array([[[1, 1, 0], [0, 0, 0]]], np.uint8)
    return {
        fields.IMAGE: tf.constant(image),
        fields.BOXES: tf.constant([[0.0, 0.0, 0.5, 2 / 3]]),
        fields.MASKS: tf.constant(mask),
        fields.KEYPOINTS: tf.constant([[[0.25, 0.1], [0.25, 0.6]]]),
        fields.KEYPOINT_VISIBILITIES: tf.constant([[True, False]]),
        fields.CLASSES: tf.constant([3]),
    }


def test_horizontal_flip_exact():
    features = _example()
    out = as_numpy(
        random_horizontal_flip(features, seed=0, probability=1.0, keypoint_flip_permutation=[1, 0])
    )
    np.testing.assert_array_equal(out[fields.IMAGE], features[fields.IMAGE].numpy()[:, ::-1])
    np.testing.assert_allclose(out[fields.BOXES], [[0.0, 1 / 3, 0.5, 1.0]], atol=1e-6)
    np.testing.assert_array_equal(out[fields.MASKS], [[[0, 1, 1], [0, 0, 0]]])
    # Keypoint 1 (right) becomes keypoint 0 and vice versa, each mirrored.
    np.testing.assert_allclose(out[fields.KEYPOINTS], [[[0.25, 0.4], [0.25, 0.9]]], atol=1e-6)
    np.testing.assert_array_equal(out[fields.KEYPOINT_VISIBILITIES], [[False, True]])
    np.testing.assert_array_equal(out[fields.CLASSES], [3])


def test_vertical_flip_exact():
    features = _example()
    out = as_numpy(
        random_vertical_flip(features, seed=0, probability=1.0, keypoint_flip_permutation=[0, 1])
    )
    np.testing.assert_array_equal(out[fields.IMAGE], features[fields.IMAGE].numpy()[::-1])
    np.testing.assert_allclose(out[fields.BOXES], [[0.5, 0.0, 1.0, 2 / 3]], atol=1e-6)
    np.testing.assert_array_equal(out[fields.MASKS], [[[0, 0, 0], [1, 1, 0]]])
    np.testing.assert_allclose(out[fields.KEYPOINTS], [[[0.75, 0.1], [0.75, 0.6]]], atol=1e-6)
    np.testing.assert_array_equal(out[fields.KEYPOINT_VISIBILITIES], [[True, False]])


def test_rotation90_exact():
    features = _example()
    out = as_numpy(
        random_rotation90(features, seed=0, probability=1.0, keypoint_rot_permutation=[0, 1])
    )
    np.testing.assert_array_equal(out[fields.IMAGE], np.rot90(features[fields.IMAGE].numpy()))
    np.testing.assert_array_equal(out[fields.IMAGE_SHAPE], [3, 2])
    np.testing.assert_array_equal(out[fields.MASKS], [[[0, 0], [1, 0], [1, 0]]])
    np.testing.assert_allclose(out[fields.BOXES], [[1 / 3, 0.0, 1.0, 0.5]], atol=1e-6)
    np.testing.assert_allclose(out[fields.KEYPOINTS], [[[0.9, 0.25], [0.4, 0.25]]], atol=1e-6)


def test_probability_zero_is_identity_and_input_untouched():
    features = _example()
    before = as_numpy(features)
    for op, perm in (
        (random_horizontal_flip, "keypoint_flip_permutation"),
        (random_vertical_flip, "keypoint_flip_permutation"),
        (random_rotation90, "keypoint_rot_permutation"),
    ):
        out = as_numpy(op(features, seed=3, probability=0.0, **{perm: [1, 0]}))
        for key, value in before.items():
            np.testing.assert_array_equal(out[key], value)
        # Applying with probability 1 must not write into the caller's dict either.
        op(features, seed=3, probability=1.0, **{perm: [1, 0]})
        for key, value in before.items():
            np.testing.assert_array_equal(features[key].numpy(), value)


@pytest.mark.parametrize("probability", [0.0, 1.0])
def test_graph_mode_unknown_shapes(probability):
    features = _example()
    del features[fields.KEYPOINTS], features[fields.KEYPOINT_VISIBILITIES]
    for op in (random_horizontal_flip, random_vertical_flip, random_rotation90):
        out = as_numpy(run_in_graph(op, features, seed=[4, 2], probability=probability))
        eager = as_numpy(op(features, seed=[4, 2], probability=probability))
        assert out.keys() == eager.keys()
        for key in eager:
            np.testing.assert_array_equal(out[key], eager[key])


def test_missing_or_bad_permutation_raises():
    features = _example()
    for op in (random_horizontal_flip, random_vertical_flip, random_rotation90):
        with pytest.raises(ValueError, match="permutation is required"):
            op(features, seed=0, probability=0.0)
    with pytest.raises(ValueError, match="not a permutation"):
        random_horizontal_flip(features, seed=0, keypoint_flip_permutation=[0, 0])
    # Without keypoints no permutation is needed.
    del features[fields.KEYPOINTS]
    random_horizontal_flip(features, seed=0, probability=1.0)


def test_parameter_validation():
    for name in ("random_horizontal_flip", "random_vertical_flip", "random_rotation90"):
        with pytest.raises(ConfigError, match=f"{name}.*probability"):
            get_step(name).resolve({"probability": 1.5})


def _assert_consistent(out):
    """Masks match boxes; each box has one labelled keypoint, on one of its corners."""
    assert_masks_match_boxes(out)
    for box, keypoints in zip(out[fields.BOXES], out[fields.KEYPOINTS], strict=True):
        labelled = keypoints[~np.isnan(keypoints).any(axis=1)]
        assert len(labelled) == 1
        y, x = labelled[0]
        assert np.isclose(y, box[[0, 2]], atol=1e-6).any()
        assert np.isclose(x, box[[1, 3]], atol=1e-6).any()


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_allclose(np.asarray(a[key], float), np.asarray(b[key], float), atol=1e-6)


@given(pixel_examples())
def test_flip_twice_is_identity_and_consistent(box_id, features):
    features[fields.IMAGE_SHAPE] = tf.shape(features[fields.IMAGE])[:2]
    original = as_numpy(features)
    for flip in (flip_left_right, flip_up_down):
        once = flip(features, [0, 1])
        _assert_consistent(as_numpy(once))
        np.testing.assert_array_equal(once["box_id"], original["box_id"])
        _assert_same(as_numpy(flip(once, [0, 1])), original)


@given(pixel_examples(), st.sampled_from([[0, 1], [1, 0]]), st.integers(0, 2**31 - 1))
def test_random_flip_is_exactly_the_flip_or_the_input(box_id, features, permutation, seed):
    # The random flips select each field (no branch over the dict): every field is bit for bit
    # the deterministic flip's or the input's, all of them the same one, in graph mode too.
    original = as_numpy(features)
    for random_op, flip in (
        (random_horizontal_flip, flip_left_right),
        (random_vertical_flip, flip_up_down),
    ):
        flipped = as_numpy(flip(features, permutation))
        out = as_numpy(
            run_in_graph(
                random_op,
                features,
                seed=[seed, 3],
                probability=0.5,
                keypoint_flip_permutation=permutation,
            )
        )
        assert out.keys() == original.keys()
        same = []
        for expected in (flipped, original):
            same.append(
                all(
                    np.array_equal(out[k], expected[k], equal_nan=out[k].dtype.kind == "f")
                    for k in out
                )
            )
        assert any(same), (out, flipped, original)


@given(pixel_examples(), st.sampled_from([[0, 1], [1, 0]]))
def test_rotation90_four_times_is_identity(box_id, features, permutation):
    original = as_numpy(features)
    out = features
    for _ in range(4):
        out = rotate90(out, permutation)
        _assert_consistent(as_numpy(out))
    out = as_numpy(out)
    del out[fields.IMAGE_SHAPE]
    _assert_same(out, original)


def test_same_seed_same_output_and_rate():
    features = _example()
    del features[fields.KEYPOINTS], features[fields.KEYPOINT_VISIBILITIES]
    original = features[fields.BOXES].numpy()
    for op in (random_horizontal_flip, random_vertical_flip, random_rotation90):
        first = op(features, seed=[7, 1], probability=0.5)
        second = op(features, seed=[7, 1], probability=0.5)
        np.testing.assert_array_equal(first[fields.BOXES], second[fields.BOXES])

        def changed(seed, op=op):
            out = op(features, seed=seed, probability=0.3)
            return tf.reduce_any(tf.not_equal(out[fields.BOXES], original))

        hits = sum(int(b) for b in over_seeds(changed, salt=11))
        # Binomial(400, 0.3): mean 120, sd 9.2; 4.5 sd either way.
        assert 79 <= hits <= 161, hits


@pytest.mark.parametrize("shape", [(4, 5), (4, 5, 3), (2, 4, 5, 1), (0, 0, 3), (1, 1, 3)])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_mirror_reverses_any_axis_of_any_raster(shape, dtype):
    array = np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)
    for axis in range(len(shape)):
        np.testing.assert_array_equal(mirror(tf.constant(array), axis), np.flip(array, axis))
    # Unknown sizes when traced: rows are still gathered in reverse.
    traced = tf.function(
        lambda t: mirror(t, 0), input_signature=[tf.TensorSpec([None] * len(shape), dtype)]
    )
    np.testing.assert_array_equal(traced(tf.constant(array)), np.flip(array, 0))
