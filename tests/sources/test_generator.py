"""A Python generator of feature dicts as a source: ragged boxes, augmentation, batching, Keras."""

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import fields
from object_input.sources import Generator

SIGNATURE = {
    fields.IMAGE: tf.TensorSpec([None, None, 3], tf.uint8),
    fields.BOXES: tf.TensorSpec([None, 4], tf.float32),
    fields.CLASSES: tf.TensorSpec([None], tf.int32),
}


def _examples():
    for i, num in enumerate([2, 0, 1, 3]):
        yield {
            fields.IMAGE: np.full([4 + i, 6, 3], i, np.uint8),
            fields.BOXES: np.tile(np.array([[0.0, 0.0, 0.5, 0.5]], np.float32), [num, 1])
            * (i + 1)
            / 4,
            fields.CLASSES: np.arange(1, num + 1, dtype=np.int32),
        }


def test_generator_examples_pass_through_with_ids_and_shapes():
    examples = list(
        oi.make_dataset(Generator(_examples, SIGNATURE), batch_size=None, shuffle=False)
    )
    assert [x[fields.BOXES].shape[0] for x in examples] == [2, 0, 1, 3]
    for example, expected in zip(examples, _examples(), strict=True):
        for name, value in expected.items():
            np.testing.assert_array_equal(example[name].numpy(), value)
        assert example[fields.IMAGE_SHAPE].numpy().tolist() == list(
            expected[fields.IMAGE].shape[:2]
        )
    assert examples[3][fields.RECORD_ID].numpy() == b"generator:3"


def test_every_pass_calls_the_generator_again():
    dataset = oi.make_dataset(Generator(_examples, SIGNATURE), batch_size=2, num_epochs=2, seed=1)
    assert sum(int(b[fields.NUM_BOXES].numpy().sum()) for b in dataset) == 12


@pytest.mark.slow
def test_augmentation_both_batchings_and_keras():
    augment = [("random_vertical_flip", {"probability": 1.0})]
    kwargs = {"augment": augment, "shuffle": False, "max_boxes": 3, "batch_size": 4}
    (dynamic,) = oi.make_dataset(Generator(_examples, SIGNATURE), **kwargs)
    assert dynamic[fields.IMAGE].shape == (4, 7, 6, 3)
    restored = oi.unpad_batch(dynamic)
    for example, expected in zip(restored, _examples(), strict=True):
        boxes = expected[fields.BOXES]
        flipped = np.stack([1 - boxes[:, 2], boxes[:, 1], 1 - boxes[:, 0], boxes[:, 3]], axis=1)
        np.testing.assert_allclose(example[fields.BOXES], flipped, atol=1e-6)
        np.testing.assert_array_equal(example[fields.IMAGE], expected[fields.IMAGE][::-1])
    (static,) = oi.make_dataset(
        Generator(_examples, SIGNATURE), batching="static", pad_image_size=(8, 8), **kwargs
    )
    assert static[fields.IMAGE].shape == (4, 8, 8, 3) and static[fields.BOXES].shape == (4, 3, 4)
    ((images, targets),) = oi.make_dataset(
        Generator(_examples, SIGNATURE), keras=True, image_size=(5, 5), **kwargs
    )
    assert images.shape == (4, 5, 5, 3)
    assert targets["classes"].numpy().tolist() == [[1, 2, -1], [-1] * 3, [1, -1, -1], [1, 2, 3]]


def test_generator_cannot_go_to_the_tf_data_service():
    with pytest.raises(ValueError, match="Generator source runs in this Python process"):
        oi.make_dataset(Generator(_examples, SIGNATURE), service="grpc://localhost:5050")


def test_generator_argument_errors():
    with pytest.raises(TypeError, match=r"lambda: iter\(items\)"):
        Generator(list(_examples()), SIGNATURE)
    with pytest.raises(TypeError, match="output_signature="):
        Generator(_examples, None)


BAD_ELEMENTS = {
    "shape": (
        {fields.BOXES: np.zeros((3,), np.float32)},
        "field 'boxes' has shape (3,), expected (None, 4)",
    ),
    "dtype": ({fields.CLASSES: ["one"]}, "field 'classes' does not convert to int32"),
    "fraction": ({fields.CLASSES: [1.5]}, "field 'classes' holds non-integers for int32: [1.5]"),
    "missing": ({fields.IMAGE: None}, "fields ['image'] are missing, [] not in output_signature"),
}


@pytest.mark.parametrize("case", sorted(BAD_ELEMENTS))
def test_a_bad_element_is_named_or_skipped_not_the_end_of_the_stream(case):
    # from_generator's own error ended the stream, under skip too, without the element's index.
    change, text = BAD_ELEMENTS[case]
    good = {
        fields.IMAGE: np.zeros([4, 6, 3], np.uint8),
        fields.BOXES: np.array([[0.0, 0.0, 0.5, 0.5]], np.float32),
        fields.CLASSES: np.array([1], np.int32),
    }
    bad = {k: v for k, v in {**good, **change}.items() if v is not None}
    source = Generator(lambda: iter([good, bad, good]), SIGNATURE)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"record generator:1: ") as err:
        list(oi.make_dataset(source, batch_size=None, shuffle=False))
    assert text in str(err.value).replace("\\'", "'")
    dataset = oi.make_dataset(source, batch_size=None, shuffle=False, on_error="skip")
    assert [x[fields.RECORD_ID].numpy() for x in dataset] == [b"generator:0", b"generator:2"]
    assert oi.stats(dataset).skipped == {"undecodable": 1}
