"""Random erasing (Cutout): fill rectangles of the image; boxes they hide are dropped or kept.

A box counts as hidden when every pixel it touches lies in the union of the patches. Dropped
boxes take every per-box field with them and are added to ``fields.NUM_DROPPED_BOXES``, so a
batch says how many objects augmentation removed.
"""

from __future__ import annotations

import tensorflow as tf

from object_input import fields
from object_input.ops import core
from object_input.ops.registry import (
    PER_BOX,
    in_range,
    non_negative,
    range_pair,
    register_step,
    rule,
)

COVERED_POLICIES = ("drop", "keep")


@rule("drop or keep")
def _covered_check(value: str) -> str | None:
    return None if value in COVERED_POLICIES else f"must be one of {COVERED_POLICIES}"


def erased_area(mask: tf.Tensor, boxes: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(erased pixels, pixels) each normalized box touches, from an ``[H, W]`` bool mask.

    A box touches the pixels its extent overlaps (at least one pixel); the counts come from an
    integral image, so the cost does not grow with the number of boxes.
    """
    height, width = tf.shape(mask)[0], tf.shape(mask)[1]
    integral = tf.pad(tf.cumsum(tf.cumsum(tf.cast(mask, tf.int32), 0), 1), [[1, 0], [1, 0]])
    size = tf.cast(tf.stack([height, width]), tf.float32)
    clipped = tf.clip_by_value(boxes, 0.0, 1.0)
    start = tf.cast(tf.floor(clipped[:, :2] * size), tf.int32)
    start = tf.minimum(start, tf.stack([height, width]) - 1)
    stop = tf.maximum(tf.cast(tf.math.ceil(clipped[:, 2:] * size), tf.int32), start + 1)

    def at(y, x):
        return tf.gather_nd(integral, tf.stack([y, x], axis=1))

    erased = (
        at(stop[:, 0], stop[:, 1])
        - at(start[:, 0], stop[:, 1])
        - at(stop[:, 0], start[:, 1])
        + at(start[:, 0], start[:, 1])
    )
    extent = stop - start
    return erased, extent[:, 0] * extent[:, 1]


def patch_mask(height, width, tops, lefts, heights, widths) -> tf.Tensor:
    """``[H, W]`` bool union of the pixel rectangles ``[top, top + h) × [left, left + w)``."""
    rows = tf.range(height)[tf.newaxis, :, tf.newaxis]
    cols = tf.range(width)[tf.newaxis, tf.newaxis, :]
    inside = (
        (rows >= tops[:, None, None])
        & (rows < (tops + heights)[:, None, None])
        & (cols >= lefts[:, None, None])
        & (cols < (lefts + widths)[:, None, None])
    )
    return tf.reduce_any(inside, axis=0)


@register_step(
    reads=(fields.IMAGE, fields.NUM_DROPPED_BOXES, PER_BOX),
    writes=(fields.IMAGE, fields.NUM_DROPPED_BOXES, PER_BOX),
    kind="geometry",
    checks={
        "num_patches": non_negative,
        "size_range": range_pair(0.0, 1.0),
        "probability": in_range(0.0, 1.0),
        "covered_boxes": _covered_check,
    },
    demo_params={"probability": 1.0, "num_patches": 3, "size_range": (0.4, 0.6)},
)
def random_cutout(
    features: core.Features,
    *,
    seed=None,
    num_patches: int = 1,
    size_range: tuple[float, float] = (0.1, 0.3),
    fill_value: float | None = 0.0,
    probability: float = 0.5,
    covered_boxes: str = "drop",
) -> core.Features:
    """With ``probability``, fill ``num_patches`` rectangles with ``fill_value``.

    Each patch's height and width are U(size_range) times the image's (drawn independently, so
    aspect ratios vary), placed uniformly inside the image; patches may overlap. ``fill_value``
    None fills with uniform noise on [0, 255] (random erasing). Boxes entirely hidden by the
    patches are dropped with every per-box field and counted in ``num_dropped_boxes``
    (``covered_boxes="drop"``), or kept (``"keep"``). Masks and keypoints are not changed: the
    object is hidden, not gone. The image keeps its dtype.
    """
    gate_seed, size_seed, place_seed, noise_seed = core.split_seed(seed, 4)
    image = features[fields.IMAGE]
    height, width = core.image_size(image)
    size = tf.cast(tf.stack([height, width]), tf.float32)
    fractions = core.uniform(size_seed, size_range[0], size_range[1], shape=[num_patches, 2])
    extents = tf.maximum(tf.cast(tf.round(fractions * size), tf.int32), 1)
    extents = tf.minimum(extents, tf.stack([height, width]))
    places = core.uniform(place_seed, shape=[num_patches, 2])
    slack = tf.cast(tf.stack([height, width]) - extents + 1, tf.float32)
    corners = tf.minimum(tf.cast(tf.floor(places * slack), tf.int32), tf.cast(slack, tf.int32) - 1)
    mask = patch_mask(height, width, corners[:, 0], corners[:, 1], extents[:, 0], extents[:, 1])
    mask = mask & core.bernoulli(gate_seed, probability)
    if fill_value is None:
        fill = core.uniform(noise_seed, 0.0, 256.0, shape=tf.shape(image))
        fill = core.like(tf.floor(fill), image.dtype)
    else:
        fill = core.like(tf.fill(tf.shape(image), float(fill_value)), image.dtype)
    out = dict(features)
    out[fields.IMAGE] = tf.where(mask[..., tf.newaxis], fill, image)
    if covered_boxes == "keep" or fields.BOXES not in features:
        return out
    erased, touched = erased_area(mask, features[fields.BOXES])
    hidden = erased >= touched
    out = core.mask_boxes(out, ~hidden)
    dropped = features.get(fields.NUM_DROPPED_BOXES, tf.constant(0, tf.int32))
    out[fields.NUM_DROPPED_BOXES] = dropped + tf.reduce_sum(tf.cast(hidden, tf.int32))
    return out
