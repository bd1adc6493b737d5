"""Image primitives for detection AutoAugment (Zoph et al. 2019), in core TensorFlow.

Pixel ops take a float32 ``[H, W, C]`` image on the [0, 255] scale and treat every channel they
are given as a colour channel; callers pass the first 3 channels only. Geometric ops are 3 × 3
*forward* matrices in continuous pixel coordinates (x to the right, y down, origin at the
top-left corner of the top-left pixel, so pixel ``i`` spans ``[i, i + 1)``);
:func:`object_input.ops._transform.warp` applies one to an image and
:func:`object_input.ops._transform.transform_points` to points, so image and boxes move
identically.
"""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf

from object_input.ops import _core as core
from object_input.ops._backend import TENSORFLOW
from object_input.ops._transform import affine_matrix, translate_matrix


def _clip(image: tf.Tensor, xp: Any = TENSORFLOW) -> tf.Tensor:
    return xp.clip_by_value(image, 0.0, 255.0)


#: ``tf.where(condition, x, y)`` for a ``condition`` of ``x``'s and ``y``'s shape: TensorFlow's
#: broadcasting select runs several times slower on an image than the plain one.
select = TENSORFLOW.select


def blend(
    degenerate: tf.Tensor | float, image: tf.Tensor, factor, xp: Any = TENSORFLOW
) -> tf.Tensor:
    """``degenerate + factor · (image − degenerate)``, clipped to [0, 255] (PIL ImageEnhance)."""
    return _clip(degenerate + factor * (image - degenerate), xp)


def _luma_weights(channels) -> tf.Tensor:
    """``[C]``: the luma weights for RGB, the plain mean for other channel counts."""
    return tf.cond(
        tf.equal(channels, 3),
        lambda: tf.constant(core.LUMA_WEIGHTS),
        lambda: tf.fill([channels], 1.0 / tf.cast(channels, tf.float32)),
    )


def grayscale(image: tf.Tensor) -> tf.Tensor:
    """``[H, W, 1]`` luma of an RGB image; the plain channel mean for other channel counts."""
    weights = _luma_weights(tf.shape(image)[-1])
    # A contraction, not a broadcast product and a sum: two passes fewer over the image.
    return tf.tensordot(image, weights, axes=[[-1], [0]])[..., tf.newaxis]


def color(image: tf.Tensor, factor) -> tf.Tensor:
    """Saturation: 0 gives grayscale, 1 the image, above 1 stronger colours."""
    channels = tf.shape(image)[-1]
    # ``factor · x + (1 − factor) · luma`` is linear in the channels: one product by a
    # [C, C] matrix, no grayscale image broadcast over the channels.
    mixing = factor * tf.eye(channels) + (1.0 - factor) * _luma_weights(channels)[:, tf.newaxis]
    pixels = tf.reshape(image, tf.stack([-1, channels]))
    return tf.reshape(_clip(tf.matmul(pixels, mixing)), tf.shape(image))


def contrast(image: tf.Tensor, factor) -> tf.Tensor:
    """Contrast around the mean luma: 0 gives a flat grey of that mean, 1 the image."""
    return blend(tf.reduce_mean(grayscale(image)), image, factor)


def brightness(image: tf.Tensor, factor) -> tf.Tensor:
    """Brightness: 0 gives black, 1 the image."""
    return blend(0.0, image, factor)


def sharpness(image: tf.Tensor, factor) -> tf.Tensor:
    """Blend with PIL's SMOOTH filter (3 × 3, centre weight 5, others 1); borders are kept.

    ``image`` is ``[H, W, C]`` or a batch ``[B, H, W, C]`` (``factor`` then broadcasts over it,
    e.g. ``[B, 1, 1, 1]``)."""
    # PIL filters the interior only. The 3 × 3 sums come from shifted slices (row sums from
    # views of the image): TensorFlow's CPU convolutions are slow over 3 channels.
    rows = tf.add_n([image[..., :-2, :, :], image[..., 1:-1, :, :], image[..., 2:, :, :]])
    centre = image[..., 1:-1, 1:-1, :]
    total = tf.add_n([rows[..., :-2, :], rows[..., 1:-1, :], rows[..., 2:, :], 4.0 * centre])
    inner = blend(_clip(total / 13.0), centre, factor)
    # The border blends with itself: the clipped image. [1:][-1:] is empty for one row/column.
    left = _clip(image[..., 1:-1, :1, :])
    right = _clip(image[..., 1:-1, 1:, :][..., -1:, :])
    middle = tf.concat([left, inner, right], axis=-2)
    top, bottom = _clip(image[..., :1, :, :]), _clip(image[..., 1:, :, :][..., -1:, :, :])
    return tf.concat([top, middle, bottom], axis=-3)


def as_levels(image: tf.Tensor, xp: Any = TENSORFLOW) -> tf.Tensor:
    """Integer grey levels 0..255 of a uint8 image, or of a float image on the [0, 255] scale."""
    if image.dtype == tf.uint8:
        return tf.cast(image, tf.int32)
    return xp.cast(xp.clip_by_value(xp.round(image), 0.0, 255.0), "int32")


def posterize(image: tf.Tensor, bits, xp: Any = TENSORFLOW) -> tf.Tensor:
    """Keep the ``bits`` most significant bits of each 8-bit value (1 ≤ bits ≤ 8)."""
    step = xp.cast(xp.left_shift(1, 8 - xp.cast(bits, "int32")), "float32")
    # On whole levels in float32, exact (the step is a power of two): no round trip through
    # int32, and no float floormod (slow on the CPU).
    return xp.floor(_clip(xp.round(image), xp) * (1.0 / step)) * step


def solarize(image: tf.Tensor, threshold, xp: Any = TENSORFLOW) -> tf.Tensor:
    """Invert (255 − x) every value at or above ``threshold``."""
    return xp.select(image < threshold, image, 255.0 - image)


def solarize_add(image: tf.Tensor, addition, threshold=128) -> tf.Tensor:
    """Add ``addition`` to every value below ``threshold``, clipped to [0, 255]."""
    return select(image < threshold, _clip(image + addition), image)


def _channel_tiled(values: tf.Tensor, pixels) -> tf.Tensor:
    """``[pixels · C]``: the per-channel ``values`` ([C]) repeated for every pixel.

    A same-shape operation against this is several times faster than one broadcasting the
    ``[C]`` vector over the image.
    """
    return tf.tile(values, tf.reshape(pixels, [1]))


def autocontrast(image: tf.Tensor) -> tf.Tensor:
    """Stretch each channel linearly so its minimum maps to 0 and its maximum to 255."""
    shape = tf.shape(image)
    # As [H, W·C] rows: the reductions run down the rows first (over long contiguous rows),
    # and the stretch broadcasts one [W·C] row instead of a [C] vector.
    rows = tf.reshape(image, tf.stack([shape[0], -1]))
    channels = tf.stack([-1, shape[2]])
    low = tf.reduce_min(tf.reshape(tf.reduce_min(rows, axis=0), channels), axis=0)
    high = tf.reduce_max(tf.reshape(tf.reduce_max(rows, axis=0), channels), axis=0)
    scale = 255.0 / tf.where(high > low, high - low, 1.0)
    stretched = _clip((rows - _channel_tiled(low, shape[1])) * _channel_tiled(scale, shape[1]))
    stretched = tf.reshape(stretched, shape)
    # Only a flat channel keeps its values; the broadcasting select is costly, so it runs
    # only then.
    return tf.cond(
        tf.reduce_all(high > low), lambda: stretched, lambda: tf.where(high > low, stretched, image)
    )


def equalize_lookup(
    histogram: tf.Tensor, num_pixels, xp: Any = TENSORFLOW
) -> tuple[tf.Tensor, tf.Tensor]:
    """``(lut, step)``: PIL's equalize lookup (float32 ``[..., 256]``) for int32 level
    histograms ``[..., 256]`` of ``num_pixels`` pixels each, and each histogram's step
    (``[...]``; 0 means the channel keeps its values)."""
    # The brightest level is the last one with pixels.
    occupied = xp.cast(histogram > 0, "int32") * xp.range(256)
    brightest = xp.take_last(histogram, xp.reduce_max(occupied, axis=-1))
    step = (num_pixels - brightest) // 255
    safe_step = xp.maximum(step, 1)[..., None]
    cumulative = xp.cumsum(histogram, axis=-1)
    # The lookup for level v counts the pixels strictly below v, hence the shift by one.
    lut = xp.concat(
        [xp.zeros_like(cumulative[..., :1]), (cumulative[..., :-1] + safe_step // 2) // safe_step],
        axis=-1,
    )
    return xp.cast(xp.minimum(lut, 255), "float32"), step


def equalize(image: tf.Tensor) -> tf.Tensor:
    """PIL ``ImageOps.equalize`` per channel on the rounded 8-bit levels.

    A channel whose step (pixels outside its brightest level, over 255) is 0 is left as is. A
    uint8 image stays uint8 (its levels are the bytes: no float copy); others come out float32.
    """
    channels = tf.shape(image)[-1]
    num_pixels = tf.size(image) // channels
    # One index per value, level + 256 · channel, serves both the histogram and the lookup.
    offsets = _channel_tiled(tf.range(channels) * 256, num_pixels)
    index = tf.reshape(as_levels(image), [-1]) + offsets
    histogram = tf.reshape(
        tf.math.bincount(index, minlength=256 * channels, maxlength=256 * channels),
        [channels, 256],
    )
    lut, step = equalize_lookup(histogram, num_pixels)
    # The lookup holds whole levels: in uint8 it is exact.
    lut = tf.reshape(tf.cast(lut, tf.uint8) if image.dtype == tf.uint8 else lut, [-1])
    equalized = tf.reshape(tf.gather(lut, index), tf.shape(image))
    # Only a channel with step 0 keeps its values; the broadcasting select runs only then.
    return tf.cond(
        tf.reduce_all(step > 0), lambda: equalized, lambda: tf.where(step > 0, equalized, image)
    )


def square_bounds(height, width, center_y, center_x, half_size) -> tuple[tf.Tensor, ...]:
    """``(top, bottom, left, right)``: rows ``[cy − s, cy + s)`` × columns ``[cx − s, cx + s)``
    (``half_size`` = (s for rows, s for columns)) clipped to a ``height`` × ``width`` image."""
    top = tf.clip_by_value(center_y - half_size[0], 0, height)
    bottom = tf.clip_by_value(center_y + half_size[0], top, height)
    left = tf.clip_by_value(center_x - half_size[1], 0, width)
    right = tf.clip_by_value(center_x + half_size[1], left, width)
    return top, bottom, left, right


def fill_square(image: tf.Tensor, center_y, center_x, half_size, value: float = 128.0) -> tf.Tensor:
    """``image`` ``[H, W, C]`` with ``value`` in the square :func:`square_bounds` gives."""
    height, width = tf.shape(image)[0], tf.shape(image)[1]
    top, bottom, left, right = square_bounds(height, width, center_y, center_x, half_size)
    patch = tf.fill(tf.stack([bottom - top, right - left, tf.shape(image)[2]]), value)
    filled = core.fill_rectangle(image, tf.cast(patch, image.dtype), tf.stack([top, left]))
    return tf.ensure_shape(filled, image.shape)


def rotation(degrees: Any) -> list[list[tf.Tensor]]:
    """The 2 × 2 rotation by ``degrees``, counter-clockwise on screen.

    y points down, so that is x' = c·x + s·y, y' = −s·x + c·y.
    """
    radians = tf.cast(degrees, tf.float32) * (math.pi / 180.0)
    cos, sin = tf.cos(radians), tf.sin(radians)
    return [[cos, sin], [-sin, cos]]


def about_centre(height, width, linear: Any, shift_x=0.0, shift_y=0.0) -> tf.Tensor:
    """The forward matrix applying the 2 × 2 ``linear`` part about the centre of a ``height`` ×
    ``width`` image, then moving the result by (``shift_x``, ``shift_y``) pixels."""
    cx = tf.cast(width, tf.float32) / 2.0
    cy = tf.cast(height, tf.float32) / 2.0
    embed = affine_matrix(
        [[linear[0][0], linear[0][1], 0], [linear[1][0], linear[1][1], 0], [0, 0, 1]]
    )
    # A matrix product, not the shift written out: the two round differently in the last bit,
    # and the seeded digests (tests/test_golden_outputs.py) hold this one.
    return translate_matrix(cx + shift_x, cy + shift_y) @ embed @ translate_matrix(-cx, -cy)


def rotate_matrix(degrees, height, width) -> tf.Tensor:
    """Rotate content counter-clockwise (as seen on screen) by ``degrees`` about the centre: the
    one rotation matrix of random_rotation and of AutoAugment's and RandAugment's Rotate."""
    return about_centre(height, width, rotation(degrees))


def shear_x_matrix(shear) -> tf.Tensor:
    """``x' = x + shear · y`` (rows slide sideways in proportion to their distance from the top)."""
    return affine_matrix([[1, shear, 0], [0, 1, 0], [0, 0, 1]])


def shear_y_matrix(shear) -> tf.Tensor:
    """``y' = y + shear · x``."""
    return affine_matrix([[1, 0, 0], [shear, 1, 0], [0, 0, 1]])


def flip_matrix(width) -> tf.Tensor:
    """Mirror left-right within a region ``width`` pixels wide."""
    return affine_matrix([[-1, 0, width], [0, 1, 0], [0, 0, 1]])
