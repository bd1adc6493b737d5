"""Per-image filters and level ops: Gaussian blur, sharpness, posterize, solarize.

Each step draws its own parameter per image from the example's seed and applies it with
probability ``probability`` (otherwise the image passes through). Images come out float32 on the
[0, 255] scale, whether the step fired or not, so every example of a pipeline has one dtype.
Sharpness, posterize and solarize act on the colour channels (3, or 1 for grayscale) and pass
further channels through; the blur smooths every channel.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import tensorflow as tf

from object_input import fields
from object_input.ops import autoaugment_ops, core
from object_input.ops.color import merge_channels, split_channels
from object_input.ops.registry import in_range, range_pair, register_step


def _maybe(
    features: core.Features,
    seed,
    probability: float,
    change: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
) -> core.Features:
    """``change(float image, seed)`` with ``probability``; the image is float32 either way."""
    gate_seed, draw_seed = core.split_seed(seed, 2)
    image = core.to_float(features[fields.IMAGE])
    out = dict(features)
    out[fields.IMAGE] = tf.cond(
        core.bernoulli(gate_seed, probability),
        lambda: tf.ensure_shape(change(image, draw_seed), image.shape),
        lambda: image,
    )
    return out


def _on_colour(image: tf.Tensor, step: str, fn: Callable[[tf.Tensor], tf.Tensor]) -> tf.Tensor:
    colour, rest = split_channels(image, step)
    return merge_channels(fn(colour), rest)


def gaussian_blur(image: tf.Tensor, sigma: tf.Tensor, radius: int) -> tf.Tensor:
    """Separable Gaussian blur of a float ``[H, W, C]`` image with a ``2·radius + 1`` kernel.

    Near the border the kernel is renormalized over the pixels inside the image, so the blur
    neither darkens edges nor needs the image to be larger than the kernel.
    """
    offsets = tf.range(-radius, radius + 1, dtype=tf.float32)
    weights = tf.exp(-0.5 * tf.square(offsets / tf.maximum(sigma, 1e-6)))
    weights = weights / tf.reduce_sum(weights)
    channels = tf.shape(image)[-1]

    def smooth(batch: tf.Tensor, depth) -> tf.Tensor:
        column = tf.tile(tf.reshape(weights, [-1, 1, 1, 1]), tf.stack([1, 1, depth, 1]))
        row = tf.reshape(column, [1, -1, depth, 1])
        batch = tf.nn.depthwise_conv2d(batch, column, [1, 1, 1, 1], "SAME")
        return tf.nn.depthwise_conv2d(batch, row, [1, 1, 1, 1], "SAME")

    blurred = smooth(image[tf.newaxis], channels)[0]
    coverage = smooth(tf.ones_like(image[tf.newaxis, :, :, :1]), 1)[0]
    return blurred / coverage


@register_step(
    kind="image",
    checks={"sigma_range": range_pair(0.01, 50.0), "probability": in_range(0.0, 1.0)},
    demo_params={"probability": 1.0},
)
def random_gaussian_blur(
    features: core.Features,
    *,
    seed=None,
    sigma_range: tuple[float, float] = (0.1, 2.0),
    probability: float = 0.5,
) -> core.Features:
    """With ``probability``, blur with a Gaussian of standard deviation U(sigma_range) pixels.

    The kernel spans ±⌈3 · sigma_range[1]⌉ pixels; borders are renormalized (see
    :func:`gaussian_blur`). Float32 out.
    """
    radius = max(1, math.ceil(3.0 * sigma_range[1]))

    def blur(image: tf.Tensor, draw_seed: tf.Tensor) -> tf.Tensor:
        sigma = core.uniform(draw_seed, sigma_range[0], sigma_range[1])
        return gaussian_blur(image, sigma, radius)

    return _maybe(features, seed, probability, blur)


@register_step(
    kind="color",
    checks={"factor_range": range_pair(0.0, 10.0), "probability": in_range(0.0, 1.0)},
    demo_params={"probability": 1.0},
)
def random_sharpness(
    features: core.Features,
    *,
    seed=None,
    factor_range: tuple[float, float] = (0.5, 1.5),
    probability: float = 0.5,
) -> core.Features:
    """With ``probability``, PIL-style sharpness with a factor U(factor_range).

    0 gives the 3 × 3 smoothed image, 1 the image, above 1 a sharper one (the one-pixel border is
    kept), clipped to [0, 255]. Float32 out.
    """

    def sharpen(image: tf.Tensor, draw_seed: tf.Tensor) -> tf.Tensor:
        factor = core.uniform(draw_seed, factor_range[0], factor_range[1])
        return _on_colour(image, "random_sharpness", lambda c: autoaugment_ops.sharpness(c, factor))

    return _maybe(features, seed, probability, sharpen)


@register_step(
    kind="color",
    checks={"bits_range": range_pair(1, 8), "probability": in_range(0.0, 1.0)},
    demo_params={"probability": 1.0, "bits_range": (2, 3)},
)
def random_posterize(
    features: core.Features,
    *,
    seed=None,
    bits_range: tuple[int, int] = (4, 8),
    probability: float = 0.5,
) -> core.Features:
    """With ``probability``, keep the top ``bits`` bits of each 8-bit colour value, ``bits``
    drawn uniformly from the integers in ``bits_range`` (both ends included; 8 is the identity).

    Values are rounded to integer levels first. Float32 out.
    """

    def posterize(image: tf.Tensor, draw_seed: tf.Tensor) -> tf.Tensor:
        bits = core.uniform_int(draw_seed, bits_range[0], bits_range[1] + 1)
        return _on_colour(image, "random_posterize", lambda c: autoaugment_ops.posterize(c, bits))

    return _maybe(features, seed, probability, posterize)


@register_step(
    kind="color",
    checks={"threshold_range": range_pair(0.0, 256.0), "probability": in_range(0.0, 1.0)},
    demo_params={"probability": 1.0, "threshold_range": (50.0, 60.0)},
)
def random_solarize(
    features: core.Features,
    *,
    seed=None,
    threshold_range: tuple[float, float] = (128.0, 256.0),
    probability: float = 0.5,
) -> core.Features:
    """With ``probability``, invert (255 − x) every colour value at or above a threshold drawn
    from U(threshold_range) (256 leaves the image as it is). Float32 out."""

    def solarize(image: tf.Tensor, draw_seed: tf.Tensor) -> tf.Tensor:
        threshold = core.uniform(draw_seed, threshold_range[0], threshold_range[1])
        return _on_colour(
            image, "random_solarize", lambda c: autoaugment_ops.solarize(c, threshold)
        )

    return _maybe(features, seed, probability, solarize)
