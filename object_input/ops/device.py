"""The device split of a step: draw and annotate on the host, change pixels on a batch anywhere.

A step that can leave the host declares a :class:`DeviceStep` at registration
(``register_step(device=...)``):

- ``prepare(features, *, seed, **params) -> (features, parameters)`` runs on the host, at the
  step's place in the per-example map. It draws every random value from the step's seed exactly
  as the step itself does, does the step's whole work on the annotations (boxes moved, clipped
  or dropped with every per-box field, keypoints, instance masks, ``num_dropped_boxes``) and
  returns the example with its image untouched, and a float32 vector of what the pixels still
  need (a flip flag, a matrix, a sigma, rectangles).
- ``apply(images, parameters, **params) -> images`` changes the pixels of a static-shape batch
  ``[B, H, W, C]`` (float32 on the [0, 255] scale in and out) with ``[B, P]`` parameters. It
  uses only ops with GPU kernels that XLA compiles: it runs in the model, on the accelerator.

Annotations thus come out of the host exactly as the step makes them, whatever runs the
pixels. Geometry in the parameters is normalized (a matrix between normalized coordinates, a
rectangle in fractions of the image), so the device applies it to the resized batch: the same
transform of the scene, resampled once after the resize instead of before it.

The batched pixel primitives the steps share live here too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import fields
from object_input.ops import autoaugment_ops, core

#: How a moved step's pixels compare with the host's (docs/ops.md lists each step's).
FIDELITIES = ("exact", "distribution")


@dataclasses.dataclass(frozen=True)
class DeviceStep:
    """How a step runs in the device stage (see the module docstring).

    ``size`` is the length of the step's parameter vector, or a function of the step's config
    parameters giving it. ``fidelity`` says how the device's pixels compare with the host step's
    on the same seeds: ``"exact"`` (equal up to float rounding when the image is already at the
    output size; resizing commutes with the step), or ``"distribution"`` (the same draws applied
    after the resize instead of before it). ``blocker(params)`` returns why a configuration
    cannot move (None: it can). ``fused(params)``, for a colour step, lists the
    :class:`~object_input.ops.fused_color.ColourPart` each parameter column drives: the stage
    then runs neighbouring colour steps together in one compiled colour pass.
    """

    prepare: Callable[..., tuple[core.Features, tf.Tensor]]
    apply: Callable[..., tf.Tensor]
    size: int | Callable[[Mapping[str, Any]], int]
    fidelity: str
    blocker: Callable[[Mapping[str, Any]], str | None] | None = None
    fused: Callable[[Mapping[str, Any]], tuple[Any, ...]] | None = None

    def __post_init__(self) -> None:
        if self.fidelity not in FIDELITIES:
            raise ValueError(f"fidelity must be one of {FIDELITIES}, got {self.fidelity!r}")

    @property
    def fuses(self) -> bool:
        """Whether the step runs in the fused colour pass."""
        return self.fused is not None

    def num_parameters(self, params: Mapping[str, Any]) -> int:
        """Length of the parameter vector for config ``params``."""
        return self.size(params) if callable(self.size) else self.size

    def why_not(self, params: Mapping[str, Any]) -> str | None:
        """Why the step with ``params`` cannot run on the device, or None."""
        return None if self.blocker is None else self.blocker(params)


def vector(*values: Any) -> tf.Tensor:
    """Float32 ``[P]`` parameters from scalars (bools become 0 or 1)."""
    return tf.stack([tf.cast(value, tf.float32) for value in values])


def without_image(features: core.Features) -> tuple[core.Features, tf.Tensor]:
    """``(features without the image, the image)``: what a prepare hands the annotation work."""
    rest = dict(features)
    return rest, rest.pop(fields.IMAGE)


def with_image(features: core.Features, image: tf.Tensor) -> core.Features:
    """``features`` with ``image`` put back."""
    return {**features, fields.IMAGE: image}


def per_example(values: tf.Tensor) -> tf.Tensor:
    """``[B]`` to ``[B, 1, 1, 1]``, to broadcast over a batch of images."""
    return values[:, tf.newaxis, tf.newaxis, tf.newaxis]


def fires(parameters: tf.Tensor, column: int = 0) -> tf.Tensor:
    """Bool ``[B, 1, 1, 1]``: whether the step acts on each image (a 0/1 column)."""
    return per_example(parameters[:, column] > 0.5)


# Noise seeds travel as float32 parameters: values below 2**24 stay exact.
_SEED_RANGE = 2**24


def seed_parameters(seed: tf.Tensor) -> list[tf.Tensor]:
    """A stateless seed as two float32-exact parameters (see :func:`batch_seed`)."""
    return tf.unstack(tf.math.floormod(core.as_seed(seed), _SEED_RANGE))


def batch_seed(parameters: tf.Tensor) -> tf.Tensor:
    """The seed of a batch's noise: its first example's two seed parameters (``[B, 2]``).

    Each image's noise is its own part of one draw for the batch: independent between images
    and the same for the same batch, though not the noise of the host step."""
    return tf.cast(parameters[0], tf.int32)


def rectangle_mask(rectangles: tf.Tensor, height: int, width: int) -> tf.Tensor:
    """Bool ``[B, H, W, 1]``: the pixels whose centres lie in each image's normalized
    ``[top, left, bottom, right)`` rectangle (``[B, 4]``)."""
    rows = (tf.range(height, dtype=tf.float32) + 0.5) / height
    cols = (tf.range(width, dtype=tf.float32) + 0.5) / width
    top, left, bottom, right = (rectangles[:, i, tf.newaxis] for i in range(4))
    in_rows = (rows[tf.newaxis] >= top) & (rows[tf.newaxis] < bottom)
    in_cols = (cols[tf.newaxis] >= left) & (cols[tf.newaxis] < right)
    return (in_rows[:, :, tf.newaxis] & in_cols[:, tf.newaxis, :])[..., tf.newaxis]


def normalized_rectangle(top, left, bottom, right, height, width) -> list[tf.Tensor]:
    """Pixel bounds of a rectangle as fractions of an image of ``height`` × ``width``."""
    size_y = tf.cast(height, tf.float32)
    size_x = tf.cast(width, tf.float32)
    return [
        tf.cast(top, tf.float32) / size_y,
        tf.cast(left, tf.float32) / size_x,
        tf.cast(bottom, tf.float32) / size_y,
        tf.cast(right, tf.float32) / size_x,
    ]


# --- warps ----------------------------------------------------------------------------------


def normalized_matrix(matrix: tf.Tensor, height, width) -> tf.Tensor:
    """Float32 ``[6]``: the top two rows of a forward pixel ``matrix`` (3 × 3, about an image of
    ``height`` × ``width``) restated between normalized coordinates, which a resize keeps."""
    size = tf.cast(tf.stack([width, height]), tf.float32)
    linear = matrix[:2, :2] * size[tf.newaxis, :] / size[:, tf.newaxis]
    shift = matrix[:2, 2] / size
    return tf.reshape(tf.concat([linear, shift[:, tf.newaxis]], axis=1), [6])


def _sampling_map(matrices: tf.Tensor, height: int, width: int) -> tf.Tensor:
    """``[B, 6]``: for each forward normalized affine ``matrices`` row, the inverse map from
    output to input pixel indices (pixel centres at integers) of a ``height`` × ``width`` batch."""
    a, b, shift_x, c, d, shift_y = tf.unstack(matrices, axis=1)
    # Forward in pixel coordinates: scale the normalized map by the image size.
    b = b * width / height
    c = c * height / width
    shift_x = shift_x * width
    shift_y = shift_y * height
    det = a * d - b * c
    ia, ib, ic, id_ = d / det, -b / det, -c / det, a / det
    # Input pixel = inverse (output pixel - shift), each in coordinates where centres sit at
    # half-integers; indices are those minus one half.
    ox = -(ia * shift_x + ib * shift_y) + 0.5 * (ia + ib) - 0.5
    oy = -(ic * shift_x + id_ * shift_y) + 0.5 * (ic + id_) - 0.5
    return tf.stack([ia, ib, ox, ic, id_, oy], axis=1)


def warp(
    images: tf.Tensor, matrices: tf.Tensor, fill_value: float, interpolation: str
) -> tf.Tensor:
    """Each image of a float32 ``[B, H, W, C]`` batch moved by its forward normalized affine
    matrix (``[B, 6]``, see :func:`normalized_matrix`); ``fill_value`` where nothing maps.

    The sampling is ``ImageProjectiveTransformV3``'s (constant fill blended in at the edge for
    bilinear; nearest rounds), written as gathers: XLA compiles those, not the kernel.
    """
    _, height, width, channels = images.shape
    inverse = _sampling_map(matrices, height, width)
    ys = tf.range(height, dtype=tf.float32)[tf.newaxis, :, tf.newaxis]
    xs = tf.range(width, dtype=tf.float32)[tf.newaxis, tf.newaxis, :]
    rows = [inverse[:, i, tf.newaxis, tf.newaxis] for i in range(6)]
    source_x = rows[0] * xs + rows[1] * ys + rows[2]
    source_y = rows[3] * xs + rows[4] * ys + rows[5]
    flat = tf.reshape(images, [-1, channels])
    base = tf.range(tf.shape(images)[0])[:, tf.newaxis, tf.newaxis] * (height * width)

    def tap(y: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
        inside = (y >= 0) & (y <= height - 1) & (x >= 0) & (x <= width - 1)
        row = tf.clip_by_value(tf.cast(y, tf.int32), 0, height - 1)
        col = tf.clip_by_value(tf.cast(x, tf.int32), 0, width - 1)
        values = tf.gather(flat, base + row * width + col)
        return tf.where(inside[..., tf.newaxis], values, fill_value)

    if interpolation == "NEAREST":
        # Half away from zero, as the kernel rounds (tf.round rounds half to even).
        return tap(_round_half_away(source_y), _round_half_away(source_x))
    y0, x0 = tf.floor(source_y), tf.floor(source_x)
    fy, fx = (source_y - y0)[..., tf.newaxis], (source_x - x0)[..., tf.newaxis]
    top = tap(y0, x0) * (1.0 - fx) + tap(y0, x0 + 1.0) * fx
    bottom = tap(y0 + 1.0, x0) * (1.0 - fx) + tap(y0 + 1.0, x0 + 1.0) * fx
    return top * (1.0 - fy) + bottom * fy


def _round_half_away(values: tf.Tensor) -> tf.Tensor:
    return tf.sign(values) * tf.floor(tf.abs(values) + 0.5)


# --- separable filters ----------------------------------------------------------------------


def gaussian_weights(sigma: tf.Tensor, max_radius: int) -> tf.Tensor:
    """``[B, 2R + 1]`` (R = ``max_radius``): each sigma's normalized Gaussian over the taps
    within ``min(⌈3σ⌉, R)`` (at least 1) of the centre, zero beyond."""
    sigma = tf.maximum(sigma, 1e-6)[:, tf.newaxis]
    radius = tf.clip_by_value(tf.math.ceil(3.0 * sigma), 1.0, float(max_radius))
    offsets = tf.range(-max_radius, max_radius + 1, dtype=tf.float32)[tf.newaxis]
    weights = tf.exp(-0.5 * tf.square(offsets / sigma))
    weights = tf.where(tf.abs(offsets) <= radius, weights, 0.0)
    return weights / tf.reduce_sum(weights, axis=1, keepdims=True)


def _convolve(images: tf.Tensor, weights: tf.Tensor, axis: int) -> tf.Tensor:
    """``images`` convolved along ``axis`` (1: rows, 2: columns) with per-image ``weights``
    (``[B, 2R + 1]``), renormalized over the taps inside the image."""
    size = images.shape[axis]
    radius = (weights.shape[1] - 1) // 2
    paddings = [[0, 0]] * 4
    paddings[axis] = [radius, radius]
    padded = tf.pad(images, paddings)
    ones = tf.pad(tf.ones([size]), [[radius, radius]])
    total, inside = 0.0, 0.0
    for tap in range(2 * radius + 1):
        weight = weights[:, tap]
        part = padded[:, tap : tap + size] if axis == 1 else padded[:, :, tap : tap + size]
        total += per_example(weight) * part
        inside += weight[:, tf.newaxis] * ones[tap : tap + size][tf.newaxis]
    shape = [-1, 1, 1, 1]
    shape[axis] = size
    return total / tf.reshape(inside, shape)


def gaussian_blur(
    images: tf.Tensor, sigma_y: tf.Tensor, sigma_x: tf.Tensor, max_radius: int
) -> tf.Tensor:
    """Separable Gaussian blur of a float32 batch, ``sigma_y`` down and ``sigma_x`` across
    (``[B]`` pixels), borders renormalized as :func:`object_input.ops.enhance.gaussian_blur`."""
    across = _convolve(images, gaussian_weights(sigma_x, max_radius), axis=2)
    return _convolve(across, gaussian_weights(sigma_y, max_radius), axis=1)


def sharpness(images: tf.Tensor, factor: tf.Tensor) -> tf.Tensor:
    """:func:`object_input.ops.autoaugment_ops.sharpness` of a float32 batch, ``factor``
    ``[B, 1, 1, 1]``: the smoothed interior from a zero-padded batch and the border kept by a
    constant mask. XLA compiles that about 20 % faster than the host form's concatenations."""
    _, height, width, _ = images.shape
    padded = tf.pad(images, [[0, 0], [1, 1], [1, 1], [0, 0]])
    rows = padded[:, :-2] + padded[:, 1:-1] + padded[:, 2:]
    total = rows[:, :, :-2] + rows[:, :, 1:-1] + rows[:, :, 2:] + 4.0 * images
    smooth = tf.clip_by_value(total / 13.0, 0.0, 255.0)
    blended = tf.clip_by_value(smooth + factor * (images - smooth), 0.0, 255.0)
    border = np.zeros((1, height, width, 1), bool)
    border[:, [0, -1]] = True
    border[:, :, [0, -1]] = True
    return tf.where(tf.constant(border), tf.clip_by_value(images, 0.0, 255.0), blended)


# --- level ops ------------------------------------------------------------------------------


def equalize(images: tf.Tensor) -> tf.Tensor:
    """:func:`object_input.ops.autoaugment_ops.equalize` of each image of a float32 batch
    ``[B, H, W, C]``: every channel of every image gets its own histogram."""
    _, height, width, channels = images.shape
    # The batch size is unknown when traced in a pipeline that keeps its last, smaller batch.
    batch = tf.shape(images)[0]
    levels = autoaugment_ops.as_levels(images)
    # One index per value, level + 256 · (image, channel), for the histograms and the lookup.
    lanes = tf.reshape(tf.range(batch * channels) * 256, [batch, 1, 1, channels])
    index = levels + lanes
    # Float counts (exact below 2**24 pixels) sum on every device; int32 segment sums do not.
    counts = tf.math.unsorted_segment_sum(
        tf.ones_like(images), index, num_segments=batch * channels * 256
    )
    histogram = tf.reshape(tf.cast(counts, tf.int32), [batch, channels, 256])
    lut, step = autoaugment_ops.equalize_lookup(histogram, height * width)
    equalized = tf.gather(tf.reshape(lut, [-1]), index)
    return tf.where((step > 0)[:, tf.newaxis, tf.newaxis, :], equalized, images)


def autocontrast(images: tf.Tensor) -> tf.Tensor:
    """:func:`object_input.ops.autoaugment_ops.autocontrast` of each image of a float32 batch:
    each channel stretched so its minimum maps to 0 and its maximum to 255 (flat ones kept)."""
    low = tf.reduce_min(images, axis=[1, 2], keepdims=True)
    high = tf.reduce_max(images, axis=[1, 2], keepdims=True)
    spread = high > low
    stretched = (images - low) * (255.0 / tf.where(spread, high - low, 1.0))
    return tf.where(spread, tf.clip_by_value(stretched, 0.0, 255.0), images)
