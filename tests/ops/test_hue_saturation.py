"""Adjacent hue and saturation steps share one HSV round trip with unchanged results."""

import numpy as np
import pytest
import tensorflow as tf

from object_input import fields
from object_input.ops import Augmentation, get_step
from object_input.ops.color import apply_hue, apply_hue_saturation, apply_saturation


@pytest.mark.parametrize("order", [("hue", "sat"), ("sat", "hue")])
def test_pair_equals_the_steps_one_after_the_other(order, rng):
    names = {"hue": "random_adjust_hue", "sat": "random_adjust_saturation"}
    steps = [(names[o], {"max_delta": 0.3} if o == "hue" else {"max_delta": 1.5}) for o in order]
    image = {fields.IMAGE: tf.constant(rng.integers(0, 256, (20, 24, 4)).astype(np.uint8))}
    paired = Augmentation(steps)(image, seed=tf.constant([4, 2]))[fields.IMAGE]
    expected = dict(image)
    for index, (name, params) in enumerate(steps):
        seed = tf.random.experimental.stateless_fold_in(tf.constant([4, 2]), index)
        expected = get_step(name).fn(expected, seed=seed, **params)
    np.testing.assert_allclose(paired, expected[fields.IMAGE], atol=5e-3)
    np.testing.assert_array_equal(paired[..., 3], image[fields.IMAGE][..., 3])


def test_single_image_path_matches_the_batched_closed_forms(rng):
    image = tf.constant(rng.integers(0, 256, (16, 16, 3)).astype(np.float32))
    fused = apply_hue_saturation(image, 0.1, 1.3)
    batched = apply_saturation(apply_hue(image[tf.newaxis], [0.1]), [1.3])[0]
    np.testing.assert_allclose(fused, batched, atol=5e-3)


def test_pair_still_validates_the_saturation_range():
    features = {fields.IMAGE: tf.zeros([2, 2, 3])}
    augment = Augmentation(
        ["random_adjust_hue", ("random_adjust_saturation", {"min_delta": 2.0, "max_delta": 1.0})]
    )
    with pytest.raises(ValueError, match="max_delta"):
        augment(features, seed=tf.constant([1, 1]))
