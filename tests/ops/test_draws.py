"""One draw per step: every step with a batched form declares its random draw once, and the
per-example step and the batched stage's per-example half (in the pipeline or moved to the
device), its colour pass included, all take it."""

import numpy as np
import pytest
import tensorflow as tf

from object_input import fields
from object_input.ops import Augmentation, get_step, register_step, registered_steps
from object_input.ops._batched import DeviceStep
from object_input.ops._device_stage import DeviceStage
from object_input.ops._draws import Draw

BATCHED = [name for name in registered_steps() if get_step(name).device is not None]
SIZE = (24, 32)
BOXES = np.array([[0.1, 0.1, 0.5, 0.45], [0.4, 0.5, 0.95, 0.9], [0.0, 0.0, 1.0, 1.0]], np.float32)


def example(index):
    """An RGB float32 image with texture, three boxes with classes, and their instance masks."""
    rng = np.random.default_rng(index)
    masks = np.zeros((3, *SIZE), np.uint8)
    for i, (top, left, bottom, right) in enumerate(BOXES):
        rows = slice(int(top * SIZE[0]), int(bottom * SIZE[0]))
        masks[i, rows, int(left * SIZE[1]) : int(right * SIZE[1])] = 1
    return {
        fields.IMAGE: tf.constant(rng.uniform(0, 255, (*SIZE, 3)).astype(np.float32)),
        fields.BOXES: tf.constant(BOXES),
        fields.CLASSES: tf.constant([1, 2, 3], tf.int32),
        fields.MASKS: tf.constant(masks),
        fields.NUM_DROPPED_BOXES: tf.constant(0, tf.int32),
    }


def _same(left, right, what):
    assert sorted(left) == sorted(right), what
    for key in left:
        np.testing.assert_array_equal(left[key], right[key], f"{what}: {key}")


class Recorded:
    """Every draw a step's :class:`Draw` makes while in use, as numpy values."""

    def __init__(self, draw):
        self.draw, self.sample, self.draws = draw, draw.sample, []

    def __enter__(self):
        def sample(*args, **kwargs):
            drawn = self.sample(*args, **kwargs)
            self.draws.append({key: np.asarray(value) for key, value in drawn.items()})
            return drawn

        object.__setattr__(self.draw, "sample", sample)
        return self.draws

    def __exit__(self, *exc):
        object.__setattr__(self.draw, "sample", self.sample)


def test_every_batched_step_declares_its_draw_and_the_per_example_step_takes_it():
    assert len(BATCHED) >= 21
    for name in BATCHED:
        spec = get_step(name)
        assert isinstance(spec.draw, Draw), name
        params = spec.resolve(spec.demo_params)
        features = example(1)
        seed = tf.constant([3, 4])
        drawn = spec.draw.sample(features, seed, **params)
        # The step is its registered work applied to the draw, with no randomness of its own.
        _same(
            spec.fn(features, seed=seed, **params), spec.registered(features, drawn, **params), name
        )


@pytest.mark.parametrize("name", BATCHED)
def test_the_step_and_its_device_half_take_the_same_draw(name):
    spec = get_step(name)
    params = spec.resolve(spec.demo_params)
    steps = [(name, params)]
    stage = DeviceStage.required(steps, "test")
    for index in range(3):
        features, seed = example(index), tf.constant([index, 9])
        with Recorded(spec.draw) as draws:
            out = Augmentation(steps)(features, seed)
            prepared = stage.prepare(features, seed)
        assert len(draws) == 2, name
        _same(draws[0], draws[1], name)
        # What the draw does to the annotations is done once, the same for both.
        del out[fields.IMAGE], prepared[fields.IMAGE]
        parameters = prepared.pop(fields.DEVICE_PARAMETERS)
        _same(out, prepared, name)
        assert parameters.shape == [spec.device.num_parameters(params)]


def test_the_batched_colour_pass_takes_each_colour_steps_draw():
    names = [name for name in BATCHED if get_step(name).device.fuses]
    assert {"random_adjust_brightness", "random_distort_color", "random_rgb_to_gray"} <= set(names)
    start, stage = DeviceStage.split(names)
    # Every colour step is in the stage, and all of them run as one colour pass on RGB.
    assert start == 0 and [(fused, len(group)) for fused, group in stage.groups(3)] == [
        (True, len(names))
    ]
    augment = Augmentation(names)
    features, seed = example(0), tf.constant([5, 6])
    for index, name in enumerate(names):
        spec = get_step(name)
        with Recorded(spec.draw) as draws:
            stage.prepare(features, seed)
            augment(features, seed, start=index, stop=index + 1)
        assert len(draws) == 2, name
        _same(draws[0], draws[1], name)


def test_a_draw_packs_into_the_batch_parameters_in_one_place():
    def sample(features, seed, *, scale):
        del features, seed
        return {"flag": tf.constant(True), "matrix": tf.constant([[1, 2], [3, 4]]) * scale}

    def annotate(features, drawn, size, *, scale):
        del scale
        out = dict(features)
        out[fields.BOXES] = features[fields.BOXES] + tf.cast(size[0], tf.float32)
        return out, {**drawn, "rows": size[0]}

    draw = Draw(sample)
    np.testing.assert_array_equal(draw.prepare({}, 1, {"scale": 2})[1], [1, 2, 4, 6, 8])
    features = {fields.IMAGE: tf.zeros([5, 7, 3], tf.uint8), fields.BOXES: tf.zeros([1, 4])}
    prepared, parameters = Draw(sample, annotate).prepare(features, 1, {"scale": 1})
    np.testing.assert_array_equal(parameters, [1, 1, 2, 3, 4, 5])
    np.testing.assert_array_equal(prepared[fields.BOXES], [[5, 5, 5, 5]])
    assert prepared[fields.IMAGE] is features[fields.IMAGE]
    encoded = Draw(sample, encode=lambda drawn, size, scale: [drawn["matrix"][0, 1]])
    np.testing.assert_array_equal(encoded.prepare({}, 1, {"scale": 3})[1], [6])


def test_a_device_form_needs_a_draw_and_a_drawn_step_takes_its_draw():
    batched = DeviceStep(lambda images, parameters: images, size=1, fidelity="exact")
    with pytest.raises(ValueError, match=r"declares its random draw once \(register_step\(draw="):
        register_step("user_undrawn", device=batched)

    def draws_itself(features, *, seed=None):
        return features

    with pytest.raises(TypeError, match=r"has a draw: it must be fn\(features, drawn, \*\*params"):
        register_step("user_undrawn", draw=Draw(lambda features, seed: {}), device=batched)(
            draws_itself
        )
    assert "user_undrawn" not in registered_steps()
    # The public step of a drawn one takes the parameters the registered function takes.
    flip = get_step("random_horizontal_flip").fn
    with pytest.raises(TypeError, match="unexpected keyword argument 'probabilty'"):
        flip(example(0), seed=1, probabilty=1.0)
