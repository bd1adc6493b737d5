"""The batched form of a step: its draw taken on the host, its pixels changed on a batch anywhere.

A step that can leave the per-example map declares its random draw once
(:class:`object_input.ops._draws.Draw`) and a :class:`DeviceStep` at registration
(``register_step(draw=..., device=DeviceStep(apply=...))``):

- on the host, at the step's place in the per-example map, the draw is taken from the step's
  seed and does the step's whole work on the annotations (boxes moved, clipped or dropped with
  every per-box field, keypoints, instance masks, ``num_dropped_boxes``); the example keeps its
  image untouched and carries the draw packed as a float32 vector of what the pixels still need
  (a flip flag, a matrix, a sigma, rectangles): :meth:`~object_input.ops._draws.Draw.prepare`.
- ``apply(images, parameters, xp=TENSORFLOW, **params) -> images`` changes the pixels of a
  static-shape batch ``[B, H, W, C]`` (float32 on the [0, 255] scale in and out) with
  ``[B, P]`` parameters. It is written once against the array namespace ``xp``
  (:mod:`object_input.ops._backend`): TensorFlow's ops in ``tf.data`` and on Keras's TensorFlow
  backend, ``keras.ops`` on JAX or PyTorch. On TensorFlow it uses only ops with GPU kernels that
  XLA compiles; on JAX it is traceable by ``jax.jit``. Noise comes from seeds in the
  parameters through integer hashing (:func:`uniform_noise`), the same on every backend.

Annotations thus come out of the host exactly as the step makes them, whatever runs the
pixels. Geometry in the parameters is normalized (a matrix between normalized coordinates, a
rectangle in fractions of the image), so the device applies it to the resized batch: the same
transform of the scene, resampled once after the resize instead of before it.

The batched pixel primitives the steps share live here too, written against ``xp`` as well.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import fields
from object_input.ops import _core as core
from object_input.ops import _image_ops as autoaugment_ops
from object_input.ops._backend import TENSORFLOW

#: How a moved step's pixels compare with the host's (docs/ops.md lists each step's).
FIDELITIES = ("exact", "distribution")


@dataclasses.dataclass(frozen=True)
class DeviceStep:
    """How a step's pixels change on a batch (see the module docstring); its draw is the
    step's :class:`~object_input.ops._draws.Draw`.

    ``size`` is the length of the step's parameter vector, or a function of the step's config
    parameters giving it. ``fidelity`` says how the device's pixels compare with the host step's
    on the same seeds: ``"exact"`` (equal up to float rounding when the image is already at the
    output size; resizing commutes with the step), or ``"distribution"`` (the same draws applied
    after the resize instead of before it). ``blocker(params)`` returns why a configuration
    cannot move (None: it can). ``fused(params)``, for a colour step, lists the
    :class:`~object_input.ops._fused_color.ColorPart` each parameter column drives: the stage
    then runs neighbouring colour steps together in one compiled colour pass. ``on_host`` False
    says the batched form costs the host CPU more than the per-example step
    (``benchmarks/ops.py``): ``trailing_steps="batched"`` then keeps the step per example, and
    only ``"device"`` moves it.
    """

    apply: Callable[..., tf.Tensor]
    size: int | Callable[[Mapping[str, Any]], int]
    fidelity: str
    blocker: Callable[[Mapping[str, Any]], str | None] | None = None
    fused: Callable[[Mapping[str, Any]], tuple[Any, ...]] | None = None
    on_host: bool = True

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


def without_image(features: core.Features) -> tuple[core.Features, tf.Tensor]:
    """``(features without the image, the image)``: what the annotation work of a draw takes."""
    rest = dict(features)
    return rest, rest.pop(fields.IMAGE)


def with_image(features: core.Features, image: tf.Tensor) -> core.Features:
    """``features`` with ``image`` put back."""
    return {**features, fields.IMAGE: image}


def per_example(values: Any) -> Any:
    """``[B]`` to ``[B, 1, 1, 1]``, to broadcast over a batch of images."""
    return values[:, None, None, None]


def fires(parameters: Any, column: int = 0) -> Any:
    """Bool ``[B, 1, 1, 1]``: whether the step acts on each image (a 0/1 column)."""
    return per_example(parameters[:, column] > 0.5)


# Noise seeds travel as float32 parameters: values below 2**24 stay exact.
_SEED_RANGE = 2**24


def seed_parameters(seed: tf.Tensor) -> list[tf.Tensor]:
    """A stateless seed as two float32-exact parameters (see :func:`uniform_noise`)."""
    return tf.unstack(tf.math.floormod(core.as_seed(seed), _SEED_RANGE))


def _shift_right(values: Any, bits: int, xp: Any) -> Any:
    """Logical right shift of int32 ``values`` (TensorFlow shifts signed values arithmetically)."""
    return xp.bitwise_and(xp.right_shift(values, bits), (1 << (32 - bits)) - 1)


def _mix(values: Any, xp: Any) -> Any:
    """An int32 integer hash (lowbias32, C. Wellons): products wrap in every backend."""
    values = xp.bitwise_xor(values, _shift_right(values, 16, xp))
    values = values * 0x7FEB352D
    values = xp.bitwise_xor(values, _shift_right(values, 15, xp))
    values = values * (0x846CA68B - 2**32)
    return xp.bitwise_xor(values, _shift_right(values, 16, xp))


def uniform_noise(seeds: Any, shape: tuple[int, int, int], stream: int, xp: Any) -> Any:
    """Float32 ``[B, *shape]`` uniform on [0, 1): each image's noise from its own two seed
    parameters (``[B, 2]``, see :func:`seed_parameters`), ``stream`` for independent draws.

    Stateless integer hashing of each value's index, the same on every backend and device
    (no backend's random generator is the same as another's)."""
    index = xp.reshape(xp.range(int(np.prod(shape)), dtype="int32"), [1, *shape])
    first, second = (per_example(xp.cast(seeds[:, i], "int32")) for i in range(2))
    key = _mix(xp.bitwise_xor(_mix(xp.bitwise_xor(second, stream), xp), first), xp)
    bits = _mix(xp.bitwise_xor(index * 2 + 1, _mix(key, xp)), xp)
    return xp.cast(_shift_right(bits, 8, xp), "float32") * (1.0 / 2**24)


def normal_noise(seeds: Any, shape: tuple[int, int, int], xp: Any) -> Any:
    """Float32 ``[B, *shape]`` standard normal noise (Box-Muller on :func:`uniform_noise`)."""
    radius = xp.sqrt(-2.0 * xp.log(1.0 - uniform_noise(seeds, shape, 0, xp)))
    return radius * xp.cos((2.0 * np.pi) * uniform_noise(seeds, shape, 1, xp))


def rectangle_mask(rectangles: Any, height: int, width: int, xp: Any = TENSORFLOW) -> Any:
    """Bool ``[B, H, W, 1]``: the pixels whose centres lie in each image's normalized
    ``[top, left, bottom, right)`` rectangle (``[B, 4]``)."""
    rows = (xp.range(height, dtype="float32") + 0.5) / height
    cols = (xp.range(width, dtype="float32") + 0.5) / width
    top, left, bottom, right = (rectangles[:, i, None] for i in range(4))
    in_rows = (rows[None] >= top) & (rows[None] < bottom)
    in_cols = (cols[None] >= left) & (cols[None] < right)
    return (in_rows[:, :, None] & in_cols[:, None, :])[..., None]


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


def split_color(images: Any, step: str) -> tuple[Any, Any]:
    """``(colour, rest)`` of a float32 batch: 3 colour channels, or 1 if C < 3 (as
    :func:`object_input.ops.color.split_channels` splits an image)."""
    channels = images.shape[-1]
    if channels is None:
        raise ValueError(f"{step}: the batch's channel count must be known when traced")
    split = 3 if channels >= 3 else 1
    return images[..., :split], images[..., split:]


def merge_color(color: Any, rest: Any, xp: Any) -> Any:
    """Inverse of :func:`split_color`."""
    return color if rest.shape[-1] == 0 else xp.concat([color, rest], axis=-1)


def on_color(images: Any, step: str, fn: Callable[[Any], Any], xp: Any) -> Any:
    """``fn`` on the colour channels of a float32 batch; further channels pass through."""
    color, rest = split_color(images, step)
    return merge_color(fn(color), rest, xp)


# --- warps ----------------------------------------------------------------------------------


def normalized_matrix(matrix: tf.Tensor, height, width) -> tf.Tensor:
    """Float32 ``[6]``: the top two rows of a forward pixel ``matrix`` (3 × 3, about an image of
    ``height`` × ``width``) restated between normalized coordinates, which a resize keeps."""
    size = tf.cast(tf.stack([width, height]), tf.float32)
    linear = matrix[:2, :2] * size[tf.newaxis, :] / size[:, tf.newaxis]
    shift = matrix[:2, 2] / size
    return tf.reshape(tf.concat([linear, shift[:, tf.newaxis]], axis=1), [6])


def _sampling_map(matrices: Any, height: int, width: int, xp: Any) -> Any:
    """``[B, 6]``: for each forward normalized affine ``matrices`` row, the inverse map from
    output to input pixel indices (pixel centres at integers) of a ``height`` × ``width`` batch."""
    a, b, shift_x, c, d, shift_y = xp.unstack(matrices, axis=1)
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
    return xp.stack([ia, ib, ox, ic, id_, oy], axis=1)


def warp(
    images: Any, matrices: Any, fill_value: float, interpolation: str, xp: Any = TENSORFLOW
) -> Any:
    """Each image of a float32 ``[B, H, W, C]`` batch moved by its forward normalized affine
    matrix (``[B, 6]``, see :func:`normalized_matrix`); ``fill_value`` where nothing maps.

    The sampling is ``ImageProjectiveTransformV3``'s (constant fill blended in at the edge for
    bilinear; nearest rounds), written as gathers: XLA compiles those, not the kernel. The
    gathers read a batch framed by one pixel of ``fill_value``, every tap clamped into it: a tap
    outside the image reads the fill without a select (a fifth less CPU on XLA's CPU).
    """
    _, height, width, channels = images.shape
    inverse = _sampling_map(matrices, height, width, xp)
    ys = xp.range(height, dtype="float32")[None, :, None]
    xs = xp.range(width, dtype="float32")[None, None, :]
    # A reshape, not inverse[:, i, None, None]: TensorFlow's graph optimizer (without XLA)
    # misreads that slice's new axes as [B] and the products below fail.
    rows = [xp.reshape(inverse[:, i], [-1, 1, 1]) for i in range(6)]
    source_x = rows[0] * xs + rows[1] * ys + rows[2]
    source_y = rows[3] * xs + rows[4] * ys + rows[5]
    framed = xp.pad(images, [[0, 0], [1, 1], [1, 1], [0, 0]], constant_values=fill_value)
    flat = xp.reshape(framed, [-1, channels])
    base = xp.range(xp.shape(images)[0])[:, None, None] * ((height + 2) * (width + 2))

    def tap(y: Any, x: Any) -> Any:
        # Indices -1 and H (W) are the frame: every tap outside the image lands on it.
        row = xp.cast(xp.clip_by_value(y, -1.0, float(height)), "int32") + 1
        col = xp.cast(xp.clip_by_value(x, -1.0, float(width)), "int32") + 1
        return xp.gather(flat, base + row * (width + 2) + col)

    if interpolation == "NEAREST":
        # Half away from zero, as the kernel rounds (tf.round rounds half to even).
        return tap(_round_half_away(source_y, xp), _round_half_away(source_x, xp))
    y0, x0 = xp.floor(source_y), xp.floor(source_x)
    fy, fx = (source_y - y0)[..., None], (source_x - x0)[..., None]
    top = tap(y0, x0) * (1.0 - fx) + tap(y0, x0 + 1.0) * fx
    bottom = tap(y0 + 1.0, x0) * (1.0 - fx) + tap(y0 + 1.0, x0 + 1.0) * fx
    return top * (1.0 - fy) + bottom * fy


def _round_half_away(values: Any, xp: Any) -> Any:
    return xp.sign(values) * xp.floor(xp.abs(values) + 0.5)


# --- separable filters ----------------------------------------------------------------------


def gaussian_weights(sigma: Any, max_radius: int, xp: Any = TENSORFLOW) -> Any:
    """``[B, 2R + 1]`` (R = ``max_radius``): each sigma's normalized Gaussian over the taps
    within ``min(⌈3σ⌉, R)`` (at least 1) of the centre, zero beyond."""
    sigma = xp.maximum(sigma, 1e-6)[:, None]
    radius = xp.clip_by_value(xp.ceil(3.0 * sigma), 1.0, float(max_radius))
    offsets = xp.range(-max_radius, max_radius + 1, dtype="float32")[None]
    weights = xp.exp(-0.5 * xp.square(offsets / sigma))
    weights = xp.where(xp.abs(offsets) <= radius, weights, 0.0)
    return weights / xp.reduce_sum(weights, axis=1, keepdims=True)


def _convolve(images: Any, weights: Any, axis: int, xp: Any) -> Any:
    """``images`` convolved along ``axis`` (1: rows, 2: columns) with per-image ``weights``
    (``[B, 2R + 1]``), renormalized over the taps inside the image."""
    size = images.shape[axis]
    radius = (weights.shape[1] - 1) // 2
    paddings = [[0, 0]] * 4
    paddings[axis] = [radius, radius]
    padded = xp.pad(images, paddings)
    ones = xp.pad(xp.ones([size]), [[radius, radius]])
    total, inside = 0.0, 0.0
    for tap in range(2 * radius + 1):
        weight = weights[:, tap]
        part = padded[:, tap : tap + size] if axis == 1 else padded[:, :, tap : tap + size]
        total += per_example(weight) * part
        inside += weight[:, None] * ones[tap : tap + size][None]
    shape = [-1, 1, 1, 1]
    shape[axis] = size
    return total / xp.reshape(inside, shape)


def gaussian_blur(
    images: Any, sigma_y: Any, sigma_x: Any, max_radius: int, xp: Any = TENSORFLOW
) -> Any:
    """Separable Gaussian blur of a float32 batch, ``sigma_y`` down and ``sigma_x`` across
    (``[B]`` pixels), borders renormalized as :func:`object_input.ops.enhance.gaussian_blur`."""
    across = _convolve(images, gaussian_weights(sigma_x, max_radius, xp), 2, xp)
    return _convolve(across, gaussian_weights(sigma_y, max_radius, xp), 1, xp)


def sharpness(images: Any, factor: Any, xp: Any = TENSORFLOW) -> Any:
    """:func:`object_input.ops._image_ops.sharpness` of a float32 batch, ``factor``
    ``[B, 1, 1, 1]``: the smoothed interior from a zero-padded batch and the border kept by a
    constant mask. XLA compiles that about 20 % faster than the host form's concatenations.

    The pixels are summed as rows ``[B, H, W * C]``, a column neighbour ``C`` values away: XLA
    on the CPU vectorizes along the last axis, which is 3 long in ``[B, H, W, C]`` (about 20 %
    less CPU, the same values)."""
    _, height, width, channels = images.shape
    row = width * channels
    flat = xp.reshape(images, [-1, height, row])
    padded = xp.pad(flat, [[0, 0], [1, 1], [channels, channels]])
    rows = padded[:, :-2] + padded[:, 1:-1] + padded[:, 2:]
    total = (
        rows[:, :, : -2 * channels]
        + rows[:, :, channels:-channels]
        + rows[:, :, 2 * channels :]
        + 4.0 * flat
    )
    smooth = xp.clip_by_value(total / 13.0, 0.0, 255.0)
    factor = xp.reshape(factor, [-1, 1, 1])
    blended = xp.clip_by_value(smooth + factor * (flat - smooth), 0.0, 255.0)
    border = np.zeros((1, height, width, channels), bool)
    border[:, [0, -1]] = True
    border[:, :, [0, -1]] = True
    border = xp.constant(border.reshape(1, height, row))
    sharpened = xp.where(border, xp.clip_by_value(flat, 0.0, 255.0), blended)
    return xp.reshape(sharpened, [-1, height, width, channels])


# --- level ops ------------------------------------------------------------------------------


def equalize(images: Any, xp: Any = TENSORFLOW) -> Any:
    """:func:`object_input.ops._image_ops.equalize` of each image of a float32 batch
    ``[B, H, W, C]``: every channel of every image gets its own histogram."""
    _, height, width, channels = images.shape
    # The batch size is unknown when traced in a pipeline that keeps its last, smaller batch.
    batch = xp.shape(images)[0]
    levels = autoaugment_ops.as_levels(images, xp)
    # One index per value, level + 256 · (image, channel), for the histograms and the lookup.
    lanes = xp.reshape(xp.range(batch * channels) * 256, [batch, 1, 1, channels])
    index = levels + lanes
    # Float counts (exact below 2**24 pixels) sum on every device; int32 segment sums do not.
    counts = xp.unsorted_segment_sum(
        xp.ones([batch * height * width * channels]),
        xp.reshape(index, [-1]),
        batch * channels * 256,
    )
    histogram = xp.reshape(xp.cast(counts, "int32"), [batch, channels, 256])
    lut, step = autoaugment_ops.equalize_lookup(histogram, height * width, xp)
    equalized = xp.gather(xp.reshape(lut, [-1]), index)
    return xp.where((step > 0)[:, None, None, :], equalized, images)


def autocontrast(images: Any, xp: Any = TENSORFLOW) -> Any:
    """:func:`object_input.ops._image_ops.autocontrast` of each image of a float32 batch:
    each channel stretched so its minimum maps to 0 and its maximum to 255 (flat ones kept)."""
    low = xp.reduce_min(images, axis=[1, 2], keepdims=True)
    high = xp.reduce_max(images, axis=[1, 2], keepdims=True)
    spread = high > low
    stretched = (images - low) * (255.0 / xp.where(spread, high - low, 1.0))
    return xp.where(spread, xp.clip_by_value(stretched, 0.0, 255.0), images)
