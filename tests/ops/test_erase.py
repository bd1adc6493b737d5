"""random_cutout: patches, hidden boxes dropped (with every per-box field) or kept, counted."""

import numpy as np
import pytest
import tensorflow as tf
from helpers import as_numpy, seeds
from hypothesis import given, settings
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import ConfigError, get_step, random_cutout
from object_input.ops._core import fill_rectangle
from object_input.ops.erase import hidden_boxes


def _features():
    return {
        fields.IMAGE: tf.fill([10, 20, 3], tf.constant(200, tf.uint8)),
        fields.BOXES: tf.constant([[0.0, 0.0, 0.5, 0.25], [0.5, 0.5, 1.0, 1.0]]),
        fields.CLASSES: tf.constant([1, 2]),
        "box_id": tf.constant([10, 11]),
        fields.NUM_DROPPED_BOXES: tf.constant(3),
    }


def _hidden(boxes, corners, extents, size=(4, 4)):
    corners = tf.constant(corners, tf.int32, shape=[len(corners), 2])
    extents = tf.constant(extents, tf.int32, shape=[len(extents), 2])
    return hidden_boxes(tf.constant(boxes), *size, corners, extents).numpy().tolist()


def test_hidden_boxes_from_the_patch_rectangles():
    # One patch: rows 0-1, columns 0-2 of a 4 x 4 image.
    boxes = [[0.0, 0.0, 0.5, 0.5], [0.1, 0.1, 0.6, 0.9], [0.75, 0.75, 1.0, 1.0]]
    assert _hidden(boxes, [[0, 0]], [[2, 3]]) == [True, False, False]
    # Two patches hide together what neither hides alone (rows 0-1 and rows 2-3 of columns
    # 0-1), and a third one inside the union changes nothing.
    box = [[0.0, 0.0, 1.0, 0.5]]
    assert _hidden(box, [[0, 0]], [[2, 2]]) == [False]
    assert _hidden(box, [[0, 0], [2, 0]], [[2, 2], [2, 2]]) == [True]
    assert _hidden(box, [[0, 0], [2, 0], [1, 0]], [[2, 2], [2, 2], [2, 1]]) == [True]
    # An L of two patches around a hole at (3, 3) leaves the whole-image box visible.
    whole = [[0.0, 0.0, 1.0, 1.0]]
    assert _hidden(whole, [[0, 0], [0, 0]], [[4, 3], [3, 4]]) == [False]
    assert _hidden(whole, [[0, 0], [0, 0], [3, 3]], [[4, 3], [3, 4], [1, 1]]) == [True]
    # A box touches at least one pixel; no patches hide nothing.
    assert _hidden([[0.5, 0.5, 0.5, 0.5]], [[2, 2]], [[1, 1]]) == [True]
    assert _hidden(boxes, [], []) == [False, False, False]


def test_fill_rectangle_writes_exactly_the_patch():
    image = np.arange(6 * 6 * 2, dtype=np.uint8).reshape(6, 6, 2)
    patch = np.full((2, 3, 2), 255, np.uint8)
    out = fill_rectangle(tf.constant(image), tf.constant(patch), tf.constant([3, 1])).numpy()
    expected = image.copy()
    expected[3:5, 1:4] = 255
    np.testing.assert_array_equal(out, expected)
    corner = fill_rectangle(tf.constant(image), tf.constant(patch[:1, :1]), tf.constant([5, 5]))
    expected = image.copy()
    expected[5, 5] = 255
    np.testing.assert_array_equal(corner.numpy(), expected)


def test_cutout_on_a_small_image_exact_pixels_and_drops():
    features = {
        fields.IMAGE: tf.fill([6, 6, 1], tf.constant(9, tf.uint8)),
        # Box 0 touches rows 0-2 x columns 0-2; box 1 rows 3-5 x columns 3-5.
        fields.BOXES: tf.constant([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]]),
    }
    params = {"size_range": (0.5, 0.5), "probability": 1.0, "fill_value": 1.0}
    drops = []
    for seed in range(40):
        out = as_numpy(random_cutout(features, seed=seed, **params))
        erased = out[fields.IMAGE][..., 0] == 1
        rows, cols = np.nonzero(erased)
        # One 3 x 3 patch of ones, everything else untouched.
        assert erased.sum() == 9 and np.ptp(rows) == 2 and np.ptp(cols) == 2
        np.testing.assert_array_equal(out[fields.IMAGE][~erased], 9)
        hidden = [erased[:3, :3].all(), erased[3:, 3:].all()]
        assert len(out[fields.BOXES]) == 2 - sum(hidden)
        assert out[fields.NUM_DROPPED_BOXES] == sum(hidden)
        drops.append(sum(hidden))
    assert 0 in drops and 1 in drops  # the seeds place a patch over a box and elsewhere


def test_whole_image_patch_hides_every_box(box_id):
    params = {"size_range": (1.0, 1.0), "probability": 1.0, "fill_value": 5.0}
    out = as_numpy(random_cutout(_features(), seed=1, **params))
    np.testing.assert_array_equal(out[fields.IMAGE], 5)
    assert len(out[fields.BOXES]) == len(out["box_id"]) == len(out[fields.CLASSES]) == 0
    assert out[fields.NUM_DROPPED_BOXES] == 5  # 3 counted upstream + 2 hidden here
    kept = as_numpy(random_cutout(_features(), seed=1, covered_boxes="keep", **params))
    np.testing.assert_array_equal(kept["box_id"], [10, 11])
    assert kept[fields.NUM_DROPPED_BOXES] == 3


@settings(max_examples=30, deadline=None)
@given(
    seed=seeds,
    num=st.integers(0, 4),
    low=st.floats(0.05, 0.6),
    extra=st.floats(0.0, 0.4),
    noise=st.booleans(),
)
def test_patches_hide_exactly_the_boxes_they_cover(box_id, seed, num, low, extra, noise):
    features = _features()
    out = as_numpy(
        random_cutout(
            features,
            seed=seed,
            num_patches=num,
            size_range=(low, min(low + extra, 1.0)),
            probability=1.0,
            fill_value=None if noise else 0.0,
        )
    )
    erased = np.any(out[fields.IMAGE] != 200, axis=-1)
    if not noise:
        np.testing.assert_array_equal(out[fields.IMAGE][erased], 0)
    regions = [(slice(0, 5), slice(0, 5)), (slice(5, 10), slice(10, 20))]
    if not noise:  # noise may draw 200 itself, so only a solid fill shows the patches exactly
        hidden = [erased[rows, cols].all() for rows, cols in regions]
        visible = [i for i, h in zip([10, 11], hidden, strict=True) if not h]
        np.testing.assert_array_equal(out["box_id"], visible)
    assert out[fields.NUM_DROPPED_BOXES] == 3 + 2 - len(out["box_id"])
    np.testing.assert_array_equal(out[fields.CLASSES], out["box_id"] - 9)


def test_probability_zero_and_no_patches_leave_the_image():
    for params in ({"probability": 0.0}, {"num_patches": 0, "probability": 1.0}):
        out = as_numpy(random_cutout(_features(), seed=2, **params))
        np.testing.assert_array_equal(out[fields.IMAGE], 200)
        assert len(out[fields.BOXES]) == 2


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"size_range": (0.5, 0.2)}, "size_range"),
        ({"covered_boxes": "hide"}, "covered_boxes"),
        ({"num_patches": -1}, "num_patches"),
    ],
)
def test_validation(params, name):
    with pytest.raises(ConfigError, match=rf"random_cutout.*{name}"):
        get_step("random_cutout").resolve(params)
