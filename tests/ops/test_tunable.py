"""Tunable parameters: read as tensors only, so that a pipeline can feed them as variables.

For every registered step that declares ``tunable`` parameters: the step tuned (its tunable
parameters as variables) gives exactly what it gives untuned, per example and on the batch;
with a draw, its apply, its device form and the stage's structure never read them (they get
objects that fail when read).
"""

import numpy as np
import pytest
import tensorflow as tf

from object_input import fields
from object_input.ops import Augmentation, get_step, register_step, registered_steps
from object_input.ops import _draws as draws
from object_input.ops._device_stage import DeviceStage

TUNABLE = [name for name in registered_steps() if get_step(name).tunable]


class _Unread:
    """A parameter that must not be read: any use of it fails the test."""

    def _read(self, *args, **kwargs):
        raise AssertionError("a tunable parameter was read outside the draw")

    __bool__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = _read
    __float__ = __int__ = __index__ = __getitem__ = __iter__ = __len__ = __array__ = _read
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _read
    __rtruediv__ = __neg__ = __pow__ = __rpow__ = _read


def _example():
    rng = np.random.default_rng(5)
    return {
        fields.IMAGE: tf.constant(rng.integers(0, 256, [12, 17, 3]), tf.uint8),
        fields.IMAGE_SHAPE: tf.constant([12, 17]),
        fields.BOXES: tf.constant([[0.1, 0.2, 0.5, 0.7], [0.4, 0.05, 0.95, 0.4]], tf.float32),
        fields.CLASSES: tf.constant([1, 2]),
    }


def _params(name):
    spec = get_step(name)
    return spec.resolve(spec.demo_params)


def _unread(name):
    spec = get_step(name)
    return {**_params(name), **{param: _Unread() for param in spec.tunable}}


def _same(first, second):
    assert sorted(first) == sorted(second)
    for key in first:
        np.testing.assert_array_equal(np.asarray(first[key]), np.asarray(second[key]), key)


def test_the_colour_steps_and_the_flips_are_tunable():
    assert {
        "random_adjust_brightness",
        "random_adjust_contrast",
        "random_adjust_hue",
        "random_adjust_saturation",
        "random_horizontal_flip",
        "random_vertical_flip",
    } <= set(TUNABLE)
    assert get_step("random_adjust_contrast").tunable == ("min_delta", "max_delta")
    # Without a draw, a step takes them as op operands.
    assert get_step("random_crop_image").tunable == ("min_object_covered", "overlap_thresh")


@pytest.mark.parametrize("name", [name for name in TUNABLE if get_step(name).draw is not None])
def test_only_the_draw_reads_tunable_parameters(name):
    spec = get_step(name)
    features, seed = _example(), tf.constant([4, 2])
    drawn = spec.draw.sample(features, seed, **_params(name))
    expected = spec.registered(features, drawn, **_params(name))
    _same(expected, spec.registered(features, drawn, **_unread(name)))
    if spec.device is not None:
        device = spec.device
        assert device.num_parameters(_unread(name)) == device.num_parameters(_params(name))
        assert device.why_not(_unread(name)) == device.why_not(_params(name))
        if device.fuses:
            assert device.fused(_unread(name)) == device.fused(_params(name))


@pytest.mark.parametrize("name", TUNABLE)
def test_a_tuned_step_gives_what_the_step_gives(name):
    given = Augmentation([(name, get_step(name).demo_params)])
    tuned = given.tuned()
    assert all(isinstance(tuned.steps[0][1][p], tf.Variable) for p in get_step(name).tunable)
    features = _example()
    for salt in range(3):
        seed = tf.constant([salt, 7])
        _same(
            tf.function(given, autograph=False)(features, seed),
            tf.function(tuned, autograph=False)(features, seed),
        )
    if get_step(name).device is None:
        return
    outputs = []
    for augment in (given, tuned):
        stage = DeviceStage.required(augment, "test")
        prepared = tf.function(stage.prepare, autograph=False)(features, tf.constant([3, 1]))
        parameters = prepared[fields.DEVICE_PARAMETERS]
        image = tf.cast(features[fields.IMAGE], tf.float32)[None]
        outputs.append(stage(image, parameters[None], compiled=True).numpy())
    np.testing.assert_array_equal(*outputs)


def test_a_tuned_copy_holds_variables_and_configures_as_given():
    given = Augmentation(
        [("random_adjust_brightness", {"max_delta": 0.3}), ("random_crop_image", {})]
    )
    tuned = given.tuned()
    variable = tuned.steps[0][1]["max_delta"]
    assert variable.dtype == tf.float32 and not variable.trainable
    assert "CPU" in variable.device
    assert variable.numpy() == np.float32(0.3)
    assert tuned.steps[1][1] == given.steps[1][1]  # nothing tunable: as given
    assert tuned.as_config() == given.as_config()
    assert tuned.as_config()[0] == {"random_adjust_brightness": {"max_delta": 0.3}}
    # A copy tuned again holds variables of its own, from the values given.
    again = tuned.tuned()
    assert again.steps[0][1]["max_delta"] is not variable
    assert again.as_config() == given.as_config()
    assert given.steps[0][1]["max_delta"] == 0.3  # the original is left as it was


def _flipping(features, drawn, *, probability: float = 0.5, count: int = 1):
    del probability, count
    return features


def test_a_tunable_parameter_must_be_a_declared_float():
    draw = draws.Draw(lambda features, seed, **params: {})
    with pytest.raises(TypeError, match=r"tunable parameter 'count' must be declared float"):
        register_step("test_int", draw=draw, tunable=("count",))(_flipping)
    with pytest.raises(TypeError, match="tunable names unknown parameter 'missing'"):
        register_step("test_missing", draw=draw, tunable=("missing",))(_flipping)
    assert not {"test_int", "test_missing"} & set(registered_steps())
