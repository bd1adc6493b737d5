"""The fused colour stage: equal to the exact colour steps, same draws, and its Keras layer."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import Augmentation, get_step
from object_input.ops.fused_color import FusedColor

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


def exact_and_fused(steps, images, seeds):
    """Each image through ``Augmentation(steps)`` one by one, and through the fused stage."""
    augment = Augmentation(steps)
    start, stage = FusedColor.split(augment)
    exact, before, parameters = [], [], []
    for image, seed in zip(images, seeds, strict=True):
        features = {fields.IMAGE: tf.constant(image)}
        exact.append(augment(features, seed)[fields.IMAGE].numpy())
        before.append(augment(features, seed, stop=start)[fields.IMAGE].numpy())
        parameters.append(stage.draw(seed))
    fused = stage(tf.constant(np.stack(before)), tf.stack(parameters)).numpy()
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
    stage = FusedColor.split(steps)[1]
    column = stage.singles.index("random_rgb_to_gray")
    assert {float(stage.draw(seed)[column]) for seed in seeds} == {0.0, 1.0}


@pytest.mark.parametrize("ordering", [0, 1])
def test_distort_color_runs_fused_as_the_steps_it_chains(ordering):
    steps = [
        "random_horizontal_flip",
        ("random_distort_color", {"color_ordering": ordering}),
        "random_adjust_hue",
    ]
    start, stage = FusedColor.split(steps)
    assert start == 1 and stage.names == ("random_distort_color", "random_adjust_hue")
    chain = {
        0: ["brightness", "saturation", "hue", "contrast"],
        1: ["brightness", "contrast", "saturation", "hue"],
    }[ordering]
    assert stage.singles == (*(f"random_adjust_{s}" for s in chain), "random_adjust_hue")
    assert stage.draw(tf.constant([1, 2])).shape == (5,)
    images = make_batch(11, size=5)
    exact, fused = exact_and_fused(steps, images, [tf.constant([7, i]) for i in range(5)])
    np.testing.assert_allclose(fused, exact, atol=TOLERANCE)


def test_uint8_images_and_leading_geometry():
    steps = ["random_horizontal_flip", *STANDARD_COLOR]
    images = make_batch(5).round().astype(np.uint8)
    exact, fused = exact_and_fused(steps, images, [tf.constant([1, i]) for i in range(4)])
    np.testing.assert_allclose(fused, exact, atol=TOLERANCE)


def test_draw_is_the_step_draws_of_the_augmentation():
    stage = FusedColor.split(["random_horizontal_flip", "random_adjust_hue"])[1]
    seed = tf.constant([4, 2])
    expected = tf.random.stateless_uniform(
        [], tf.random.experimental.stateless_fold_in(seed, 1), minval=-0.02, maxval=0.02
    )
    np.testing.assert_allclose(stage.draw(seed).numpy(), [expected.numpy()])


@pytest.mark.parametrize(
    ("steps", "start", "names"),
    [
        (
            ["random_adjust_hue", "random_horizontal_flip", "random_adjust_saturation"],
            2,
            ("random_adjust_saturation",),
        ),
        (STANDARD_COLOR, 0, tuple(STANDARD_COLOR)),
        (["random_adjust_hue", "random_horizontal_flip"], 2, None),
        (["random_adjust_hue", "random_solarize"], 2, None),
        (
            ["random_adjust_hue", "random_rgb_to_gray"],
            0,
            ("random_adjust_hue", "random_rgb_to_gray"),
        ),
        ([], 0, None),
    ],
)
def test_split_takes_the_trailing_fusable_run(steps, start, names):
    got_start, stage = FusedColor.split(steps)
    assert got_start == start
    assert (stage.names if stage else None) == names
    assert all(get_step(name).device.fuses for name in names or ())


def test_rejects_non_rgb_batches():
    stage = FusedColor.split(["random_adjust_hue"])[1]
    with pytest.raises(ValueError, match=r"RGB batches \[B, H, W, 3\], got shape \(2, 4, 4, 1\)"):
        stage(tf.zeros([2, 4, 4, 1]), tf.zeros([2, 1]))


@pytest.mark.parametrize("dtype", [tf.uint8, tf.bfloat16])
def test_narrow_output_is_the_float_output_cast_like_the_steps(dtype):
    stage = FusedColor.split(STANDARD_COLOR)[1]
    images = tf.constant(make_batch(11))
    parameters = tf.stack([stage.draw(tf.constant([i, 3])) for i in range(4)])
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


def test_colour_part_is_the_old_name_of_color_part():
    import object_input.ops.fused_color as fused_color

    with pytest.warns(
        DeprecationWarning, match="fused_color.ColourPart moved to .*fused_color.ColorPart"
    ):
        old = fused_color.ColourPart
    assert old is fused_color.ColorPart
