"""One example's feature dict: the helpers for its boxes and image that readers and ops share.

The per-box helpers keep every registered per-box field
(:func:`object_input.fields.per_box_fields`) aligned; the image helpers keep ``IMAGE_SHAPE``
true. The module sits below the op library, so a decoder uses it without importing any op.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from object_input import fields

Features = dict[str, Any]


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


def set_image(features: Features, image: tf.Tensor) -> Features:
    """Replace the image and keep ``IMAGE_SHAPE`` equal to its true (height, width)."""
    out = dict(features)
    out[fields.IMAGE] = image
    out[fields.IMAGE_SHAPE] = tf.shape(image)[:2]
    return out
