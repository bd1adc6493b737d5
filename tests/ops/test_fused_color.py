"""The fused colour stage: equal to the exact colour steps, same draws, and its Keras layer."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import Augmentation
from object_input.ops._device_stage import DeviceStage
from object_input.ops._fused_color import FusedColor

TOLERANCE = 1e-3  # on the [0, 255] scale

STANDARD_COLOR = [
    "random_adjust_brightness",
    "random_adjust_contrast",
    "random_adjust_hue",
    "random_adjust_saturation",
]


def make_batch(seed, size=4, shape=(6, 7, 3)):
    """Float32 images; half of each uses {0, 64, 255} so that channels tie and hit the bounds."""
    rng = np.random.default_rng(seed)
    images = rng.uniform(0.0, 255.0, (size, *shape)).astype(np.float32)
    images[:, : shape[0] // 2] = rng.choice([0.0, 64.0, 255.0], images[:, : shape[0] // 2].shape)
    return images


def fused_of(steps):
    """The colour pass of the trailing colour steps of ``steps``, and their device stage."""
    stage = DeviceStage.split(steps)[1]
    fused, group = stage.groups(3)[-1]
    assert fused
    color = FusedColor(tuple((i, spec.name, params) for i, spec, params in group))
    return color, DeviceStage(stage.augment, group[0][0])


def draw(stage, seed):
    """One image's parameters of ``stage``, drawn from its example seed."""
    return stage.prepare({fields.IMAGE: tf.zeros([2, 2, 3])}, seed)[fields.DEVICE_PARAMETERS]


def exact_and_fused(steps, images, seeds):
    """Each image through ``Augmentation(steps)`` one by one, and through the colour pass."""
    augment = Augmentation(steps)
    color, stage = fused_of(steps)
    exact, before, parameters = [], [], []
    for image, seed in zip(images, seeds, strict=True):
        features = {fields.IMAGE: tf.constant(image)}
        exact.append(augment(features, seed)[fields.IMAGE].numpy())
        before.append(augment(features, seed, stop=stage.start)[fields.IMAGE].numpy())
        parameters.append(draw(stage, seed))
    fused = color(tf.constant(np.stack(before)), tf.stack(parameters)).numpy()
    return np.stack(exact), fused


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    steps=st.permutations(STANDARD_COLOR).flatmap(
        lambda order: st.integers(1, 4).map(lambda n: order[:n])
    ),
)
def test_fused_equals_exact_steps_in_any_order(seed, steps):
    images = make_batch(seed)
    seeds = [tf.constant([seed, i]) for i in range(len(images))]
    exact, fused = exact_and_fused(steps, images, seeds)
    assert fused.dtype == np.float32
    np.testing.assert_allclose(fused, exact, atol=TOLERANCE)


def test_wide_parameters_and_repeated_steps_match():
    steps = [
        ("random_adjust_saturation", {"min_delta": 0.0, "max_delta": 6.0}),
        ("random_adjust_hue", {"max_delta": 0.5}),
        ("random_adjust_contrast", {"min_delta": 0.0, "max_delta": 4.0}),
        ("random_adjust_brightness", {"max_delta": 1.0}),
        ("random_adjust_hue", {"max_delta": 0.5}),
    ]
    images = make_batch(3, size=6)
    exact, fused = exact_and_fused(steps, images, [tf.constant([9, i]) for i in range(6)])
    np.testing.assert_allclose(fused, exact, atol=TOLERANCE)


@pytest.mark.parametrize(
    "steps",
    [
        ["random_rgb_to_gray"],
        ["random_adjust_brightness", "random_rgb_to_gray", "random_adjust_contrast"],
        ["random_rgb_to_gray", "random_adjust_saturation", "random_adjust_hue"],
        ["random_adjust_hue", "random_rgb_to_gray", "random_adjust_brightness"],
    ],
)
def test_grayscale_runs_fused_among_the_other_color_steps(steps):
    # Half the images turn gray (probability 0.5 over 8 seeds draws both outcomes).
    steps = [(n, {"probability": 0.5}) if n == "random_rgb_to_gray" else n for n in steps]
    images = make_batch(5, size=8)
    seeds = [tf.constant([11, i]) for i in range(len(images))]
    exact, fused = exact_and_fused(steps, images, seeds)
    np.testing.assert_allclose(fused, exact, atol=TOLERANCE)
    color, stage = fused_of(steps)
    column = color.singles.index("random_rgb_to_gray")
    assert {float(draw(stage, seed)[column]) for seed in seeds} == {0.0, 1.0}


@pytest.mark.parametrize("ordering", [0, 1])
def test_distort_color_runs_fused_as_the_steps_it_chains(ordering):
    steps = [
        "random_horizontal_flip",
        ("random_distort_color", {"color_ordering": ordering}),
        "random_adjust_hue",
    ]
    color, stage = fused_of(steps)
    assert stage.start == 1 and color.names == ("random_distort_color", "random_adjust_hue")
    chain = {
        0: ["brightness", "saturation", "hue", "contrast"],
        1: ["brightness", "contrast", "saturation", "hue"],
    }[ordering]
    assert color.singles == (*(f"random_adjust_{s}" for s in chain), "random_adjust_hue")
    assert draw(stage, tf.constant([1, 2])).shape == (5,)
    images = make_batch(11, size=5)
    exact, fused = exact_and_fused(steps, images, [tf.constant([7, i]) for i in range(5)])
    np.testing.assert_allclose(fused, exact, atol=TOLERANCE)


def test_uint8_images_and_leading_geometry():
    steps = ["random_horizontal_flip", *STANDARD_COLOR]
    images = make_batch(5).round().astype(np.uint8)
    exact, fused = exact_and_fused(steps, images, [tf.constant([1, i]) for i in range(4)])
    np.testing.assert_allclose(fused, exact, atol=TOLERANCE)


def test_draw_is_the_step_draws_of_the_augmentation():
    stage = DeviceStage(Augmentation(["random_horizontal_flip", "random_adjust_hue"]), 1)
    seed = tf.constant([4, 2])
    expected = tf.random.stateless_uniform(
        [], tf.random.experimental.stateless_fold_in(seed, 1), minval=-0.02, maxval=0.02
    )
    np.testing.assert_allclose(draw(stage, seed).numpy(), [expected.numpy()])


@pytest.mark.parametrize(
    ("steps", "groups"),
    [
        (
            ["random_adjust_hue", "random_horizontal_flip", "random_adjust_saturation"],
            [(True, [0]), (False, [1]), (True, [2])],
        ),
        (STANDARD_COLOR, [(True, [0, 1, 2, 3])]),
        (["random_adjust_hue", "random_solarize"], [(True, [0]), (False, [1])]),
        (["random_adjust_hue", "random_rgb_to_gray"], [(True, [0, 1])]),
    ],
)
def test_neighbouring_colour_steps_run_as_one_pass(steps, groups):
    stage = DeviceStage.split(steps)[1]
    got = [(fused, [i for i, _, _ in group]) for fused, group in stage.groups(3)]
    assert got == groups
    # Only RGB batches take the colour pass: every step runs alone on other channel counts.
    assert all(not fused for fused, _ in stage.groups(1))


def test_rejects_non_rgb_batches():
    stage = fused_of(["random_adjust_hue"])[0]
    with pytest.raises(ValueError, match=r"RGB batches \[B, H, W, 3\], got shape \(2, 4, 4, 1\)"):
        stage(tf.zeros([2, 4, 4, 1]), tf.zeros([2, 1]))


@pytest.mark.parametrize("dtype", [tf.uint8, tf.bfloat16])
def test_narrow_output_is_the_float_output_cast_like_the_steps(dtype):
    stage, device_stage = fused_of(STANDARD_COLOR)
    images = tf.constant(make_batch(11))
    parameters = tf.stack([draw(device_stage, tf.constant([i, 3])) for i in range(4)])
    color = stage(images, parameters)
    narrow = stage(images, parameters, dtype)
    assert narrow.dtype == dtype
    if dtype.is_integer:
        # Rounded, not truncated: the batch has values that the two casts take apart.
        assert np.any(tf.cast(color, dtype).numpy() != tf.cast(tf.round(color), dtype).numpy())
        np.testing.assert_array_equal(narrow.numpy(), tf.cast(tf.round(color), dtype).numpy())
    else:
        np.testing.assert_array_equal(
            tf.bitcast(narrow, tf.uint16).numpy(),
            tf.bitcast(tf.cast(color, dtype), tf.uint16).numpy(),
        )
