"""Pad steps. Every one places the image on a larger canvas through :func:`pad_to_window`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import _core as core
from object_input.ops._registry import MOVED, non_negative, positive, register_step, rule
from object_input.ops.crop import (
    CROP_CHECKS,
    CROP_FIELDS,
    CROP_OD_API_FIELDS,
    all_positive,
    crop_to_window,
    random_crop_image,
)

# Checks of the padded size ratios, for every step that takes them.
PADDED_SIZE_CHECKS = {
    "min_padded_size_ratio": all_positive,
    "max_padded_size_ratio": all_positive,
}


@rule("not empty")
def _non_empty(value: Any) -> str | None:
    return None if len(value) > 0 else "must not be empty"


def fill_color(image: tf.Tensor, pad_color: Sequence[float] | None) -> tf.Tensor:
    """Per-channel fill of ``image``'s dtype: ``pad_color`` (one value or one per channel) or,
    when None, the image's per-channel mean."""
    channels = image.shape[-1]
    if pad_color is None:
        color = tf.reduce_mean(core.to_float(image), axis=[0, 1])
    else:
        if channels is not None and len(pad_color) not in (1, channels):
            raise ValueError(
                f"pad_color has {len(pad_color)} values but the image has {channels} channels "
                "(give one value, or one per channel)"
            )
        color = tf.broadcast_to(
            tf.constant(pad_color, tf.float32), tf.shape(image)[-1:], name="pad_color_per_channel"
        )
    return core.like(color, image.dtype)


def pad_to_window(
    features: core.Features,
    top,
    left,
    height,
    width,
    pad_color: Sequence[float] | None = None,
) -> core.Features:
    """Place the image at (``top``, ``left``) on a ``height`` × ``width`` canvas.

    The canvas is ``pad_color`` (the image's per-channel mean when None), masks are padded with 0,
    and boxes and keypoints move to the canvas frame; no box is dropped or clipped.
    """
    color = fill_color(features[fields.IMAGE], pad_color)
    return crop_to_window(features, -top, -left, height, width, clip_boxes=False, fill=color)


@rule("`min_image_size` ≤ `max_image_size` per dimension")
def _sizes_ordered(params: Mapping[str, Any]) -> str | None:
    low, high = params["min_image_size"], params["max_image_size"]
    if low is None or high is None or all(lo <= hi for lo, hi in zip(low, high, strict=True)):
        return None
    return f"parameter 'min_image_size' {tuple(low)} exceeds 'max_image_size' {tuple(high)}"


def _random_pad(
    features: core.Features,
    seed: Any,
    min_size: Any,
    max_size: Any,
    pad_color: Sequence[float] | None,
    center_pad: bool = False,
) -> core.Features:
    """Pad to a size drawn in [min_size, max_size) per dimension (never below the image)."""
    size = tf.shape(features[fields.IMAGE])[:2]
    low = tf.maximum(tf.cast(min_size, tf.int32), size)
    high = tf.maximum(tf.cast(max_size, tf.int32), size)
    height_seed, width_seed, offset_seed = core.split_seed(seed, 3)
    target = tf.stack(
        [
            core.uniform_int(height_seed, low[0], high[0]),
            core.uniform_int(width_seed, low[1], high[1]),
        ]
    )
    slack = target - size
    offset = slack // 2 if center_pad else core.uniform_int(offset_seed, 0, slack + 1, shape=[2])
    return pad_to_window(features, offset[0], offset[1], target[0], target[1], pad_color)


@register_step(
    reads=(MOVED,),
    writes=(MOVED,),
    kind="geometry",
    checks={
        "min_image_size": all_positive,
        "max_image_size": all_positive,
        "pad_color": _non_empty,
    },
    validate=_sizes_ordered,
    od_api_fields={
        "min_image_size": ("min_image_height", "min_image_width"),
        "max_image_size": ("max_image_height", "max_image_width"),
    },
)
def random_pad_image(
    features: core.Features,
    *,
    seed=None,
    min_image_size: tuple[int, int] | None = None,
    max_image_size: tuple[int, int] | None = None,
    pad_color: Sequence[float] | None = None,
    center_pad: bool = False,
) -> core.Features:
    """Pad to a random (height, width) in [min_image_size, max_image_size) at a random offset.

    The sizes default to the image size and twice it, and never go below the image size.
    ``center_pad`` centres the image. The fill is ``pad_color`` (default: the image's mean).
    """
    size = tf.shape(features[fields.IMAGE])[:2]
    low = size if min_image_size is None else tf.constant(min_image_size, tf.int32)
    high = 2 * size if max_image_size is None else tf.constant(max_image_size, tf.int32)
    return _random_pad(features, seed, low, high, pad_color, center_pad)


@register_step(
    reads=(MOVED,),
    writes=(MOVED,),
    kind="geometry",
    checks={
        "max_height_padding": non_negative,
        "max_width_padding": non_negative,
        "pad_color": _non_empty,
    },
    demo_params={"max_height_padding": 5, "max_width_padding": 5},
)
def random_absolute_pad_image(
    features: core.Features,
    *,
    seed=None,
    max_height_padding: int,
    max_width_padding: int,
    pad_color: Sequence[float] | None = None,
) -> core.Features:
    """Add U[0, max_height_padding) rows and U[0, max_width_padding) columns at a random offset."""
    size = tf.shape(features[fields.IMAGE])[:2]
    high = size + tf.constant([max_height_padding, max_width_padding], tf.int32)
    return _random_pad(features, seed, size, high, pad_color)


@register_step(
    reads=CROP_FIELDS,
    writes=CROP_FIELDS,
    kind="geometry",
    checks={**CROP_CHECKS, **PADDED_SIZE_CHECKS, "pad_color": _non_empty},
    od_api_fields=CROP_OD_API_FIELDS,
    tunable=("min_object_covered", "overlap_thresh"),
)
def random_crop_pad_image(
    features: core.Features,
    *,
    seed=None,
    min_object_covered: float = 1.0,
    aspect_ratio_range: tuple[float, float] = (0.75, 1.33),
    area_range: tuple[float, float] = (0.1, 1.0),
    overlap_thresh: float = 0.3,
    clip_boxes: bool = True,
    random_coef: float = 0.0,
    min_padded_size_ratio: tuple[float, float] = (1.0, 1.0),
    max_padded_size_ratio: tuple[float, float] = (2.0, 2.0),
    pad_color: Sequence[float] | None = None,
) -> core.Features:
    """:func:`random_crop_image`, then :func:`random_pad_image` to a size drawn between
    ``min_padded_size_ratio`` and ``max_padded_size_ratio`` times the *original* (height, width).

    ``min_padded_size_ratio`` here is a per-dimension (height, width) pair, as is the maximum.
    """
    crop_seed, pad_seed = core.split_seed(seed, 2)
    original = tf.cast(tf.shape(features[fields.IMAGE])[:2], tf.float32)
    cropped = random_crop_image(
        features,
        seed=crop_seed,
        min_object_covered=min_object_covered,
        aspect_ratio_range=aspect_ratio_range,
        area_range=area_range,
        overlap_thresh=overlap_thresh,
        clip_boxes=clip_boxes,
        random_coef=random_coef,
    )
    low = original * tf.constant(min_padded_size_ratio, tf.float32)
    high = original * tf.constant(max_padded_size_ratio, tf.float32)
    return _random_pad(cropped, pad_seed, low, high, pad_color)


@register_step(
    reads=(MOVED,),
    writes=(MOVED,),
    kind="geometry",
    checks={"aspect_ratio": positive, **PADDED_SIZE_CHECKS},
    tunable=("aspect_ratio",),
)
def random_pad_to_aspect_ratio(
    features: core.Features,
    *,
    seed=None,
    aspect_ratio: float = 1.0,
    min_padded_size_ratio: tuple[float, float] = (1.0, 1.0),
    max_padded_size_ratio: tuple[float, float] = (2.0, 2.0),
) -> core.Features:
    """Zero-pad at the bottom/right to width / height = ``aspect_ratio``, randomly enlarged.

    The smallest padded size with the ratio is scaled by U(min_scale, max_scale), the range that
    keeps each side within [min, max]_padded_size_ratio × the image side where it can; sides are
    rounded to pixels.
    """
    height, width = (tf.cast(s, tf.float32) for s in core.image_size(features[fields.IMAGE]))
    base_height = tf.maximum(height, width / aspect_ratio)
    base_width = tf.maximum(width, height * aspect_ratio)
    min_height = tf.maximum(min_padded_size_ratio[0] * height, base_height)
    min_width = tf.maximum(min_padded_size_ratio[1] * width, base_width)
    max_height = tf.maximum(max_padded_size_ratio[0] * height, base_height)
    max_width = tf.maximum(max_padded_size_ratio[1] * width, base_width)
    max_scale = tf.minimum(max_height / base_height, max_width / base_width)
    min_scale = tf.minimum(max_scale, tf.maximum(min_height / base_height, min_width / base_width))
    scale = core.uniform(seed, min_scale, max_scale)
    target_height = tf.cast(tf.round(scale * base_height), tf.int32)
    target_width = tf.cast(tf.round(scale * base_width), tf.int32)
    # A zero canvas is the plain pad's own (fill None), with no per-channel fill blocks.
    return crop_to_window(features, 0, 0, target_height, target_width, clip_boxes=False, fill=None)
