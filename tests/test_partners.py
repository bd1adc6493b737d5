"""Combining steps inside make_dataset: partners drawn from the stream, reproducibly."""

import numpy as np
import tensorflow as tf

import object_input as oi
from object_input import fields, partners
from object_input.synthetic import synthetic_examples
from object_input.writers import write_tfrecords


def _stream(count):
    """``(seed, {"x": [i] * (i + 1), "name": str(i)})``: values of varying shapes."""
    seeds = tf.data.Dataset.range(count).map(lambda i: tf.stack([tf.cast(i, tf.int32), 7]))
    values = tf.data.Dataset.range(count).map(
        lambda i: {"x": tf.fill([i + 1], i), "name": tf.strings.as_string(i)}
    )
    return tf.data.Dataset.zip((seeds, values))


def test_partners_come_from_the_examples_seen_before():
    out = list(partners.with_partners(_stream(20), count=3, buffer_size=4))
    for index, (_, features, drawn) in enumerate(out):
        assert int(features["x"][0]) == index
        ids = [int(p["x"][0]) for p in drawn]
        for p in drawn:  # stored values come back at their true shape, strings too
            assert p["x"].shape == (int(p["x"][0]) + 1,)
            assert p["name"].numpy() == str(int(p["x"][0])).encode()
        if index == 0:
            assert ids == [0, 0, 0]  # nothing seen yet: its own partner
        else:
            assert set(ids) <= set(range(max(0, index - 4), index))
            assert len(set(ids)) == min(3, index)  # distinct while enough were seen
    again = list(partners.with_partners(_stream(20), count=3, buffer_size=4))
    for (_, _, a), (_, _, b) in zip(out, again, strict=True):
        assert [int(p["x"][0]) for p in a] == [int(p["x"][0]) for p in b]


def _write(tmp_path):
    write_tfrecords(list(synthetic_examples(12, seed=2, max_objects=3)), tmp_path / "s")
    return tmp_path


def _batches(directory, seed):
    return [
        oi.unpad_batch(batch)
        for batch in oi.make_dataset(
            directory,
            batch_size=3,
            seed=seed,
            masks="png",
            augment=[
                ("random_horizontal_flip", {}),
                ("mosaic", {"output_size": (48, 64)}),
                ("mixup", {}),
            ],
        )
    ]


def test_mosaic_and_mixup_in_make_dataset_are_reproducible_and_aligned(tmp_path):
    directory = _write(tmp_path)
    first, second = _batches(directory, 5), _batches(directory, 5)
    examples = [e for batch in first for e in batch]
    assert len(examples) == 12  # one output per input example
    for a, b in zip(examples, [e for batch in second for e in batch], strict=True):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    for example in examples:
        n = len(example[fields.BOXES])
        assert example[fields.IMAGE].shape == (48, 64, 3)
        assert len(example[fields.CLASSES]) == len(example[fields.MASKS]) == n
        assert len(example[fields.WEIGHTS]) == n
        weights = example[fields.WEIGHTS]
        assert ((weights > 0) & (weights <= 1)).all()
        boxes = example[fields.BOXES]
        assert ((boxes >= 0) & (boxes <= 1)).all()
