"""The filter and level steps (blur, sharpness, posterize, solarize, equalize, autocontrast,
invert): exact values."""

import numpy as np
import pytest
import tensorflow as tf
from helpers import over_seeds

from object_input import fields
from object_input.ops import (
    ConfigError,
    get_step,
    random_autocontrast,
    random_equalize,
    random_gaussian_blur,
    random_invert,
    random_posterize,
    random_sharpness,
    random_solarize,
)
from object_input.ops._image_ops import sharpness
from object_input.ops.enhance import gaussian_blur


def _image(shape=(5, 6, 3), seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)


def _run(op, image, **params):
    return op({fields.IMAGE: tf.constant(image)}, seed=(1, 2), **params)[fields.IMAGE].numpy()


def _blur_reference(image, sigma, radius):
    """Separable Gaussian with the kernel renormalized over the pixels inside the image."""
    offsets = np.arange(-radius, radius + 1)
    weights = np.exp(-0.5 * (offsets / sigma) ** 2)
    out = image.astype(np.float64)
    for axis in (0, 1):
        total = np.zeros_like(out)
        norm = np.zeros_like(out)
        for offset, weight in zip(offsets, weights, strict=True):
            shifted = np.roll(out, -offset, axis=axis)
            index = np.arange(out.shape[axis]) + offset
            valid = ((index >= 0) & (index < out.shape[axis])).reshape(
                [-1 if a == axis else 1 for a in range(3)]
            )
            total += np.where(valid, shifted * weight, 0)
            norm += np.where(valid, weight, 0)
        out = total / norm
    return out


def test_gaussian_blur_matches_a_renormalized_reference():
    image = _image((7, 9, 2))
    out = _run(random_gaussian_blur, image, sigma_range=(1.3, 1.3), probability=1.0)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, _blur_reference(image, 1.3, 4), atol=1e-3)


def test_gaussian_blur_of_an_impulse_is_the_outer_product_of_the_1d_kernel():
    sigma, radius = 1.5, 5
    image = np.zeros((31, 33, 3), np.float32)
    image[15, 16] = 1.0
    out = gaussian_blur(tf.constant(image), tf.constant(sigma), 6).numpy()
    weights = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
    weights /= weights.sum()
    expected = np.zeros_like(image)
    # The impulse is more than a radius from every border: no renormalization reaches it.
    expected[10:21, 11:22] = np.outer(weights, weights)[..., np.newaxis]
    np.testing.assert_allclose(out, expected, atol=1e-5)


def test_gaussian_blur_keeps_a_flat_image_and_tiny_images():
    flat = np.full((2, 3, 3), 77, np.uint8)
    np.testing.assert_allclose(
        _run(random_gaussian_blur, flat, sigma_range=(5.0, 5.0), probability=1.0), 77.0, atol=1e-4
    )


def test_sharpness_factor_one_is_identity_and_zero_is_the_smoothed_image():
    image = _image((5, 6, 4))
    same = _run(random_sharpness, image, factor_range=(1.0, 1.0), probability=1.0)
    np.testing.assert_allclose(same, image, atol=1e-4)
    smooth = _run(random_sharpness, image, factor_range=(0.0, 0.0), probability=1.0)
    expected = sharpness(tf.constant(image[..., :3], tf.float32), 0.0).numpy()
    np.testing.assert_allclose(smooth[..., :3], expected, atol=1e-4)
    np.testing.assert_array_equal(smooth[..., 3], image[..., 3])  # alpha passes through


def test_posterize_exact():
    image = np.array([[[0, 15, 16], [130, 255, 200]]], np.uint8)
    out = _run(random_posterize, image, bits_range=(4, 4), probability=1.0)
    np.testing.assert_array_equal(out, [[[0, 0, 16], [128, 240, 192]]])
    bits = over_seeds(
        lambda s: random_posterize(
            {fields.IMAGE: tf.fill([1, 1, 3], 255)}, seed=s, bits_range=(1, 3), probability=1.0
        )[fields.IMAGE][0, 0, 0],
        salt=1,
        num=200,
    ).numpy()
    assert set(bits) == {128.0, 192.0, 224.0}  # 1, 2 and 3 bits kept, both ends drawn


def test_solarize_exact():
    image = np.array([[[0, 99, 100], [101, 255, 50]]], np.uint8)
    out = _run(random_solarize, image, threshold_range=(100.0, 100.0), probability=1.0)
    np.testing.assert_array_equal(out, [[[0, 99, 155], [154, 0, 50]]])


def test_equalize_exact():
    # 8 pixels: levels 0 (×2), 10 (×2), 20 (×3), 200 (×1). PIL's step is (8 - 1) // 255 = 0, so
    # a channel this small is kept; 2040 pixels make a step of 7 (the brightest level has one).
    small = np.array([[0, 0, 10, 10], [20, 20, 20, 200]], np.uint8)[..., np.newaxis]
    np.testing.assert_array_equal(_run(random_equalize, small, probability=1.0), small)
    image = np.repeat(small, 255, axis=1)  # 2 × 1020: every count × 255
    out = _run(random_equalize, image, probability=1.0)
    # step = (2040 - 255) // 255 = 7; level v maps to (pixels below v + 3) // 7.
    expected = {0: 0, 10: (510 + 3) // 7, 20: (1020 + 3) // 7, 200: (1785 + 3) // 7}
    np.testing.assert_array_equal(out, np.vectorize(expected.get)(image).astype(np.float32))


def test_autocontrast_exact_and_flat_channels_kept():
    image = np.zeros((2, 2, 3), np.uint8)
    image[..., 0] = [[50, 100], [150, 60]]
    image[..., 1] = [[0, 255], [10, 20]]
    image[..., 2] = 77
    out = _run(random_autocontrast, image, probability=1.0)
    np.testing.assert_allclose(out[..., 0], (image[..., 0] - 50.0) * 255.0 / 100.0, atol=1e-4)
    np.testing.assert_array_equal(out[..., 1], image[..., 1])
    np.testing.assert_array_equal(out[..., 2], 77.0)


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_invert_exact_on_bytes_and_floats_color_only(channels):
    image = _image((3, 4, channels), seed=3)
    for given in (image, image.astype(np.float32)):
        out = _run(random_invert, given, probability=1.0)
        color = min(channels, 3) if channels != 2 else 1
        np.testing.assert_array_equal(out[..., :color], 255.0 - image[..., :color])
        np.testing.assert_array_equal(out[..., color:], image[..., color:])


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize(
    ("op", "params"),
    [(random_posterize, {"bits_range": (b, b)}) for b in range(1, 9)]
    + [(random_equalize, {}), (random_invert, {})]
    + [
        (random_solarize, {"threshold_range": (t, t)})
        for t in (0.0, 0.5, 1.0, 127.5, 128.0, 254.2, 255.0, 255.5, 256.0)
    ],
)
def test_level_ops_on_bytes_equal_the_float_values(op, params, channels):
    # uint8 images take an integer path; it must give the float path's values exactly. 16 × 17
    # pixels: equalize changes images of 256 pixels or more.
    image = _image((16, 17, channels), seed=channels)
    image[0, 0] = 0
    image[0, 1] = 255
    on_bytes = _run(op, image, probability=1.0, **params)
    on_floats = _run(op, image.astype(np.float32), probability=1.0, **params)
    assert on_bytes.dtype == np.float32
    np.testing.assert_array_equal(on_bytes, on_floats)
    if channels == 4:
        np.testing.assert_array_equal(on_bytes[..., 3], image[..., 3])  # alpha passes through


@pytest.mark.parametrize(
    ("op", "params"),
    [
        (random_gaussian_blur, {}),
        (random_sharpness, {"factor_range": (0.0, 0.5)}),
        (random_posterize, {"bits_range": (4, 4)}),
        (random_solarize, {"threshold_range": (100.0, 100.0)}),
        (random_equalize, {}),
        (random_autocontrast, {}),
        (random_invert, {}),
    ],
)
def test_probability_gates_per_image_and_output_is_float(op, params):
    # Equalize keeps images of fewer than 256 pixels.
    image = _image((16, 17, 3))
    np.testing.assert_array_equal(_run(op, image, probability=0.0), image.astype(np.float32))
    changed = over_seeds(
        lambda s: tf.reduce_any(
            op({fields.IMAGE: tf.constant(image)}, seed=s, probability=0.5, **params)[fields.IMAGE]
            != tf.cast(image, tf.float32)
        ),
        salt=2,
        num=300,
    ).numpy()
    assert 0.4 < changed.mean() < 0.6  # 300 draws: ±0.1 is about 3.5 standard deviations


@pytest.mark.parametrize(
    ("step", "params", "name"),
    [
        ("random_gaussian_blur", {"sigma_range": (2.0, 1.0)}, "sigma_range"),
        ("random_posterize", {"bits_range": (0, 8)}, "bits_range"),
        ("random_solarize", {"threshold_range": (100.0, 300.0)}, "threshold_range"),
        ("random_sharpness", {"probability": 2.0}, "probability"),
        ("random_invert", {"probability": -0.1}, "probability"),
    ],
)
def test_validation(step, params, name):
    with pytest.raises(ConfigError, match=rf"{step}.*{name}"):
        get_step(step).resolve(params)
