"""Pixel-value steps: remaps, per-pixel noise, black patches, JPEG re-encoding."""

import numpy as np
import pytest
import tensorflow as tf

from object_input import fields
from object_input.ops._registry import ConfigError, get_step


def make_image(seed, shape=(8, 10, 3), dtype=np.float32):
    return np.random.default_rng(seed).uniform(0.0, 255.0, shape).round().astype(dtype)


def run_step(name, image, seed=(1, 2), **params):
    return get_step(name).fn({fields.IMAGE: tf.constant(image)}, seed=seed, **params)[fields.IMAGE]


def rate(name, image, params, num=400):
    """How often (over ``num`` seeds) the step changes ``image``, run as one tf.function."""
    step = get_step(name).fn
    seeds = tf.stack([tf.range(num), tf.fill([num], 3)], axis=1)

    @tf.function
    def changed(seeds):
        def one(seed):
            out = step({fields.IMAGE: tf.constant(image)}, seed=seed, **params)[fields.IMAGE]
            return tf.reduce_any(tf.not_equal(tf.cast(out, tf.float32), image))

        return tf.map_fn(one, seeds, fn_output_signature=tf.bool)

    return float(np.mean(changed(seeds).numpy()))


def assert_binomial(observed, probability, num=400):
    assert abs(observed - probability) <= 5 * np.sqrt(probability * (1 - probability) / num) + 1e-9


# per_image_standardization --------------------------------------------------------------------


def test_per_image_standardization_exact_and_equal_to_tensorflows():
    image = np.array([[[0, 2, 4], [6, 8, 10]]], np.uint8)  # mean 5, std sqrt(35/3)
    out = run_step("per_image_standardization", image)
    np.testing.assert_allclose(out, (image - 5.0) / np.sqrt(35 / 3), rtol=1e-6)
    assert out.dtype == tf.float32
    other = make_image(4)
    np.testing.assert_allclose(
        run_step("per_image_standardization", other),
        tf.image.per_image_standardization(other),
        atol=1e-5,
    )


def test_per_image_standardization_flat_image_and_batches():
    flat = np.full([2, 2, 1], 7.0, np.float32)
    np.testing.assert_array_equal(run_step("per_image_standardization", flat), np.zeros_like(flat))
    batch = np.stack([make_image(1), make_image(2) * 0.5])
    out = run_step("per_image_standardization", batch)
    for got, image in zip(out, batch, strict=True):
        np.testing.assert_allclose(got, tf.image.per_image_standardization(image), atol=1e-5)


# normalize_image / subtract_channel_mean ------------------------------------------------------


def test_normalize_image_exact():
    image = np.array([[[0, 128, 255]]], np.uint8)
    out = run_step("normalize_image", image, original_minval=0.0, original_maxval=255.0)
    np.testing.assert_allclose(out, [[[0.0, 128 / 255, 1.0]]], rtol=1e-6)
    out = run_step(
        "normalize_image",
        image,
        original_minval=0.0,
        original_maxval=255.0,
        target_minval=-1.0,
        target_maxval=1.0,
    )
    assert out.dtype == tf.float32
    np.testing.assert_allclose(out, [[[-1.0, 1 / 255, 1.0]]], rtol=1e-6, atol=1e-7)


def test_normalize_image_all_channels_and_batched():
    image = make_image(0, (2, 3, 4, 5))
    out = run_step("normalize_image", image, original_minval=100.0, original_maxval=200.0)
    np.testing.assert_allclose(out, (image - 100.0) / 100.0, rtol=1e-5, atol=1e-6)


def test_normalize_image_validation():
    with pytest.raises(ConfigError, match=r"normalize_image.*original_minval.*required"):
        get_step("normalize_image").resolve({"original_maxval": 255})
    with pytest.raises(ConfigError, match=r"normalize_image.*must differ"):
        run_step("normalize_image", make_image(0), original_minval=3.0, original_maxval=3.0)


def test_subtract_channel_mean():
    image = np.array([[[10, 20, 30, 40]]], np.uint8)
    out = run_step("subtract_channel_mean", image, means=(1.0, 2.0, 3.0, 50.0))
    assert out.dtype == tf.float32
    np.testing.assert_array_equal(out, [[[9.0, 18.0, 27.0, -10.0]]])
    batch = make_image(1, (2, 3, 4, 3))
    out = run_step("subtract_channel_mean", batch, means=(1.0, 2.0, 3.0))
    np.testing.assert_allclose(out, batch - [1.0, 2.0, 3.0])


def test_subtract_channel_mean_validation():
    with pytest.raises(ValueError, match="2 means given for an image with 3 channels"):
        run_step("subtract_channel_mean", make_image(0), means=(1.0, 2.0))
    with pytest.raises(ConfigError, match=r"subtract_channel_mean.*means.*at least one"):
        get_step("subtract_channel_mean").resolve({"means": []})
    with pytest.raises(ConfigError, match=r"subtract_channel_mean.*means.*required"):
        get_step("subtract_channel_mean").resolve({})


# random_pixel_value_scale ---------------------------------------------------------------------


def test_pixel_value_scale_forced_factor():
    image = make_image(2, (4, 5, 4), np.uint8)
    out = run_step("random_pixel_value_scale", image, minval=1.5, maxval=1.5).numpy()
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[..., :3], np.clip(image[..., :3] * 1.5, 0, 255), rtol=1e-6)
    np.testing.assert_array_equal(out[..., 3], image[..., 3])


def test_pixel_value_scale_draws_one_factor_per_element():
    image = np.full((20, 20, 3), 100.0, np.float32)
    out = run_step("random_pixel_value_scale", image, minval=0.9, maxval=1.1).numpy()
    factors = out / 100.0
    assert factors.min() >= 0.9 and factors.max() <= 1.1
    assert len(np.unique(factors)) > 1000
    assert abs(factors.mean() - 1.0) < 0.01
    again = run_step("random_pixel_value_scale", image, minval=0.9, maxval=1.1)
    np.testing.assert_array_equal(out, again)


# random_black_patches --------------------------------------------------------------------------


def test_black_patch_is_one_square_of_the_right_size_on_every_channel():
    image = np.full((10, 12, 5), 7, np.uint8)
    for seed in range(8):
        out = run_step(
            "random_black_patches",
            image,
            seed=(seed, 1),
            max_black_patches=1,
            probability=1.0,
            size_to_image_ratio=0.5,
        ).numpy()
        assert out.dtype == np.uint8
        black = np.all(out == 0, axis=-1)
        assert np.all((out == 0) | (out == 7)) and np.array_equal(black, np.any(out == 0, -1))
        rows, cols = np.nonzero(black)
        assert black.sum() == 25
        assert rows.max() - rows.min() == 4 and cols.max() - cols.min() == 4
        # Top-left corner: int(U(0, 1 - ratio) * size).
        assert rows.min() < 5 and cols.min() < 6


def test_black_patches_probability_zero_and_zero_tries():
    image = make_image(3, (6, 6, 3))
    np.testing.assert_array_equal(run_step("random_black_patches", image, probability=0.0), image)
    out = run_step("random_black_patches", image, max_black_patches=0, probability=1.0)
    np.testing.assert_array_equal(out, image)


def test_black_patches_several_tries_cover_more():
    image = np.full((40, 40, 1), 200.0, np.float32)
    one = run_step("random_black_patches", image, max_black_patches=1, probability=1.0)
    ten = run_step("random_black_patches", image, max_black_patches=10, probability=1.0)
    assert np.sum(one.numpy() == 0) == 16
    assert np.sum(ten.numpy() == 0) > 16


def test_black_patches_rate():
    image = np.full((6, 6, 3), 9.0, np.float32)
    params = {"max_black_patches": 1, "probability": 0.3, "size_to_image_ratio": 0.5}
    assert_binomial(rate("random_black_patches", image, params), 0.3)


def test_black_patches_validation():
    step = get_step("random_black_patches")
    with pytest.raises(ConfigError, match=r"random_black_patches.*max_black_patches"):
        step.resolve({"max_black_patches": -1})
    with pytest.raises(ConfigError, match=r"random_black_patches.*size_to_image_ratio"):
        step.resolve({"size_to_image_ratio": 1.5})
    with pytest.raises(ConfigError, match=r"random_black_patches.*max_black_patches"):
        step.resolve({"max_black_patches": 2.5})


# random_jpeg_quality ---------------------------------------------------------------------------


@pytest.mark.parametrize("quality", [0, 35, 100])
def test_jpeg_quality_forced(quality):
    image = make_image(4, (16, 16, 3), np.uint8)
    params = {"min_jpeg_quality": quality, "max_jpeg_quality": quality}
    out = run_step("random_jpeg_quality", image, **params)
    assert out.dtype == tf.uint8
    np.testing.assert_array_equal(out, tf.image.adjust_jpeg_quality(image, quality))
    as_float = run_step("random_jpeg_quality", image.astype(np.float32), **params)
    assert as_float.dtype == tf.float32
    np.testing.assert_array_equal(as_float, tf.cast(out, tf.float32))


def test_jpeg_quality_grayscale_and_channel_errors():
    gray = make_image(5, (16, 16, 1), np.uint8)
    out = run_step("random_jpeg_quality", gray, min_jpeg_quality=20, max_jpeg_quality=20)
    np.testing.assert_array_equal(out, tf.image.adjust_jpeg_quality(gray, 20))
    for channels in (2, 4):
        with pytest.raises(ValueError, match="channel count of 1 or 3"):
            run_step("random_jpeg_quality", make_image(5, (8, 8, channels), np.uint8))


def test_jpeg_quality_random_coef():
    image = make_image(6, (16, 16, 3), np.uint8)
    np.testing.assert_array_equal(run_step("random_jpeg_quality", image, random_coef=1.0), image)
    params = {"min_jpeg_quality": 5, "max_jpeg_quality": 5, "random_coef": 0.4}
    assert_binomial(rate("random_jpeg_quality", image, params, num=200), 0.6, num=200)


def test_jpeg_quality_in_dataset_map_and_validation():
    images = [make_image(7, (h, 9, 3), np.uint8) for h in (8, 13)]
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(images), output_signature=tf.TensorSpec([None, None, 3], tf.uint8)
    )
    step = get_step("random_jpeg_quality").fn
    mapped = dataset.map(lambda im: step({fields.IMAGE: im}, seed=(2, 2))[fields.IMAGE])
    for image, got in zip(images, mapped, strict=True):
        np.testing.assert_array_equal(got, run_step("random_jpeg_quality", image, seed=(2, 2)))
    with pytest.raises(ConfigError, match=r"random_jpeg_quality.*max_jpeg_quality"):
        get_step("random_jpeg_quality").resolve({"max_jpeg_quality": 101})
    with pytest.raises(ConfigError, match=r"random_jpeg_quality.*max_jpeg_quality"):
        run_step("random_jpeg_quality", images[0], min_jpeg_quality=50, max_jpeg_quality=40)


# random_patch_gaussian -------------------------------------------------------------------------


def _patch(out, image):
    changed = np.any(out != image, axis=-1)
    rows, cols = np.nonzero(changed)
    return changed, rows, cols


@pytest.mark.parametrize("size", [3, 4])
def test_patch_gaussian_changes_one_square_of_color_channels(size):
    image = np.full((30, 30, 4), 128.0, np.float32)
    params = {
        "min_patch_size": size,
        "max_patch_size": size,
        "min_gaussian_stddev": 0.2,
        "max_gaussian_stddev": 0.2,
    }
    full_squares = 0
    for seed in range(6):
        out = run_step("random_patch_gaussian", image, seed=(seed, 4), **params).numpy()
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out[..., 3], image[..., 3])
        changed, rows, cols = _patch(out[..., :3], image[..., :3])
        assert 0 < changed.sum() <= size * size
        assert rows.max() - rows.min() < size and cols.max() - cols.min() < size
        # Away from the border the patch is a full size × size square.
        if rows.min() > 0 and cols.min() > 0 and rows.max() < 29 and cols.max() < 29:
            full_squares += 1
            assert changed.sum() == size * size
    assert full_squares > 0


def test_patch_gaussian_clips_at_the_border_and_noise_scale():
    image = np.full((20, 20, 3), 128.0, np.float32)
    params = {
        "min_patch_size": 50,
        "max_patch_size": 50,
        "min_gaussian_stddev": 0.05,
        "max_gaussian_stddev": 0.05,
    }
    out = run_step("random_patch_gaussian", image, **params).numpy()
    # A 50-pixel patch centred anywhere in a 20 × 20 image covers it all.
    assert np.all(out != image)
    assert abs(np.std(out - image) - 0.05 * 255) < 1.5
    loud = dict(params, min_gaussian_stddev=1.0, max_gaussian_stddev=1.0)
    out = run_step("random_patch_gaussian", image, **loud).numpy()
    assert out.min() == 0.0 and out.max() == 255.0


def test_patch_gaussian_zero_stddev_and_random_coef():
    image = make_image(8, (10, 10, 3), np.uint8)
    out = run_step("random_patch_gaussian", image, max_gaussian_stddev=0.0)
    np.testing.assert_array_equal(out, image.astype(np.float32))
    out = run_step("random_patch_gaussian", image, random_coef=1.0, min_gaussian_stddev=0.5)
    np.testing.assert_array_equal(out, image.astype(np.float32))
    params = {"min_patch_size": 40, "max_patch_size": 40, "min_gaussian_stddev": 0.5}
    assert_binomial(
        rate("random_patch_gaussian", image.astype(np.float32), dict(params, random_coef=0.25)),
        0.75,
    )


def test_patch_gaussian_validation():
    step = get_step("random_patch_gaussian")
    with pytest.raises(ConfigError, match=r"random_patch_gaussian.*min_patch_size"):
        step.resolve({"min_patch_size": 0})
    with pytest.raises(ConfigError, match=r"random_patch_gaussian.*max_gaussian_stddev"):
        step.resolve({"max_gaussian_stddev": -0.1})
    with pytest.raises(ConfigError, match=r"random_patch_gaussian.*max_patch_size"):
        run_step("random_patch_gaussian", make_image(0), min_patch_size=9, max_patch_size=3)
    with pytest.raises(ConfigError, match=r"random_patch_gaussian.*max_gaussian_stddev"):
        run_step(
            "random_patch_gaussian", make_image(0), min_gaussian_stddev=0.5, max_gaussian_stddev=0.1
        )


# Shared properties -----------------------------------------------------------------------------

RANDOM_STEPS = {
    "random_pixel_value_scale": {},
    "random_black_patches": {"probability": 1.0},
    "random_jpeg_quality": {},
    "random_patch_gaussian": {"min_gaussian_stddev": 0.3},
}


@pytest.mark.parametrize("name", sorted(RANDOM_STEPS))
def test_same_seed_same_output_and_seeds_differ(name):
    image = make_image(9, (12, 12, 3), np.uint8)
    params = RANDOM_STEPS[name]
    first = run_step(name, image, seed=(5, 5), **params)
    np.testing.assert_array_equal(first, run_step(name, image, seed=(5, 5), **params))
    others = [run_step(name, image, seed=(5, s), **params) for s in range(6, 10)]
    assert any(not np.array_equal(first, other) for other in others)
    assert run_step(name, image, seed=None, **params).shape == image.shape


@pytest.mark.parametrize("name", sorted(RANDOM_STEPS))
def test_graph_mode_with_unknown_height_and_width(name):
    step = get_step(name).fn
    params = RANDOM_STEPS[name]

    @tf.function(input_signature=[tf.TensorSpec([None, None, 3], tf.uint8)])
    def run(image):
        return step({fields.IMAGE: image}, seed=(3, 3), **params)[fields.IMAGE]

    image = make_image(10, (9, 7, 3), np.uint8)
    np.testing.assert_array_equal(run(image), run_step(name, image, seed=(3, 3), **params))


def test_kinds():
    for name in ("normalize_image", "subtract_channel_mean", "random_pixel_value_scale"):
        assert get_step(name).kind == "color"
    for name in ("random_black_patches", "random_jpeg_quality", "random_patch_gaussian"):
        assert get_step(name).kind == "image"
