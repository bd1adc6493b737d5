"""Public box format conversions: exact small cases, round trips, errors."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

from object_input import box_formats as boxes

# One box on a 200 (high) x 400 (wide) image: rows 20..100, columns 40..200.
IMAGE_SHAPE = (200, 400)
SAME_BOX = {
    "xyxy": [40, 20, 200, 100],
    "yxyx": [20, 40, 100, 200],
    "xywh": [40, 20, 160, 80],
    "center_xywh": [120, 60, 160, 80],
    "center_yxhw": [60, 120, 80, 160],
    "rel_xyxy": [0.1, 0.1, 0.5, 0.5],
    "rel_yxyx": [0.1, 0.1, 0.5, 0.5],
    "rel_xywh": [0.1, 0.1, 0.4, 0.4],
    "rel_center_xywh": [0.3, 0.3, 0.4, 0.4],
    "rel_center_yxhw": [0.3, 0.3, 0.4, 0.4],
    "yolo": [0.3, 0.3, 0.4, 0.4],
    "coco": [40, 20, 160, 80],
    "pascal_voc": [40, 20, 200, 100],
}


@pytest.mark.parametrize("source", sorted(SAME_BOX))
@pytest.mark.parametrize("target", sorted(SAME_BOX))
def test_every_pair_of_formats_gives_the_same_box(source, target):
    out = boxes.convert([SAME_BOX[source]], source, target, image_shape=IMAGE_SHAPE)
    np.testing.assert_allclose(out.numpy(), [SAME_BOX[target]], rtol=1e-6)
    assert out.dtype == tf.float32


def test_formats_are_case_insensitive_and_integers_become_float32():
    out = boxes.convert(np.array([[40, 20, 200, 100]], np.int64), "XYXY", "Rel_YXYX", (200, 400))
    np.testing.assert_allclose(out.numpy(), [[0.1, 0.1, 0.5, 0.5]])
    assert out.dtype == tf.float32


def test_float64_boxes_stay_float64():
    out = boxes.convert(np.array([[0.1, 0.2, 0.3, 0.4]]), "rel_yxyx", "yxyx", (10, 10))
    assert out.dtype == tf.float64
    np.testing.assert_allclose(out.numpy(), [[1.0, 2.0, 3.0, 4.0]])


def test_image_shape_with_channels_is_accepted():
    out = boxes.convert([[0.5, 0.25, 1.0, 1.0]], "rel_yxyx", "xyxy", image_shape=(8, 16, 3))
    np.testing.assert_array_equal(out.numpy(), [[4.0, 4.0, 16.0, 8.0]])


def test_batched_boxes_scale_by_their_own_image():
    batch = [[[0.5, 0.5, 1.0, 1.0], [0.0, 0.0, 0.5, 0.5]], [[0.5, 0.5, 1.0, 1.0], [0, 0, 0, 0]]]
    out = boxes.convert(batch, "rel_yxyx", "yxyx", image_shape=[[8, 16], [4, 2]])
    np.testing.assert_array_equal(
        out.numpy(),
        [[[4, 8, 8, 16], [0, 0, 4, 8]], [[2, 1, 4, 2], [0, 0, 0, 0]]],
    )


def test_empty_boxes_keep_their_shape():
    out = boxes.convert(tf.zeros([0, 4]), "rel_yxyx", "center_xywh", (10, 10))
    assert out.shape == (0, 4)


def test_works_inside_a_dataset_map():
    dataset = tf.data.Dataset.from_tensor_slices(
        {"boxes": [[[0.1, 0.1, 0.5, 0.5]]], "shape": [[200, 400]]}
    )
    out = dataset.map(lambda d: boxes.convert(d["boxes"], "rel_yxyx", "xyxy", d["shape"]))
    np.testing.assert_allclose(next(iter(out)).numpy(), [SAME_BOX["xyxy"]], rtol=1e-6)


def test_unknown_format_is_named():
    with pytest.raises(ValueError, match=r"unknown box format 'xyzw'; known formats: xyxy, yxyx"):
        boxes.convert([[0, 0, 1, 1]], "xyzw", "xyxy")
    with pytest.raises(ValueError, match="unknown box format 'rel_coco'"):
        boxes.convert([[0, 0, 1, 1]], "xyxy", "rel_coco")


def test_pixel_to_relative_needs_the_image_shape():
    with pytest.raises(
        ValueError, match=r"from 'xyxy' to 'rel_center_xywh' needs image_shape=\(height, width\)"
    ):
        boxes.convert([[0, 0, 1, 1]], "xyxy", "yolo")
    with pytest.raises(ValueError, match="from 'rel_yxyx' to 'yxyx' needs image_shape"):
        boxes.convert([[0, 0, 1, 1]], "rel_yxyx", "yxyx")


def test_same_frame_conversions_need_no_image_shape():
    out = boxes.convert([[0.1, 0.2, 0.5, 0.6]], "rel_yxyx", "yolo")
    np.testing.assert_allclose(out.numpy(), [[0.4, 0.3, 0.4, 0.4]], rtol=1e-6)


def test_boxes_need_four_values():
    with pytest.raises(ValueError, match=r"4 values in their last dimension, got \(1, 5\)"):
        boxes.convert([[0, 0, 1, 1, 1]], "xyxy", "yxyx")


def test_format_helpers():
    assert boxes.canonical_format("YOLO") == "rel_center_xywh"
    assert boxes.is_relative("yolo") and not boxes.is_relative("coco")
    assert boxes.INTERNAL_FORMAT == "rel_yxyx"
    assert len(boxes.FORMATS) == 10


coordinate = st.floats(0.0, 1.0, width=32)
box_lists = st.lists(st.tuples(coordinate, coordinate, coordinate, coordinate), max_size=5)
sides = st.integers(1, 4096)


def _valid(raw):
    """Proper ``rel_yxyx`` boxes (min <= max) from four random coordinates."""
    array = np.asarray(raw, np.float32).reshape(-1, 4)
    return np.concatenate(
        [np.minimum(array[:, :2], array[:, 2:]), np.maximum(array[:, :2], array[:, 2:])], axis=1
    )


@given(box_lists, st.sampled_from(boxes.FORMATS), sides, sides)
def test_round_trip_through_any_format(raw, fmt, height, width):
    start = _valid(raw)
    there = boxes.convert(start, "rel_yxyx", fmt, image_shape=(height, width))
    back = boxes.convert(there, fmt, "rel_yxyx", image_shape=(height, width))
    np.testing.assert_allclose(back.numpy(), start, atol=1e-6)


@given(box_lists, st.sampled_from(boxes.FORMATS), st.sampled_from(boxes.FORMATS), sides, sides)
def test_conversion_is_path_independent(raw, middle, target, height, width):
    start = _valid(raw)
    direct = boxes.convert(start, "rel_yxyx", target, image_shape=(height, width))
    via = boxes.convert(
        boxes.convert(start, "rel_yxyx", middle, image_shape=(height, width)),
        middle,
        target,
        image_shape=(height, width),
    )
    scale = max(height, width) if not boxes.is_relative(target) else 1.0
    np.testing.assert_allclose(via.numpy(), direct.numpy(), atol=1e-6 * scale)


@given(box_lists, sides, sides)
def test_widths_and_heights_are_never_negative(raw, height, width):
    for fmt in ("xywh", "center_xywh", "rel_center_yxhw"):
        out = boxes.convert(_valid(raw), "rel_yxyx", fmt, image_shape=(height, width)).numpy()
        assert (out[:, 2:] >= 0).all()
