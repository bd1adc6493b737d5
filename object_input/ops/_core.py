"""Shared building blocks for ops: seeds and random draws, image patches, and the feature-dict
helpers of :mod:`object_input.feature_dict` (per-box gathering, image size and dtype), re-exported
here so that an op imports one module.

Every op is a pure function ``op(features, *, seed=None, **params) -> features`` over one
example's feature dict. Randomness is stateless: an op derives all its draws from ``seed``, a
shape-[2] integer tensor, so the result depends on the seed alone, never on thread timing.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from object_input.feature_dict import (
    Features,
    concat_boxes,
    gather_boxes,
    image_size,
    like,
    mask_boxes,
    mirror,
    num_boxes,
    set_image,
    to_float,
)

__all__ = [
    "LUMA_WEIGHTS",
    "Features",
    "as_seed",
    "bernoulli",
    "concat_boxes",
    "fill_rectangle",
    "fold_seed",
    "gather_boxes",
    "image_size",
    "like",
    "mask_boxes",
    "mirror",
    "num_boxes",
    "set_image",
    "split_seed",
    "to_float",
    "uniform",
    "uniform_int",
]

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
