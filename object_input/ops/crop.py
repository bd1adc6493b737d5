"""Crop steps. Every one of them, and every pad step, goes through :func:`crop_to_window`.

A window is given in pixels of the current image as ``(top, left, height, width)``; it may extend
beyond the image on any side, so the same function crops, pads, or does both at once.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import _box_geometry as box_ops
from object_input.ops import _core as core
from object_input.ops import _transform as transform
from object_input.ops._registry import (
    MOVED,
    PER_BOX,
    in_range,
    non_negative,
    ordered,
    positive,
    register_step,
    rule,
)
from object_input.ops.resize import resize_features

# Crops drop boxes, so they read and write every per-box field as well as the moved ones.
CROP_FIELDS = (MOVED, PER_BOX)

_MAX_ATTEMPTS = 100  # tries of sample_distorted_bounding_box before it falls back to the image


@rule("(low, high), 0 < low ≤ high")
def positive_pair(value: Any) -> str | None:
    """Check that a pair is (low, high) with 0 < low <= high."""
    if not 0 < value[0] <= value[1]:
        return "must be (low, high) with 0 < low <= high"
    return None


@rule("each > 0")
def all_positive(value: Any) -> str | None:
    """Check that every number in a sequence is > 0."""
    return None if min(value) > 0 else "must be > 0"


@rule("(low, high), 0 < low ≤ high ≤ 1")
def area_pair(value: Any) -> str | None:
    """Check that a pair is (low, high) with 0 < low <= high <= 1."""
    if not 0 < value[0] <= value[1] <= 1:
        return "must be (low, high) with 0 < low <= high <= 1"
    return None


# Checks of random_crop_image's parameters, also for the steps that pass them on to it.
CROP_CHECKS = {
    "min_object_covered": in_range(0.0, 1.0),
    "aspect_ratio_range": positive_pair,
    "area_range": area_pair,
    "overlap_thresh": in_range(0.0, 1.0),
    "random_coef": in_range(0.0, 1.0),
}
# The Object Detection API spells the crop's (low, high) pairs as two fields each.
CROP_OD_API_FIELDS = {
    "aspect_ratio_range": ("min_aspect_ratio", "max_aspect_ratio"),
    "area_range": ("min_area", "max_area"),
}


def crop_to_window(
    features: core.Features,
    top,
    left,
    height,
    width,
    *,
    overlap_thresh: float | None = None,
    clip_boxes: bool = True,
    fill: tf.Tensor | None = None,
) -> core.Features:
    """Cut the pixel window ``[top, top + height) × [left, left + width)`` out of the example.

    The window may extend beyond the image: the image there is ``fill`` (a per-channel vector of
    the image dtype; zeros when None) and masks are 0. With ``overlap_thresh`` set, boxes entirely
    outside the window or with less than that fraction of their own area inside it are dropped,
    with every per-box field. Boxes and keypoints move to the window's frame (see
    :class:`transform.Window`).
    """
    window = transform.Window(
        core.image_size(features[fields.IMAGE]),
        top,
        left,
        height,
        width,
        overlap_thresh=overlap_thresh,
        clip_boxes=clip_boxes,
        fill=fill,
    )
    return transform.apply(features, window)


def _sample_window(
    features: core.Features,
    seed: Any,
    min_object_covered: float,
    aspect_ratio_range: tuple[float, float],
    area_range: tuple[float, float],
) -> tuple[tf.Tensor, ...]:
    """(top, left, height, width) from ``stateless_sample_distorted_bounding_box``."""
    box_list = features.get(fields.BOXES, tf.zeros([0, 4], tf.float32))
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        tf.shape(features[fields.IMAGE]),
        tf.clip_by_value(box_list, 0.0, 1.0)[tf.newaxis],
        seed=core.as_seed(seed),
        min_object_covered=min_object_covered,
        aspect_ratio_range=aspect_ratio_range,
        area_range=area_range,
        max_attempts=_MAX_ATTEMPTS,
        use_image_if_no_bounding_boxes=True,
    )
    return begin[0], begin[1], size[0], size[1]


@register_step(
    reads=CROP_FIELDS,
    writes=CROP_FIELDS,
    kind="geometry",
    checks=CROP_CHECKS,
    deferral="crop",
    od_api_fields=CROP_OD_API_FIELDS,
    tunable=("min_object_covered", "overlap_thresh"),
)
def random_crop_image(
    features: core.Features,
    *,
    seed=None,
    min_object_covered: float = 1.0,
    aspect_ratio_range: tuple[float, float] = (0.75, 1.33),
    area_range: tuple[float, float] = (0.1, 1.0),
    overlap_thresh: float = 0.3,
    clip_boxes: bool = True,
    random_coef: float = 0.0,
) -> core.Features:
    """Crop a window from ``sample_distorted_bounding_box``; with ``random_coef`` keep the input.

    The window covers at least ``min_object_covered`` of some box (of the whole image when there
    are no boxes). A box survives if at least ``overlap_thresh`` of its area is inside.
    """
    keep_seed, window_seed = core.split_seed(seed, 2)

    def crop() -> core.Features:
        window = _sample_window(
            features, window_seed, min_object_covered, aspect_ratio_range, area_range
        )
        return crop_to_window(
            features, *window, overlap_thresh=overlap_thresh, clip_boxes=clip_boxes
        )

    if random_coef <= 0.0:
        return crop()
    return tf.cond(
        core.bernoulli(keep_seed, random_coef),
        lambda: core.set_image(features, features[fields.IMAGE]),
        crop,
    )


@register_step(
    reads=CROP_FIELDS,
    writes=CROP_FIELDS,
    kind="geometry",
    checks={"aspect_ratio": positive, "overlap_thresh": in_range(0.0, 1.0)},
    tunable=("aspect_ratio", "overlap_thresh"),
)
def random_crop_to_aspect_ratio(
    features: core.Features,
    *,
    seed=None,
    aspect_ratio: float = 1.0,
    overlap_thresh: float = 0.3,
    clip_boxes: bool = True,
    center_crop: bool = False,
) -> core.Features:
    """Crop the largest window with width / height = ``aspect_ratio`` at a random offset.

    ``center_crop`` centres the window instead. Boxes are kept as in :func:`random_crop_image`.
    """
    height, width = core.image_size(features[fields.IMAGE])
    height_f = tf.cast(height, tf.float32)
    width_f = tf.cast(width, tf.float32)
    # One side stays whole; the other is cut to the ratio (rounded, at least one pixel).
    crop_height = tf.clip_by_value(tf.cast(tf.round(width_f / aspect_ratio), tf.int32), 1, height)
    crop_width = tf.clip_by_value(tf.cast(tf.round(height_f * aspect_ratio), tf.int32), 1, width)
    if center_crop:
        top = (height - crop_height) // 2
        left = (width - crop_width) // 2
    else:
        top_seed, left_seed = core.split_seed(seed, 2)
        top = core.uniform_int(top_seed, 0, height - crop_height + 1)
        left = core.uniform_int(left_seed, 0, width - crop_width + 1)
    return crop_to_window(
        features,
        top,
        left,
        crop_height,
        crop_width,
        overlap_thresh=overlap_thresh,
        clip_boxes=clip_boxes,
    )


@register_step(
    reads=CROP_FIELDS,
    writes=CROP_FIELDS,
    kind="geometry",
    checks={"height": positive, "width": positive, "overlap_thresh": in_range(0.0, 1.0)},
    demo_params={"height": 9, "width": 11},
    tunable=("overlap_thresh",),
)
def random_crop_to_size(
    features: core.Features,
    *,
    seed=None,
    height: int,
    width: int,
    center_crop: bool = False,
    overlap_thresh: float = 0.3,
    clip_boxes: bool = True,
) -> core.Features:
    """Cut a ``height`` × ``width`` window at a random offset (``tf.image.random_crop``).

    ``center_crop`` centres the window instead (offsets rounded down), for evaluation. A side
    shorter than the window is padded with zeros, the image placed at a random (or centred)
    offset, so the output is always ``height`` × ``width``. Boxes are kept as in
    :func:`random_crop_image`.
    """
    image_height, image_width = core.image_size(features[fields.IMAGE])
    spare_height, spare_width = image_height - height, image_width - width
    if center_crop:
        top, left = tf.math.floordiv(spare_height, 2), tf.math.floordiv(spare_width, 2)
    else:
        top_seed, left_seed = core.split_seed(seed, 2)
        # Offsets in [0, spare] when the image is larger, in [spare, 0] (a pad) when smaller.
        top = core.uniform_int(
            top_seed, tf.minimum(spare_height, 0), tf.maximum(spare_height, 0) + 1
        )
        left = core.uniform_int(
            left_seed, tf.minimum(spare_width, 0), tf.maximum(spare_width, 0) + 1
        )
    return crop_to_window(
        features,
        top,
        left,
        height,
        width,
        overlap_thresh=overlap_thresh,
        clip_boxes=clip_boxes,
    )


def _border(max_border: int, size: tf.Tensor) -> tf.Tensor:
    """``max_border`` halved until twice it is below ``size`` (CenterNet's border rule)."""
    candidates = tf.constant([max_border >> k for k in range(max_border.bit_length() + 1)])
    fits = 2 * candidates < size
    return tf.gather(candidates, tf.argmax(tf.cast(fits, tf.int32), output_type=tf.int32))


@register_step(
    reads=CROP_FIELDS,
    writes=CROP_FIELDS,
    kind="geometry",
    checks={
        "max_border": non_negative,
        "scale_min": positive,
        "scale_max": positive,
        "num_scales": positive,
    },
    validate=ordered(("scale_min", "scale_max")),
)
def random_square_crop_by_scale(
    features: core.Features,
    *,
    seed=None,
    max_border: int = 128,
    scale_min: float = 0.6,
    scale_max: float = 1.3,
    num_scales: int = 8,
) -> core.Features:
    """CenterNet crop: a square of side scale · max(H, W), centred at least a border inside.

    The scale is one of ``num_scales`` evenly spaced values in [scale_min, scale_max]. The part of
    the square outside the image is zero. Boxes are clipped; boxes left without area are dropped.
    """
    scale_seed, y_seed, x_seed = core.split_seed(seed, 3)
    height, width = core.image_size(features[fields.IMAGE])
    scales = tf.linspace(float(scale_min), float(scale_max), num_scales)
    scale = tf.gather(scales, core.uniform_int(scale_seed, 0, num_scales))
    longest = tf.cast(tf.maximum(height, width), tf.float32)
    side = tf.maximum(tf.cast(tf.floor(scale * longest), tf.int32), 1)
    y_border = _border(max_border, height)
    x_border = _border(max_border, width)
    center_y = core.uniform_int(y_seed, y_border, height - y_border + 1)
    center_x = core.uniform_int(x_seed, x_border, width - x_border + 1)
    out = crop_to_window(
        features, center_y - side // 2, center_x - side // 2, side, side, clip_boxes=True
    )
    return box_ops.drop_degenerate(out)


@register_step(
    reads=CROP_FIELDS,
    writes=CROP_FIELDS,
    kind="geometry",
    checks={"output_size": positive, "scale_min": positive, "scale_max": positive},
    validate=ordered(("scale_min", "scale_max")),
    tunable=("scale_min", "scale_max"),
)
def random_scale_crop_and_pad_to_square(
    features: core.Features,
    *,
    seed=None,
    output_size: int = 512,
    scale_min: float = 0.1,
    scale_max: float = 2.0,
) -> core.Features:
    """EfficientDet scale jitter to an ``output_size`` square.

    The longer side is resized (bilinear; masks nearest) to output_size · U(scale_min, scale_max);
    a random output_size² window is cut from it, zero-filled at the bottom/right where the image
    is smaller. Boxes are clipped; boxes left without area are dropped. The image is float32.
    """
    scale_seed, y_seed, x_seed = core.split_seed(seed, 3)
    height, width = core.image_size(features[fields.IMAGE])
    target = core.uniform(scale_seed, scale_min, scale_max) * float(output_size)
    factor = tf.minimum(target / tf.cast(height, tf.float32), target / tf.cast(width, tf.float32))
    new_height = tf.maximum(tf.cast(tf.cast(height, tf.float32) * factor, tf.int32), 1)
    new_width = tf.maximum(tf.cast(tf.cast(width, tf.float32) * factor, tf.int32), 1)
    out = resize_features(features, new_height, new_width)
    top = core.uniform_int(y_seed, 0, tf.maximum(new_height - output_size, 0) + 1)
    left = core.uniform_int(x_seed, 0, tf.maximum(new_width - output_size, 0) + 1)
    out = crop_to_window(out, top, left, output_size, output_size, clip_boxes=True)
    return box_ops.drop_degenerate(out)
