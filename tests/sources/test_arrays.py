"""Preloaded arrays: dense and ragged fields, through augmentation, both batchings and Keras."""

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import fields
from object_input.sources import Arrays

BOXES = [
    [[0.0, 0.0, 0.5, 0.25]],
    [[0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 1.0, 1.0], [0.0, 0.6, 0.2, 0.9]],
    np.zeros([0, 4]),
]
CLASSES = [[2], [1, 3, 1], []]


def _data():
    images = np.arange(3 * 4 * 8 * 3, dtype=np.uint8).reshape(3, 4, 8, 3)
    return {
        fields.IMAGE: images,
        fields.BOXES: [np.array(b, np.float64) for b in BOXES],
        fields.CLASSES: [np.array(c, np.int64) for c in CLASSES],
    }


def test_ragged_boxes_come_back_per_example_in_pipeline_dtypes():
    examples = list(oi.make_dataset(Arrays(_data()), batch_size=None, shuffle=False))
    assert [x[fields.BOXES].shape[0] for x in examples] == [1, 3, 0]
    for example, boxes, classes in zip(examples, BOXES, CLASSES, strict=True):
        assert example[fields.BOXES].dtype == tf.float32
        assert example[fields.CLASSES].dtype == tf.int32
        np.testing.assert_allclose(example[fields.BOXES].numpy().reshape(-1, 4), boxes)
        assert example[fields.CLASSES].numpy().tolist() == classes
        assert example[fields.IMAGE_SHAPE].numpy().tolist() == [4, 8]
    assert [x[fields.RECORD_ID].numpy() for x in examples] == [
        b"arrays:0",
        b"arrays:1",
        b"arrays:2",
    ]


def test_images_of_different_sizes_become_ragged_then_dense_again():
    images = [np.full([2, 3, 3], 1, np.uint8), np.full([5, 1, 3], 2, np.uint8)]
    examples = list(
        oi.make_dataset(
            Arrays({fields.IMAGE: images, fields.LABEL: [4, 7]}), batch_size=None, shuffle=False
        )
    )
    for example, image in zip(examples, images, strict=True):
        np.testing.assert_array_equal(example[fields.IMAGE].numpy(), image)
    assert [int(x[fields.LABEL]) for x in examples] == [4, 7]
    assert examples[0][fields.LABEL].dtype == tf.int32


def test_augmentation_moves_ragged_boxes_and_dynamic_batches_unpad_exactly():
    augment = [("random_horizontal_flip", {"probability": 1.0})]
    (batch,) = oi.make_dataset(Arrays(_data()), batch_size=3, augment=augment, shuffle=False)
    assert batch[fields.BOXES].shape == (3, 3, 4)
    assert batch[fields.NUM_BOXES].numpy().tolist() == [1, 3, 0]
    restored = oi.unpad_batch(batch)
    for example, boxes in zip(restored, BOXES, strict=True):
        boxes = np.array(boxes, np.float32).reshape(-1, 4)
        flipped = np.stack([boxes[:, 0], 1 - boxes[:, 3], boxes[:, 2], 1 - boxes[:, 1]], axis=1)
        np.testing.assert_allclose(example[fields.BOXES], flipped, atol=1e-6)
    np.testing.assert_array_equal(restored[1][fields.IMAGE], _data()[fields.IMAGE][1][:, ::-1])


def test_static_batching_and_keras_targets():
    kwargs = {"batch_size": 2, "shuffle": False, "max_boxes": 4, "image_size": (8, 8)}
    static = list(oi.make_dataset(Arrays(_data()), batching="static", **kwargs))
    assert [b[fields.BOXES].shape for b in static] == [(2, 4, 4)]  # static drops the remainder
    images, targets = next(iter(oi.make_dataset(Arrays(_data()), keras=True, **kwargs)))
    assert images.shape == (2, 8, 8, 3)
    assert targets["classes"].numpy().tolist() == [[2, -1, -1], [1, 3, 1]]


def test_mismatched_lengths_and_ranks_are_errors():
    with pytest.raises(ValueError, match=r"same number of examples in every field, got .*'a': 2"):
        Arrays({"a": np.zeros([2]), "b": np.zeros([3])})
    with pytest.raises(ValueError, match=r"field 'b': per-example arrays must have one rank"):
        Arrays({"b": [np.zeros([2, 4]), np.zeros([3])]})
    with pytest.raises(TypeError, match=r"field 'a' must be an array or a list"):
        Arrays({"a": 3})


def test_plain_lists_with_empty_examples():
    data = {"boxes": [[[0.0, 0.0, 1.0, 1.0]], np.zeros([0, 4])], "classes": [[3], []]}
    examples = list(oi.make_dataset(Arrays(data), batch_size=None, shuffle=False))
    assert [x[fields.CLASSES].numpy().tolist() for x in examples] == [[3], []]
    assert examples[1][fields.CLASSES].dtype == tf.int32
    assert examples[1][fields.BOXES].dtype == tf.float32


BAD_BOXES = {
    "box_not_finite": (
        [[0.1, 0.1, np.nan, 0.5]],
        [1],
        "field boxes has non-finite coordinates: [nan]",
    ),
    "box_order": ([[0.6, 0.1, 0.5, 0.5]], [1], "field boxes has a box with ymin > ymax"),
    "box_out_of_range": ([[0.1, 0.1, 0.5, 2.0]], [1], "outside [0, 1]: [2]"),
    "class_count": ([[0.1, 0.1, 0.5, 0.5]], [1, 2], "has 1 boxes but field classes has 2 values"),
    "class_range": ([[0.1, 0.1, 0.5, 0.5]], [0], "class ids outside [1, 2**31): [0]"),
}


@pytest.mark.parametrize("reason", sorted(BAD_BOXES))
def test_bad_boxes_are_named_or_skipped_not_passed_on(reason):
    # Arrays passed NaN and out-of-range boxes on silently (a flip made them worse).
    boxes, classes, text = BAD_BOXES[reason]
    data = {
        fields.IMAGE: np.zeros((3, 4, 8, 3), np.uint8),
        fields.BOXES: [np.array(b, np.float32) for b in ([[0, 0, 1, 1]], boxes, [[0, 0, 1, 1]])],
        fields.CLASSES: [np.array(c, np.int32) for c in ([1], classes, [1])],
    }
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"record arrays:1: ") as err:
        list(oi.make_dataset(Arrays(data), batch_size=None, shuffle=False))
    assert text in str(err.value)
    dataset = oi.make_dataset(Arrays(data), batch_size=None, shuffle=False, on_error="skip")
    assert [x[fields.RECORD_ID].numpy() for x in dataset] == [b"arrays:0", b"arrays:2"]
    assert oi.stats(dataset).skipped == {reason: 1}


def test_a_per_box_field_of_another_length_is_named_or_skipped():
    # A weight too many for the boxes: every per-box field is gathered with the boxes, so a
    # mismatch would misalign them (or fail in a crop far from the record).
    data = {
        fields.IMAGE: np.zeros((3, 4, 8, 3), np.uint8),
        fields.BOXES: np.tile(np.array([[[0, 0, 1, 1]]], np.float32), [3, 1, 1]),
        fields.WEIGHTS: [np.ones([1], np.float32), np.ones([2], np.float32), np.ones([1])],
    }
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"record arrays:1: ") as err:
        list(oi.make_dataset(Arrays(data), batch_size=None, shuffle=False))
    assert "field weights has 2 values for 1 boxes" in str(err.value)
    dataset = oi.make_dataset(Arrays(data), batch_size=None, shuffle=False, on_error="skip")
    assert [x[fields.RECORD_ID].numpy() for x in dataset] == [b"arrays:0", b"arrays:2"]
    assert oi.stats(dataset).skipped == {"per_box_count": 1}


def test_float_noise_at_the_range_ends_is_clipped():
    data = {
        fields.IMAGE: np.zeros((1, 4, 8, 3), np.uint8),
        fields.BOXES: np.array([[[-1e-7, 0.0, 1.0000001, 1.0]]], np.float32),
    }
    (example,) = oi.make_dataset(Arrays(data), batch_size=None, shuffle=False)
    np.testing.assert_array_equal(example[fields.BOXES], [[0.0, 0.0, 1.0, 1.0]])


def test_boxes_of_another_shape_fail_when_the_pipeline_is_built():
    data = {fields.IMAGE: np.zeros((2, 4, 8, 3), np.uint8), fields.BOXES: np.zeros((2, 1, 3))}
    with pytest.raises(ValueError, match=r"field .boxes. must hold float \[N, 4\].*shape \(1, 3\)"):
        oi.make_dataset(Arrays(data), batch_size=None)
