"""Tests for the box utilities shared by the crop and pad ops."""

import numpy as np
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from object_input import fields
from object_input.ops import _box_geometry as box_ops

NAN = float("nan")


def _boxes(*rows):
    return tf.constant(rows, tf.float32)


def test_area_and_intersection():
    b = _boxes([0.0, 0.0, 0.5, 0.5], [0.2, 0.1, 0.6, 0.9], [0.5, 0.5, 0.4, 0.7])
    np.testing.assert_allclose(box_ops.area(b), [0.25, 0.32, 0.0], atol=1e-6)
    window = [0.25, 0.0, 1.0, 0.5]
    np.testing.assert_allclose(box_ops.intersection(b, window), [0.125, 0.14, 0.0], atol=1e-6)


def test_fraction_inside_counts_own_area():
    b = _boxes([0.0, 0.0, 0.5, 0.5], [0.6, 0.6, 0.8, 0.8], [0.9, 0.9, 1.0, 1.0])
    np.testing.assert_allclose(
        box_ops.fraction_inside(b, [0.25, 0.25, 0.85, 0.85]), [0.25, 1.0, 0.0], atol=1e-6
    )


def test_fraction_inside_of_zero_area_boxes_is_containment():
    # A point inside, a segment inside, a point outside, a segment crossing the edge.
    b = _boxes(
        [0.5, 0.5, 0.5, 0.5], [0.3, 0.4, 0.3, 0.6], [0.9, 0.9, 0.9, 0.9], [0.5, 0.1, 0.5, 0.9]
    )
    np.testing.assert_array_equal(
        box_ops.fraction_inside(b, [0.2, 0.2, 0.8, 0.8]), [1.0, 1.0, 0.0, 0.0]
    )


def test_fully_outside_treats_touching_as_outside():
    window = [0.2, 0.2, 0.6, 0.6]
    b = _boxes(
        [0.6, 0.3, 0.9, 0.5],  # touches the bottom edge
        [0.3, 0.0, 0.5, 0.2],  # touches the left edge
        [0.59, 0.59, 0.9, 0.9],  # overlaps a corner
        [0.0, 0.0, 1.0, 1.0],  # contains the window
        [0.7, 0.0, 0.9, 0.1],  # far away
    )
    np.testing.assert_array_equal(
        box_ops.fully_outside(b, window), [True, True, False, False, True]
    )


def test_overlaps_window_threshold_is_inclusive():
    b = _boxes([0.0, 0.0, 0.5, 1.0], [0.0, 0.0, 0.8, 1.0], [0.0, 0.0, 0.1, 1.0])
    # Inside [0.25, 1] × [0, 1]: halves 0.5, 0.6875, 0 (and the last one is fully outside).
    keep = box_ops.overlaps_window(b, [0.25, 0.0, 1.0, 1.0], 0.5)
    np.testing.assert_array_equal(keep, [True, True, False])
    np.testing.assert_array_equal(
        box_ops.overlaps_window(b, [0.25, 0.0, 1.0, 1.0], 0.0), [True, True, False]
    )


def test_clip_and_degenerate():
    b = _boxes([-0.2, 0.5, 0.4, 1.3], [1.1, 0.2, 1.4, 0.4], [0.3, 0.3, 0.3, 0.5])
    clipped = box_ops.clip_to_window(b)
    np.testing.assert_allclose(
        clipped, [[0.0, 0.5, 0.4, 1.0], [1.0, 0.2, 1.0, 0.4], [0.3, 0.3, 0.3, 0.5]]
    )
    np.testing.assert_array_equal(box_ops.is_degenerate(clipped), [False, True, True])
    np.testing.assert_allclose(
        box_ops.clip_to_window(b, [0.0, 0.0, 0.5, 0.5])[0], [0.0, 0.5, 0.4, 0.5]
    )


def test_change_frame_exact():
    window = [0.2, 0.4, 0.6, 0.8]  # 0.4 high, 0.4 wide
    b = _boxes([0.2, 0.4, 0.6, 0.8], [0.3, 0.5, 0.4, 1.0])
    np.testing.assert_allclose(
        box_ops.change_box_frame(b, window),
        [[0.0, 0.0, 1.0, 1.0], [0.25, 0.25, 0.5, 1.5]],
        atol=1e-6,
    )
    kp = tf.constant([[[0.4, 0.6], [0.0, 0.0]]])
    np.testing.assert_allclose(
        box_ops.change_keypoint_frame(kp, window), [[[0.5, 0.5], [-0.5, -1.0]]], atol=1e-6
    )


_windows = st.tuples(
    st.floats(-1.0, 0.9), st.floats(-1.0, 0.9), st.floats(0.05, 2.0), st.floats(0.05, 2.0)
).map(lambda t: [t[0], t[1], t[0] + t[2], t[1] + t[3]])
_box_arrays = hnp.arrays(
    np.float32, st.tuples(st.integers(0, 6), st.just(4)), elements=st.floats(0, 1, width=32)
).map(lambda a: np.concatenate([np.minimum(a[:, :2], a[:, 2:]), np.maximum(a[:, :2], a[:, 2:])], 1))


@given(_box_arrays, _windows)
def test_change_frame_round_trip(b, window):
    """Moving into a window's frame and back through the inverse window is the identity."""
    y0, x0, y1, x1 = window
    height, width = y1 - y0, x1 - x0
    inverse = [-y0 / height, -x0 / width, (1 - y0) / height, (1 - x0) / width]
    back = box_ops.change_box_frame(box_ops.change_box_frame(tf.constant(b), window), inverse)
    np.testing.assert_allclose(back, b, atol=1e-4)


@given(_box_arrays, _windows)
def test_fraction_inside_is_a_fraction_consistent_with_pruning(b, window):
    fraction = box_ops.fraction_inside(tf.constant(b), window).numpy()
    assert ((fraction >= 0) & (fraction <= 1 + 1e-6)).all()
    outside = box_ops.fully_outside(tf.constant(b), window).numpy()
    has_area = box_ops.area(tf.constant(b)).numpy() > 0
    # A box with area that is fully outside has nothing inside.
    assert (fraction[outside & has_area] == 0).all()
    # Inside the unit window every box in [0, 1] is whole.
    np.testing.assert_allclose(box_ops.fraction_inside(tf.constant(b), box_ops.UNIT_WINDOW), 1.0)


def test_to_window_frame_sets_outside_keypoints_nan_and_invisible():
    features = {
        fields.BOXES: _boxes([0.0, 0.0, 0.5, 0.5]),
        fields.KEYPOINTS: tf.constant([[[0.25, 0.25], [0.75, 0.5], [NAN, NAN]]]),
        fields.KEYPOINT_VISIBILITIES: tf.constant([[True, True, True]]),
    }
    out = box_ops.to_window_frame(features, [0.0, 0.0, 0.5, 1.0], clip_boxes=False)
    np.testing.assert_allclose(out[fields.BOXES], [[0.0, 0.0, 1.0, 0.5]])
    np.testing.assert_allclose(out[fields.KEYPOINTS], [[[0.5, 0.25], [NAN, NAN], [NAN, NAN]]])
    np.testing.assert_array_equal(out[fields.KEYPOINT_VISIBILITIES], [[True, False, False]])
    clipped = box_ops.to_window_frame(features, [0.25, 0.25, 0.5, 0.5], clip_boxes=True)
    np.testing.assert_allclose(clipped[fields.BOXES], [[0.0, 0.0, 1.0, 1.0]])


def test_drop_degenerate_keeps_per_box_fields_aligned(box_id):
    features = {
        fields.BOXES: _boxes([0.1, 0.1, 0.2, 0.2], [0.3, 0.3, 0.3, 0.4], [0.5, 0.5, 0.9, 0.6]),
        fields.CLASSES: tf.constant([1, 2, 3]),
        "box_id": tf.constant([10, 11, 12]),
        fields.IMAGE_CLASSES: tf.constant([7, 8, 9]),
    }
    out = box_ops.drop_degenerate(features)
    np.testing.assert_array_equal(out["box_id"], [10, 12])
    np.testing.assert_array_equal(out[fields.CLASSES], [1, 3])
    np.testing.assert_array_equal(out[fields.IMAGE_CLASSES], [7, 8, 9])
    assert box_ops.drop_degenerate({fields.CLASSES: tf.constant([1])})[fields.CLASSES].shape == [1]


def test_empty_boxes():
    empty = tf.zeros([0, 4])
    assert box_ops.fraction_inside(empty, [0.0, 0.0, 0.5, 0.5]).shape == [0]
    assert box_ops.overlaps_window(empty, [0.0, 0.0, 0.5, 0.5], 0.3).shape == [0]
    assert box_ops.change_box_frame(empty, [0.0, 0.0, 0.5, 0.5]).shape == [0, 4]
