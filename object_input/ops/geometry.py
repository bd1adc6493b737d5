"""Box-level geometry steps: box jitter, pixel coordinates, and tiling an image with itself."""

from __future__ import annotations

import tensorflow as tf

from object_input import fields
from object_input.ops import _box_geometry as box_ops
from object_input.ops import _core as core
from object_input.ops._registry import PER_BOX, in_range, register_step, rule

JITTER_MODES = (
    "default",
    "expand",
    "shrink",
    "expand_symmetric",
    "shrink_symmetric",
    "expand_symmetric_xy",
    "shrink_symmetric_xy",
)


@rule("default, or expand/shrink with an optional _symmetric or _symmetric_xy")
def _jitter_mode_check(value: str) -> str | None:
    return None if value.lower() in JITTER_MODES else f"must be one of {list(JITTER_MODES)}"


@register_step(
    reads=(fields.BOXES,),
    writes=(fields.BOXES,),
    kind="geometry",
    checks={"ratio": in_range(0.0, 0.5), "jitter_mode": _jitter_mode_check},
    tunable=("ratio",),
)
def random_jitter_boxes(
    features: core.Features,
    *,
    seed=None,
    ratio: float = 0.05,
    jitter_mode: str = "default",
) -> core.Features:
    """Move each box edge outward by d × (box height or width), then clip to [0, 1].

    ``default`` draws d ∈ U(-ratio, ratio) per edge; ``expand``/``shrink`` restrict d to
    [0, ratio] / [-ratio, 0]. ``*_symmetric`` modes share d between the two edges of an axis (the
    centre stays; y and x draw independently), ``*_symmetric_xy`` share one d for all four edges.
    """
    if fields.BOXES not in features:
        return dict(features)
    mode = jitter_mode.lower()
    if mode.startswith("expand"):
        low, high = 0.0, ratio
    elif mode.startswith("shrink"):
        low, high = -ratio, 0.0
    else:
        low, high = -ratio, ratio
    boxes = features[fields.BOXES]
    count = tf.shape(boxes)[0]
    if mode.endswith("_xy"):
        distortion = tf.tile(core.uniform(seed, low, high, [count, 1]), [1, 4])
    elif mode.endswith("symmetric"):
        distortion = tf.tile(core.uniform(seed, low, high, [count, 2]), [1, 2])
    else:
        distortion = core.uniform(seed, low, high, [count, 4])
    height = boxes[:, 2] - boxes[:, 0]
    width = boxes[:, 3] - boxes[:, 1]
    sizes = tf.stack([height, width, height, width], axis=1)
    # Positive d moves the min edges down and the max edges up: the box grows.
    outward = tf.constant([-1.0, -1.0, 1.0, 1.0])
    out = dict(features)
    out[fields.BOXES] = tf.clip_by_value(boxes + outward * distortion * sizes, 0.0, 1.0)
    return out


@register_step(
    reads=(fields.IMAGE, fields.BOXES, fields.KEYPOINTS),
    writes=(fields.BOXES, fields.KEYPOINTS),
    kind="geometry",
)
def scale_boxes_to_pixel_coordinates(features: core.Features, *, seed=None) -> core.Features:
    """Turn normalized boxes and keypoints into pixel coordinates of the current image.

    Every later step still assumes normalized coordinates, so this belongs at the end of a config.
    """
    del seed
    height, width = core.image_size(features[fields.IMAGE])
    return box_ops.scale_coordinates(
        features, tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    )


def self_concat(features: core.Features, axis: int) -> core.Features:
    """Tile the image with a copy of itself below (``axis`` 0) or to the right (``axis`` 1).

    Every box is duplicated: the originals are re-framed into the first half, the copies (with
    every per-box field) into the second half.
    """
    image = features[fields.IMAGE]
    tiled = core.set_image(features, tf.concat([image, image], axis=axis))
    first, second = dict(tiled), dict(tiled)
    # (y, x) factors that squeeze coordinates into the first half, and the shift to the second.
    scale = tf.constant([0.5, 1.0] if axis == 0 else [1.0, 0.5])
    shift = tf.constant([0.5, 0.0] if axis == 0 else [0.0, 0.5])
    if fields.BOXES in tiled:
        first[fields.BOXES] = tiled[fields.BOXES] * tf.tile(scale, [2])
        second[fields.BOXES] = first[fields.BOXES] + tf.tile(shift, [2])
    if fields.KEYPOINTS in tiled:
        first[fields.KEYPOINTS] = tiled[fields.KEYPOINTS] * scale
        second[fields.KEYPOINTS] = first[fields.KEYPOINTS] + shift
    if fields.MASKS in tiled:
        masks = tiled[fields.MASKS]
        empty = tf.zeros_like(masks)
        first[fields.MASKS] = tf.concat([masks, empty], axis=axis + 1)
        second[fields.MASKS] = tf.concat([empty, masks], axis=axis + 1)
    return core.concat_boxes(first, second)


@register_step(
    reads=(fields.IMAGE, PER_BOX),
    writes=(fields.IMAGE, fields.IMAGE_SHAPE, PER_BOX),
    kind="geometry",
    checks={
        "concat_vertical_probability": in_range(0.0, 1.0),
        "concat_horizontal_probability": in_range(0.0, 1.0),
    },
    demo_params={"concat_vertical_probability": 1.0, "concat_horizontal_probability": 1.0},
    tunable=("concat_vertical_probability", "concat_horizontal_probability"),
)
def random_self_concat_image(
    features: core.Features,
    *,
    seed=None,
    concat_vertical_probability: float = 0.1,
    concat_horizontal_probability: float = 0.1,
) -> core.Features:
    """With each probability, stack the image on itself vertically, then horizontally.

    Boxes, masks, keypoints and every other per-box field are duplicated with the image."""
    vertical_seed, horizontal_seed = core.split_seed(seed, 2)
    # Both tf.cond branches must return the same keys, and self_concat always sets IMAGE_SHAPE.
    out = core.set_image(features, features[fields.IMAGE])
    for axis, draw_seed, probability in (
        (0, vertical_seed, concat_vertical_probability),
        (1, horizontal_seed, concat_horizontal_probability),
    ):
        out = tf.cond(
            core.bernoulli(draw_seed, probability),
            lambda out=out, axis=axis: self_concat(out, axis),
            lambda out=out: dict(out),
        )
    return out
