"""Pixel-value steps: value-range remaps, per-pixel noise, black patches and JPEG re-encoding.

None of these move boxes or change the image size. Channel rules follow :mod:`.color`: noise
touches the colour channels (0-2, or 0 for grayscale) only; value remaps and black patches touch
every channel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import _batched as device
from object_input.ops import _core as core
from object_input.ops import _draws as draws
from object_input.ops._backend import TENSORFLOW
from object_input.ops._registry import (
    in_range,
    non_negative,
    ordered,
    positive,
    register_step,
    rule,
)
from object_input.ops.color import merge_channels, split_channels


def _with_image(features: core.Features, image: tf.Tensor) -> core.Features:
    out = dict(features)
    out[fields.IMAGE] = image
    return out


@rule("`original_minval` ≠ `original_maxval`")
def _distinct_original_range(params: Mapping[str, Any]) -> str | None:
    if params["original_minval"] != params["original_maxval"]:
        return None
    return (
        "parameters 'original_minval' and 'original_maxval' must differ, got "
        f"{params['original_minval']!r} for both"
    )


@register_step(
    kind="color",
    validate=_distinct_original_range,
    demo_params={"original_minval": 0.0, "original_maxval": 255.0},
)
def normalize_image(
    features: core.Features,
    *,
    seed=None,
    original_minval: float,
    original_maxval: float,
    target_minval: float = 0.0,
    target_maxval: float = 1.0,
) -> core.Features:
    """Linearly map [original_minval, original_maxval] to [target_minval, target_maxval].

    Every channel is remapped; no clipping; float32 out.
    """
    del seed
    scale = (target_maxval - target_minval) / (original_maxval - original_minval)
    image = core.to_float(features[fields.IMAGE])
    return _with_image(features, (image - original_minval) * scale + target_minval)


@rule("not empty")
def _means_check(value: Sequence[float]) -> str | None:
    return None if len(value) > 0 else "must list at least one mean"


@register_step(kind="color", checks={"means": _means_check}, demo_params={"means": [1.0, 2.0, 3.0]})
def subtract_channel_mean(
    features: core.Features, *, seed=None, means: Sequence[float]
) -> core.Features:
    """Subtract ``means[c]`` from channel ``c``; ``len(means)`` must equal the channel count.

    No clipping (results may be negative); float32 out.
    """
    del seed
    image = features[fields.IMAGE]
    if image.shape[-1] != len(means):
        raise ValueError(
            f"subtract_channel_mean: {len(means)} means given for an image with "
            f"{image.shape[-1]} channels (the channel count must be known and equal)"
        )
    return _with_image(features, core.to_float(image) - tf.constant(means, tf.float32))


@register_step(kind="color")
def per_image_standardization(features: core.Features, *, seed=None) -> core.Features:
    """``(x - mean) / max(stddev, 1 / sqrt(N))`` over all N values of the image (every channel).

    ``tf.image.per_image_standardization``; the CIFAR-10 recipe's last step. Float32 out, mean 0
    and standard deviation 1 (unless the image is nearly flat).
    """
    del seed
    image = core.to_float(features[fields.IMAGE])
    axes = [-3, -2, -1]
    count = tf.cast(tf.reduce_prod(tf.shape(image)[-3:]), tf.float32)
    mean = tf.reduce_mean(image, axis=axes, keepdims=True)
    stddev = tf.math.reduce_std(image, axis=axes, keepdims=True)
    return _with_image(features, (image - mean) / tf.maximum(stddev, tf.math.rsqrt(count)))


@register_step(
    kind="color",
    checks={"minval": non_negative, "maxval": non_negative},
    validate=ordered(("minval", "maxval")),
    tunable=("minval", "maxval"),
)
def random_pixel_value_scale(
    features: core.Features, *, seed=None, minval: float = 0.9, maxval: float = 1.1
) -> core.Features:
    """Multiply every colour value by its own factor U(minval, maxval), clip to [0, 255].

    Float32 out. Channels after the colour channels pass through.
    """
    color, rest = split_channels(features[fields.IMAGE], "random_pixel_value_scale")
    factors = core.uniform(seed, minval, maxval, shape=tf.shape(color))
    color = tf.clip_by_value(color * factors, 0.0, 255.0)
    return _with_image(features, merge_channels(color, rest))


@register_step(
    kind="image",
    checks={
        "max_black_patches": non_negative,
        "probability": in_range(0.0, 1.0),
        "size_to_image_ratio": in_range(0.0, 1.0),
    },
    demo_params={"probability": 1.0},
    tunable=("probability", "size_to_image_ratio"),
)
def random_black_patches(
    features: core.Features,
    *,
    seed=None,
    max_black_patches: int = 10,
    probability: float = 0.5,
    size_to_image_ratio: float = 0.1,
) -> core.Features:
    """Up to ``max_black_patches`` tries; each, with ``probability``, zeroes a square patch.

    The patch side is ``int(size_to_image_ratio * min(H, W))``; its top-left corner is
    ``int(U(0, 1 - size_to_image_ratio) * H)``, likewise for x, so it lies inside the image. All
    channels are zeroed; the dtype is kept.
    """
    image = features[fields.IMAGE]
    height, width = core.image_size(image)
    applied_seed, corner_seed = core.split_seed(seed, 2)
    applied = core.uniform(applied_seed, shape=[max_black_patches]) < probability
    size = tf.cast(tf.stack([height, width]), tf.float32)
    fraction = core.uniform(corner_seed, 0.0, 1.0 - size_to_image_ratio, [max_black_patches, 2])
    corner = tf.cast(fraction * size, tf.int32)
    top, left = corner[:, 0], corner[:, 1, tf.newaxis]
    side = tf.cast(tf.reduce_min(size) * size_to_image_ratio, tf.int32)
    shape = tf.shape(image)
    rows = tf.range(height)[:, tf.newaxis]
    # Every column index C times: the mask comes out in the [H, W·C] layout of the image.
    cols = tf.repeat(tf.range(width), shape[2])
    in_rows = (rows >= top) & (rows < top + side) & applied
    in_cols = (cols >= left) & (cols < left + side)
    # Patches covering each value: a [H, P] by [P, W·C] product, not a [P, H, W] mask. The
    # product with the 0/1 mask then runs over equal shapes (broadcasting ops are slow).
    covering = tf.matmul(tf.cast(in_rows, tf.float32), tf.cast(in_cols, tf.float32))
    kept = tf.cast(tf.equal(covering, 0.0), image.dtype)
    pixels = tf.reshape(image, tf.stack([height, -1]))
    return _with_image(features, tf.reshape(pixels * kept, shape))


@rule("in [0, 100]")
def _quality_range_check(value: int) -> str | None:
    return None if 0 <= value <= 100 else "must be in [0, 100]"


@register_step(
    kind="image",
    checks={
        "min_jpeg_quality": _quality_range_check,
        "max_jpeg_quality": _quality_range_check,
        "random_coef": in_range(0.0, 1.0),
    },
    validate=ordered(("min_jpeg_quality", "max_jpeg_quality")),
    tunable=("random_coef",),
)
def random_jpeg_quality(
    features: core.Features,
    *,
    seed=None,
    min_jpeg_quality: int = 0,
    max_jpeg_quality: int = 100,
    random_coef: float = 0.0,
) -> core.Features:
    """Re-encode as JPEG at a quality drawn from [min, max] (inclusive), then decode.

    With probability ``random_coef`` the image is left unchanged. Only 1- or 3-channel images;
    values are rounded to uint8 for encoding; the dtype is kept.
    """
    image = features[fields.IMAGE]
    if image.shape[-1] not in (1, 3):
        raise ValueError(
            "random_jpeg_quality: JPEG needs an image with a known channel count of 1 or 3, "
            f"got shape {image.shape}"
        )
    keep_seed, quality_seed = core.split_seed(seed, 2)
    quality = core.uniform_int(quality_seed, min_jpeg_quality, max_jpeg_quality + 1)

    def reencode() -> tf.Tensor:
        pixels = core.like(core.to_float(image), tf.uint8)
        return tf.cast(tf.image.adjust_jpeg_quality(pixels, quality), image.dtype)

    keep = core.bernoulli(keep_seed, random_coef)
    return _with_image(features, tf.cond(keep, lambda: image, reencode))


def _draw_patch(features, seed, **params) -> draws.Drawn:
    """random_patch_gaussian's draw for the example's image: whether it is left as it is
    (``keep``), the patch's side ``size`` and ``top``-``left`` corner in pixels, the noise's
    ``stddev`` and ``noise_seed``."""
    height, width = core.image_size(features[fields.IMAGE])
    keep_seed, size_seed, stddev_seed, y_seed, x_seed, noise_seed = core.split_seed(seed, 6)
    size = core.uniform_int(size_seed, params["min_patch_size"], params["max_patch_size"] + 1)
    stddev = core.uniform(stddev_seed, params["min_gaussian_stddev"], params["max_gaussian_stddev"])
    top = core.uniform_int(y_seed, 0, height) - size // 2
    left = core.uniform_int(x_seed, 0, width) - size // 2
    return {
        "keep": core.bernoulli(keep_seed, params["random_coef"]),
        "size": size,
        "stddev": stddev,
        "top": top,
        "left": left,
        "noise_seed": noise_seed,
    }


def _patch_fraction(drawn, size, **params):
    """Whether the noise is added, the patch as fractions of the image, its standard deviation
    and the noise seed, for the batch (which draws the noise itself)."""
    del params
    top, left, side = drawn["top"], drawn["left"], drawn["size"]
    rectangle = device.normalized_rectangle(top, left, top + side, left + side, *size)
    return [
        ~drawn["keep"],
        *rectangle,
        drawn["stddev"],
        *device.seed_parameters(drawn["noise_seed"]),
    ]


def _patch_gaussian_batch(images, parameters, xp=TENSORFLOW, **params):
    """Noise added inside each image's patch of a batch where it fired."""
    del params

    def noisy(color: Any) -> Any:
        noise = device.normal_noise(parameters[:, 6:8], tuple(color.shape[1:]), xp)
        patch = device.rectangle_mask(parameters[:, 1:5], *color.shape[1:3], xp)
        added = xp.clip_by_value(
            color + noise * device.per_example(255.0 * parameters[:, 5]), 0.0, 255.0
        )
        return xp.where(patch & device.fires(parameters), added, color)

    return device.on_color(images, "random_patch_gaussian", noisy, xp)


@register_step(
    kind="image",
    checks={
        "min_patch_size": positive,
        "max_patch_size": positive,
        "min_gaussian_stddev": non_negative,
        "max_gaussian_stddev": non_negative,
        "random_coef": in_range(0.0, 1.0),
    },
    validate=ordered(
        ("min_patch_size", "max_patch_size"), ("min_gaussian_stddev", "max_gaussian_stddev")
    ),
    draw=draws.Draw(_draw_patch, encode=_patch_fraction),
    # The batch draws noise for every pixel and keeps the patch; per example only the patch
    # is drawn, 5x cheaper on the host (docs/performance.md).
    device=device.DeviceStep(_patch_gaussian_batch, size=8, fidelity="distribution", on_host=False),
    tunable=("min_gaussian_stddev", "max_gaussian_stddev"),
)
def random_patch_gaussian(
    features: core.Features,
    drawn: draws.Drawn,
    *,
    min_patch_size: int = 1,
    max_patch_size: int = 250,
    min_gaussian_stddev: float = 0.0,
    max_gaussian_stddev: float = 1.0,
    random_coef: float = 0.0,
) -> core.Features:
    """Add Gaussian noise inside a random square patch of the colour channels.

    The side is drawn from [min, max] (inclusive); the centre is a uniform pixel (for an even
    side the extra row/column goes top/left); the patch may extend past the border. The standard
    deviation U(min, max) is on the [0, 1] scale (×255 on ours). Clipped to [0, 255]. With
    probability ``random_coef`` the image is left unchanged. Float32 out.
    """
    del min_patch_size, max_patch_size, min_gaussian_stddev, max_gaussian_stddev, random_coef
    color, rest = split_channels(features[fields.IMAGE], "random_patch_gaussian")
    height, width = core.image_size(color)
    keep, size, stddev = drawn["keep"], drawn["size"], drawn["stddev"]
    top, left, noise_seed = drawn["top"], drawn["left"], drawn["noise_seed"]

    def patch() -> tf.Tensor:
        # Only the patch's rectangle gets noise, stitched back in: a broadcasting whole-image
        # select is several times slower than slices and concatenations, and normal draws
        # for the whole image (or the rows down to the patch) cost more than the rest.
        y0, y1 = tf.clip_by_value(top, 0, height), tf.clip_by_value(top + size, 0, height)
        x0, x1 = tf.clip_by_value(left, 0, width), tf.clip_by_value(left + size, 0, width)
        extent = tf.concat([[y1 - y0, x1 - x0], tf.shape(color)[2:]], 0)
        noise = tf.random.stateless_normal(extent, noise_seed, stddev=255.0 * stddev)
        band = color[y0:y1]
        noisy = band[:, x0:x1] + noise
        band = tf.concat([band[:, :x0], noisy, band[:, x1:]], axis=1)
        stitched = tf.concat([color[:y0], band, color[y1:]], axis=0)
        return tf.clip_by_value(stitched, 0.0, 255.0)

    color = tf.cond(keep, lambda: color, patch)
    return _with_image(features, merge_channels(color, rest))
