"""Resizing ops. Normalized boxes and keypoints are unchanged by a resize; masks use nearest."""

from __future__ import annotations

import tensorflow as tf

from object_input import fields
from object_input.ops import core
from object_input.ops.registry import positive, register_step

METHODS = {
    "BILINEAR": tf.image.ResizeMethod.BILINEAR,
    "NEAREST_NEIGHBOR": tf.image.ResizeMethod.NEAREST_NEIGHBOR,
    "BICUBIC": tf.image.ResizeMethod.BICUBIC,
    "AREA": tf.image.ResizeMethod.AREA,
}


def _method_check(value: str) -> str | None:
    return None if value.upper() in METHODS else f"must be one of {sorted(METHODS)}"


def resize_features(
    features: core.Features, height, width, method: str = "BILINEAR"
) -> core.Features:
    """Resize image (float32 on [0, 255] out, except nearest keeps the dtype) and masks."""
    image = features[fields.IMAGE]
    size = tf.stack([tf.cast(height, tf.int32), tf.cast(width, tf.int32)])
    resize_method = METHODS[method.upper()]
    resized = tf.image.resize(image, size, method=resize_method)
    if resize_method == tf.image.ResizeMethod.NEAREST_NEIGHBOR:
        resized = tf.cast(resized, image.dtype)
    elif image.dtype.is_integer:
        # Bicubic can overshoot the input range: keep values on the [0, 255] scale.
        resized = tf.clip_by_value(resized, 0.0, 255.0)
    out = core.set_image(features, resized)
    if fields.MASKS in out:
        masks = out[fields.MASKS][..., tf.newaxis]
        masks = tf.image.resize(masks, size, method=tf.image.ResizeMethod.NEAREST_NEIGHBOR)
        out[fields.MASKS] = tf.cast(masks[..., 0], features[fields.MASKS].dtype)
    return out


@register_step(
    reads=(fields.IMAGE, fields.MASKS),
    writes=(fields.IMAGE, fields.MASKS, fields.IMAGE_SHAPE),
    kind="geometry",
    checks={"new_height": positive, "new_width": positive, "method": _method_check},
)
def resize_image(
    features: core.Features,
    *,
    seed=None,
    new_height: int = 600,
    new_width: int = 1024,
    method: str = "BILINEAR",
) -> core.Features:
    """Resize to exactly ``new_height`` × ``new_width``; masks with nearest neighbour."""
    del seed
    return resize_features(features, new_height, new_width, method)
