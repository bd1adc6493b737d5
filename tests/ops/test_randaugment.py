"""randaugment_detection: per-example op choice, boxes moved with the geometric ops."""

import numpy as np
import pytest
import tensorflow as tf
from helpers import as_numpy, coord_features, over_seeds, seeds
from hypothesis import given, settings

from object_input import fields
from object_input.ops import ConfigError, get_step, randaugment_detection

BOXES = [[0.2, 0.2, 0.6, 0.5], [0.5, 0.55, 0.9, 0.95]]


@settings(max_examples=6, deadline=None)
@given(seed=seeds)
def test_boxes_stay_valid_and_aligned(box_id, seed):
    features = coord_features(20, 24, BOXES, dtype=np.uint8)
    out = as_numpy(randaugment_detection(features, seed=seed, num_layers=3, magnitude=7))
    boxes = out[fields.BOXES]
    assert ((boxes >= 0) & (boxes <= 1)).all() and (boxes[:, :2] <= boxes[:, 2:]).all()
    np.testing.assert_array_equal(out["box_id"] - 99, out[fields.CLASSES])
    assert out[fields.IMAGE].dtype == np.uint8
    assert len(out[fields.MASKS]) == len(boxes)


def test_magnitude_zero_and_probability_zero_leave_geometry_alone():
    features = coord_features(20, 24, BOXES)
    for params in ({"magnitude": 0}, {"probability": 0.0}):
        out = as_numpy(randaugment_detection(features, seed=3, num_layers=4, **params))
        np.testing.assert_allclose(out[fields.BOXES], np.array(BOXES), atol=1e-5)
    out = as_numpy(randaugment_detection(features, seed=3, num_layers=4, probability=0.0))
    np.testing.assert_array_equal(out[fields.IMAGE], features[fields.IMAGE].numpy())


def test_ops_are_drawn_per_example_and_geometric_ones_move_boxes():
    features = coord_features(20, 24, BOXES)

    def moved(seed):
        out = randaugment_detection(features, seed=seed, num_layers=1, magnitude=10)
        boxes = out[fields.BOXES]
        return tf.cond(
            tf.shape(boxes)[0] == 2,
            lambda: tf.reduce_any(tf.abs(boxes - BOXES) > 1e-3),
            lambda: tf.constant(False),
        )

    rate = over_seeds(moved, salt=4, num=280).numpy().mean()
    # 5 of the 14 choices (rotate, 2 shears, 2 translations) move boxes; a few drop one instead.
    assert 0.2 < rate < 0.45


def test_validation():
    with pytest.raises(ConfigError, match=r"randaugment_detection.*magnitude"):
        get_step("randaugment_detection").resolve({"magnitude": 11})
    with pytest.raises(ConfigError, match=r"randaugment_detection.*num_layers"):
        get_step("randaugment_detection").resolve({"num_layers": 0})
