"""Combining steps inside make_dataset: partners drawn from the stream, reproducibly."""

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import fields, partners
from object_input.ops import register_step, unregister_step
from object_input.writers import build_example, write_tfrecords
from object_input.writers.synthetic import synthetic_examples


def _stream(count):
    """``(seed, {"x": [i] * (i + 1), "name": str(i)})``: values of varying shapes."""
    seeds = tf.data.Dataset.range(count).map(lambda i: tf.stack([tf.cast(i, tf.int32), 7]))
    values = tf.data.Dataset.range(count).map(
        lambda i: {"x": tf.fill([i + 1], i), "name": tf.strings.as_string(i)}
    )
    return tf.data.Dataset.zip((seeds, values))


def _drawn(count, group_size, size=20):
    """Per example of ``_stream(size)``: its index and its partners' indices."""
    out = []
    for seed, features, drawn in partners.with_partners(
        _stream(size), count=count, group_size=group_size
    ):
        for p in drawn:  # partners come back at their true shape, strings too
            assert p["x"].shape == (int(p["x"][0]) + 1,)
            assert p["name"].numpy() == str(int(p["x"][0])).encode()
        assert int(seed[0]) == int(features["x"][0])
        assert features["x"].shape == (int(features["x"][0]) + 1,)
        out.append((int(features["x"][0]), [int(p["x"][0]) for p in drawn]))
    return out


def test_partners_are_distinct_others_of_the_example_group():
    out = _drawn(count=3, group_size=4, size=18)
    assert [index for index, _ in out] == list(range(18))  # one element per example, in order
    for index, ids in out[:16]:
        group = set(range(index - index % 4, index - index % 4 + 4))
        # Never itself, three distinct others from its (full) group, even at the stream's start.
        assert set(ids) <= group - {index} and len(set(ids)) == 3
    # The last group holds 2 examples: each has only the other to draw from.
    assert out[16:] == [(16, [17, 17, 17]), (17, [16, 16, 16])]
    assert _drawn(count=3, group_size=4, size=18) == out  # the same draw run after run
    # Draws differ between examples: over the stream, many different partner sets.
    assert len({tuple(sorted(ids)) for _, ids in _drawn(count=1, group_size=8, size=64)}) > 4


def test_an_example_alone_in_its_group_is_its_own_partner():
    assert _drawn(count=1, group_size=4, size=5)[4] == (4, [4])
    with pytest.raises(ValueError, match="group_size"):
        partners.with_partners(_stream(3), count=1, group_size=1)


def _write(tmp_path):
    write_tfrecords(list(synthetic_examples(12, seed=2, max_objects=3)), tmp_path / "s")
    return tmp_path


def _batches(directory, seed, num_parallel_calls=tf.data.AUTOTUNE):
    return [
        oi.unpad_batch(batch)
        for batch in oi.make_dataset(
            directory,
            batch_size=3,
            seed=seed,
            num_parallel_calls=num_parallel_calls,
            masks="png",
            augment=[
                ("random_horizontal_flip", {}),
                ("mosaic", {"output_size": (48, 64)}),
                ("mixup", {}),
            ],
        )
    ]


@pytest.mark.slow
def test_mosaic_and_mixup_in_make_dataset_are_reproducible_and_aligned(tmp_path):
    directory = _write(tmp_path)
    # The same examples run after run, whatever the parallelism.
    first, second = _batches(directory, 5), _batches(directory, 5, num_parallel_calls=1)
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


def _write_distinct(directory, count):
    """``count`` examples, example i a 16x16 image with one whole-image box of class i + 1."""
    examples = [
        build_example(
            np.full((16, 16, 3), 10 * i, np.uint8),
            boxes=[[0.0, 0.0, 1.0, 1.0]],
            classes=[i + 1],
            source_id=str(i),
        )
        for i in range(count)
    ]
    write_tfrecords(examples, directory / "distinct")
    return directory


@pytest.mark.parametrize(
    ("step", "inputs"),
    [
        (("mosaic", {"output_size": (16, 16), "center_range": (0.5, 0.5), "min_visible": 0.0}), 4),
        (("mixup", {}), 2),
    ],
)
def test_no_example_is_its_own_partner_even_at_the_stream_start(tmp_path, step, inputs):
    directory = _write_distinct(tmp_path, 20)  # a full group of 16, then a group of 4
    drawn = []
    for example in oi.make_dataset(directory, batch_size=None, seed=3, augment=[step]):
        own = int(example[fields.SOURCE_ID].numpy()) + 1
        classes = example[fields.CLASSES].numpy().tolist()
        # Every input shows one box: the example's first, then partners all different from it.
        assert len(classes) == inputs and classes[0] == own
        assert len(set(classes)) == inputs, classes
        drawn.append(frozenset(classes[1:]))
    assert len(drawn) == 20
    assert len(set(drawn)) > 10  # partners drawn from many different examples


def _tenfold(features, **params):
    """A prepare that a second run would show: every class times ten."""
    del params
    return {**features, fields.CLASSES: features[fields.CLASSES] * 10}


def user_pair(examples, *, seed=None, tag: int = 0):
    """The first example with its partner's boxes and classes after its own."""
    del seed, tag
    first, partner = examples
    return {
        **first,
        fields.BOXES: tf.concat([first[fields.BOXES], partner[fields.BOXES]], 0),
        fields.CLASSES: tf.concat([first[fields.CLASSES], partner[fields.CLASSES]], 0),
    }


@pytest.fixture
def prepared_pair():
    register_step(
        reads=(fields.BOXES, fields.CLASSES),
        writes=(fields.BOXES, fields.CLASSES),
        kind="label",
        examples=2,
        prepare=_tenfold,
    )(user_pair)
    yield
    unregister_step("user_pair")


def test_a_combining_step_prepares_each_example_once_before_partners(tmp_path, prepared_pair):
    directory = _write_distinct(tmp_path, 6)
    seen = []
    for example in oi.make_dataset(directory, batch_size=None, seed=1, augment=["user_pair"]):
        own = int(example[fields.SOURCE_ID].numpy()) + 1
        classes = example[fields.CLASSES].numpy().tolist()
        # Both the example and its partner were prepared, once each (x10, never x100).
        assert classes[0] == 10 * own and classes[1] % 10 == 0 and classes[1] <= 60, classes
        seen.append(own)
    assert sorted(seen) == list(range(1, 7))
    with pytest.raises(ValueError, match="prepare applies to combining steps"):
        register_step(prepare=_tenfold)
