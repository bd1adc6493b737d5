"""Per-image filters and level ops: Gaussian blur, sharpness, posterize, solarize, equalize,
autocontrast, invert.

Each step draws its own parameter per image from the example's seed and applies it with
probability ``probability`` (otherwise the image passes through): the gate and the parameter
are the step's registered draw, which its batched form takes too. Images come out float32 on the
[0, 255] scale, whether the step fired or not, so every example of a pipeline has one dtype.
The level ops and sharpness act on the colour channels (3, or 1 for grayscale) and pass
further channels through; the blur smooths every channel.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import (
    _batched as device,
)
from object_input.ops import (
    _core as core,
)
from object_input.ops import (
    _draws as draws,
)
from object_input.ops import (
    _image_ops as autoaugment_ops,
)
from object_input.ops._backend import TENSORFLOW
from object_input.ops._registry import in_range, range_pair, register_step
from object_input.ops.color import merge_channels, split_channels


def _maybe(
    features: core.Features,
    fires: tf.Tensor,
    change: Callable[[tf.Tensor], tf.Tensor],
    keep_dtype: bool = False,
) -> core.Features:
    """``change(image)`` where the drawn gate ``fires``; the image is float32 either way.

    ``change`` gets the image as float32, or in its own dtype when ``keep_dtype`` (it then
    returns float32 itself)."""
    image = features[fields.IMAGE]
    if not keep_dtype:
        image = core.to_float(image)
    out = dict(features)
    out[fields.IMAGE] = tf.cond(
        fires,
        lambda: tf.ensure_shape(change(image), image.shape),
        lambda: core.to_float(image),
    )
    return out


def _gated_draw(
    value: Callable[..., draws.Drawn] | None = None,
    encode: Callable[..., list[tf.Tensor]] | None = None,
) -> draws.Draw:
    """The draw of a step gated by ``probability``: ``fires`` from the gate's seed, then
    ``value(draw_seed, **params)`` (None: nothing else). ``encode(drawn, size, **params)``
    gives the batch's values after the gate (None: the drawn values)."""

    def sample(features, seed, *, probability, **params):
        del features
        gate_seed, draw_seed = core.split_seed(seed, 2)
        drawn = {"fires": core.bernoulli(gate_seed, probability)}
        if value is not None:
            drawn.update(value(draw_seed, **params))
        return drawn

    def encode_gated(drawn, size, **params):
        return [drawn["fires"], *encode(drawn, size, **params)]

    return draws.Draw(sample, encode=None if encode is None else encode_gated)


def _uniform(param: str, key: str) -> Callable[..., draws.Drawn]:
    """A ``value`` drawing ``key`` U(``params[param]``), the draw of sharpness and solarize."""

    def value(draw_seed, **params):
        low, high = params[param][0], params[param][1]  # a pair, or a tuned variable
        return {key: core.uniform(draw_seed, low, high)}

    return value


def _device_gated(
    change: Callable[..., tf.Tensor],
    size: int,
    fidelity: str = "distribution",
    on_host: bool = True,
) -> device.DeviceStep:
    """The batched form of a gated step: ``change(images, drawn, xp, **params)`` (``drawn`` the
    ``size`` values after the gate, ``[B, size]``) where the gate fired."""

    def apply(images, parameters, xp=TENSORFLOW, **params):
        params.pop("probability", None)  # the gate's, drawn per example (tunable)
        changed = change(images, parameters[:, 1:], xp, **params)
        return xp.where(device.fires(parameters), changed, images)

    return device.DeviceStep(apply, size=1 + size, fidelity=fidelity, on_host=on_host)


def _on_color_per_image(step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A ``change`` applying ``fn(colour, value, xp)`` with each image's drawn value
    (``[B, 1, 1, 1]``) to the colour channels of a batch."""

    def change(images, drawn, xp, **params):
        del params
        value = device.per_example(drawn[:, 0])
        return device.on_color(images, step, lambda c: fn(c, value, xp), xp)

    return change


def _on_color_of_batch(step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A ``change`` applying ``fn(colour, xp)`` to the colour channels of a batch."""

    def change(images, drawn, xp, **params):
        del drawn, params
        return device.on_color(images, step, lambda c: fn(c, xp), xp)

    return change


def _on_color(
    image: tf.Tensor, step: str, fn: Callable[[tf.Tensor], tf.Tensor], keep_dtype: bool = False
) -> tf.Tensor:
    color, rest = split_channels(image, step, keep_dtype)
    return merge_channels(fn(color), rest)


def _on_levels(
    image: tf.Tensor,
    step: str,
    on_bytes: Callable[[tf.Tensor], tf.Tensor],
    on_floats: Callable[[tf.Tensor], tf.Tensor],
) -> tf.Tensor:
    """``on_bytes`` on the colour of a uint8 image, else ``on_floats``; float32 out.

    On uint8 the level ops are one integer pass before the cast to float, where on floats
    they take several float passes after it."""
    if image.dtype == tf.uint8:
        return core.to_float(_on_color(image, step, on_bytes, keep_dtype=True))
    return _on_color(image, step, on_floats)


def _inside_weight(weights: tf.Tensor, length) -> tf.Tensor:
    """``[length]``: the sum of the kernel ``weights`` over the taps that land inside the axis."""
    radius = (tf.size(weights) - 1) // 2
    taps = tf.range(length)[:, tf.newaxis] + tf.range(-radius, radius + 1)[tf.newaxis, :]
    inside = tf.cast((taps >= 0) & (taps < length), tf.float32)
    return tf.linalg.matvec(inside, weights)


def _block_matrices(weights: tf.Tensor, block: int, channels) -> tuple[tf.Tensor, tf.Tensor]:
    """``(own, next)``: ``[block·C, block·C]`` maps from a block of a zero-padded row, and from
    the block after it, to the 1-D convolution of that row at the block's pixels.

    Output pixel ``i`` of a block reads padded pixels ``i .. i + 2r`` from the block's start.
    """
    taps = tf.size(weights)
    padded = tf.concat([weights, tf.zeros([2 * block], tf.float32)], 0)
    source = tf.range(block)[:, tf.newaxis]
    target = tf.range(block)[tf.newaxis, :]

    def band(shift: int) -> tf.Tensor:
        offset = source + shift - target
        inside = (offset >= 0) & (offset < taps)
        small = tf.gather(padded, tf.where(inside, offset, taps))
        identity = tf.eye(channels)
        big = small[:, tf.newaxis, :, tf.newaxis] * identity[tf.newaxis, :, tf.newaxis, :]
        return tf.reshape(big, [block * channels, block * channels])

    return band(0), band(block)


def gaussian_blur(image: tf.Tensor, sigma: tf.Tensor, max_radius: int) -> tf.Tensor:
    """Separable Gaussian blur of a float ``[H, W, C]`` image, radius ``min(⌈3σ⌉, max_radius)``.

    Near the border the kernel is renormalized over the pixels inside the image, so the blur
    neither darkens edges nor needs the image to be larger than the kernel.

    TensorFlow's CPU convolutions are slow over 3 channels, so the rows are convolved as a
    matrix product over blocks of ``block`` pixels (each block and the next one map to the
    block's output), and the columns by a depthwise convolution whose lanes are every
    (column, channel) of the row; the per-column renormalization rides in its kernel.
    """
    sigma = tf.maximum(sigma, 1e-6)
    radius = tf.clip_by_value(tf.cast(tf.math.ceil(3.0 * sigma), tf.int32), 1, max_radius)
    offsets = tf.cast(tf.range(-radius, radius + 1), tf.float32)
    weights = tf.exp(-0.5 * tf.square(offsets / sigma))
    weights = weights / tf.reduce_sum(weights)
    # The matrix block must hold the 2r extra pixels a block's output reads past its end.
    block = 16 * max(1, math.ceil(max_radius / 8))
    height, width = core.image_size(image)
    channels = tf.shape(image)[-1]
    blocks = width // block + 2
    # One spare zero row lets the "next block" view run one block past the last row.
    padded = tf.pad(image, [[0, 1], [radius, blocks * block - width - radius], [0, 0]])
    rows = tf.reshape(padded, tf.stack([-1, block * channels]))
    own, following = _block_matrices(weights, block, channels)
    count = height * blocks
    across = tf.matmul(rows[:count], own) + tf.matmul(rows[1 : count + 1], following)
    lanes = tf.reshape(across, tf.stack([1, height, 1, blocks * block * channels]))
    column_weight = _inside_weight(weights, width)
    per_lane = tf.pad(column_weight, [[0, blocks * block - width]], constant_values=1.0)
    per_lane = tf.repeat(per_lane, channels)
    kernel = weights[:, tf.newaxis] / per_lane[tf.newaxis, :]
    down = tf.nn.depthwise_conv2d(lanes, kernel[:, tf.newaxis, :, tf.newaxis], [1] * 4, "SAME")
    down = down[0, :, 0] / _inside_weight(weights, height)[:, tf.newaxis]
    return tf.reshape(down, tf.stack([height, blocks * block, channels]))[:, :width]


def _max_radius(sigma_range: tuple[float, float]) -> int:
    return max(1, math.ceil(3.0 * sigma_range[1]))


def _draw_sigma(draw_seed, *, sigma_range, **params):
    del params
    return {"sigma": core.uniform(draw_seed, sigma_range[0], sigma_range[1])}


def _sigma_fractions(drawn, size, **params):
    """The blur's sigma as fractions of the image's height and of its width: on the resized
    batch it then spans the same part of the scene along each axis."""
    del params
    height, width = size
    sigma = drawn["sigma"]
    return [sigma / tf.cast(height, tf.float32), sigma / tf.cast(width, tf.float32)]


def _blur_batch(images, drawn, xp, *, sigma_range):
    height, width = images.shape[1], images.shape[2]
    return device.gaussian_blur(
        images, drawn[:, 0] * height, drawn[:, 1] * width, _max_radius(sigma_range), xp
    )


@register_step(
    kind="image",
    checks={"sigma_range": range_pair(0.01, 50.0), "probability": in_range(0.0, 1.0)},
    demo_params={"probability": 1.0},
    draw=_gated_draw(_draw_sigma, _sigma_fractions),
    device=_device_gated(_blur_batch, 2),
    tunable=("probability",),
)
def random_gaussian_blur(
    features: core.Features,
    drawn: draws.Drawn,
    *,
    sigma_range: tuple[float, float] = (0.1, 2.0),
    probability: float = 0.5,
) -> core.Features:
    """With ``probability``, blur with a Gaussian of standard deviation U(sigma_range) pixels.

    The kernel spans ±⌈3 · sigma⌉ pixels for the drawn sigma (at most ±⌈3 · sigma_range[1]⌉);
    borders are renormalized (see :func:`gaussian_blur`). Float32 out.
    """
    del probability
    radius = _max_radius(sigma_range)
    blur = functools.partial(gaussian_blur, sigma=drawn["sigma"], max_radius=radius)
    return _maybe(features, drawn["fires"], blur)


@register_step(
    kind="color",
    checks={"factor_range": range_pair(0.0, 10.0), "probability": in_range(0.0, 1.0)},
    demo_params={"probability": 1.0},
    draw=_gated_draw(_uniform("factor_range", "factor")),
    device=_device_gated(_on_color_per_image("random_sharpness", device.sharpness), 1),
    tunable=("factor_range", "probability"),
)
def random_sharpness(
    features: core.Features,
    drawn: draws.Drawn,
    *,
    factor_range: tuple[float, float] = (0.5, 1.5),
    probability: float = 0.5,
) -> core.Features:
    """With ``probability``, PIL-style sharpness with a factor U(factor_range).

    0 gives the 3 × 3 smoothed image, 1 the image, above 1 a sharper one (the one-pixel border is
    kept), clipped to [0, 255]. Float32 out.
    """
    del factor_range, probability

    def sharpen(image: tf.Tensor) -> tf.Tensor:
        return _on_color(
            image, "random_sharpness", lambda c: autoaugment_ops.sharpness(c, drawn["factor"])
        )

    return _maybe(features, drawn["fires"], sharpen)


def _draw_bits(draw_seed, *, bits_range, **params):
    del params
    return {"bits": core.uniform_int(draw_seed, bits_range[0], bits_range[1] + 1)}


@register_step(
    kind="color",
    checks={"bits_range": range_pair(1, 8), "probability": in_range(0.0, 1.0)},
    demo_params={"probability": 1.0, "bits_range": (2, 3)},
    draw=_gated_draw(_draw_bits),
    device=_device_gated(_on_color_per_image("random_posterize", autoaugment_ops.posterize), 1),
    tunable=("probability",),
)
def random_posterize(
    features: core.Features,
    drawn: draws.Drawn,
    *,
    bits_range: tuple[int, int] = (4, 8),
    probability: float = 0.5,
) -> core.Features:
    """With ``probability``, keep the top ``bits`` bits of each 8-bit colour value, ``bits``
    drawn uniformly from the integers in ``bits_range`` (both ends included; 8 is the identity).

    Values are rounded to integer levels first. Float32 out.
    """
    del bits_range, probability
    bits = drawn["bits"]

    def posterize(image: tf.Tensor) -> tf.Tensor:
        # The top bits of a byte: the level rounded down to a multiple of 2 ** (8 - bits).
        top_bits = tf.cast(256 - tf.bitwise.left_shift(1, 8 - bits), tf.uint8)
        return _on_levels(
            image,
            "random_posterize",
            lambda c: tf.bitwise.bitwise_and(c, top_bits),
            lambda c: autoaugment_ops.posterize(c, bits),
        )

    return _maybe(features, drawn["fires"], posterize, keep_dtype=True)


@register_step(
    kind="color",
    checks={"threshold_range": range_pair(0.0, 256.0), "probability": in_range(0.0, 1.0)},
    demo_params={"probability": 1.0, "threshold_range": (50.0, 60.0)},
    draw=_gated_draw(_uniform("threshold_range", "threshold")),
    device=_device_gated(_on_color_per_image("random_solarize", autoaugment_ops.solarize), 1),
    tunable=("threshold_range", "probability"),
)
def random_solarize(
    features: core.Features,
    drawn: draws.Drawn,
    *,
    threshold_range: tuple[float, float] = (128.0, 256.0),
    probability: float = 0.5,
) -> core.Features:
    """With ``probability``, invert (255 − x) every colour value at or above a threshold drawn
    from U(threshold_range) (256 leaves the image as it is). Float32 out."""
    del threshold_range, probability
    threshold = drawn["threshold"]

    def solarize(image: tf.Tensor) -> tf.Tensor:
        # A level is below the threshold when it is below its ceiling; 256 keeps every level.
        ceiling = tf.cast(tf.math.ceil(threshold), tf.int32)

        def on_bytes(c: tf.Tensor) -> tf.Tensor:
            def inverted() -> tf.Tensor:
                below = tf.cast(ceiling, tf.uint8)
                return autoaugment_ops.select(c < below, c, 255 - c)

            return tf.cond(ceiling > 255, lambda: c, inverted)

        return _on_levels(
            image,
            "random_solarize",
            on_bytes,
            lambda c: autoaugment_ops.solarize(c, threshold),
        )

    return _maybe(features, drawn["fires"], solarize, keep_dtype=True)


@register_step(
    kind="color",
    checks={"probability": in_range(0.0, 1.0)},
    demo_params={"probability": 1.0},
    draw=_gated_draw(),
    # The batched histograms cost the host 1.5x the per-example ones (docs/performance.md).
    device=_device_gated(_on_color_of_batch("random_equalize", device.equalize), 0, on_host=False),
    tunable=("probability",),
)
def random_equalize(
    features: core.Features, drawn: draws.Drawn, *, probability: float = 0.5
) -> core.Features:
    """With ``probability``, equalize the histogram of each colour channel (PIL's
    ``ImageOps.equalize`` on the rounded levels; a channel of one level is kept). Float32 out."""
    del probability

    def equalize(image: tf.Tensor) -> tf.Tensor:
        return _on_levels(
            image, "random_equalize", autoaugment_ops.equalize, autoaugment_ops.equalize
        )

    return _maybe(features, drawn["fires"], equalize, keep_dtype=True)


@register_step(
    kind="color",
    checks={"probability": in_range(0.0, 1.0)},
    demo_params={"probability": 1.0},
    draw=_gated_draw(),
    # Per image min and max over the batch cost the host 1.45x the per-example step.
    device=_device_gated(
        _on_color_of_batch("random_autocontrast", device.autocontrast), 0, on_host=False
    ),
    tunable=("probability",),
)
def random_autocontrast(
    features: core.Features, drawn: draws.Drawn, *, probability: float = 0.5
) -> core.Features:
    """With ``probability``, stretch each colour channel linearly so that its darkest value
    becomes 0 and its brightest 255 (a flat channel is kept). Float32 out."""
    del probability

    def stretch(image: tf.Tensor) -> tf.Tensor:
        return _on_color(image, "random_autocontrast", autoaugment_ops.autocontrast)

    return _maybe(features, drawn["fires"], stretch)


def _invert(color: tf.Tensor, xp: Any = TENSORFLOW) -> tf.Tensor:
    del xp
    return 255.0 - color


@register_step(
    kind="color",
    checks={"probability": in_range(0.0, 1.0)},
    demo_params={"probability": 1.0},
    draw=_gated_draw(),
    device=_device_gated(_on_color_of_batch("random_invert", _invert), 0, fidelity="exact"),
    tunable=("probability",),
)
def random_invert(
    features: core.Features, drawn: draws.Drawn, *, probability: float = 0.5
) -> core.Features:
    """With ``probability``, invert the colour channels (255 − x). Float32 out."""
    del probability

    def invert(image: tf.Tensor) -> tf.Tensor:
        return _on_levels(image, "random_invert", lambda c: 255 - c, _invert)

    return _maybe(features, drawn["fires"], invert, keep_dtype=True)
