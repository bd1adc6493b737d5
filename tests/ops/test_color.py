"""Colour steps: agreement with tf.image.adjust_*, the draw/apply split, batching, channels."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import color
from object_input.ops._registry import ConfigError, get_step, registered_steps

TOLERANCE = 1e-3  # on the [0, 255] scale


def make_image(seed, shape=(6, 7, 3)):
    """Random float32 pixels; the top half uses {0, 64, 255} so channels tie and hit the bounds."""
    rng = np.random.default_rng(seed)
    image = rng.uniform(0.0, 255.0, shape).astype(np.float32)
    half = shape[-3] // 2
    image[..., :half, :, :] = rng.choice([0.0, 64.0, 255.0], image[..., :half, :, :].shape)
    return image


def reference(adjust, image, param):
    """The Object Detection API recipe: adjust image / 255, then * 255 and clip."""
    return np.clip(adjust(image / 255.0, param).numpy() * 255.0, 0.0, 255.0)


def run_step(name, image, seed=(1, 2), **params):
    return get_step(name).fn({fields.IMAGE: tf.constant(image)}, seed=seed, **params)[fields.IMAGE]


ADJUSTMENTS = {
    "brightness": (color.apply_brightness, tf.image.adjust_brightness, st.floats(-1.0, 1.0)),
    "contrast": (color.apply_contrast, tf.image.adjust_contrast, st.floats(0.0, 4.0)),
    "hue": (color.apply_hue, tf.image.adjust_hue, st.floats(-0.5, 0.5)),
    "saturation": (color.apply_saturation, tf.image.adjust_saturation, st.floats(0.0, 6.0)),
}


@pytest.mark.parametrize("name", sorted(ADJUSTMENTS))
def test_apply_matches_tf_image(name):
    apply, adjust, params = ADJUSTMENTS[name]

    @settings(max_examples=25, deadline=None)
    @given(seed=st.integers(0, 2**16), param=params)
    def check(seed, param):
        image = make_image(seed)
        got = apply(image, param).numpy()
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, reference(adjust, image, param), atol=TOLERANCE)

    check()


@pytest.mark.parametrize(
    ("name", "adjust", "value"),
    [
        ("random_adjust_contrast", tf.image.adjust_contrast, 1.7),
        ("random_adjust_contrast", tf.image.adjust_contrast, 0.3),
        ("random_adjust_saturation", tf.image.adjust_saturation, 1.7),
        ("random_adjust_saturation", tf.image.adjust_saturation, 0.3),
    ],
)
def test_steps_with_degenerate_range_match_tf_image(name, adjust, value):
    image = make_image(3)
    got = run_step(name, image, min_delta=value, max_delta=value)
    np.testing.assert_allclose(got, reference(adjust, image, value), atol=TOLERANCE)


@pytest.mark.parametrize("name", ["random_adjust_brightness", "random_adjust_hue"])
def test_zero_max_delta_leaves_image_unchanged(name):
    image = make_image(4)
    np.testing.assert_allclose(run_step(name, image, max_delta=0.0), image, atol=TOLERANCE)


def test_brightness_step_adds_its_drawn_delta():
    image = np.full((2, 3, 3), 120.0, np.float32)
    for seed in range(5):
        out = run_step("random_adjust_brightness", image, seed=(seed, 0), max_delta=0.2).numpy()
        delta = color.draw_delta((seed, 0), max_delta=0.2)["delta"].numpy()
        np.testing.assert_allclose(out, image + 255.0 * delta, atol=TOLERANCE)


def _many_draws(draw, num=400, **params):
    seeds = tf.stack([tf.range(num), tf.fill([num], 5)], axis=1)
    signature = {k: tf.TensorSpec([], v.dtype) for k, v in draw((0, 0), **params).items()}
    fn = tf.function(
        lambda s: tf.map_fn(lambda x: draw(x, **params), s, fn_output_signature=signature)
    )
    return {k: v.numpy() for k, v in fn(seeds).items()}


@pytest.mark.parametrize(
    ("draw", "params", "key", "low", "high"),
    [
        (color.draw_delta, {"max_delta": 0.2}, "delta", -0.2, 0.2),
        (color.draw_factor, {"min_delta": 0.8, "max_delta": 1.25}, "factor", 0.8, 1.25),
        (color.draw_delta, {"max_delta": 0.02}, "delta", -0.02, 0.02),
        (color.draw_factor, {"min_delta": 0.5, "max_delta": 2.0}, "factor", 0.5, 2.0),
        (color.draw_distort_color, {}, "brightness_delta", -32 / 255, 32 / 255),
        (color.draw_distort_color, {}, "saturation_factor", 0.5, 1.5),
        (color.draw_distort_color, {}, "hue_delta", -0.2, 0.2),
        (color.draw_distort_color, {}, "contrast_factor", 0.5, 1.5),
    ],
)
def test_draws_are_uniform_over_their_range(draw, params, key, low, high):
    values = _many_draws(draw, **params)[key]
    assert values.min() >= low and values.max() <= high
    # Uniform: each quarter of the range holds ~100 of 400 draws (binomial sd ~8.7).
    counts = np.histogram(values, bins=4, range=(low, high))[0]
    assert np.all(np.abs(counts - 100) < 45), counts


def test_random_rgb_to_gray_rate():
    image = tf.constant([[[10.0, 100.0, 200.0]]])
    seeds = tf.stack([tf.range(400), tf.fill([400], 9)], axis=1)
    step = get_step("random_rgb_to_gray").fn

    @tf.function
    def grayed(seeds):
        def one(seed):
            out = step({fields.IMAGE: image}, seed=seed, probability=0.3)[fields.IMAGE]
            return tf.equal(out[0, 0, 0], out[0, 0, 2])

        return tf.map_fn(one, seeds, fn_output_signature=tf.bool)

    count = int(np.sum(grayed(seeds).numpy()))
    assert abs(count - 120) < 5 * np.sqrt(400 * 0.3 * 0.7), count


def test_random_rgb_to_gray_forced():
    image = make_image(5)
    expected = tf.image.grayscale_to_rgb(tf.image.rgb_to_grayscale(image)).numpy()
    gray = run_step("random_rgb_to_gray", image, probability=1.0).numpy()
    np.testing.assert_allclose(gray, expected, atol=TOLERANCE)
    # The same luma in every channel, bit for bit: a gray pixel has no hue.
    for shown in (
        gray,
        run_step("random_rgb_to_gray", make_image(6, (61, 83, 3)), probability=1.0),
    ):
        shown = np.asarray(shown)
        np.testing.assert_array_equal(shown[..., 1:], np.repeat(shown[..., :1], 2, axis=-1))
    np.testing.assert_array_equal(run_step("random_rgb_to_gray", image, probability=0.0), image)


@pytest.mark.parametrize(("gamma", "gain"), [(1.0, 1.0), (0.5, 1.0), (2.2, 0.8), (0.0, 1.3)])
def test_adjust_gamma_matches_tf_image(gamma, gain):
    image = make_image(6).astype(np.uint8)
    got = run_step("adjust_gamma", image, gamma=gamma, gain=gain)
    expected = np.clip(tf.image.adjust_gamma(image / 255.0, gamma, gain).numpy() * 255.0, 0, 255)
    assert got.dtype == tf.float32
    np.testing.assert_allclose(got, expected, atol=TOLERANCE)


def _distort_reference(image, drawn, ordering):
    stages = {
        "brightness": (tf.image.adjust_brightness, drawn["brightness_delta"]),
        "saturation": (tf.image.adjust_saturation, drawn["saturation_factor"]),
        "hue": (tf.image.adjust_hue, drawn["hue_delta"]),
        "contrast": (tf.image.adjust_contrast, drawn["contrast_factor"]),
    }
    order = [
        ["brightness", "saturation", "hue", "contrast"],
        ["brightness", "contrast", "saturation", "hue"],
    ][ordering]
    for stage in order:
        adjust, value = stages[stage]
        image = reference(adjust, image, value)
    return image


@pytest.mark.parametrize("ordering", [0, 1])
def test_distort_color_matches_chained_tf_image(ordering):
    image = make_image(7)
    outputs = []
    for seed in [(3, 4), (8, 1)]:
        drawn = color.draw_distort_color(seed)
        got = run_step("random_distort_color", image, seed=seed, color_ordering=ordering)
        np.testing.assert_allclose(got, _distort_reference(image, drawn, ordering), atol=TOLERANCE)
        outputs.append(got.numpy())
    assert not np.allclose(outputs[0], outputs[1])


def test_distort_color_orderings_differ():
    image = make_image(8)
    first = run_step("random_distort_color", image, color_ordering=0)
    second = run_step("random_distort_color", image, color_ordering=1)
    assert np.abs(first - second).max() > 1.0


def test_distort_color_rejects_other_orderings():
    with pytest.raises(ConfigError, match=r"random_distort_color.*color_ordering"):
        get_step("random_distort_color").resolve({"color_ordering": 2})
    drawn = color.draw_distort_color((1, 1))
    with pytest.raises(ConfigError, match="color_ordering"):
        color.apply_distort_color(make_image(1), **drawn, color_ordering=-1)


def _batch_inputs():
    return np.stack([make_image(seed, (5, 6, 4)) for seed in range(3)]).astype(np.uint8)


COLOR_STEPS = sorted(
    name
    for name in registered_steps()
    if get_step(name).fn.__module__ == color.__name__ and get_step(name).kind == "color"
)


@pytest.mark.parametrize("name", [n for n in COLOR_STEPS if get_step(n).device is not None])
def test_batched_apply_equals_per_image_step(name):
    """The fusing contract: draw per image, stack to [B], apply once on [B, H, W, C]."""
    spec = get_step(name)
    params = spec.resolve({})
    images = _batch_inputs()
    seeds = [(11, s) for s in range(len(images))]
    drawn = tf.stack([spec.draw.prepare({}, seed, params)[1] for seed in seeds])
    batched = spec.device.apply(tf.constant(images), drawn, **params).numpy()
    for index, seed in enumerate(seeds):
        single = spec.fn({fields.IMAGE: tf.constant(images[index])}, seed=seed, **params)
        np.testing.assert_allclose(batched[index], single[fields.IMAGE], atol=TOLERANCE)


def test_gamma_applies_per_image_values_to_a_batch():
    images = _batch_inputs()
    batched = color.apply_gamma(tf.constant(images), [0.5, 1.0, 2.0], [1.0, 1.2, 0.8]).numpy()
    gammas, gains = [0.5, 1.0, 2.0], [1.0, 1.2, 0.8]
    for image, gamma, gain, got in zip(images, gammas, gains, batched, strict=True):
        single = run_step("adjust_gamma", image, gamma=gamma, gain=gain).numpy()
        np.testing.assert_allclose(got, single, atol=TOLERANCE)


@pytest.mark.parametrize("name", COLOR_STEPS)
def test_extra_channels_pass_through(name):
    image = make_image(9, (4, 5, 5)).astype(np.uint8)
    params = get_step(name).resolve({})
    out = run_step(name, image, **params).numpy()
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out[..., 3:], image[..., 3:].astype(np.float32))
    rgb_only = run_step(name, image[..., :3], **params).numpy()
    np.testing.assert_allclose(out[..., :3], rgb_only, atol=TOLERANCE)


@pytest.mark.parametrize(
    "name", ["random_adjust_hue", "random_adjust_saturation", "random_rgb_to_gray"]
)
def test_hue_saturation_gray_are_no_ops_on_grayscale(name):
    image = make_image(10, (4, 5, 2)).astype(np.uint8)
    params = {"probability": 1.0} if name == "random_rgb_to_gray" else {"max_delta": 0.5}
    if name == "random_adjust_saturation":
        params = {"min_delta": 3.0, "max_delta": 3.0}
    out = run_step(name, image, **params)
    assert out.dtype == tf.float32
    np.testing.assert_array_equal(out, image.astype(np.float32))


def test_brightness_and_contrast_act_on_the_gray_channel_only():
    image = make_image(11, (4, 5, 2))
    out = run_step("random_adjust_brightness", image, seed=(0, 3), max_delta=0.2).numpy()
    delta = color.draw_delta((0, 3), max_delta=0.2)["delta"].numpy()
    np.testing.assert_allclose(
        out[..., 0], np.clip(image[..., 0] + 255 * delta, 0, 255), atol=TOLERANCE
    )
    np.testing.assert_array_equal(out[..., 1], image[..., 1])
    out = run_step("random_adjust_contrast", image, min_delta=2.0, max_delta=2.0).numpy()
    expected = reference(tf.image.adjust_contrast, image[..., :1], 2.0)
    np.testing.assert_allclose(out[..., :1], expected, atol=TOLERANCE)
    np.testing.assert_array_equal(out[..., 1], image[..., 1])


def test_rgb_to_gray():
    image = make_image(12)
    out = run_step("rgb_to_gray", image)
    np.testing.assert_allclose(out, tf.image.rgb_to_grayscale(image), atol=TOLERANCE)
    four = make_image(12, (6, 7, 4))
    out = run_step("rgb_to_gray", four).numpy()
    assert out.shape == (6, 7, 2)
    np.testing.assert_array_equal(out[..., 1], four[..., 3])
    gray = make_image(12, (6, 7, 1)).astype(np.uint8)
    out = run_step("rgb_to_gray", gray)
    assert out.dtype == tf.float32
    np.testing.assert_array_equal(out, gray.astype(np.float32))
    assert get_step("rgb_to_gray").kind == "image"


@pytest.mark.parametrize("name", [*COLOR_STEPS, "rgb_to_gray"])
def test_unknown_channel_count_is_a_trace_time_error(name):
    step = get_step(name)
    params = step.resolve({})

    @tf.function(input_signature=[tf.TensorSpec([None, None, None], tf.uint8)])
    def run(image):
        return step.fn({fields.IMAGE: image}, seed=(1, 1), **params)[fields.IMAGE]

    with pytest.raises(ValueError, match="channel count must be known"):
        run.get_concrete_function()


def test_works_in_dataset_map_with_unknown_sizes():
    images = [
        make_image(s, (h, w, 3)).astype(np.uint8) for s, (h, w) in enumerate([(4, 6), (7, 3)])
    ]
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(images), output_signature=tf.TensorSpec([None, None, 3], tf.uint8)
    )
    step = get_step("random_distort_color").fn
    mapped = dataset.map(lambda im: step({fields.IMAGE: im}, seed=(4, 2))[fields.IMAGE])
    for image, got in zip(images, mapped, strict=True):
        eager = run_step("random_distort_color", image, seed=(4, 2))
        assert got.dtype == tf.float32
        np.testing.assert_allclose(got, eager, atol=TOLERANCE)
        assert got.numpy().min() >= 0.0 and got.numpy().max() <= 255.0


@pytest.mark.parametrize("name", [n for n in COLOR_STEPS if n.startswith("random_")])
def test_same_seed_same_output_and_seeds_differ(name):
    image = make_image(13)
    params = get_step(name).resolve({})
    if name == "random_rgb_to_gray":
        params = {"probability": 0.5}
    first = run_step(name, image, seed=(5, 5), **params)
    np.testing.assert_array_equal(first, run_step(name, image, seed=(5, 5), **params))
    others = [run_step(name, image, seed=(5, s), **params) for s in range(6, 12)]
    assert any(not np.array_equal(first, other) for other in others)
    assert run_step(name, image, seed=None, **params).shape == image.shape


@pytest.mark.parametrize(
    ("name", "params", "bad"),
    [
        ("random_adjust_brightness", {"max_delta": -0.1}, "max_delta"),
        ("random_adjust_hue", {"max_delta": 0.6}, "max_delta"),
        ("random_adjust_contrast", {"min_delta": -0.5}, "min_delta"),
        ("random_adjust_saturation", {"max_delta": -1.0}, "max_delta"),
        ("random_rgb_to_gray", {"probability": 1.5}, "probability"),
        ("adjust_gamma", {"gamma": -1.0}, "gamma"),
        ("adjust_gamma", {"gain": "x"}, "gain"),
        ("random_distort_color", {"color_ordering": 0.5}, "color_ordering"),
    ],
)
def test_parameter_validation(name, params, bad):
    with pytest.raises(ConfigError, match=f"{name}.*{bad}"):
        get_step(name).resolve(params)


@pytest.mark.parametrize("name", ["random_adjust_contrast", "random_adjust_saturation"])
def test_reversed_range_is_a_config_error(name):
    with pytest.raises(ConfigError, match=f"{name}.*max_delta"):
        run_step(name, make_image(0), min_delta=1.5, max_delta=1.0)


@pytest.mark.parametrize("gamma, gain", [(1.0, 1.3), (0.7, 1.1), (2.2, 0.9)])
def test_gamma_of_a_uint8_image_is_the_curve_of_its_values(gamma, gain):
    # Every uint8 value once per channel: the table (or the gamma-1 scale) against the closed form.
    values = np.arange(256, dtype=np.float32)
    image = np.stack([values, values[::-1], values], axis=-1).reshape(16, 16, 3).astype(np.uint8)
    out = get_step("adjust_gamma").fn({fields.IMAGE: tf.constant(image)}, gamma=gamma, gain=gain)
    expected = np.clip(gain * (image / 255.0) ** gamma * 255.0, 0, 255)
    assert out[fields.IMAGE].dtype == tf.float32
    np.testing.assert_allclose(out[fields.IMAGE].numpy(), expected, rtol=1e-5, atol=1e-4)
