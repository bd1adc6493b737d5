"""Shared building blocks for ops: seeds, per-box gathering, image dtype handling.

Every op is a pure function ``op(features, *, seed=None, **params) -> features`` over one
example's feature dict. Randomness is stateless: an op derives all its draws from ``seed``, a
shape-[2] integer tensor, so the result depends on the seed alone, never on thread timing.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from object_input import fields

Features = dict[str, Any]

_INT32_MAX = 2**31 - 1


#: ITU-R 601 luma weights of RGB, the ones tf.image.rgb_to_grayscale uses.
LUMA_WEIGHTS = (0.2989, 0.5870, 0.1140)


def as_seed(seed: Any) -> tf.Tensor:
    """Turn ``seed`` (None, int, or a shape-[2] integer tensor) into a shape-[2] int32 tensor.

    ``None`` draws a fresh seed from TensorFlow's global generator: results then differ run to run.
    """
    if seed is None:
        return tf.random.uniform([2], maxval=_INT32_MAX, dtype=tf.int32)
    if isinstance(seed, int):
        return tf.constant([seed & _INT32_MAX, (seed >> 31) & _INT32_MAX], tf.int32)
    seed = tf.convert_to_tensor(seed)
    if seed.shape.rank == 0:
        return tf.stack([tf.cast(seed, tf.int32), tf.constant(0, tf.int32)])
    return tf.cast(seed, tf.int32)


def split_seed(seed: Any, num: int) -> list[tf.Tensor]:
    """``num`` independent shape-[2] seeds derived from ``seed``."""
    # One unstack, not a slice (four graph nodes) per seed: nodes cost tracing and start-up.
    return tf.unstack(tf.random.experimental.stateless_split(as_seed(seed), num), num=num)


def fold_seed(seed: Any, data: Any) -> tf.Tensor:
    """A new seed derived from ``seed`` and an integer ``data`` (a step index, a position)."""
    return tf.random.experimental.stateless_fold_in(as_seed(seed), tf.cast(data, tf.int64))


def uniform(seed: Any, minval: Any = 0.0, maxval: Any = 1.0, shape: Any = ()) -> tf.Tensor:
    """Float32 uniform draw in ``[minval, maxval)`` from a stateless seed."""
    return tf.random.stateless_uniform(shape, as_seed(seed), minval=minval, maxval=maxval)


def uniform_int(seed: Any, minval: Any, maxval: Any, shape: Any = ()) -> tf.Tensor:
    """Int32 uniform draw in ``[minval, maxval)``; ``maxval`` may be a tensor."""
    minval = tf.cast(minval, tf.int32)
    maxval = tf.maximum(tf.cast(maxval, tf.int32), minval + 1)
    draw = tf.random.stateless_uniform(shape, as_seed(seed), minval=0.0, maxval=1.0)
    span = tf.cast(maxval - minval, tf.float32)
    return minval + tf.minimum(tf.cast(tf.floor(draw * span), tf.int32), maxval - minval - 1)


def bernoulli(seed: Any, probability: Any) -> tf.Tensor:
    """A scalar bool that is True with ``probability``."""
    return uniform(seed) < probability


def num_boxes(features: Features) -> tf.Tensor:
    """Number of boxes in ``features`` (0 when the example has no boxes field)."""
    if fields.BOXES not in features:
        return tf.constant(0, tf.int32)
    return tf.shape(features[fields.BOXES])[0]


def gather_boxes(features: Features, indices: tf.Tensor) -> Features:
    """Keep the boxes at ``indices`` (reordering or repeating allowed) in every per-box field."""
    out = dict(features)
    for name in fields.per_box_fields():
        if name in out:
            out[name] = tf.gather(out[name], indices)
    return out


def mask_boxes(features: Features, keep: tf.Tensor) -> Features:
    """Keep the boxes where the bool vector ``keep`` is True, in every per-box field.

    When ``features`` counts ``NUM_DROPPED_BOXES`` (decoded examples do), the boxes removed are
    added to it, so an example reports what crops and filters took from it. (An absent count stays
    absent: the ops keep a feature dict's keys.)
    """
    out = gather_boxes(features, tf.reshape(tf.where(keep), [-1]))
    if fields.NUM_DROPPED_BOXES in features:
        removed = tf.reduce_sum(tf.cast(tf.logical_not(keep), tf.int32))
        out[fields.NUM_DROPPED_BOXES] = features[fields.NUM_DROPPED_BOXES] + removed
    return out


def concat_boxes(first: Features, second: Features) -> Features:
    """Append ``second``'s boxes after ``first``'s in every per-box field present in both."""
    out = dict(first)
    for name in fields.per_box_fields():
        if name in first and name in second:
            out[name] = tf.concat([first[name], second[name]], axis=0)
    return out


def image_size(image: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(height, width) of a ``[H, W, C]`` image as int32 scalars."""
    shape = tf.shape(image)
    if image.shape.rank is not None:
        height, width, *_ = tf.unstack(shape, num=image.shape.rank)
        return height, width
    return shape[0], shape[1]


def to_float(image: tf.Tensor) -> tf.Tensor:
    """Image as float32 with values kept on the [0, 255] scale (no rescaling)."""
    return tf.cast(image, tf.float32) if image.dtype != tf.float32 else image


def like(image: tf.Tensor, reference_dtype: tf.DType) -> tf.Tensor:
    """Cast float ``image`` back to ``reference_dtype``, rounding and saturating for integers."""
    if reference_dtype == image.dtype:
        return image
    if reference_dtype.is_integer:
        return tf.saturate_cast(tf.round(image), reference_dtype)
    return tf.cast(image, reference_dtype)


def mirror(tensor: tf.Tensor, axis: int) -> tf.Tensor:
    """``tensor`` reversed along ``axis``.

    Along an axis of rows (two or more axes after it) the rows are gathered in reverse order,
    a copy of whole rows: TensorFlow's reverse moves element by element, about 3x slower there.
    """
    rank = tensor.shape.rank
    if rank is not None and axis < rank - 2:
        rows = tf.shape(tensor)[axis]
        return tf.gather(tensor, tf.range(rows - 1, -1, -1), axis=axis)
    return tf.reverse(tensor, [axis])


def fill_rectangle(image: tf.Tensor, patch: tf.Tensor, corner: tf.Tensor) -> tf.Tensor:
    """``image`` with the ``[h, w, C]`` ``patch`` written at ``corner`` (row, column).

    Written by slicing and concatenating, one copy of the image: a masked select over every
    pixel costs several times more on the CPU.
    """
    top, left = corner[0], corner[1]
    bottom, right = top + tf.shape(patch)[0], left + tf.shape(patch)[1]
    band = image[top:bottom]
    band = tf.concat([band[:, :left], patch, band[:, right:]], axis=1)
    return tf.concat([image[:top], band, image[bottom:]], axis=0)


def set_image(features: Features, image: tf.Tensor) -> Features:
    """Replace the image and keep ``IMAGE_SHAPE`` equal to its true (height, width)."""
    out = dict(features)
    out[fields.IMAGE] = image
    out[fields.IMAGE_SHAPE] = tf.shape(image)[:2]
    return out
