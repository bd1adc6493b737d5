"""random_cutout: patches, hidden boxes dropped (with every per-box field) or kept, counted."""

import numpy as np
import pytest
import tensorflow as tf
from helpers import as_numpy, seeds
from hypothesis import given, settings
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import ConfigError, get_step, random_cutout
from object_input.ops.erase import erased_area, patch_mask


def _features():
    return {
        fields.IMAGE: tf.fill([10, 20, 3], tf.constant(200, tf.uint8)),
        fields.BOXES: tf.constant([[0.0, 0.0, 0.5, 0.25], [0.5, 0.5, 1.0, 1.0]]),
        fields.CLASSES: tf.constant([1, 2]),
        "box_id": tf.constant([10, 11]),
        fields.NUM_DROPPED_BOXES: tf.constant(3),
    }


def test_erased_area_counts_the_pixels_each_box_touches():
    mask = patch_mask(4, 4, tf.constant([0]), tf.constant([0]), tf.constant([2]), tf.constant([3]))
    boxes = tf.constant([[0.0, 0.0, 0.5, 0.5], [0.1, 0.1, 0.6, 0.9], [0.75, 0.75, 1.0, 1.0]])
    erased, touched = (t.numpy() for t in erased_area(mask, boxes))
    np.testing.assert_array_equal(touched, [4, 12, 1])
    np.testing.assert_array_equal(erased, [4, 6, 0])


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
