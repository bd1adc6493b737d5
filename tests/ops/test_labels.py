"""Tests for drop_label_probabilistically, remap_labels, convert_class_logits_to_softmax and
one_hot_encoding."""

import numpy as np
import pytest
import tensorflow as tf
from helpers import run_in_graph
from hypothesis import given
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import (
    IMAGE_CLASSES_MULTI_HOT,
    ConfigError,
    convert_class_logits_to_softmax,
    drop_label_probabilistically,
    get_step,
    one_hot_encoding,
    remap_labels,
)


def _boxes(classes):
    count = len(classes)
    return {
        fields.IMAGE: tf.zeros([4, 4, 3], tf.uint8),
        fields.BOXES: tf.constant(np.linspace(0, 0.5, count * 4).reshape(count, 4), tf.float32),
        fields.CLASSES: tf.constant(classes, tf.int32),
        fields.WEIGHTS: tf.range(count, dtype=tf.float32),
        fields.IS_CROWD: tf.constant([i % 2 == 0 for i in range(count)]),
        fields.MASKS: tf.reshape(tf.range(count * 16) % 2, [count, 4, 4]) == 1,
        fields.MULTICLASS_SCORES: tf.reshape(tf.range(count * 3, dtype=tf.float32), [count, 3]),
        "box_id": tf.range(count),
    }


# --- drop_label_probabilistically --------------------------------------------------------------


def test_drop_label_exact(box_id):
    features = _boxes([1, 2, 1, 3])
    out = drop_label_probabilistically(features, seed=0, dropped_label=1)
    np.testing.assert_array_equal(out[fields.CLASSES], [2, 3])
    np.testing.assert_array_equal(out["box_id"], [1, 3])
    for name in (
        fields.BOXES,
        fields.WEIGHTS,
        fields.IS_CROWD,
        fields.MASKS,
        fields.MULTICLASS_SCORES,
    ):
        np.testing.assert_array_equal(out[name], tf.gather(features[name], [1, 3]))
    np.testing.assert_array_equal(out[fields.IMAGE], features[fields.IMAGE])
    kept = drop_label_probabilistically(features, seed=0, dropped_label=1, drop_probability=0.0)
    np.testing.assert_array_equal(kept["box_id"], [0, 1, 2, 3])
    absent = drop_label_probabilistically(features, seed=0, dropped_label=7)
    np.testing.assert_array_equal(absent["box_id"], [0, 1, 2, 3])


@given(st.lists(st.integers(1, 3), max_size=12), st.integers(0, 2**31), st.floats(0.0, 1.0))
def test_drop_label_properties(box_id, classes, seed, probability):
    features = _boxes(classes)
    out = drop_label_probabilistically(
        features, seed=seed, dropped_label=2, drop_probability=probability
    )
    ids = out["box_id"].numpy()
    # Survivors keep their order and every per-box field stays with its box.
    assert (np.diff(ids) > 0).all()
    np.testing.assert_array_equal(out[fields.CLASSES], np.asarray(classes, np.int32)[ids])
    np.testing.assert_array_equal(out[fields.WEIGHTS], ids.astype(np.float32))
    np.testing.assert_array_equal(out[fields.MASKS], tf.gather(features[fields.MASKS], ids))
    # Only boxes of the dropped label go.
    assert set(range(len(classes))) - set(ids) <= {i for i, c in enumerate(classes) if c == 2}
    again = drop_label_probabilistically(
        features, seed=seed, dropped_label=2, drop_probability=probability
    )
    np.testing.assert_array_equal(again["box_id"], ids)


def test_drop_label_rate_and_graph_mode():
    features = {fields.CLASSES: tf.fill([400], 5), fields.BOXES: tf.zeros([400, 4])}
    out = run_in_graph(
        drop_label_probabilistically, features, seed=[2, 3], dropped_label=5, drop_probability=0.3
    )
    dropped = 400 - int(tf.shape(out[fields.CLASSES])[0])
    # Binomial(400, 0.3): mean 120, sd 9.2.
    assert 79 <= dropped <= 161, dropped
    eager = drop_label_probabilistically(
        features, seed=[2, 3], dropped_label=5, drop_probability=0.3
    )
    np.testing.assert_array_equal(eager[fields.BOXES], out[fields.BOXES])


def test_drop_label_no_boxes():
    features = _boxes([])
    out = drop_label_probabilistically(features, seed=1, dropped_label=1, drop_probability=0.5)
    assert out[fields.CLASSES].shape == (0,)
    assert out[fields.MASKS].shape == (0, 4, 4)
    image_only = {fields.IMAGE: tf.zeros([2, 2, 3])}
    assert drop_label_probabilistically(image_only, dropped_label=1).keys() == {fields.IMAGE}


# --- remap_labels ---------------------------------------------------------------------------


def test_remap_labels():
    features = _boxes([1, 2, 3, 4, 2])
    out = remap_labels(features, original_labels=[2, 4], new_label=9)
    np.testing.assert_array_equal(out[fields.CLASSES], [1, 9, 3, 9, 9])
    np.testing.assert_array_equal(out[fields.BOXES], features[fields.BOXES])
    graph = run_in_graph(remap_labels, features, seed=None, original_labels=[3], new_label=1)
    np.testing.assert_array_equal(graph[fields.CLASSES], [1, 2, 1, 4, 2])
    assert remap_labels(_boxes([]), original_labels=[1], new_label=2)[fields.CLASSES].shape == (0,)
    np.testing.assert_array_equal(
        remap_labels(features, original_labels=[], new_label=2)[fields.CLASSES], [1, 2, 3, 4, 2]
    )


# --- convert_class_logits_to_softmax ----------------------------------------------------------


def test_convert_class_logits_to_softmax():
    logits = np.array([[0.0, 0.0, np.log(2.0)], [1.0, 2.0, 3.0]], np.float32)
    features = {fields.MULTICLASS_SCORES: tf.constant(logits), fields.CLASSES: tf.constant([1, 2])}
    out = convert_class_logits_to_softmax(features)
    np.testing.assert_allclose(out[fields.MULTICLASS_SCORES][0], [0.25, 0.25, 0.5], atol=1e-6)
    hot = convert_class_logits_to_softmax(features, temperature=2.0)[
        fields.MULTICLASS_SCORES
    ].numpy()
    expected = np.exp(logits / 2) / np.exp(logits / 2).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(hot, expected, atol=1e-6)
    np.testing.assert_array_equal(out[fields.CLASSES], [1, 2])
    graph = run_in_graph(convert_class_logits_to_softmax, features, seed=None, temperature=2.0)
    np.testing.assert_allclose(graph[fields.MULTICLASS_SCORES], expected, atol=1e-6)
    empty = convert_class_logits_to_softmax({fields.MULTICLASS_SCORES: tf.zeros([0, 5])})
    assert empty[fields.MULTICLASS_SCORES].shape == (0, 5)
    assert convert_class_logits_to_softmax({fields.CLASSES: tf.constant([1])}).keys() == {
        fields.CLASSES
    }


# --- one_hot_encoding -----------------------------------------------------------------------


def test_one_hot_encoding():
    features = {fields.IMAGE_CLASSES: tf.constant([1, 4, 4])}
    out = one_hot_encoding(features, num_classes=5)
    np.testing.assert_array_equal(out[IMAGE_CLASSES_MULTI_HOT], [1, 0, 0, 1, 0])
    assert out[IMAGE_CLASSES_MULTI_HOT].dtype == tf.float32
    np.testing.assert_array_equal(out[fields.IMAGE_CLASSES], [1, 4, 4])
    none = one_hot_encoding({fields.IMAGE_CLASSES: tf.zeros([0], tf.int32)}, num_classes=3)
    np.testing.assert_array_equal(none[IMAGE_CLASSES_MULTI_HOT], [0, 0, 0])
    graph = run_in_graph(one_hot_encoding, features, seed=None, num_classes=4)
    np.testing.assert_array_equal(graph[IMAGE_CLASSES_MULTI_HOT], [1, 0, 0, 1])
    assert one_hot_encoding({fields.CLASSES: tf.constant([1])}, num_classes=3).keys() == {
        fields.CLASSES
    }


@pytest.mark.parametrize("bad", [0, 6])
def test_one_hot_encoding_out_of_range(bad):
    features = {fields.IMAGE_CLASSES: tf.constant([1, bad]), fields.RECORD_ID: tf.constant("a:7")}
    with pytest.raises(tf.errors.InvalidArgumentError, match="a:7"):
        one_hot_encoding(features, num_classes=5)
    dataset = tf.data.Dataset.from_tensors(features).map(
        lambda f: one_hot_encoding(f, num_classes=5)
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="one_hot_encoding"):
        dataset.get_single_element()


@pytest.mark.parametrize(
    ("step", "params", "parameter"),
    [
        ("drop_label_probabilistically", {"drop_probability": 0.5}, "dropped_label"),
        ("drop_label_probabilistically", {"dropped_label": 0}, "dropped_label"),
        (
            "drop_label_probabilistically",
            {"dropped_label": 1, "drop_probability": 2.0},
            "drop_probability",
        ),
        ("drop_label_probabilistically", {"label": 1}, "label"),
        ("remap_labels", {"original_labels": [1, 0], "new_label": 2}, "original_labels"),
        ("remap_labels", {"original_labels": 3, "new_label": 2}, "original_labels"),
        ("remap_labels", {"original_labels": [1]}, "new_label"),
        ("convert_class_logits_to_softmax", {"temperature": 0.0}, "temperature"),
        ("one_hot_encoding", {}, "num_classes"),
        ("one_hot_encoding", {"num_classes": 0}, "num_classes"),
    ],
)
def test_parameter_validation(step, params, parameter):
    with pytest.raises(ConfigError, match=rf"{step}.*{parameter}"):
        get_step(step).resolve(params)


def test_defaults():
    assert get_step("drop_label_probabilistically").resolve({"dropped_label": 3}) == {
        "dropped_label": 3,
        "drop_probability": 1.0,
    }
    assert get_step("convert_class_logits_to_softmax").resolve({}) == {"temperature": 1.0}
