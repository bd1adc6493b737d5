"""Padding and its exact inverse; box limits."""

import pathlib
import re

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

import object_input as oi
from object_input import fields, unpad_batch
from object_input.batching import batch_features, limit_boxes, prepare


def _example(rng, h, w, n, k=2):
    boxes = np.sort(rng.random((n, 4)), axis=1).astype(np.float32)  # ymin<=xmin<=ymax<=xmax
    return {
        fields.IMAGE: rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
        fields.IMAGE_SHAPE: np.array([h, w], np.int32),
        fields.BOXES: boxes,
        fields.CLASSES: rng.integers(1, 5, n).astype(np.int32),
        fields.WEIGHTS: rng.random(n).astype(np.float32),
        fields.IS_CROWD: rng.random(n) > 0.5,
        fields.MASKS: rng.integers(0, 2, (n, h, w), dtype=np.uint8),
        fields.KEYPOINTS: rng.random((n, k, 2)).astype(np.float32),
        fields.IMAGE_CLASSES: rng.integers(1, 9, int(rng.integers(0, 4))).astype(np.int32),
        fields.SOURCE_ID: str(n).encode(),
        fields.RECORD_ID: b"f:0",
    }


def _dataset(examples):
    def gen():
        yield from examples

    signature = {
        k: tf.TensorSpec([None] * np.asarray(v).ndim, tf.as_dtype(np.asarray(v).dtype))
        if k not in (fields.SOURCE_ID, fields.RECORD_ID)
        else tf.TensorSpec([], tf.string)
        for k, v in examples[0].items()
    }
    signature[fields.IMAGE] = tf.TensorSpec([None, None, 3], tf.uint8)
    signature[fields.KEYPOINTS] = tf.TensorSpec([None, 2, 2], tf.float32)
    signature[fields.IMAGE_SHAPE] = tf.TensorSpec([2], tf.int32)
    signature[fields.BOXES] = tf.TensorSpec([None, 4], tf.float32)
    return tf.data.Dataset.from_generator(gen, output_signature=signature)


def _assert_same(before, after):
    for key, value in before.items():
        np.testing.assert_array_equal(after[key], value, err_msg=key)


@given(
    sizes=st.lists(
        st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(0, 4)), min_size=1, max_size=4
    ),
    seed=st.integers(0, 1000),
)
def test_dynamic_padding_then_unpad_restores_every_field(sizes, seed):
    rng = np.random.default_rng(seed)
    examples = [_example(rng, h, w, n) for h, w, n in sizes]
    ds = _dataset(examples).map(lambda f: prepare(f, None))
    batch = next(iter(batch_features(ds, len(examples))))
    restored = unpad_batch(batch)
    assert len(restored) == len(examples)
    for before, after in zip(examples, restored, strict=True):
        _assert_same(before, after)
        assert after[fields.NUM_BOXES] == len(before[fields.BOXES])


def test_static_padding_has_fixed_shapes_and_unpads(rng):
    examples = [_example(rng, 5, 7, 3), _example(rng, 8, 4, 0)]
    ds = _dataset(examples).map(lambda f: prepare(f, 6))
    batched = batch_features(ds, 2, mode="static", max_boxes=6, image_size=(8, 8))
    assert batched.element_spec[fields.BOXES].shape.as_list() == [None, 6, 4]
    assert batched.element_spec[fields.IMAGE].shape.as_list() == [None, 8, 8, 3]
    assert batched.element_spec[fields.MASKS].shape.as_list() == [None, 6, 8, 8]
    batch = next(iter(batched))
    assert batch[fields.CLASSES].numpy()[1].tolist() == [0] * 6
    for before, after in zip(examples, unpad_batch(batch), strict=True):
        _assert_same(before, after)


def test_image_classes_shape_keeps_each_examples_image_class_count(rng):
    examples = [_example(rng, 4, 4, 1), _example(rng, 4, 4, 1)]
    examples[0][fields.IMAGE_CLASSES] = np.array([3, 5], np.int32)
    examples[1][fields.IMAGE_CLASSES] = np.zeros([0], np.int32)
    batch = next(iter(batch_features(_dataset(examples).map(lambda f: prepare(f, None)), 2)))
    # Padding alone cannot tell [3, 5] from [3, 5, 0]: the side field says how many are real.
    assert batch[fields.IMAGE_CLASSES].numpy().tolist() == [[3, 5], [0, 0]]
    assert batch[fields.shape_key(fields.IMAGE_CLASSES)].numpy().tolist() == [[2], [0]]
    restored = unpad_batch(batch)
    assert [e[fields.IMAGE_CLASSES].tolist() for e in restored] == [[3, 5], []]
    assert all(fields.shape_key(fields.IMAGE_CLASSES) not in e for e in restored)


def test_every_field_of_a_batch_is_in_the_concepts_table(synthetic_dir):
    text = (pathlib.Path(__file__).parents[1] / "docs" / "concepts.md").read_text()
    table = text[text.index("| field |") : text.index("from object_input import fields")]
    documented = set(re.findall(r"`([a-z_<>]+)`", table))
    for options in (
        {"masks": "png"},
        {"image_size": (32, 32), "max_boxes": 8, "batching": "static", "num_keypoints": 0},
    ):
        batch = next(iter(oi.make_dataset(str(synthetic_dir), batch_size=2, **options)))
        for name in batch:
            side = name.endswith("_shape") and name[: -len("_shape")] in batch
            assert name in documented or (side and "<name>_shape" in documented), name


def test_too_many_boxes_raises_naming_the_record(rng):
    ds = _dataset([_example(rng, 4, 4, 5)]).map(lambda f: limit_boxes(f, 3))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"f:0.*more than max_boxes=3"):
        next(iter(ds))


def test_truncate_keeps_first_boxes_and_counts_the_rest(rng):
    example = _example(rng, 4, 4, 5)
    out = next(iter(_dataset([example]).map(lambda f: limit_boxes(f, 3, "truncate"))))
    assert out[fields.NUM_BOXES].numpy() == 3
    assert out[fields.NUM_DROPPED_BOXES].numpy() == 2
    for name in (fields.BOXES, fields.CLASSES, fields.MASKS, fields.KEYPOINTS, fields.IS_CROWD):
        np.testing.assert_array_equal(out[name], example[name][:3])


def test_static_needs_sizes():
    ds = tf.data.Dataset.from_tensors({fields.BOXES: tf.zeros([0, 4])})
    with pytest.raises(ValueError, match="static batching needs"):
        batch_features(ds, 2, mode="static", max_boxes=None, image_size=(4, 4))


def test_unpad_rejects_foreign_batches():
    with pytest.raises(ValueError, match="not made by object_input"):
        unpad_batch({"image": np.zeros((1, 2, 2, 3))})


SIDES = [(8, 16), (16, 8), (12, 12), (6, 18), (18, 6), (10, 12)]


def test_group_by_aspect_ratio_batches_similar_shapes_and_keeps_every_example():
    rng = np.random.default_rng(4)
    shapes = [SIDES[i % len(SIDES)] for i in rng.permutation(30)]
    examples = [_example(rng, h, w, 2) for h, w in shapes]
    for index, example in enumerate(examples):
        example[fields.SOURCE_ID] = str(index).encode()
    grouped = list(batch_features(_prepared(examples), 4, group_by_aspect_ratio=True))
    seen, padded, plain_padded = [], 0, 0
    for batch in grouped:
        ratios = [w / h for h, w in batch[fields.IMAGE_SHAPE].numpy()]
        assert len({_bucket(r) for r in ratios}) == 1, ratios
        padded += np.prod(batch[fields.IMAGE].shape[:3])
        seen += [int(s) for s in batch[fields.SOURCE_ID].numpy()]
        for example in unpad_batch(batch):
            np.testing.assert_array_equal(
                example[fields.IMAGE], examples[int(example[fields.SOURCE_ID])][fields.IMAGE]
            )
    assert sorted(seen) == list(range(30))
    for batch in batch_features(_prepared(examples), 4):
        plain_padded += np.prod(batch[fields.IMAGE].shape[:3])
    assert padded < plain_padded
    again = [
        b[fields.SOURCE_ID].numpy().tolist()
        for b in batch_features(_prepared(examples), 4, group_by_aspect_ratio=True)
    ]
    assert again == [b[fields.SOURCE_ID].numpy().tolist() for b in grouped]


def _prepared(examples):
    return _dataset(examples).map(lambda features: prepare(features, None))


def _bucket(ratio):
    return sum(ratio >= b for b in (0.5, 0.75, 0.95, 1.05, 4 / 3, 2.0))


def test_group_by_aspect_ratio_needs_dynamic_batching():
    examples = [_example(np.random.default_rng(0), 4, 4, 1)]
    with pytest.raises(ValueError, match="needs batching='dynamic'"):
        batch_features(
            _dataset(examples),
            2,
            mode="static",
            max_boxes=2,
            image_size=(4, 4),
            group_by_aspect_ratio=True,
        )


def test_make_dataset_refuses_grouping_with_static_batches(tmp_path):
    import object_input as oi
    from object_input.writers import build_example, write_tfrecords

    write_tfrecords([build_example(np.zeros((4, 4, 3), np.uint8))], tmp_path / "one")
    with pytest.raises(ValueError, match="group_by_aspect_ratio needs batching='dynamic'"):
        oi.make_dataset(
            tmp_path,
            batch_size=2,
            batching="static",
            max_boxes=2,
            image_size=(4, 4),
            group_by_aspect_ratio=True,
        )
